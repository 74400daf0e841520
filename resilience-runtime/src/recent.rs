//! The last rare events of every guard of a registry, in a bounded buffer
//! ([`Registry::keep_recent_events`]): what Resilience4j's `…events` actuator endpoints show.
//! Kept with [`Interest::Rare`], so keeping them costs an ordinary call nothing.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use crate::aspect::Aspect;
use crate::bulkhead::{Bulkhead, BulkheadEvent};
use crate::circuit_breaker::{CircuitBreaker, CircuitBreakerEvent};
use crate::fault::{FaultEvent, FaultInjector};
use crate::hedge::{Hedge, HedgeEvent};
use crate::name::Name;
use crate::rate_limiter::{RateLimiter, RateLimiterEvent};
use crate::retry::{Retry, RetryEvent};
use crate::subscribers::Interest;
use crate::time_limiter::{TimeLimiter, TimeLimiterEvent};

/// One event a registry kept (see [`Registry::recent_events`](crate::Registry::recent_events)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecentEvent {
    at: SystemTime,
    aspect: Aspect,
    name: Name,
    kind: &'static str,
    message: String,
}

impl RecentEvent {
    /// When it happened (the system's wall clock).
    pub fn at(&self) -> SystemTime {
        self.at
    }

    /// The kind of guard.
    pub fn aspect(&self) -> Aspect {
        self.aspect
    }

    /// The instance.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// What happened, as a label in Resilience4j's event types: `state_transition`, `reset`,
    /// `not_permitted`, `failure_rate_exceeded`, `slow_call_rate_exceeded` (circuit breaker),
    /// `call_rejected` (bulkhead), `failed_acquire` (rate limiter), `retry`, `success`,
    /// `error`, `ignored_error` (retry), `timeout` (time limiter).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The event as a sentence, as its `Display` writes it.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The buffer: the newest `capacity` events, oldest first.
pub(crate) struct EventLog {
    capacity: usize,
    events: Mutex<VecDeque<RecentEvent>>,
}

impl EventLog {
    pub(crate) fn new(capacity: usize) -> Self {
        EventLog {
            capacity,
            events: Mutex::new(VecDeque::with_capacity(capacity.min(1024))),
        }
    }

    fn push(&self, event: RecentEvent) {
        if self.capacity == 0 {
            return;
        }
        let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        if events.len() == self.capacity {
            events.pop_front();
        }
        events.push_back(event);
    }

    pub(crate) fn snapshot(&self) -> Vec<RecentEvent> {
        let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        events.iter().cloned().collect()
    }
}

/// An event kept by the log: its label, or `None` for the event of an ordinary call.
trait Kept: std::fmt::Display {
    fn kept(&self) -> Option<&'static str>;
    fn instance(&self) -> &Name;
}

impl Kept for CircuitBreakerEvent {
    fn kept(&self) -> Option<&'static str> {
        match self {
            CircuitBreakerEvent::StateTransition { .. } => Some("state_transition"),
            CircuitBreakerEvent::Reset { .. } => Some("reset"),
            CircuitBreakerEvent::NotPermitted { .. } => Some("not_permitted"),
            CircuitBreakerEvent::FailureRateExceeded { .. } => Some("failure_rate_exceeded"),
            CircuitBreakerEvent::SlowCallRateExceeded { .. } => Some("slow_call_rate_exceeded"),
            CircuitBreakerEvent::Success { .. }
            | CircuitBreakerEvent::Error { .. }
            | CircuitBreakerEvent::IgnoredError { .. } => None,
        }
    }
    fn instance(&self) -> &Name {
        self.name()
    }
}

impl Kept for BulkheadEvent {
    fn kept(&self) -> Option<&'static str> {
        match self {
            BulkheadEvent::CallRejected { .. } => Some("call_rejected"),
            // As frequent as samples while the limit moves: the limit is in the metrics.
            BulkheadEvent::LimitChanged { .. } => None,
            BulkheadEvent::FleetUnavailable { .. } => Some("fleet_unavailable"),
            BulkheadEvent::FleetRestored { .. } => Some("fleet_restored"),
        }
    }
    fn instance(&self) -> &Name {
        self.name()
    }
}

impl Kept for RateLimiterEvent {
    fn kept(&self) -> Option<&'static str> {
        match self {
            RateLimiterEvent::FailedAcquire { .. } => Some("failed_acquire"),
            RateLimiterEvent::FleetUnavailable { .. } => Some("fleet_unavailable"),
            RateLimiterEvent::FleetRestored { .. } => Some("fleet_restored"),
            RateLimiterEvent::SuccessfulAcquire { .. } => None,
        }
    }
    fn instance(&self) -> &Name {
        self.name()
    }
}

impl Kept for RetryEvent {
    fn kept(&self) -> Option<&'static str> {
        Some(match self {
            RetryEvent::Retry { .. } => "retry",
            RetryEvent::Success { .. } => "success",
            RetryEvent::Error { .. } => "error",
            RetryEvent::IgnoredError { .. } => "ignored_error",
            RetryEvent::OverBudget { .. } => "over_budget",
        })
    }
    fn instance(&self) -> &Name {
        self.name()
    }
}

impl Kept for TimeLimiterEvent {
    fn kept(&self) -> Option<&'static str> {
        match self {
            TimeLimiterEvent::Timeout { .. } => Some("timeout"),
            TimeLimiterEvent::Success { .. } | TimeLimiterEvent::Error { .. } => None,
        }
    }
    fn instance(&self) -> &Name {
        self.name()
    }
}

impl Kept for HedgeEvent {
    fn kept(&self) -> Option<&'static str> {
        match self {
            HedgeEvent::SecondarySuccess { .. } => Some("secondary_success"),
            HedgeEvent::PrimaryFailure { .. } => Some("primary_failure"),
            HedgeEvent::SecondaryFailure { .. } => Some("secondary_failure"),
            HedgeEvent::OverBudget { .. } => Some("over_budget"),
            HedgeEvent::PrimarySuccess { .. } | HedgeEvent::Hedged { .. } => None,
        }
    }
    fn instance(&self) -> &Name {
        self.name()
    }
}

impl Kept for FaultEvent {
    fn kept(&self) -> Option<&'static str> {
        // Injected on purpose: the log keeps the guards' own events.
        None
    }
    fn instance(&self) -> &Name {
        self.name()
    }
}

/// The callback that keeps `aspect`'s events in `log`.
fn keeper<E: Kept>(aspect: Aspect, log: &Arc<EventLog>) -> impl Fn(&E) + Send + Sync + 'static {
    let log = Arc::clone(log);
    move |event: &E| {
        if let Some(kind) = event.kept() {
            log.push(RecentEvent {
                at: SystemTime::now(),
                aspect,
                name: event.instance().clone(),
                kind,
                message: event.to_string(),
            });
        }
    }
}

/// A guard whose rare events a log can keep.
pub(crate) trait Keep {
    /// Subscribes `log` to this guard's rare events.
    fn keep_events_in(&self, log: &Arc<EventLog>);
}

macro_rules! keep {
    ($instance:ty, $aspect:ident) => {
        impl Keep for $instance {
            fn keep_events_in(&self, log: &Arc<EventLog>) {
                self.subscribe_with(Interest::Rare, keeper(Aspect::$aspect, log));
            }
        }
    };
}

keep!(Bulkhead, Bulkhead);
keep!(RateLimiter, RateLimiter);
keep!(Retry, Retry);
keep!(CircuitBreaker, CircuitBreaker);
keep!(TimeLimiter, TimeLimiter);
keep!(Hedge, Hedge);
keep!(FaultInjector, Fault);

#[cfg(test)]
mod tests {
    use crate::{CircuitState, Registry};

    #[test]
    fn the_newest_events_are_kept_and_ordinary_calls_are_not_events() {
        let registry = Registry::new();
        let breaker = registry.circuit_breaker("ledger");
        registry.keep_recent_events(2);
        registry.keep_recent_events(100); // the first capacity holds
        breaker.try_acquire().unwrap().record_success();
        assert!(registry.recent_events().is_empty());
        breaker.transition_to_open_state().unwrap();
        breaker.transition_to_half_open_state().unwrap();
        breaker.transition_to_closed_state();
        let kept = registry.recent_events();
        assert_eq!(kept.len(), 2);
        assert!(
            kept[0].message().ends_with("from open to half-open"),
            "{kept:?}"
        );
        assert!(
            kept[1].message().ends_with("from half-open to closed"),
            "{kept:?}"
        );
        assert_eq!(breaker.state(), CircuitState::Closed);
        // An instance created later keeps its events too.
        let pool = registry.bulkhead("pool");
        let held: Vec<_> = (0..25).map(|_| pool.try_acquire().unwrap()).collect();
        assert!(pool.try_acquire().is_err());
        drop(held);
        let last = registry.recent_events().pop().unwrap();
        assert_eq!(
            (last.kind(), last.name().as_str()),
            ("call_rejected", "pool")
        );
    }
}
