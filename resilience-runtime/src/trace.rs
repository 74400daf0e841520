//! Forwarding every guard's rare events to `tracing` ([`Registry::trace_events`](crate::Registry::trace_events)): breaker
//! transitions, rejections, retries, time-outs. Each forwarder subscribes with
//! [`Interest::Rare`], so a guard gathers no event of an ordinary call for it: forwarding costs
//! nothing on the path of a call that changes nothing (a closed breaker's record reads no
//! precise clock and builds no event).
//!
//! Levels: a breaker opening (or forced open) is `WARN`; its other transitions, a reset and a
//! rate reaching its threshold are `INFO`; a single refusal, retry or time-out is `DEBUG`, so
//! that an overload does not flood the logs; a retry that ends is `DEBUG` too. Every event has
//! the target `resilience` and the fields `aspect` and `name`, plus its own.

use crate::bulkhead::{Bulkhead, BulkheadEvent};
use crate::circuit_breaker::{CircuitBreaker, CircuitBreakerEvent};
use crate::rate_limiter::{RateLimiter, RateLimiterEvent};
use crate::retry::{Retry, RetryEvent};
use crate::subscribers::Interest;
use crate::time_limiter::{TimeLimiter, TimeLimiterEvent};

/// A guard whose events can be forwarded to `tracing`.
pub(crate) trait Forward {
    /// Subscribes the forwarder of this guard's events.
    fn forward_events(&self);
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Forward for CircuitBreaker {
    fn forward_events(&self) {
        self.subscribe_with(Interest::Rare, |event| match event {
            CircuitBreakerEvent::StateTransition { name, from, to } if to.refuses_calls() => {
                tracing::warn!(
                    target: "resilience",
                    aspect = "circuit_breaker",
                    name = name.as_str(),
                    from = from.as_str(),
                    to = to.as_str(),
                    "circuit breaker `{name}` is {to} (was {from}): calls are refused"
                );
            }
            CircuitBreakerEvent::StateTransition { name, from, to } => {
                tracing::info!(
                    target: "resilience",
                    aspect = "circuit_breaker",
                    name = name.as_str(),
                    from = from.as_str(),
                    to = to.as_str(),
                    "circuit breaker `{name}` is {to} (was {from})"
                );
            }
            CircuitBreakerEvent::FailureRateExceeded { name, rate } => {
                tracing::info!(
                    target: "resilience",
                    aspect = "circuit_breaker",
                    name = name.as_str(),
                    failure_rate = rate,
                    "circuit breaker `{name}`: the failure rate reached its threshold ({rate} %)"
                );
            }
            CircuitBreakerEvent::SlowCallRateExceeded { name, rate } => {
                tracing::info!(
                    target: "resilience",
                    aspect = "circuit_breaker",
                    name = name.as_str(),
                    slow_call_rate = rate,
                    "circuit breaker `{name}`: the slow-call rate reached its threshold ({rate} %)"
                );
            }
            CircuitBreakerEvent::Reset { name } => {
                tracing::info!(
                    target: "resilience",
                    aspect = "circuit_breaker",
                    name = name.as_str(),
                    "circuit breaker `{name}` was reset"
                );
            }
            CircuitBreakerEvent::NotPermitted { name } => {
                tracing::debug!(
                    target: "resilience",
                    aspect = "circuit_breaker",
                    name = name.as_str(),
                    "circuit breaker `{name}` refused a call"
                );
            }
            // The events of ordinary calls, heard only while another subscriber asks for them.
            CircuitBreakerEvent::Success { .. }
            | CircuitBreakerEvent::Error { .. }
            | CircuitBreakerEvent::IgnoredError { .. } => {}
        });
    }
}

impl Forward for Bulkhead {
    fn forward_events(&self) {
        self.subscribe_with(Interest::Rare, |event| match event {
            BulkheadEvent::CallRejected { name, waited } => {
                tracing::debug!(
                    target: "resilience",
                    aspect = "bulkhead",
                    name = name.as_str(),
                    waited_ms = millis(*waited),
                    "bulkhead `{name}` is full: call rejected"
                );
            }
        });
    }
}

impl Forward for RateLimiter {
    fn forward_events(&self) {
        self.subscribe_with(Interest::Rare, |event| match event {
            RateLimiterEvent::FailedAcquire { name, retry_after } => {
                tracing::debug!(
                    target: "resilience",
                    aspect = "rate_limiter",
                    name = name.as_str(),
                    retry_after_ms = millis(*retry_after),
                    "rate limiter `{name}` refused a call"
                );
            }
            RateLimiterEvent::SuccessfulAcquire { .. } => {}
        });
    }
}

impl Forward for Retry {
    fn forward_events(&self) {
        self.subscribe_with(Interest::Rare, |event| match event {
            RetryEvent::Retry {
                name,
                attempt,
                wait,
            } => {
                tracing::debug!(
                    target: "resilience",
                    aspect = "retry",
                    name = name.as_str(),
                    attempt,
                    wait_ms = millis(*wait),
                    "retry `{name}`: attempt {attempt} failed, retrying"
                );
            }
            RetryEvent::Error { name, attempts } => {
                tracing::debug!(
                    target: "resilience",
                    aspect = "retry",
                    name = name.as_str(),
                    attempts,
                    "retry `{name}`: every attempt failed"
                );
            }
            RetryEvent::Success { name, attempts } => {
                tracing::debug!(
                    target: "resilience",
                    aspect = "retry",
                    name = name.as_str(),
                    attempts,
                    "retry `{name}`: succeeded after retrying"
                );
            }
            RetryEvent::IgnoredError { name, attempts } => {
                tracing::trace!(
                    target: "resilience",
                    aspect = "retry",
                    name = name.as_str(),
                    attempts,
                    "retry `{name}`: an error it does not retry"
                );
            }
        });
    }
}

impl Forward for TimeLimiter {
    fn forward_events(&self) {
        self.subscribe_with(Interest::Rare, |event| match event {
            TimeLimiterEvent::Timeout { name, timeout } => {
                tracing::debug!(
                    target: "resilience",
                    aspect = "time_limiter",
                    name = name.as_str(),
                    timeout_ms = millis(*timeout),
                    "time limiter `{name}` cut a call off"
                );
            }
            TimeLimiterEvent::Success { .. } | TimeLimiterEvent::Error { .. } => {}
        });
    }
}
