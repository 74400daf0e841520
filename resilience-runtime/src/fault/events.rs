//! [`FaultEvent`]: what a fault injector tells its subscribers.

use std::fmt;
use std::time::Duration;

use crate::name::Name;

/// A fault injected into a call, delivered to the callbacks registered with
/// [`FaultInjector::subscribe`](super::FaultInjector::subscribe).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultEvent {
    /// The call waits `latency` before it runs.
    #[non_exhaustive]
    Latency {
        /// The instance name the faults are configured for.
        name: Name,
        /// The latency added.
        latency: Duration,
    },
    /// The call fails with the injected error, without running.
    #[non_exhaustive]
    Error {
        /// The instance name.
        name: Name,
    },
    /// The call is refused.
    #[non_exhaustive]
    Refusal {
        /// The instance name.
        name: Name,
    },
}

impl FaultEvent {
    /// The instance name the faults are configured for.
    pub fn name(&self) -> &Name {
        match self {
            FaultEvent::Latency { name, .. }
            | FaultEvent::Error { name }
            | FaultEvent::Refusal { name } => name,
        }
    }
}

impl fmt::Display for FaultEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultEvent::Latency { name, latency } => {
                write!(f, "fault `{name}`: {latency:?} of latency injected")
            }
            FaultEvent::Error { name } => write!(f, "fault `{name}`: an error injected"),
            FaultEvent::Refusal { name } => write!(f, "fault `{name}`: a refusal injected"),
        }
    }
}
