//! [`Aspect`]: the kinds of guard, and their default precedence.

use std::fmt;

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Aspect {
    /// Admission control by a bounded number of concurrent calls.
    Bulkhead,
    /// Admission control by a bounded rate of calls.
    RateLimiter,
    /// Re-running a failed call.
    Retry,
    /// Short-circuiting calls to a failing dependency.
    CircuitBreaker,
    /// Bounding the duration of an async call.
    TimeLimiter,
}

impl Aspect {
    /// Every aspect kind, in default precedence order.
    pub const ALL: [Aspect; 5] = [
        Aspect::Bulkhead,
        Aspect::RateLimiter,
        Aspect::Retry,
        Aspect::CircuitBreaker,
        Aspect::TimeLimiter,
    ];

    /// The precedence this aspect has in a new registry (lower runs first).
    pub const fn default_precedence(self) -> i32 {
        match self {
            Aspect::Bulkhead => 100,
            Aspect::RateLimiter => 200,
            Aspect::Retry => 300,
            Aspect::CircuitBreaker => 400,
            Aspect::TimeLimiter => 500,
        }
    }

    /// The name used in attributes, configuration and messages (`"circuit_breaker"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Aspect::Bulkhead => "bulkhead",
            Aspect::RateLimiter => "rate_limiter",
            Aspect::Retry => "retry",
            Aspect::CircuitBreaker => "circuit_breaker",
            Aspect::TimeLimiter => "time_limiter",
        }
    }

    pub(crate) const fn index(self) -> usize {
        match self {
            Aspect::Bulkhead => 0,
            Aspect::RateLimiter => 1,
            Aspect::Retry => 2,
            Aspect::CircuitBreaker => 3,
            Aspect::TimeLimiter => 4,
        }
    }
}

impl fmt::Display for Aspect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Aspect::Bulkhead => "bulkhead",
            Aspect::RateLimiter => "rate limiter",
            Aspect::Retry => "retry",
            Aspect::CircuitBreaker => "circuit breaker",
            Aspect::TimeLimiter => "time limiter",
        })
    }
}
