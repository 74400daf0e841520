//! [`Aspect`]: the kinds of guard, and their default precedence.

use std::fmt;

/// The table of aspect kinds: hands `$callback!` one row per kind, in default precedence
/// order,
///
/// ```text
/// $(#[doc])* Variant(instance type, config type, registry field): "snake", "words", precedence N;
/// ```
///
/// The types are named as they are, for the callback's module to have in scope (this file
/// depends on no aspect's module).
///
/// Every per-kind list in the crate is written by a callback over this table, so a new kind
/// is one row here, and the compiler then asks for what the kind must provide (its
/// `Registered`, `Forward`, `Keep` and actuator impls) rather than a list forgetting it.
macro_rules! aspect_table {
    ($callback:ident) => {
        $callback! {
            /// Admission control by a bounded number of concurrent calls.
            Bulkhead(Bulkhead, BulkheadConfig, bulkheads):
                "bulkhead", "bulkhead", precedence 100;
            /// Admission control by a bounded rate of calls.
            RateLimiter(RateLimiter, RateLimiterConfig, rate_limiters):
                "rate_limiter", "rate limiter", precedence 200;
            /// Re-running a failed call.
            Retry(Retry, RetryConfig, retries):
                "retry", "retry", precedence 300;
            /// Starting another attempt beside a slow one (async calls).
            Hedge(Hedge, HedgeConfig, hedges):
                "hedge", "hedge", precedence 350;
            /// Short-circuiting calls to a failing dependency.
            CircuitBreaker(CircuitBreaker, CircuitBreakerConfig, circuit_breakers):
                "circuit_breaker", "circuit breaker", precedence 400;
            /// Bounding the duration of an async call.
            TimeLimiter(TimeLimiter, TimeLimiterConfig, time_limiters):
                "time_limiter", "time limiter", precedence 500;
            /// Injecting faults into calls, for tests and game days (off unless a registry
            /// allows it).
            Fault(FaultInjector, FaultConfig, faults):
                "fault", "fault injection", precedence 650;
        }
    };
}
pub(crate) use aspect_table;

/// Declares [`Aspect`] and its per-kind facts from [`aspect_table!`]: [`Aspect::ALL`] lists
/// every variant by construction, in the table's order, and the indexes into per-kind arrays
/// are the variants' own discriminants.
macro_rules! aspects {
    ($(
        $(#[$doc:meta])*
        $variant:ident($instance:ident, $config:ident, $field:ident):
            $snake:literal, $words:literal, precedence $precedence:literal;
    )*) => {
        /// A kind of guard that can wrap a call.
        ///
        /// The registry's precedence table orders the aspects of a guarded call: a lower
        /// number runs first (outermost). The defaults put admission control outside
        /// everything else:
        ///
        /// | aspect | default precedence |
        /// |---|---|
        $(#[doc = concat!("| [`", stringify!($variant), "`](Aspect::", stringify!($variant), ") | ", stringify!($precedence), " |")])*
        ///
        /// The bulkhead, the rate limiter and the circuit breaker are gates: they admit a call
        /// or refuse it. Retry and the time limiter are wrappers: they wrap the aspects after
        /// them and the call (re-running it, bounding its duration).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Aspect {
            $($(#[$doc])* $variant,)*
        }

        impl Aspect {
            /// Every aspect kind, in default precedence order.
            pub const ALL: [Aspect; 0 $(+ aspects!(@one $variant))*] = [$(Aspect::$variant),*];

            /// The precedence this aspect has in a new registry (lower runs first).
            pub const fn default_precedence(self) -> i32 {
                match self {
                    $(Aspect::$variant => $precedence,)*
                }
            }

            /// The name used in attributes, configuration and messages (`"circuit_breaker"`).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Aspect::$variant => $snake,)*
                }
            }

            /// The name in words (`"circuit breaker"`), as [`Display`](fmt::Display) writes it.
            const fn words(self) -> &'static str {
                match self {
                    $(Aspect::$variant => $words,)*
                }
            }
        }
    };
    (@one $variant:ident) => {
        1
    };
}

aspect_table!(aspects);

// `ALL` is in declaration order, which the docs call the default precedence order.
const _: () = {
    let mut i = 1;
    while i < Aspect::ALL.len() {
        assert!(
            Aspect::ALL[i - 1].default_precedence() < Aspect::ALL[i].default_precedence(),
            "declare the aspects in the order of their default precedence"
        );
        i += 1;
    }
};

impl Aspect {
    /// The position of this kind in [`Aspect::ALL`], for arrays indexed by kind.
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Aspect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.words())
    }
}
