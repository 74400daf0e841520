//! [`BulkheadEvent`]: what a bulkhead tells its subscribers.

use std::fmt;
use std::time::Duration;

use crate::fleet::FleetFallback;
use crate::name::Name;

/// Something a bulkhead did, delivered to the callbacks registered with
/// [`Bulkhead::subscribe`](super::Bulkhead::subscribe) (Resilience4j's
/// `BulkheadOnCallRejectedEvent`). A bulkhead tells of its refusals and of the changes of an
/// adaptive limit: an admitted call costs it no event, so subscribing costs the admission path
/// nothing.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use resilience_runtime::{Bulkhead, BulkheadConfig, BulkheadEvent};
///
/// let bulkhead = Bulkhead::new("orders", BulkheadConfig::builder().max_concurrent_calls(1).build()?);
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let sink = Arc::clone(&seen);
/// bulkhead.subscribe(move |event: &BulkheadEvent| sink.lock().unwrap().push(event.to_string()));
///
/// let _held = bulkhead.try_acquire()?;
/// assert!(bulkhead.try_acquire().is_err());
/// assert_eq!(*seen.lock().unwrap(), ["bulkhead `orders`: call rejected after waiting 0 ms"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BulkheadEvent {
    /// A call found no free permit within the bulkhead's `max_wait_duration`.
    #[non_exhaustive]
    CallRejected {
        /// The bulkhead.
        name: Name,
        /// How long the call waited for a permit.
        waited: Duration,
    },
    /// An adaptive limit changed (see [`AdaptiveLimit`](super::AdaptiveLimit)).
    #[non_exhaustive]
    LimitChanged {
        /// The bulkhead.
        name: Name,
        /// The limit before.
        from: u32,
        /// The limit now.
        to: u32,
    },
    /// A fleet bulkhead's Redis did not answer: calls go by `fallback` until it does again.
    #[non_exhaustive]
    FleetUnavailable {
        /// The bulkhead.
        name: Name,
        /// What decides the calls meanwhile.
        fallback: FleetFallback,
        /// What went wrong, in a line.
        reason: String,
    },
    /// A fleet bulkhead's Redis answers again: calls go by the fleet limit.
    #[non_exhaustive]
    FleetRestored {
        /// The bulkhead.
        name: Name,
    },
}

impl BulkheadEvent {
    /// The bulkhead the event comes from.
    pub fn name(&self) -> &Name {
        match self {
            BulkheadEvent::CallRejected { name, .. }
            | BulkheadEvent::LimitChanged { name, .. }
            | BulkheadEvent::FleetUnavailable { name, .. }
            | BulkheadEvent::FleetRestored { name } => name,
        }
    }
}

impl fmt::Display for BulkheadEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BulkheadEvent::CallRejected { name, waited } => write!(
                f,
                "bulkhead `{name}`: call rejected after waiting {} ms",
                waited.as_millis()
            ),
            BulkheadEvent::LimitChanged { name, from, to } => {
                write!(f, "bulkhead `{name}`: limit changed from {from} to {to}")
            }
            BulkheadEvent::FleetUnavailable {
                name,
                fallback,
                reason,
            } => crate::fleet::write_unavailable(f, "bulkhead", name, *fallback, reason),
            BulkheadEvent::FleetRestored { name } => {
                crate::fleet::write_restored(f, "bulkhead", name)
            }
        }
    }
}
