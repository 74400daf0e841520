//! [`CircuitBreakerEvent`]: what a breaker tells its subscribers, and the subscriber list.

use std::fmt;
use std::time::Duration;

use super::CircuitState;
use crate::name::Name;

/// Something a circuit breaker did, delivered to the callbacks registered with
/// [`CircuitBreaker::subscribe`](super::CircuitBreaker::subscribe).
///
/// Call events ([`Success`](Self::Success), [`Error`](Self::Error),
/// [`IgnoredError`](Self::IgnoredError)) are emitted for the outcomes the breaker records: not
/// in the disabled state, and not for a call whose permit was taken before the breaker last
/// changed state.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CircuitBreakerEvent {
    /// The breaker changed state (manually or by itself). `from` and `to` are equal when a
    /// manual transition re-enters the current state with fresh metrics.
    #[non_exhaustive]
    StateTransition {
        /// The breaker.
        name: Name,
        /// The state left.
        from: CircuitState,
        /// The state entered.
        to: CircuitState,
    },
    /// A call succeeded.
    #[non_exhaustive]
    Success {
        /// The breaker.
        name: Name,
        /// How long the call took.
        elapsed: Duration,
    },
    /// A call failed (or was rejected further in, with `record_rejections`).
    #[non_exhaustive]
    Error {
        /// The breaker.
        name: Name,
        /// How long the call took.
        elapsed: Duration,
    },
    /// A call ended in an error that counts as neither success nor failure.
    #[non_exhaustive]
    IgnoredError {
        /// The breaker.
        name: Name,
        /// How long the call took.
        elapsed: Duration,
    },
    /// A call was refused with `CallNotPermitted`.
    #[non_exhaustive]
    NotPermitted {
        /// The breaker.
        name: Name,
    },
    /// The failure rate reached the threshold (emitted before the transition it causes; in
    /// the metrics-only state, once each time the rate reaches the threshold).
    #[non_exhaustive]
    FailureRateExceeded {
        /// The breaker.
        name: Name,
        /// The failure rate, in percent.
        rate: f32,
    },
    /// The slow-call rate reached the threshold (emitted like
    /// [`FailureRateExceeded`](Self::FailureRateExceeded)).
    #[non_exhaustive]
    SlowCallRateExceeded {
        /// The breaker.
        name: Name,
        /// The slow-call rate, in percent.
        rate: f32,
    },
    /// The breaker was reset ([`reset`](super::CircuitBreaker::reset), or
    /// [`reconfigure`](super::CircuitBreaker::reconfigure)): closed, with empty metrics.
    #[non_exhaustive]
    Reset {
        /// The breaker.
        name: Name,
    },
}

impl CircuitBreakerEvent {
    /// The breaker the event comes from.
    pub fn name(&self) -> &Name {
        match self {
            CircuitBreakerEvent::StateTransition { name, .. }
            | CircuitBreakerEvent::Success { name, .. }
            | CircuitBreakerEvent::Error { name, .. }
            | CircuitBreakerEvent::IgnoredError { name, .. }
            | CircuitBreakerEvent::NotPermitted { name }
            | CircuitBreakerEvent::FailureRateExceeded { name, .. }
            | CircuitBreakerEvent::SlowCallRateExceeded { name, .. }
            | CircuitBreakerEvent::Reset { name } => name,
        }
    }
}

impl fmt::Display for CircuitBreakerEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CircuitBreakerEvent::StateTransition { name, from, to } => {
                write!(
                    f,
                    "circuit breaker `{name}` changed state from {from} to {to}"
                )
            }
            CircuitBreakerEvent::Success { name, elapsed } => {
                write!(
                    f,
                    "circuit breaker `{name}` recorded a success ({elapsed:?})"
                )
            }
            CircuitBreakerEvent::Error { name, elapsed } => {
                write!(
                    f,
                    "circuit breaker `{name}` recorded a failure ({elapsed:?})"
                )
            }
            CircuitBreakerEvent::IgnoredError { name, elapsed } => {
                write!(f, "circuit breaker `{name}` ignored an error ({elapsed:?})")
            }
            CircuitBreakerEvent::NotPermitted { name } => {
                write!(f, "circuit breaker `{name}` did not permit a call")
            }
            CircuitBreakerEvent::FailureRateExceeded { name, rate } => write!(
                f,
                "circuit breaker `{name}` exceeded its failure rate threshold ({rate} %)"
            ),
            CircuitBreakerEvent::SlowCallRateExceeded { name, rate } => write!(
                f,
                "circuit breaker `{name}` exceeded its slow call rate threshold ({rate} %)"
            ),
            CircuitBreakerEvent::Reset { name } => write!(f, "circuit breaker `{name}` was reset"),
        }
    }
}

pub use crate::subscribers::SubscriptionId;

/// An event as recorded under the breaker's lock: small and `Copy`, without the name.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Ev {
    Transition(CircuitState, CircuitState),
    Success(Duration),
    Error(Duration),
    Ignored(Duration),
    NotPermitted,
    FailureRate(f32),
    SlowCallRate(f32),
    Reset,
}

impl Ev {
    fn into_event(self, name: &Name) -> CircuitBreakerEvent {
        let name = name.clone();
        match self {
            Ev::Transition(from, to) => CircuitBreakerEvent::StateTransition { name, from, to },
            Ev::Success(elapsed) => CircuitBreakerEvent::Success { name, elapsed },
            Ev::Error(elapsed) => CircuitBreakerEvent::Error { name, elapsed },
            Ev::Ignored(elapsed) => CircuitBreakerEvent::IgnoredError { name, elapsed },
            Ev::NotPermitted => CircuitBreakerEvent::NotPermitted { name },
            Ev::FailureRate(rate) => CircuitBreakerEvent::FailureRateExceeded { name, rate },
            Ev::SlowCallRate(rate) => CircuitBreakerEvent::SlowCallRateExceeded { name, rate },
            Ev::Reset => CircuitBreakerEvent::Reset { name },
        }
    }
}

/// The events of one operation, gathered under the lock and delivered after it: a fixed
/// array, so gathering never allocates; disabled (and free) when nobody subscribed.
#[derive(Debug)]
pub(crate) struct EventBuf {
    enabled: bool,
    len: usize,
    items: [Option<Ev>; EventBuf::CAPACITY],
}

impl EventBuf {
    /// More than any one operation emits (a call, two rate events, a transition).
    const CAPACITY: usize = 6;

    pub(crate) fn new(enabled: bool) -> Self {
        EventBuf {
            enabled,
            len: 0,
            items: [None; Self::CAPACITY],
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, event: Ev) {
        if self.enabled && self.len < Self::CAPACITY {
            self.items[self.len] = Some(event);
            self.len += 1;
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The breaker's subscriber list.
pub(crate) type Subscribers = crate::subscribers::Subscribers<CircuitBreakerEvent>;

impl EventBuf {
    /// Delivers the gathered events to `subscribers` (see [`Subscribers::deliver`]): called
    /// with no lock held, once the breaker is consistent (every permit it granted exists, so
    /// an unwinding caller gives its probe back).
    pub(crate) fn deliver(&self, subscribers: &Subscribers, name: &Name) {
        subscribers.deliver(
            self.items[..self.len]
                .iter()
                .flatten()
                .map(|event| event.into_event(name)),
        );
    }
}
