//! [`Aspect`]: the kinds of guard, and their default precedence.

use std::fmt;

/// Declares [`Aspect`] and its per-kind facts from one row per kind, so that a new kind is one
/// row: [`Aspect::ALL`] lists every variant by construction, in declaration order, and the
/// indexes into per-kind arrays are the variants' own discriminants.
macro_rules! aspects {
    ($(#[$enum_doc:meta])* enum Aspect; $(
        $(#[$doc:meta])*
        $variant:ident: $snake:literal, $words:literal, precedence $precedence:literal;
    )*) => {
        $(#[$enum_doc])*
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

aspects! {
    /// A kind of guard that can wrap a call.
    ///
    /// The registry's precedence table orders the aspects of a guarded call: a lower number runs
    /// first (outermost). The defaults put admission control outside everything else:
    ///
    /// | aspect | default precedence |
    /// |---|---|
    /// | [`Bulkhead`](Aspect::Bulkhead) | 100 |
    /// | [`RateLimiter`](Aspect::RateLimiter) | 200 |
    /// | [`Retry`](Aspect::Retry) | 300 |
    /// | [`CircuitBreaker`](Aspect::CircuitBreaker) | 400 |
    /// | [`TimeLimiter`](Aspect::TimeLimiter) | 500 |
    ///
    /// The bulkhead, the rate limiter and the circuit breaker are gates: they admit a call or
    /// refuse it. Retry and the time limiter are wrappers: they wrap the aspects after them and
    /// the call (re-running it, bounding its duration).
    enum Aspect;

    /// Admission control by a bounded number of concurrent calls.
    Bulkhead: "bulkhead", "bulkhead", precedence 100;
    /// Admission control by a bounded rate of calls.
    RateLimiter: "rate_limiter", "rate limiter", precedence 200;
    /// Re-running a failed call.
    Retry: "retry", "retry", precedence 300;
    /// Short-circuiting calls to a failing dependency.
    CircuitBreaker: "circuit_breaker", "circuit breaker", precedence 400;
    /// Bounding the duration of an async call.
    TimeLimiter: "time_limiter", "time limiter", precedence 500;
}

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
