//! Attribute macros of `resilience`: `#[bulkhead]`, `#[rate_limiter]`, `#[retry]`,
//! `#[circuit_breaker]` and `#[time_limiter]`.
//!
//! Use them through `resilience-runtime`, which re-exports them: generated code names only
//! `::resilience_runtime::__private` and `::core` (or the path given with `crate = "path"`),
//! so a service depends on `resilience-runtime` alone.
//!
//! Each attribute is documented, with its examples, where `resilience-runtime` re-exports it,
//! and only there (`resilience-runtime/src/attributes/*.md`): rustdoc shows a re-export's docs
//! before the item's own, and the examples need the runtime, which as a dev-dependency of this
//! proc-macro crate was built a second time (with tokio, for the host) in every
//! `cargo test --workspace`.

mod args;
mod errors;
mod expand;
mod model;
mod stack;
mod valid;

use proc_macro::TokenStream;

use args::Kind;

#[allow(missing_docs)] // resilience-runtime/src/attributes/bulkhead.md
#[proc_macro_attribute]
pub fn bulkhead(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Kind::Bulkhead, args.into(), item.into()).into()
}

#[allow(missing_docs)] // resilience-runtime/src/attributes/rate_limiter.md
#[proc_macro_attribute]
pub fn rate_limiter(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Kind::RateLimiter, args.into(), item.into()).into()
}

#[allow(missing_docs)] // resilience-runtime/src/attributes/circuit_breaker.md
#[proc_macro_attribute]
pub fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Kind::CircuitBreaker, args.into(), item.into()).into()
}

#[allow(missing_docs)] // resilience-runtime/src/attributes/retry.md
#[proc_macro_attribute]
pub fn retry(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Kind::Retry, args.into(), item.into()).into()
}

#[allow(missing_docs)] // resilience-runtime/src/attributes/hedge.md
#[proc_macro_attribute]
pub fn hedge(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Kind::Hedge, args.into(), item.into()).into()
}

#[allow(missing_docs)] // resilience-runtime/src/attributes/time_limiter.md
#[proc_macro_attribute]
pub fn time_limiter(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Kind::TimeLimiter, args.into(), item.into()).into()
}

#[cfg(test)]
mod snapshots;
