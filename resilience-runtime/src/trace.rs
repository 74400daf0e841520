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
//!
//! The per-call `DEBUG` events (refusals, retries, time-outs) are throttled per instance and
//! kind ([`Throttle`]): at most one line per [`THROTTLE`] (on the registry's clock), the first
//! at once; those left out are counted, and the next line says how many (its field `more`).
//! An overload of 45 000 refusals is then a line a second per guard, not 45 000 lines. Code
//! that needs every event subscribes to the guard (`subscribe`), which is not throttled.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::Clock;
use crate::fleet::FleetFallback;
use crate::name::Name;

use crate::bulkhead::{Bulkhead, BulkheadEvent};
use crate::circuit_breaker::{CircuitBreaker, CircuitBreakerEvent};
use crate::fault::{FaultEvent, FaultInjector};
use crate::hedge::{Hedge, HedgeEvent};
use crate::rate_limiter::{RateLimiter, RateLimiterEvent};
use crate::retry::{Retry, RetryEvent};
use crate::subscribers::Interest;
use crate::time_limiter::{TimeLimiter, TimeLimiterEvent};

/// A guard whose events can be forwarded to `tracing`.
pub(crate) trait Forward {
    /// Subscribes the forwarder of this guard's events; `clock` (the registry's) paces its
    /// throttled lines.
    fn forward_events(&self, clock: &Clock);
}

/// The least time between two lines of one instance's per-call events of one kind.
const THROTTLE: Duration = Duration::from_secs(1);

/// One instance's per-call events of one kind, at most one line per [`THROTTLE`]: the first
/// at once, the others counted until a line is due. Lock-free: under an overload every
/// refusal passes here.
struct Throttle {
    clock: Clock,
    /// When the next line may be written, in the clock's nanoseconds.
    next_at: AtomicU64,
    /// The events left out since the last line.
    left_out: AtomicU64,
}

impl Throttle {
    fn new(clock: &Clock) -> Self {
        Throttle {
            clock: clock.clone(),
            next_at: AtomicU64::new(0),
            left_out: AtomicU64::new(0),
        }
    }

    /// `Some(more)` if this event is written, `more` the events left out since the last line;
    /// `None` if it is left out (and counted).
    fn admit(&self) -> Option<u64> {
        let now = self.clock.now_nanos();
        let next = self.next_at.load(Ordering::Relaxed);
        let due = now.saturating_add(THROTTLE.as_nanos() as u64);
        if now >= next
            && self
                .next_at
                .compare_exchange(next, due, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.left_out.swap(0, Ordering::Relaxed));
        }
        self.left_out.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// A per-call event at `DEBUG`, through `$throttle`: written if it admits it, with the
/// fields `aspect`, `name`, the event's own and `more`, its message noting those left out.
macro_rules! throttled_debug {
    ($throttle:expr, $aspect:literal, $name:expr, { $($field:tt)* }, $($message:tt)+) => {
        if let Some(more) = $throttle.admit() {
            tracing::debug!(
                target: "resilience",
                aspect = $aspect,
                name = $name.as_str(),
                $($field)*
                more,
                "{}{}",
                format_args!($($message)+),
                and_more(more)
            );
        }
    };
}

/// What a throttled line adds to its message: the events left out before it, if any.
fn and_more(more: u64) -> String {
    if more == 0 {
        String::new()
    } else {
        format!(" ({more} more like it since the last line)")
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Forward for CircuitBreaker {
    fn forward_events(&self, clock: &Clock) {
        let refused = Throttle::new(clock);
        self.subscribe_with(Interest::Rare, move |event| match event {
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
                throttled_debug!(
                    refused,
                    "circuit_breaker",
                    name,
                    {},
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
    fn forward_events(&self, clock: &Clock) {
        let rejected = Throttle::new(clock);
        let changed = Throttle::new(clock);
        self.subscribe_with(Interest::Rare, move |event| match event {
            BulkheadEvent::CallRejected { name, waited } => {
                throttled_debug!(
                    rejected,
                    "bulkhead",
                    name,
                    { waited_ms = millis(*waited), },
                    "bulkhead `{name}` is full: call rejected"
                );
            }
            // An adaptive limit moves by small steps: one line a second at most, the latest.
            BulkheadEvent::LimitChanged { name, from, to } => {
                throttled_debug!(
                    changed,
                    "bulkhead",
                    name,
                    { from = *from, to = *to, },
                    "bulkhead `{name}`: adaptive limit changed from {from} to {to}"
                );
            }
            BulkheadEvent::FleetUnavailable {
                name,
                fallback,
                reason,
            } => fleet_unavailable("bulkhead", "bulkhead", name, *fallback, reason),
            BulkheadEvent::FleetRestored { name } => fleet_restored("bulkhead", "bulkhead", name),
        });
    }
}

/// A fleet instance's Redis does not answer: a warning, for either kind of fleet guard.
fn fleet_unavailable(
    aspect: &'static str,
    kind: &str,
    name: &Name,
    fallback: FleetFallback,
    reason: &str,
) {
    tracing::warn!(
        target: "resilience",
        aspect,
        name = name.as_str(),
        fallback = fallback.as_str(),
        reason,
        "{kind} `{name}` cannot reach Redis: calls go by its fallback, `{fallback}`"
    );
}

/// A fleet instance's Redis answers again.
fn fleet_restored(aspect: &'static str, kind: &str, name: &Name) {
    tracing::info!(
        target: "resilience",
        aspect,
        name = name.as_str(),
        "{kind} `{name}` reaches Redis again: calls go by the fleet limit"
    );
}

impl Forward for RateLimiter {
    fn forward_events(&self, clock: &Clock) {
        let refused = Throttle::new(clock);
        self.subscribe_with(Interest::Rare, move |event| match event {
            RateLimiterEvent::FailedAcquire { name, retry_after } => {
                throttled_debug!(
                    refused,
                    "rate_limiter",
                    name,
                    { retry_after_ms = millis(*retry_after), },
                    "rate limiter `{name}` refused a call"
                );
            }
            RateLimiterEvent::SuccessfulAcquire { .. } => {}
            RateLimiterEvent::FleetUnavailable {
                name,
                fallback,
                reason,
            } => fleet_unavailable("rate_limiter", "rate limiter", name, *fallback, reason),
            RateLimiterEvent::FleetRestored { name } => {
                fleet_restored("rate_limiter", "rate limiter", name);
            }
        });
    }
}

impl Forward for Retry {
    fn forward_events(&self, clock: &Clock) {
        let (retried, exhausted, recovered, over_budget) = (
            Throttle::new(clock),
            Throttle::new(clock),
            Throttle::new(clock),
            Throttle::new(clock),
        );
        self.subscribe_with(Interest::Rare, move |event| match event {
            RetryEvent::Retry {
                name,
                attempt,
                wait,
            } => {
                throttled_debug!(
                    retried,
                    "retry",
                    name,
                    { attempt, wait_ms = millis(*wait), },
                    "retry `{name}`: attempt {attempt} failed, retrying"
                );
            }
            RetryEvent::Error { name, attempts } => {
                throttled_debug!(
                    exhausted,
                    "retry",
                    name,
                    { attempts, },
                    "retry `{name}`: every attempt failed"
                );
            }
            RetryEvent::Success { name, attempts } => {
                throttled_debug!(
                    recovered,
                    "retry",
                    name,
                    { attempts, },
                    "retry `{name}`: succeeded after retrying"
                );
            }
            RetryEvent::OverBudget { name, attempts } => {
                throttled_debug!(
                    over_budget,
                    "retry",
                    name,
                    { attempts, },
                    "retry `{name}`: over its budget, not retried"
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

impl Forward for Hedge {
    fn forward_events(&self, clock: &Clock) {
        let over_budget = Throttle::new(clock);
        let failed = Throttle::new(clock);
        self.subscribe_with(Interest::Rare, move |event| match event {
            HedgeEvent::OverBudget { name, attempt } => {
                throttled_debug!(
                    over_budget,
                    "hedge",
                    name,
                    { attempt, },
                    "hedge `{name}`: over its budget, no extra attempt"
                );
            }
            HedgeEvent::PrimaryFailure { name } | HedgeEvent::SecondaryFailure { name, .. } => {
                throttled_debug!(
                    failed,
                    "hedge",
                    name,
                    {},
                    "hedge `{name}`: the call ended with a failure"
                );
            }
            HedgeEvent::SecondarySuccess { name, attempt } => {
                tracing::trace!(
                    target: "resilience",
                    aspect = "hedge",
                    name = name.as_str(),
                    attempt,
                    "hedge `{name}`: an extra attempt answered first"
                );
            }
            HedgeEvent::PrimarySuccess { .. } | HedgeEvent::Hedged { .. } => {}
        });
    }
}

impl Forward for FaultInjector {
    fn forward_events(&self, clock: &Clock) {
        let injected = Throttle::new(clock);
        self.subscribe_with(Interest::Rare, move |event: &FaultEvent| {
            let name = event.name();
            throttled_debug!(injected, "fault", name, {}, "{event}");
        });
    }
}

impl Forward for TimeLimiter {
    fn forward_events(&self, clock: &Clock) {
        let cut = Throttle::new(clock);
        self.subscribe_with(Interest::Rare, move |event| match event {
            TimeLimiterEvent::Timeout { name, timeout } => {
                throttled_debug!(
                    cut,
                    "time_limiter",
                    name,
                    { timeout_ms = millis(*timeout), },
                    "time limiter `{name}` cut a call off"
                );
            }
            TimeLimiterEvent::Success { .. } | TimeLimiterEvent::Error { .. } => {}
        });
    }
}
