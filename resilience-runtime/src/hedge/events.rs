//! [`HedgeEvent`]: what a hedge tells its subscribers.

use std::fmt;

use crate::name::Name;

/// Something a hedge saw, delivered to the callbacks registered with
/// [`Hedge::subscribe`](super::Hedge::subscribe). The four outcomes are Resilience4j's
/// `HedgeEvent` types (`PRIMARY_SUCCESS`, `SECONDARY_SUCCESS`, `PRIMARY_FAILURE`,
/// `SECONDARY_FAILURE`): each call that ends through a hedge is one of them, by which attempt
/// it ended with. A call whose first attempt succeeds without a hedge being made is told only
/// to per-call subscribers (the actuator's recent events skip it).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HedgeEvent {
    /// The call ended with its first attempt's success.
    #[non_exhaustive]
    PrimarySuccess {
        /// The hedge.
        name: Name,
    },
    /// The call ended with the success of an extra attempt (`attempt` 2 for the first hedge).
    #[non_exhaustive]
    SecondarySuccess {
        /// The hedge.
        name: Name,
        /// The number of the attempt that won (1 is the first call).
        attempt: u32,
    },
    /// The call ended with its first attempt's failure.
    #[non_exhaustive]
    PrimaryFailure {
        /// The hedge.
        name: Name,
    },
    /// The call ended with the failure of an extra attempt.
    #[non_exhaustive]
    SecondaryFailure {
        /// The hedge.
        name: Name,
        /// The number of the attempt it ended with.
        attempt: u32,
    },
    /// An extra attempt started (`attempt` 2 for the first hedge).
    #[non_exhaustive]
    Hedged {
        /// The hedge.
        name: Name,
        /// The number of the attempt started.
        attempt: u32,
    },
    /// An extra attempt was due, but the instance's budget had none left: it was not made.
    #[non_exhaustive]
    OverBudget {
        /// The hedge.
        name: Name,
        /// The number of the attempt that was not made.
        attempt: u32,
    },
}

impl HedgeEvent {
    /// The hedge the event comes from.
    pub fn name(&self) -> &Name {
        match self {
            HedgeEvent::PrimarySuccess { name }
            | HedgeEvent::PrimaryFailure { name }
            | HedgeEvent::SecondarySuccess { name, .. }
            | HedgeEvent::SecondaryFailure { name, .. }
            | HedgeEvent::Hedged { name, .. }
            | HedgeEvent::OverBudget { name, .. } => name,
        }
    }
}

impl fmt::Display for HedgeEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HedgeEvent::PrimarySuccess { name } => {
                write!(f, "hedge `{name}`: the first attempt succeeded")
            }
            HedgeEvent::PrimaryFailure { name } => {
                write!(
                    f,
                    "hedge `{name}`: the call ended with its first attempt's failure"
                )
            }
            HedgeEvent::SecondarySuccess { name, attempt } => {
                write!(
                    f,
                    "hedge `{name}`: attempt {attempt} answered first and succeeded"
                )
            }
            HedgeEvent::SecondaryFailure { name, attempt } => {
                write!(
                    f,
                    "hedge `{name}`: the call ended with attempt {attempt}'s failure"
                )
            }
            HedgeEvent::Hedged { name, attempt } => {
                write!(f, "hedge `{name}`: attempt {attempt} started")
            }
            HedgeEvent::OverBudget { name, attempt } => write!(
                f,
                "hedge `{name}`: attempt {attempt} was due, but the budget has none left"
            ),
        }
    }
}
