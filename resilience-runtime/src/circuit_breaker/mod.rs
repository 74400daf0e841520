//! The circuit breaker: stops calling a dependency that keeps failing (or is too slow), and
//! probes it again after a while.
//!
//! A [`CircuitBreaker`] hands out a [`CircuitPermit`] per call, and the permit records how the
//! call ended. The breaker moves between the states of [`CircuitState`]:
//!
//! - **Closed**: every call passes and is recorded in the [`SlidingWindow`]. Once the window
//!   holds `minimum_number_of_calls` calls and the failure rate or the slow-call rate reaches
//!   its threshold, the breaker opens.
//! - **Open**: calls are refused with [`Rejected::CallNotPermitted`] for
//!   `wait_duration_in_open_state` (growing over consecutive openings with an
//!   [`OpenStateBackoff`]), then the next call turns the breaker half-open; with
//!   `automatic_transition_from_open_to_half_open` it turns half-open without waiting for a call.
//! - **Half-open**: `permitted_calls_in_half_open_state` probe calls pass. When they are all
//!   recorded, the breaker closes, or opens again if a rate reaches its threshold. It also opens
//!   again if it stays half-open longer than a non-zero `max_wait_duration_in_half_open_state`.
//! - **Disabled** (always permits, records nothing), **forced open** (always refuses) and
//!   **metrics-only** (permits, records, never changes state by itself) are entered and left
//!   only by the manual transitions (and metrics-only by an `initial_state`).
//!
//! A breaker starts closed, or in its configuration's `initial_state` (open or metrics-only).
//! The manual transitions (`transition_to_*_state`) follow Resilience4j's table: closed →
//! half-open and metrics-only → open or half-open are refused with an
//! [`IllegalStateTransition`]; every other pair is allowed.
//!
//! A subscriber to the breaker's events is user code, called after the breaker's state is
//! consistent: if one panics, the others still get the event, and the panic is then resumed
//! on the thread that caused the event (a call whose permit was granted gets the panic instead
//! of its permit, and a half-open probe is given back).
//!
//! Time comes from the breaker's [`Clock`], so a [`ManualClock`](crate::ManualClock) drives every
//! time-dependent behaviour in tests.
//!
//! # Reconfiguration
//!
//! [`CircuitBreaker::reconfigure`] changes a breaker's configuration in place: the breaker
//! starts over with the new configuration, in its initial state (closed by default), with a
//! fresh window, fresh metrics and no backoff, as a new breaker would, but it stays the same instance, so references to it and its
//! event subscriptions stay valid. Calls permitted before record nothing. The closed path costs
//! the same: the values it reads are plain atomic loads, and a record checks, under the
//! window's lock, that it belongs to the current configuration.
//!
//! # What the closed path costs
//!
//! A successful call through a closed breaker is one atomic load to permit it and one short spin
//! lock around the sliding window to record it; the breaker's state-machine lock is taken only
//! when a rate reaches its threshold. The clock is read only where a rule needs it:
//!
//! - **No clock** with a count-based window and slow-call detection turned off
//!   (`slow_call_duration_threshold(Duration::MAX)`), unless someone subscribed to the events.
//! - **A coarse clock** for call durations on the system clock on Linux
//!   (`CLOCK_MONOTONIC_COARSE`, read at a fifth of the cost), when its resolution (a few
//!   milliseconds) is at most 1 % of `slow_call_duration_threshold` (the default 60 s
//!   qualifies); otherwise the precise clock. A time-based window reads the coarse clock for
//!   every record and every read of its totals when its resolution is at most 10 ms (1 % of a
//!   one-second bucket); otherwise the precise clock. A [`ManualClock`](crate::ManualClock)
//!   drives all of these.
//! - **Event durations**: a call made while someone is subscribed is timed with the precise
//!   clock, so its [`CircuitBreakerEvent`] carries a precise `elapsed`. A call that started
//!   before anyone subscribed reports the elapsed time it has: coarse, or zero if it was not
//!   timed at all.
//!
//! The waits of the open and half-open states, their timers and
//! [`remaining_open_time`](CircuitBreaker::remaining_open_time) always read the breaker's
//! precise [`Clock`]. So under a paused tokio runtime those waits follow paused time, while call
//! durations (slow calls) and time-based windows follow the operating system's clock: test
//! those with a [`ManualClock`](crate::ManualClock), which drives everything.

mod config;
#[cfg(feature = "serde")]
pub(crate) use config::WindowType;
mod derived;
pub(crate) mod durations;
mod events;
mod machine;
mod metrics;
mod permit;
pub(crate) mod state;
mod transition;
mod window;

#[cfg(all(test, not(loom)))]
mod tests;

pub use config::{
    CircuitBreakerConfig, CircuitBreakerConfigBuilder, OpenStateBackoff, SlidingWindow,
};
pub use events::{CircuitBreakerEvent, SubscriptionId};
use metrics::CallTotals;
pub use metrics::CircuitBreakerMetrics;
pub use permit::CircuitPermit;
pub use state::CircuitState;
pub use transition::IllegalStateTransition;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, Reading};
use crate::error::Rejected;
use crate::name::Name;
use crate::sync::{lock, AtomicBool, AtomicU64, Mutex, Ordering, SpinLock};

use derived::{AtomicReading, Derived, Thresholds};
use durations::CallDurations;
use events::{EventBuf, Subscribers};
use permit::PermitKind;
use state::{pack, unpack};
use window::{Totals, Window};

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// No deadline: above every clock reading ([`END`](crate::clock::END) is the last one). A
/// deadline computed past the end saturates to it ([`deadline_after`]): it is never reached.
const NEVER: u64 = u64::MAX;

/// `slow_call_nanos` of a threshold of 2⁶⁴ ns (584 years) or more, such as `Duration::MAX`:
/// slow-call detection is off, no call is ever slow.
const NEVER_SLOW: u64 = u64::MAX;

/// A `recording_epoch` that no permit has (epochs stay below 2⁵⁶: see [`pack`]).
const NO_EPOCH: u64 = u64::MAX;

/// A circuit breaker. `Send + Sync`: share it by reference or in an `Arc`.
///
/// Each call takes a [`CircuitPermit`] with [`try_acquire`](Self::try_acquire) and reports how
/// it ended on the permit. The [module docs](self) describe the states.
/// [`reconfigure`](Self::reconfigure) changes the configuration in place and starts over
/// (in its initial state, with a fresh window and metrics), keeping the instance, its name and
/// its subscribers.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{
///     CircuitBreaker, CircuitBreakerConfig, CircuitState, Clock, ManualClock, Rejected,
///     SlidingWindow,
/// };
///
/// let clock = ManualClock::new();
/// let config = CircuitBreakerConfig::builder()
///     .sliding_window(SlidingWindow::CountBased(4))
///     .minimum_number_of_calls(4)
///     .failure_rate_threshold(50.0)
///     .wait_duration_in_open_state(Duration::from_secs(10))
///     .permitted_calls_in_half_open_state(1)
///     .build()?;
/// let breaker = CircuitBreaker::with_clock("inventory", config, Clock::from(clock.clone()));
///
/// for ok in [true, false, true, false] {
///     let permit = breaker.try_acquire()?;
///     if ok { permit.record_success() } else { permit.record_failure() }
/// }
/// // 2 failures out of 4 calls: 50 %, the threshold.
/// assert_eq!(breaker.state(), CircuitState::Open);
/// assert!(matches!(breaker.try_acquire(), Err(Rejected::CallNotPermitted { .. })));
/// assert_eq!(breaker.remaining_open_time(), Some(Duration::from_secs(10)));
///
/// // After the wait, one probe passes; its success closes the breaker.
/// clock.advance(Duration::from_secs(10));
/// let probe = breaker.try_acquire()?;
/// assert_eq!(breaker.state(), CircuitState::HalfOpen);
/// probe.record_success();
/// assert_eq!(breaker.state(), CircuitState::Closed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CircuitBreaker {
    shared: Arc<Shared>,
}

/// The breaker proper, behind an `Arc` so that a timer task can hold a `Weak` to it.
///
/// # Where the configuration lives
///
/// [`CircuitBreaker::reconfigure`] changes the configuration in place, so every value derived
/// from it can change. Each lives where its readers already synchronise:
///
/// - read without a lock (the closed path, `state`, `record_rejected`): the atomics below,
///   loaded `Relaxed`, as cheap as the plain loads they replace;
/// - read under the window's lock (the closed path's record): in [`Recorder`];
/// - read only under the state machine's lock (waits, half-open probes): the configuration
///   itself, in [`Core`].
///
/// A reconfiguration writes all of them, and moves the epoch, holding both locks (`core`, then
/// `window`), and publishes the new epoch in `packed` (`Release`) after the atomics. So:
///
/// - a reader under either lock sees one configuration, whole;
/// - a permit whose epoch comes from `packed` (`Acquire`) or from under `core` reads (after
///   that) the values of its epoch's configuration, or of a later one;
/// - a record that read a value of a later configuration without a lock takes its lock after
///   the reconfiguration that wrote the value released it: the value was written inside that
///   critical section, and a read cannot see a write that its own critical section is ordered
///   before;
/// - every record compares its permit's epoch with `recording_epoch` (under the window's lock)
///   or `core.epoch` (under `core`) before it lands. So a record that read values of two
///   configurations, or of a configuration later than its permit's, finds a later epoch and
///   is discarded, as a permit of an earlier state is; one that lands used its epoch's values
///   only.
struct Shared {
    name: Name,
    id: u64,
    clock: Clock,
    /// `pack(epoch, state)`: a mirror of `core.epoch` and `core.state`, written under the lock,
    /// read without it.
    packed: AtomicU64,
    /// A mirror of `core.deadline`, stored before `packed`.
    deadline: AtomicU64,
    /// Calls refused since the breaker was created (counted without the lock); the current
    /// metrics count from `not_permitted_at_clear`, its value when they started.
    not_permitted: AtomicU64,
    not_permitted_at_clear: AtomicU64,
    /// Calls that ended in an error counting as neither success nor failure, since the breaker
    /// was created.
    ignored: AtomicU64,
    /// The state machine. Lock order: `core`, then `window`; never the reverse.
    core: Mutex<Core>,
    /// The sliding window, under its own short lock: a closed-state permit records into it
    /// without taking `core` (see [`Shared::finish_closed`]).
    window: SpinLock<Recorder>,
    subscribers: Subscribers,
    /// How calls are timed for the slow-call rule (when nobody subscribed to events).
    call_reading: AtomicReading,
    /// The clock reading of every window operation.
    window_reading: AtomicReading,
    /// `slow_call_duration_threshold` in nanoseconds; `NEVER_SLOW` when the rule is off.
    slow_call_nanos: AtomicU64,
    /// `automatic_transition_from_open_to_half_open`, for the lock-free `state`.
    automatic: AtomicBool,
    /// `record_rejections`, for the lock-free `record_rejected`.
    record_rejections: AtomicBool,
    /// `record_call_durations`: whether records add to `Recorder::durations`.
    record_call_durations: AtomicBool,
    /// The runtime that runs the timers of time-driven transitions, when the breaker was created
    /// inside one and reads the system clock.
    #[cfg(not(loom))]
    runtime: Option<tokio::runtime::Handle>,
}

/// The state machine, under `Shared::core`.
#[derive(Debug)]
struct Core {
    /// The configuration in force (its waits and probes are read here, under this lock).
    config: CircuitBreakerConfig,
    state: CircuitState,
    /// The number of transitions so far; a permit records only in the epoch it was issued in.
    epoch: u64,
    /// Open: when the wait ends. Half-open: when the maximum wait ends. Otherwise `NEVER`.
    deadline: u64,
    /// Probe permits taken in the current half-open epoch and not given back.
    probes_issued: u32,
    /// The outcomes of the probes of the current half-open epoch.
    probes: Totals,
    /// The successful and failed probes since the breaker was created (see
    /// `Recorder::recorded`, which counts the other recorded calls).
    recorded_probes: [u64; 2],
    /// Whether the metrics are those of the probes (half-open, and open after half-open).
    metrics_from_probes: bool,
    /// Consecutive openings since the breaker was last closed.
    openings: u32,
    /// Metrics-only: whether a rate is at its threshold (its event was emitted).
    rate_exceeded: bool,
}

/// The sliding window of the closed and metrics-only states, and which permits may record into
/// it without the state machine's lock; under `Shared::window`.
#[derive(Debug)]
struct Recorder {
    window: Window,
    /// The successful and failed calls recorded since the breaker was created: never cleared
    /// (a transition, a reset and a reconfiguration keep counting), for metrics counters. Two
    /// additions under the lock the record takes anyway.
    recorded: [u64; 2],
    /// How long the recorded calls took (all of them: the probes' and the ignored ones' too),
    /// while `record_call_durations` is on; never cleared, as `recorded`.
    durations: CallDurations,
    /// The epoch whose closed-state permits record on the fast path: the current epoch while
    /// the breaker is closed, `NO_EPOCH` otherwise. Set to an epoch only by a transition (under
    /// both locks); the fast path only ever sets it to `NO_EPOCH`, when its record made a rate
    /// reach its threshold and the breaker is about to open.
    recording_epoch: u64,
    /// `minimum_number_of_calls`, capped by a count window's size.
    minimum_calls: u64,
    thresholds: Thresholds,
}

/// How a permit ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Finish {
    Success,
    Failure,
    Ignored,
    /// Not recorded: rejected further in (without `record_rejections`), or abandoned.
    GiveBack,
}

/// A configuration [`CircuitBreaker::reconfigure`] installs, with what is derived from it.
struct Replacement {
    config: CircuitBreakerConfig,
    /// A fresh window of the new kind and size.
    window: Window,
    derived: Derived,
}

/// What the breaker must do once its lock is released.
struct Effects {
    events: EventBuf,
    /// A deadline to wake up at: `(epoch, deadline)`.
    timer: Option<(u64, u64)>,
}

impl Effects {
    fn new(shared: &Shared) -> Self {
        Effects {
            events: EventBuf::new(shared.subscribers.any()),
            timer: None,
        }
    }
}

impl CircuitBreaker {
    /// A circuit breaker reading the system clock.
    ///
    /// Created inside a tokio runtime (with its time driver enabled), it runs its time-driven
    /// transitions (`automatic_transition_from_open_to_half_open`,
    /// `max_wait_duration_in_half_open_state`) on a timer of that runtime; otherwise they
    /// happen when the breaker is next used or observed.
    pub fn new(name: impl Into<Name>, config: CircuitBreakerConfig) -> Self {
        Self::with_clock(name, config, Clock::system())
    }

    /// A circuit breaker reading `clock`. With a [`ManualClock`](crate::ManualClock), no timer
    /// runs: time-driven transitions happen when the breaker is next used or observed
    /// ([`state`](Self::state), [`metrics`](Self::metrics), [`try_acquire`](Self::try_acquire)).
    pub fn with_clock(name: impl Into<Name>, config: CircuitBreakerConfig, clock: Clock) -> Self {
        #[cfg(not(loom))]
        let runtime = if clock.is_manual() {
            None
        } else {
            tokio::runtime::Handle::try_current().ok()
        };
        let derived = Derived::new(&config, &clock);
        let window = Window::new(config.sliding_window());
        let core = Core {
            config,
            state: CircuitState::Closed,
            epoch: 0,
            deadline: NEVER,
            probes_issued: 0,
            probes: Totals::default(),
            recorded_probes: [0; 2],
            metrics_from_probes: false,
            openings: 0,
            rate_exceeded: false,
        };
        let shared = Shared {
            name: name.into(),
            id: crate::next_instance_id(),
            call_reading: AtomicReading::new(derived.call_reading),
            window_reading: AtomicReading::new(derived.window_reading),
            slow_call_nanos: AtomicU64::new(derived.slow_call_nanos),
            automatic: AtomicBool::new(derived.automatic),
            record_rejections: AtomicBool::new(derived.record_rejections),
            record_call_durations: AtomicBool::new(derived.record_call_durations),
            clock,
            packed: AtomicU64::new(pack(0, CircuitState::Closed)),
            deadline: AtomicU64::new(NEVER),
            not_permitted: AtomicU64::new(0),
            not_permitted_at_clear: AtomicU64::new(0),
            ignored: AtomicU64::new(0),
            core: Mutex::new(core),
            window: SpinLock::new(Recorder {
                window,
                recorded: [0; 2],
                durations: CallDurations::default(),
                recording_epoch: 0,
                minimum_calls: derived.minimum_calls,
                thresholds: derived.thresholds,
            }),
            subscribers: Subscribers::new(),
            #[cfg(not(loom))]
            runtime,
        };
        let shared = Arc::new(shared);
        let initial = lock(&shared.core).config.initial_state();
        if initial != CircuitState::Closed {
            // Nobody has subscribed yet: the only effect is the open state's timer, if any.
            let entered = shared.transition_manually(initial, None);
            debug_assert!(
                entered.is_ok(),
                "a valid initial state is allowed from closed"
            );
        }
        CircuitBreaker { shared }
    }

    /// The instance name.
    pub fn name(&self) -> &Name {
        &self.shared.name
    }

    /// The configuration in force (a copy: [`reconfigure`](Self::reconfigure) may change it).
    pub fn config(&self) -> CircuitBreakerConfig {
        lock(&self.shared.core).config.clone()
    }

    /// The process-wide id of this instance (re-entrancy tracking of the call chain).
    pub(crate) fn id(&self) -> u64 {
        self.shared.id
    }

    /// The current state. An elapsed wait is applied first: an open breaker with
    /// `automatic_transition_from_open_to_half_open` whose wait is over is half-open, a
    /// half-open breaker past its `max_wait_duration_in_half_open_state` is open.
    pub fn state(&self) -> CircuitState {
        let (_, state) = unpack(self.shared.packed.load(Ordering::Acquire));
        match state {
            CircuitState::Open if self.shared.automatic.load(Ordering::Relaxed) => {}
            CircuitState::HalfOpen => {}
            _ => return state,
        }
        let now = self.shared.clock.now_nanos();
        if now < self.shared.deadline.load(Ordering::Relaxed) {
            return state;
        }
        self.shared.observe(now)
    }

    /// A snapshot of the calls recorded in the current state (see [`CircuitBreakerMetrics`]).
    pub fn metrics(&self) -> CircuitBreakerMetrics {
        let shared = &self.shared;
        let now = shared.clock.now_nanos();
        let mut fx = Effects::new(shared);
        let metrics = {
            let mut core = lock(&shared.core);
            shared.observe_time(&mut core, now, false, &mut fx);
            // Under `core`: the window's reading cannot change until the window is read.
            let window_now = shared.window_time(Reading::Precise, now);
            let mut recorder = shared.window.lock();
            let (totals, minimum) = if core.metrics_from_probes {
                let probes = core.config.permitted_calls_in_half_open_state();
                (core.probes, u64::from(probes))
            } else {
                (recorder.window.totals(window_now), recorder.minimum_calls)
            };
            let not_permitted = shared.not_permitted.load(Ordering::Relaxed);
            let at_clear = shared.not_permitted_at_clear.load(Ordering::Relaxed);
            let recorded = |i: usize| recorder.recorded[i] + core.recorded_probes[i];
            CircuitBreakerMetrics::new(
                totals,
                minimum,
                not_permitted.saturating_sub(at_clear),
                CallTotals {
                    successful: recorded(0),
                    failed: recorded(1),
                    ignored: shared.ignored.load(Ordering::Relaxed),
                    not_permitted,
                },
            )
        };
        self.shared.after_unlock(&fx);
        metrics
    }

    /// The histogram of the recorded calls' durations, if the configuration keeps one
    /// (`record_call_durations`).
    #[cfg(any(feature = "metrics", test))]
    pub(crate) fn call_durations(&self) -> Option<CallDurations> {
        let shared = &self.shared;
        if !shared.record_call_durations.load(Ordering::Relaxed) {
            return None;
        }
        Some(shared.window.lock().durations.clone())
    }

    /// Asks to make one call.
    ///
    /// Closed, metrics-only and disabled breakers always permit; a half-open breaker permits
    /// while it has probe calls left. The call's outcome is reported on the returned permit;
    /// dropping the permit without reporting abandons the call (nothing is recorded, and a
    /// half-open probe is given back).
    ///
    /// # Errors
    ///
    /// [`Rejected::CallNotPermitted`], with the state that refused the call, when the breaker is
    /// open (and its wait is not over), forced open, or half-open with every probe taken.
    // Always inlined: the permit is built in the caller's registers, not returned through
    // memory (a store-forwarding stall that cost a few ns per call here).
    #[inline(always)]
    pub fn try_acquire(&self) -> Result<CircuitPermit<'_>, Rejected> {
        let (epoch, state) = unpack(self.shared.packed.load(Ordering::Acquire));
        if state == CircuitState::Closed {
            // The hot path, inlined into the caller: one load, a clock read only if needed.
            Ok(self.timed_permit(epoch, PermitKind::Closed))
        } else {
            self.try_acquire_other(epoch, state)
        }
    }

    /// [`try_acquire`](Self::try_acquire), writing the permit into `slot`, where the caller
    /// keeps it: a guarded call holds its permits in place, and a permit built in a temporary
    /// then copied there was read back in wide loads from the narrow stores that had just
    /// written it (a store-forwarding stall perf showed on every guarded call).
    #[inline(always)]
    pub(crate) fn try_acquire_into<'a>(
        &'a self,
        slot: &mut Option<CircuitPermit<'a>>,
    ) -> Result<(), Rejected> {
        let (epoch, state) = unpack(self.shared.packed.load(Ordering::Acquire));
        let permit = if state == CircuitState::Closed {
            self.timed_permit(epoch, PermitKind::Closed)
        } else {
            self.try_acquire_other(epoch, state)?
        };
        crate::slot::fill(slot, permit);
        Ok(())
    }

    /// A permit of a state that permits every call and records it, timed as the breaker's
    /// rules (and its subscribers) need.
    #[inline(always)]
    fn timed_permit(&self, epoch: u64, kind: PermitKind) -> CircuitPermit<'_> {
        let shared = &self.shared;
        // Events carry precise durations; otherwise the call is timed only as its rules need.
        let reading = if shared.subscribers.per_call() {
            Reading::Precise
        } else {
            shared.call_reading.load()
        };
        CircuitPermit::new(shared, epoch, shared.clock.read(reading), reading, kind)
    }

    /// [`try_acquire`](Self::try_acquire) in every state but closed.
    fn try_acquire_other(
        &self,
        epoch: u64,
        state: CircuitState,
    ) -> Result<CircuitPermit<'_>, Rejected> {
        let shared = &self.shared;
        match state {
            CircuitState::Closed => Ok(self.timed_permit(epoch, PermitKind::Closed)),
            CircuitState::MetricsOnly => Ok(self.timed_permit(epoch, PermitKind::Recorded)),
            CircuitState::Disabled => Ok(CircuitPermit::new(
                shared,
                epoch,
                0,
                Reading::None,
                PermitKind::Unrecorded,
            )),
            CircuitState::ForcedOpen => Err(shared.refuse(state, None)),
            CircuitState::Open => {
                let now = shared.clock.now_nanos();
                let deadline = shared.deadline.load(Ordering::Relaxed);
                if now < deadline {
                    let left = Duration::from_nanos(deadline - now);
                    return Err(shared.refuse(state, Some(left)));
                }
                shared.acquire_locked(now)
            }
            CircuitState::HalfOpen => shared.acquire_locked(shared.clock.now_nanos()),
        }
    }

    /// How long until an open breaker lets probe calls through (for a `Retry-After` header);
    /// `None` unless the breaker is open.
    pub fn remaining_open_time(&self) -> Option<Duration> {
        if self.state() != CircuitState::Open {
            return None;
        }
        let deadline = self.shared.deadline.load(Ordering::Relaxed);
        let now = self.shared.clock.now_nanos();
        Some(Duration::from_nanos(deadline.saturating_sub(now)))
    }

    /// Closes the breaker with fresh metrics and no backoff, and emits
    /// [`CircuitBreakerEvent::Reset`] (after the transition event, if the state changed).
    pub fn reset(&self) {
        self.shared.restart(None);
    }

    /// Replaces the configuration in place and starts over, as [`reset`](Self::reset) does,
    /// but in the new configuration's
    /// [`initial_state`](CircuitBreakerConfig::initial_state) (closed by default): a fresh
    /// sliding window of the new kind and size, fresh metrics and no backoff.
    ///
    /// The breaker stays the same instance: its name, its subscribers (they receive the
    /// [`StateTransition`](CircuitBreakerEvent::StateTransition) to the initial state, if the
    /// state changed, then [`Reset`](CircuitBreakerEvent::Reset)), its timer runtime, and every
    /// reference to it. Permits taken before record nothing (like permits of an earlier state),
    /// a half-open probe taken before is not given back, and timers of the state it left do
    /// nothing. A configuration equal to the current one still starts over: reconfiguring is
    /// deliberate.
    ///
    /// ```
    /// use resilience_runtime::{CircuitBreaker, CircuitBreakerConfig, CircuitState, SlidingWindow};
    ///
    /// let config = |calls| {
    ///     CircuitBreakerConfig::builder()
    ///         .sliding_window(SlidingWindow::CountBased(calls))
    ///         .minimum_number_of_calls(calls)
    ///         .build()
    /// };
    /// let breaker = CircuitBreaker::new("inventory", config(10)?);
    /// breaker.transition_to_forced_open_state();
    /// assert!(breaker.try_acquire().is_err());
    ///
    /// breaker.reconfigure(config(2)?);
    /// assert_eq!(breaker.state(), CircuitState::Closed);
    /// assert_eq!(breaker.config().sliding_window(), SlidingWindow::CountBased(2));
    /// // Two failures fill the new window of 2: 100 % ≥ 50 %, the breaker opens.
    /// breaker.try_acquire()?.record_failure();
    /// breaker.try_acquire()?.record_failure();
    /// assert_eq!(breaker.state(), CircuitState::Open);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reconfigure(&self, config: CircuitBreakerConfig) {
        // Allocated before any lock is taken (the window's is a spin lock).
        let window = Window::new(config.sliding_window());
        let derived = Derived::new(&config, &self.shared.clock);
        self.shared.restart(Some(Replacement {
            config,
            window,
            derived,
        }));
    }

    /// Calls `callback` with every event of this breaker, synchronously, on the thread that
    /// caused it, after the breaker's internal lock is released: the callback may use the
    /// breaker. Events of concurrent calls may reach it in any order.
    ///
    /// A callback that panics costs the breaker nothing: its state is already consistent, the
    /// other callbacks still get the event, and then the panic is resumed on the thread that
    /// caused the event (so a subscriber's bug is not hidden; a call whose permit had been
    /// granted gets the panic instead, and a half-open probe is given back). On a thread
    /// that is already unwinding (a permit dropped by a panicking call), the callback's panic
    /// is dropped instead, since a second panic there would abort the process.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use resilience_runtime::circuit_breaker::CircuitBreakerEvent;
    /// use resilience_runtime::{CircuitBreaker, CircuitBreakerConfig, CircuitState};
    ///
    /// let breaker = CircuitBreaker::new("payments", CircuitBreakerConfig::default());
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let sink = Arc::clone(&seen);
    /// let id = breaker.subscribe(move |event| {
    ///     if let CircuitBreakerEvent::StateTransition { to, .. } = event {
    ///         sink.lock().unwrap().push(*to);
    ///     }
    /// });
    /// breaker.transition_to_forced_open_state();
    /// assert_eq!(*seen.lock().unwrap(), [CircuitState::ForcedOpen]);
    /// assert!(breaker.unsubscribe(id));
    /// ```
    pub fn subscribe(
        &self,
        callback: impl Fn(&CircuitBreakerEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.shared.subscribers.add(Arc::new(callback))
    }

    /// Like [`subscribe`](Self::subscribe), for the events of `interest`.
    pub(crate) fn subscribe_with(
        &self,
        interest: crate::subscribers::Interest,
        callback: impl Fn(&CircuitBreakerEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.shared
            .subscribers
            .add_with(interest, Arc::new(callback))
    }

    /// Removes a callback added by [`subscribe`](Self::subscribe); `false` if it was not
    /// subscribed.
    pub fn unsubscribe(&self, id: SubscriptionId) -> bool {
        self.shared.subscribers.remove(id)
    }
}

impl fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (epoch, state) = unpack(self.shared.packed.load(Ordering::Acquire));
        f.debug_struct("CircuitBreaker")
            .field("name", &self.shared.name)
            .field("state", &state)
            .field("transitions", &epoch)
            .field("config", &self.config())
            .field("clock", &self.shared.clock)
            .field("subscribers", &self.shared.subscribers)
            .finish_non_exhaustive()
    }
}
