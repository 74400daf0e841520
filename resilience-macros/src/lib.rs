//! Attribute macros of `resilience`: `#[bulkhead]` and `#[circuit_breaker]`.
//!
//! Use them through `resilience-runtime`, which re-exports them and documents them; generated
//! code names only `::resilience_runtime::__private` and `::core` (or the path given with
//! `crate = "path"`).

mod args;
mod expand;
mod stack;

use proc_macro::TokenStream;

use args::Kind;

/// Guards a function (or every method of an impl block) with the bulkhead `name`.
///
/// See `resilience_runtime::bulkhead` for the documentation.
#[proc_macro_attribute]
pub fn bulkhead(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Kind::Bulkhead, args.into(), item.into()).into()
}

/// Guards a function (or every method of an impl block) with the circuit breaker `name`.
///
/// See `resilience_runtime::circuit_breaker` for the documentation.
#[proc_macro_attribute]
pub fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Kind::CircuitBreaker, args.into(), item.into()).into()
}

#[cfg(test)]
mod snapshots;
