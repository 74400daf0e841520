//! The manual transitions of a [`CircuitBreaker`], and the table of those it refuses.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::{CircuitBreaker, CircuitState, Effects, Shared};
use crate::clock::{deadline_after, Clock};
use crate::name::Name;
use crate::sync::lock;

/// A manual transition the breaker refuses: Resilience4j's `IllegalStateTransitionException`.
///
/// Three of the 36 pairs of states are refused, as in Resilience4j: closed → half-open (probes
/// make sense only after an opening), and metrics-only → open or half-open (a metrics-only
/// breaker never acts on what it records; leave it for closed first). Every other pair is
/// allowed, including a state to itself, which starts it over with fresh metrics.
///
/// ```
/// use resilience_runtime::{CircuitBreaker, CircuitBreakerConfig, CircuitState};
///
/// let breaker = CircuitBreaker::new("search", CircuitBreakerConfig::default());
/// let refused = breaker.transition_to_half_open_state().unwrap_err();
/// assert_eq!((refused.from, refused.to), (CircuitState::Closed, CircuitState::HalfOpen));
/// assert_eq!(breaker.state(), CircuitState::Closed, "nothing changed");
///
/// breaker.transition_to_open_state()?;
/// breaker.transition_to_half_open_state()?;
/// assert_eq!(breaker.state(), CircuitState::HalfOpen);
/// # Ok::<(), resilience_runtime::IllegalStateTransition>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct IllegalStateTransition {
    /// The breaker.
    pub name: Name,
    /// The state it was in (and stays in).
    pub from: CircuitState,
    /// The state it was asked to enter.
    pub to: CircuitState,
}

impl fmt::Display for IllegalStateTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let IllegalStateTransition { name, from, to } = self;
        write!(
            f,
            "circuit breaker `{name}` cannot go from {from} to {to}; "
        )?;
        match from {
            CircuitState::Closed => f.write_str("open it first"),
            _ => f.write_str("close it first"),
        }
    }
}

impl Error for IllegalStateTransition {}

/// Whether a manual transition from `from` to `to` is allowed: Resilience4j's
/// `CircuitBreaker.StateTransition` table.
pub(crate) const fn is_allowed(from: CircuitState, to: CircuitState) -> bool {
    use CircuitState::{Closed, HalfOpen, MetricsOnly, Open};
    !matches!(
        (from, to),
        (Closed, HalfOpen) | (MetricsOnly, Open) | (MetricsOnly, HalfOpen)
    )
}

impl CircuitBreaker {
    /// The clock the breaker reads (for [`transition_to_open_state_until`]).
    ///
    /// [`transition_to_open_state_until`]: Self::transition_to_open_state_until
    pub fn clock(&self) -> &Clock {
        &self.shared.clock
    }

    /// Closes the breaker, with fresh metrics and no backoff. Allowed from every state.
    pub fn transition_to_closed_state(&self) {
        self.infallible(CircuitState::Closed);
    }

    /// Opens the breaker for the wait its configuration gives this opening (a further
    /// consecutive opening for the backoff of the wait).
    ///
    /// # Errors
    ///
    /// [`IllegalStateTransition`] from the metrics-only state.
    pub fn transition_to_open_state(&self) -> Result<(), IllegalStateTransition> {
        self.shared.transition_manually(CircuitState::Open, None)
    }

    /// Opens the breaker for `wait`, whatever its configuration says (Resilience4j's
    /// `transitionToOpenStateFor`); then it turns half-open as after any other wait. It counts
    /// as a consecutive opening for the backoff of later waits.
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilience_runtime::{CircuitBreaker, CircuitBreakerConfig, CircuitState, Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let breaker = CircuitBreaker::with_clock(
    ///     "ledger", CircuitBreakerConfig::default(), Clock::from(clock.clone()));
    /// // The dependency announced 5 minutes of maintenance.
    /// breaker.transition_to_open_state_for(Duration::from_secs(300))?;
    /// assert_eq!(breaker.remaining_open_time(), Some(Duration::from_secs(300)));
    /// clock.advance(Duration::from_secs(300));
    /// let probe = breaker.try_acquire().expect("the wait is over");
    /// assert_eq!(breaker.state(), CircuitState::HalfOpen);
    /// # drop(probe);
    /// # Ok::<(), resilience_runtime::IllegalStateTransition>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`IllegalStateTransition`] from the metrics-only state.
    pub fn transition_to_open_state_for(
        &self,
        wait: Duration,
    ) -> Result<(), IllegalStateTransition> {
        let until = deadline_after(self.shared.clock.now_nanos(), wait);
        self.shared
            .transition_manually(CircuitState::Open, Some(until))
    }

    /// Opens the breaker until the breaker's [`clock`](Self::clock) reads `deadline` (a
    /// reading of [`Clock::now`]; one already passed lets the next call through as a probe),
    /// like [`transition_to_open_state_for`](Self::transition_to_open_state_for).
    ///
    /// # Errors
    ///
    /// [`IllegalStateTransition`] from the metrics-only state.
    pub fn transition_to_open_state_until(
        &self,
        deadline: Duration,
    ) -> Result<(), IllegalStateTransition> {
        // `Duration::MAX` (or anything past the clock's end): open until another transition.
        let until = deadline_after(0, deadline);
        self.shared
            .transition_manually(CircuitState::Open, Some(until))
    }

    /// Turns the breaker half-open, with all its probe calls available.
    ///
    /// # Errors
    ///
    /// [`IllegalStateTransition`] from the closed and metrics-only states.
    pub fn transition_to_half_open_state(&self) -> Result<(), IllegalStateTransition> {
        self.shared
            .transition_manually(CircuitState::HalfOpen, None)
    }

    /// Disables the breaker: every call passes and nothing is recorded. Allowed from every
    /// state.
    pub fn transition_to_disabled_state(&self) {
        self.infallible(CircuitState::Disabled);
    }

    /// Forces the breaker open: every call is refused until another manual transition.
    /// Allowed from every state.
    pub fn transition_to_forced_open_state(&self) {
        self.infallible(CircuitState::ForcedOpen);
    }

    /// Records calls and emits events without ever changing state by itself. Allowed from
    /// every state.
    pub fn transition_to_metrics_only_state(&self) {
        self.infallible(CircuitState::MetricsOnly);
    }

    /// A transition the table allows from every state.
    fn infallible(&self, to: CircuitState) {
        let entered = self.shared.transition_manually(to, None);
        debug_assert!(entered.is_ok(), "{to} is allowed from every state");
    }
}

impl Shared {
    /// A manual transition to `to` (open until `open_until`, if given), if the table allows
    /// it from the current state. (Elapsed waits need not be applied first: they move only
    /// between open and half-open, which the table treats alike.)
    pub(super) fn transition_manually(
        self: &Arc<Self>,
        to: CircuitState,
        open_until: Option<u64>,
    ) -> Result<(), IllegalStateTransition> {
        let now = self.clock.now_nanos();
        let mut fx = Effects::new(self);
        let entered = {
            let mut core = lock(&self.core);
            let from = core.state;
            if is_allowed(from, to) {
                let mut window = self.window.lock();
                self.transition_with(&mut core, &mut window, to, open_until, now, &mut fx);
                Ok(())
            } else {
                Err(IllegalStateTransition {
                    name: self.name.clone(),
                    from,
                    to,
                })
            }
        };
        self.after_unlock(&fx);
        entered
    }
}
