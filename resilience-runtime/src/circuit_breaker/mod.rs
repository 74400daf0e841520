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
mod events;
mod metrics;
pub(crate) mod state;
mod transition;
mod window;

#[cfg(all(test, not(loom)))]
mod tests;

pub use config::{
    CircuitBreakerConfig, CircuitBreakerConfigBuilder, OpenStateBackoff, SlidingWindow,
};
pub use events::{CircuitBreakerEvent, SubscriptionId};
pub use metrics::CircuitBreakerMetrics;
pub use state::CircuitState;
pub use transition::IllegalStateTransition;

use std::fmt;
use std::mem::{self, ManuallyDrop};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{deadline_after, Clock, Reading};
use crate::error::Rejected;
use crate::name::Name;
use crate::sync::{lock, AtomicBool, AtomicU64, AtomicU8, Mutex, Ordering, SpinLock};

use events::{Ev, EventBuf, Subscribers};
use state::{pack, unpack};
use window::{Outcome, Totals, Window};

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

/// How a breaker times its calls for the slow-call rule, chosen once: no clock when the rule is
/// off, the coarse clock when its resolution is at most 1 % of the threshold, else the precise
/// clock. `coarse_resolution` is [`Clock::coarse_resolution`]: `None` for a manual clock.
fn call_reading(slow_call_nanos: u64, coarse_resolution: Option<u64>) -> Reading {
    if slow_call_nanos == NEVER_SLOW {
        return Reading::None;
    }
    match coarse_resolution {
        Some(resolution) if resolution.saturating_mul(100) <= slow_call_nanos => Reading::Coarse,
        _ => Reading::Precise,
    }
}

/// The one clock reading every operation of a breaker's sliding window uses (a record and
/// every read of the totals: they must share one timeline). A count-based window needs none; a
/// time-based one takes the coarse clock when its resolution is at most 10 ms (1 % of a bucket
/// of one second), else the precise clock.
fn window_reading(window: SlidingWindow, coarse_resolution: Option<u64>) -> Reading {
    const MAX_COARSE_RESOLUTION: u64 = 10_000_000;
    match window {
        SlidingWindow::CountBased(_) => Reading::None,
        SlidingWindow::TimeBased(_) => match coarse_resolution {
            Some(resolution) if resolution <= MAX_COARSE_RESOLUTION => Reading::Coarse,
            _ => Reading::Precise,
        },
    }
}

/// `minimum_number_of_calls` as the breaker applies it: capped by the size of a count window.
fn minimum_calls(config: &CircuitBreakerConfig) -> u64 {
    let minimum = match config.sliding_window() {
        SlidingWindow::CountBased(size) => config.minimum_number_of_calls().min(size),
        SlidingWindow::TimeBased(_) => config.minimum_number_of_calls(),
    };
    u64::from(minimum)
}

/// A [`Reading`] that can change while other threads read it: one byte, loaded `Relaxed` (a
/// plain load on the platforms we run on). Written only under both of the breaker's locks.
struct AtomicReading(AtomicU8);

impl AtomicReading {
    fn new(reading: Reading) -> Self {
        AtomicReading(AtomicU8::new(Self::code(reading)))
    }

    const fn code(reading: Reading) -> u8 {
        match reading {
            Reading::None => 0,
            Reading::Coarse => 1,
            Reading::Precise => 2,
        }
    }

    #[inline(always)]
    fn load(&self) -> Reading {
        Self::decode(self.load_code())
    }

    /// The reading's code: compare it with [`code`](Self::code) of another reading rather than
    /// decoding it (the compiler does not know the byte is a valid code, so a decoded
    /// comparison costs a few instructions on the closed path).
    #[inline(always)]
    fn load_code(&self) -> u8 {
        self.0.load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn decode(code: u8) -> Reading {
        match code {
            0 => Reading::None,
            1 => Reading::Coarse,
            _ => Reading::Precise,
        }
    }

    fn store(&self, reading: Reading) {
        self.0.store(Self::code(reading), Ordering::Relaxed);
    }
}

impl fmt::Debug for AtomicReading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.load(), f)
    }
}

/// The rate thresholds of a configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Thresholds {
    failure_rate: f32,
    slow_call_rate: f32,
}

impl Thresholds {
    fn of(config: &CircuitBreakerConfig) -> Self {
        Thresholds {
            failure_rate: config.failure_rate_threshold(),
            slow_call_rate: config.slow_call_rate_threshold(),
        }
    }

    /// `Some((failure rate exceeded, slow-call rate exceeded))` if either is.
    #[inline]
    fn exceeded(self, totals: Totals) -> Option<(bool, bool)> {
        let failure = totals.failure_rate() >= self.failure_rate;
        let slow = totals.slow_call_rate() >= self.slow_call_rate;
        (failure || slow).then_some((failure, slow))
    }
}

/// What a breaker derives from its configuration and its clock, computed before any lock is
/// taken (at creation and by [`CircuitBreaker::reconfigure`]), then installed under both locks.
struct Derived {
    call_reading: Reading,
    window_reading: Reading,
    slow_call_nanos: u64,
    automatic: bool,
    record_rejections: bool,
    minimum_calls: u64,
    thresholds: Thresholds,
}

impl Derived {
    fn new(config: &CircuitBreakerConfig, clock: &Clock) -> Self {
        let slow_call_nanos = duration_nanos(config.slow_call_duration_threshold());
        let coarse_resolution = clock.coarse_resolution();
        Derived {
            call_reading: call_reading(slow_call_nanos, coarse_resolution),
            window_reading: window_reading(config.sliding_window(), coarse_resolution),
            slow_call_nanos,
            automatic: config.automatic_transition_from_open_to_half_open(),
            record_rejections: config.record_rejections(),
            minimum_calls: minimum_calls(config),
            thresholds: Thresholds::of(config),
        }
    }
}

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
    /// Calls refused since the current metrics started (counted without the lock).
    not_permitted: AtomicU64,
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

/// Whether the permit takes part in the accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PermitKind {
    /// Disabled state: nothing is recorded.
    Unrecorded,
    /// Closed: recorded in the sliding window under its lock only (the fast path).
    Closed,
    /// Metrics-only: recorded in the sliding window under the state machine's lock.
    Recorded,
    /// Half-open: one of the bounded probes.
    Probe,
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
            clock,
            packed: AtomicU64::new(pack(0, CircuitState::Closed)),
            deadline: AtomicU64::new(NEVER),
            not_permitted: AtomicU64::new(0),
            core: Mutex::new(core),
            window: SpinLock::new(Recorder {
                window,
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
            let (totals, minimum) = if core.metrics_from_probes {
                let probes = core.config.permitted_calls_in_half_open_state();
                (core.probes, u64::from(probes))
            } else {
                // Under `core`: the window's reading cannot change until the window is read.
                let window_now = shared.window_time(Reading::Precise, now);
                let mut recorder = shared.window.lock();
                (recorder.window.totals(window_now), recorder.minimum_calls)
            };
            CircuitBreakerMetrics::new(
                totals,
                minimum,
                shared.not_permitted.load(Ordering::Relaxed),
            )
        };
        self.shared.after_unlock(&fx);
        metrics
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
        *slot = Some(if state == CircuitState::Closed {
            self.timed_permit(epoch, PermitKind::Closed)
        } else {
            self.try_acquire_other(epoch, state)?
        });
        Ok(())
    }

    /// A permit of a state that permits every call and records it, timed as the breaker's
    /// rules (and its subscribers) need.
    #[inline(always)]
    fn timed_permit(&self, epoch: u64, kind: PermitKind) -> CircuitPermit<'_> {
        let shared = &self.shared;
        // Events carry precise durations; otherwise the call is timed only as its rules need.
        let reading = if shared.subscribers.any() {
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

impl Shared {
    /// Refuses a call on the lock-free path; `retry_after` is the rest of an open state's wait.
    fn refuse(&self, state: CircuitState, retry_after: Option<Duration>) -> Rejected {
        self.not_permitted.fetch_add(1, Ordering::Relaxed);
        if self.subscribers.any() {
            let mut events = EventBuf::new(true);
            events.push(Ev::NotPermitted);
            events.deliver(&self.subscribers, &self.name);
        }
        self.rejection(state, retry_after)
    }

    fn rejection(&self, state: CircuitState, retry_after: Option<Duration>) -> Rejected {
        Rejected::CallNotPermitted {
            name: self.name.clone(),
            state,
            retry_after,
        }
    }

    /// Takes a permit under the lock: after an elapsed wait, or in the half-open state.
    fn acquire_locked(self: &Arc<Self>, now: u64) -> Result<CircuitPermit<'_>, Rejected> {
        let mut fx = Effects::new(self);
        let granted = {
            let mut core = lock(&self.core);
            self.observe_time(&mut core, now, true, &mut fx);
            let kind = match core.state {
                CircuitState::Closed => Ok(PermitKind::Closed),
                CircuitState::MetricsOnly => Ok(PermitKind::Recorded),
                CircuitState::Disabled => Ok(PermitKind::Unrecorded),
                CircuitState::HalfOpen
                    if core.probes_issued < core.config.permitted_calls_in_half_open_state() =>
                {
                    core.probes_issued += 1;
                    Ok(PermitKind::Probe)
                }
                state => {
                    self.not_permitted.fetch_add(1, Ordering::Relaxed);
                    fx.events.push(Ev::NotPermitted);
                    // Still open here: its wait is not over (`observe_time` ended an elapsed one).
                    let retry_after = (state == CircuitState::Open)
                        .then(|| Duration::from_nanos(core.deadline.saturating_sub(now)));
                    Err((state, retry_after))
                }
            };
            kind.map(|kind| (core.epoch, kind))
        };
        // The permit exists before any subscriber runs: if one panics, the unwinding drops the
        // permit, which gives a half-open probe back (it was counted under the lock).
        let granted = granted
            .map(|(epoch, kind)| CircuitPermit::new(self, epoch, now, Reading::Precise, kind))
            .map_err(|(state, retry_after)| self.rejection(state, retry_after));
        self.after_unlock(&fx);
        granted
    }

    /// Starts over with fresh metrics and no backoff, and emits the transition (if the state
    /// changed) and [`Ev::Reset`]: closed, or with `replacement`, in the initial state of that
    /// new configuration, installed first. Both in one critical section of both locks: the new
    /// configuration's values and the new epoch appear together.
    fn restart(self: &Arc<Self>, replacement: Option<Replacement>) {
        let now = self.clock.now_nanos();
        let mut fx = Effects::new(self);
        let retired = {
            let mut core = lock(&self.core);
            let mut recorder = self.window.lock();
            let retired = replacement.map(|r| self.install(&mut core, &mut recorder, r));
            let to = match retired {
                Some(_) => core.config.initial_state(),
                None => CircuitState::Closed,
            };
            let from = core.state;
            // Nothing of the state left survives, whatever the state entered keeps.
            self.clear_metrics(&mut core, &mut recorder);
            core.openings = 0;
            self.transition_locked(&mut core, &mut recorder, to, now, &mut fx);
            if from == to {
                // Starting over in the same state is not a change of state.
                fx.events = EventBuf::new(self.subscribers.any());
            }
            fx.events.push(Ev::Reset);
            retired
        };
        // The old window and configuration are freed outside the locks.
        drop(retired);
        self.after_unlock(&fx);
    }

    /// Installs a new configuration, its derived values and its window, under both locks,
    /// before the transition that publishes the new epoch; returns the old configuration and
    /// window. Permits of the current epoch may still read the atomics: the transition that
    /// follows makes their records fail the epoch check.
    fn install(
        &self,
        core: &mut Core,
        recorder: &mut Recorder,
        replacement: Replacement,
    ) -> (CircuitBreakerConfig, Window) {
        let Replacement {
            config,
            window,
            derived,
        } = replacement;
        self.call_reading.store(derived.call_reading);
        self.window_reading.store(derived.window_reading);
        self.slow_call_nanos
            .store(derived.slow_call_nanos, Ordering::Relaxed);
        self.automatic.store(derived.automatic, Ordering::Relaxed);
        self.record_rejections
            .store(derived.record_rejections, Ordering::Relaxed);
        recorder.minimum_calls = derived.minimum_calls;
        recorder.thresholds = derived.thresholds;
        let window = mem::replace(&mut recorder.window, window);
        (mem::replace(&mut core.config, config), window)
    }

    /// Applies elapsed waits and returns the state.
    fn observe(self: &Arc<Self>, now: u64) -> CircuitState {
        let mut fx = Effects::new(self);
        let state = {
            let mut core = lock(&self.core);
            self.observe_time(&mut core, now, false, &mut fx);
            core.state
        };
        self.after_unlock(&fx);
        state
    }

    /// The time-driven transitions: open → half-open once the wait is over (on a call, or
    /// with the automatic transition), half-open → open once the maximum wait is over.
    fn observe_time(&self, core: &mut Core, now: u64, call: bool, fx: &mut Effects) {
        if now < core.deadline {
            return;
        }
        match core.state {
            CircuitState::Open
                if call || core.config.automatic_transition_from_open_to_half_open() =>
            {
                self.transition(core, CircuitState::HalfOpen, now, fx);
            }
            CircuitState::HalfOpen => self.transition(core, CircuitState::Open, now, fx),
            _ => {}
        }
    }

    /// Moves to `to`, starting a new epoch: permits of earlier epochs record nothing.
    fn transition(&self, core: &mut Core, to: CircuitState, now: u64, fx: &mut Effects) {
        let mut window = self.window.lock();
        self.transition_locked(core, &mut window, to, now, fx);
    }

    /// [`transition`](Self::transition) with the window already locked (after `core`).
    fn transition_locked(
        &self,
        core: &mut Core,
        window: &mut Recorder,
        to: CircuitState,
        now: u64,
        fx: &mut Effects,
    ) {
        self.transition_with(core, window, to, None, now, fx);
    }

    /// [`transition_locked`](Self::transition_locked); a transition to open waits until
    /// `open_until` if given, else as long as the configuration (and its backoff) says.
    fn transition_with(
        &self,
        core: &mut Core,
        window: &mut Recorder,
        to: CircuitState,
        open_until: Option<u64>,
        now: u64,
        fx: &mut Effects,
    ) {
        let from = core.state;
        core.epoch += 1;
        core.deadline = NEVER;
        match to {
            CircuitState::Open => {
                // Keeps the metrics that made it open.
                core.openings = core.openings.saturating_add(1);
                core.deadline = open_until.unwrap_or_else(|| {
                    deadline_after(now, core.config.wait_in_open_state(core.openings))
                });
                if core.config.automatic_transition_from_open_to_half_open() {
                    fx.timer = Some((core.epoch, core.deadline));
                }
            }
            CircuitState::HalfOpen => {
                core.probes_issued = 0;
                core.probes = Totals::default();
                core.metrics_from_probes = true;
                self.not_permitted.store(0, Ordering::Relaxed);
                let max_wait = core.config.max_wait_duration_in_half_open_state();
                if !max_wait.is_zero() {
                    core.deadline = deadline_after(now, max_wait);
                    fx.timer = Some((core.epoch, core.deadline));
                }
            }
            CircuitState::Closed
            | CircuitState::Disabled
            | CircuitState::ForcedOpen
            | CircuitState::MetricsOnly => {
                if to == CircuitState::Closed {
                    core.openings = 0;
                }
                self.clear_metrics(core, window);
            }
        }
        core.state = to;
        // Only the permits of a new closed state record on the fast path; a permit of an
        // earlier epoch finds another value here and records nothing.
        window.recording_epoch = if to == CircuitState::Closed {
            core.epoch
        } else {
            NO_EPOCH
        };
        self.deadline.store(core.deadline, Ordering::Relaxed);
        self.packed.store(pack(core.epoch, to), Ordering::Release);
        fx.events.push(Ev::Transition(from, to));
    }

    /// Empties the metrics of the state being left: the window, the probes' outcomes, the
    /// refused calls.
    fn clear_metrics(&self, core: &mut Core, window: &mut Recorder) {
        window.window.clear();
        core.probes = Totals::default();
        core.metrics_from_probes = false;
        core.rate_exceeded = false;
        self.not_permitted.store(0, Ordering::Relaxed);
    }

    /// The time of the window for an operation that read `end` with `reading`: `end` itself
    /// when that is the window's reading, else a reading of the window's own.
    #[inline]
    fn window_time(&self, reading: Reading, end: u64) -> u64 {
        let window_reading = self.window_reading.load_code();
        if window_reading == AtomicReading::code(reading) {
            end
        } else {
            self.clock.read(AtomicReading::decode(window_reading))
        }
    }

    /// Whether a call that took `elapsed` nanoseconds is slow: longer than the threshold, as in
    /// Resilience4j. (With the rule off the threshold is `NEVER_SLOW`, `u64::MAX`, which no
    /// elapsed time exceeds: no second comparison.)
    #[inline]
    fn is_slow(&self, elapsed: u64) -> bool {
        elapsed > self.slow_call_nanos.load(Ordering::Relaxed)
    }

    /// Records the success or failure of a closed-state permit of `epoch`, started at `start`
    /// read with `reading`: the fast path, under the window's lock only.
    ///
    /// The permit records only if the window still belongs to its epoch. If its record makes a
    /// rate reach its threshold, the window stops taking records of that epoch at once (as if
    /// the breaker had opened with this record) and [`trip`](Self::trip) opens the breaker.
    #[inline]
    fn finish_closed(self: &Arc<Self>, epoch: u64, start: u64, reading: Reading, failed: bool) {
        let end = self.clock.read(reading);
        let elapsed = end.saturating_sub(start);
        let window_now = self.window_time(reading, end);
        let outcome = Outcome::new(failed, self.is_slow(elapsed));
        let exceeded = {
            let mut recorder = self.window.lock();
            if recorder.recording_epoch != epoch {
                // The breaker left the closed state this permit was taken in.
                return;
            }
            recorder.window.record(outcome, window_now);
            let totals = recorder.window.totals(window_now);
            // Thresholds are above zero: no failed or slow call, no rate reached.
            let exceeded = if totals.calls >= recorder.minimum_calls
                && (totals.failed != 0 || totals.slow != 0)
            {
                recorder.thresholds.exceeded(totals)
            } else {
                None
            };
            if exceeded.is_some() {
                recorder.recording_epoch = NO_EPOCH;
            }
            exceeded.map(|rates| (totals, rates))
        };
        let elapsed = Duration::from_nanos(elapsed);
        let event = if failed {
            Ev::Error(elapsed)
        } else {
            Ev::Success(elapsed)
        };
        if let Some((totals, rates)) = exceeded {
            self.trip(epoch, totals, rates, event);
        } else if self.subscribers.any() {
            let mut events = EventBuf::new(true);
            events.push(event);
            events.deliver(&self.subscribers, &self.name);
        }
    }

    /// Opens the breaker after a record of the fast path made a rate of `totals` (the window's
    /// totals after that record) reach its threshold (`rates`: which ones), unless a transition
    /// came first.
    #[cold]
    fn trip(self: &Arc<Self>, epoch: u64, totals: Totals, rates: (bool, bool), event: Ev) {
        let now = self.clock.now_nanos();
        let mut fx = Effects::new(self);
        fx.events.push(event);
        {
            let mut core = lock(&self.core);
            self.observe_time(&mut core, now, false, &mut fx);
            if core.epoch == epoch && core.state == CircuitState::Closed {
                // No record landed since (the window refused this epoch's), so `totals` are
                // still the window's, and `rates` were judged by this epoch's thresholds.
                push_rate_events(totals, Some(rates), &mut fx);
                self.transition(&mut core, CircuitState::Open, now, &mut fx);
            }
        }
        self.after_unlock(&fx);
    }

    /// Records how a permit of `epoch`, started at `start` read with `reading`, ended: under
    /// the state machine's lock (half-open probes, metrics-only calls, ignored calls).
    fn finish(self: &Arc<Self>, epoch: u64, start: u64, reading: Reading, finish: Finish) {
        let end = self.clock.read(reading);
        let elapsed = end.saturating_sub(start);
        let now = if reading == Reading::Precise {
            end
        } else {
            self.clock.now_nanos()
        };
        let window_now = self.window_time(reading, end);
        let mut fx = Effects::new(self);
        {
            let mut core = lock(&self.core);
            self.observe_time(&mut core, now, false, &mut fx);
            if core.epoch == epoch {
                let times = Times {
                    elapsed,
                    now,
                    window_now,
                };
                self.record(&mut core, finish, times, &mut fx);
            }
        }
        self.after_unlock(&fx);
    }

    /// Records an outcome of the current epoch.
    fn record(&self, core: &mut Core, finish: Finish, times: Times, fx: &mut Effects) {
        let Times {
            elapsed,
            now,
            window_now,
        } = times;
        let elapsed_duration = Duration::from_nanos(elapsed);
        let failed = match finish {
            Finish::Success => false,
            Finish::Failure => true,
            Finish::Ignored | Finish::GiveBack => {
                if core.state == CircuitState::HalfOpen {
                    debug_assert!(core.probes_issued > 0, "a probe given back twice");
                    core.probes_issued = core.probes_issued.saturating_sub(1);
                }
                if finish == Finish::Ignored {
                    fx.events.push(Ev::Ignored(elapsed_duration));
                }
                return;
            }
        };
        fx.events.push(if failed {
            Ev::Error(elapsed_duration)
        } else {
            Ev::Success(elapsed_duration)
        });
        let outcome = Outcome::new(failed, self.is_slow(elapsed));
        match core.state {
            CircuitState::Closed | CircuitState::MetricsOnly => {
                let mut window = self.window.lock();
                window.window.record(outcome, window_now);
                let totals = window.window.totals(window_now);
                if totals.calls < window.minimum_calls {
                    return;
                }
                let exceeded = window.thresholds.exceeded(totals);
                if core.state == CircuitState::MetricsOnly {
                    let newly = exceeded.is_some() && !core.rate_exceeded;
                    core.rate_exceeded = exceeded.is_some();
                    if newly {
                        push_rate_events(totals, exceeded, fx);
                    }
                } else if exceeded.is_some() {
                    push_rate_events(totals, exceeded, fx);
                    self.transition_locked(core, &mut window, CircuitState::Open, now, fx);
                }
            }
            CircuitState::HalfOpen => {
                core.probes.add(outcome);
                let probes = core.config.permitted_calls_in_half_open_state();
                if core.probes.calls < u64::from(probes) {
                    return;
                }
                let totals = core.probes;
                let exceeded = Thresholds::of(&core.config).exceeded(totals);
                if exceeded.is_some() {
                    push_rate_events(totals, exceeded, fx);
                    self.transition(core, CircuitState::Open, now, fx);
                } else {
                    self.transition(core, CircuitState::Closed, now, fx);
                }
            }
            // Permits of these states are not recorded (or not issued).
            CircuitState::Open | CircuitState::Disabled | CircuitState::ForcedOpen => {}
        }
    }

    /// Delivers the events gathered under the lock and starts the requested timer.
    #[inline]
    fn after_unlock(self: &Arc<Self>, fx: &Effects) {
        if let Some((epoch, deadline)) = fx.timer {
            self.start_timer(epoch, deadline);
        }
        if !fx.events.is_empty() {
            fx.events.deliver(&self.subscribers, &self.name);
        }
    }

    /// Wakes up at `deadline` to apply a time-driven transition of `epoch`, on the runtime of
    /// the caller that caused the transition if it runs in one, else on the runtime the
    /// breaker was created in (which may have ended since: then the transition happens when
    /// the breaker is next used or observed). The task holds only a `Weak`: it never keeps the
    /// breaker alive.
    #[cfg(not(loom))]
    fn start_timer(self: &Arc<Self>, epoch: u64, deadline: u64) {
        if self.clock.is_manual() {
            return;
        }
        let current = tokio::runtime::Handle::try_current().ok();
        let Some(runtime) = current.as_ref().or(self.runtime.as_ref()) else {
            return;
        };
        let weak = Arc::downgrade(self);
        runtime.spawn(async move {
            loop {
                let wait = {
                    let Some(shared) = weak.upgrade() else {
                        return;
                    };
                    if unpack(shared.packed.load(Ordering::Acquire)).0 != epoch {
                        return;
                    }
                    let now = shared.clock.now_nanos();
                    if now >= deadline {
                        shared.observe(now);
                        return;
                    }
                    deadline - now
                };
                tokio::time::sleep(Duration::from_nanos(wait)).await;
            }
        });
    }

    #[cfg(loom)]
    fn start_timer(self: &Arc<Self>, _epoch: u64, _deadline: u64) {}
}

/// The times of a record under the state machine's lock.
#[derive(Clone, Copy, Debug)]
struct Times {
    /// How long the call took (zero if it was not timed).
    elapsed: u64,
    /// The precise clock, for the waits.
    now: u64,
    /// The window's clock.
    window_now: u64,
}

fn push_rate_events(totals: Totals, exceeded: Option<(bool, bool)>, fx: &mut Effects) {
    let Some((failure, slow)) = exceeded else {
        return;
    };
    if failure {
        fx.events.push(Ev::FailureRate(totals.failure_rate()));
    }
    if slow {
        fx.events.push(Ev::SlowCallRate(totals.slow_call_rate()));
    }
}

/// Permission to make one call through a [`CircuitBreaker`]; report how the call ended with
/// one of the `record_*` methods.
///
/// The elapsed time of the call (for slow calls and events) is measured from
/// [`try_acquire`](CircuitBreaker::try_acquire) to the `record_*` call, with the clock the
/// [module docs](self) describe (none, coarse or precise; always precise while someone is
/// subscribed to the breaker's events). An outcome
/// is recorded only if the breaker has not changed state since the permit was taken. Dropping
/// the permit without recording abandons the call (a dropped future, a panic): nothing is
/// recorded, and a half-open probe is given back.
#[must_use = "dropping a permit without recording an outcome abandons the call"]
pub struct CircuitPermit<'a> {
    shared: &'a Arc<Shared>,
    /// The epoch the permit was issued in (below 2⁵⁶: see [`pack`]), with the permit's
    /// [`PermitKind`] and the [`Reading`] of `start` in the top byte. Folded into one word, a
    /// permit is 24 bytes and an `Option` of it too (the reference's niche): every guarded
    /// call holds one in its state, and a guarded `async fn` with a fallback stays within the
    /// 128 bytes above which its future is moved with a `memcpy` call.
    tag: u64,
    /// When the call started, read with the tag's reading (the end is read the same way).
    start: u64,
}

/// Where the tag of a [`CircuitPermit`] keeps its kind (2 bits) and its reading (2 bits).
const TAG_KIND_SHIFT: u32 = 56;
const TAG_READING_SHIFT: u32 = 58;
const TAG_EPOCH_MASK: u64 = (1 << TAG_KIND_SHIFT) - 1;

impl PermitKind {
    const fn code(self) -> u64 {
        match self {
            PermitKind::Unrecorded => 0,
            PermitKind::Closed => 1,
            PermitKind::Recorded => 2,
            PermitKind::Probe => 3,
        }
    }

    const fn from_code(code: u64) -> Self {
        match code & 0b11 {
            0 => PermitKind::Unrecorded,
            1 => PermitKind::Closed,
            2 => PermitKind::Recorded,
            _ => PermitKind::Probe,
        }
    }
}

impl<'a> CircuitPermit<'a> {
    #[inline(always)]
    fn new(
        shared: &'a Arc<Shared>,
        epoch: u64,
        start: u64,
        reading: Reading,
        kind: PermitKind,
    ) -> Self {
        debug_assert!(epoch <= TAG_EPOCH_MASK, "epochs stay below 2^56");
        let reading = u64::from(AtomicReading::code(reading));
        CircuitPermit {
            shared,
            tag: epoch | (kind.code() << TAG_KIND_SHIFT) | (reading << TAG_READING_SHIFT),
            start,
        }
    }

    #[inline(always)]
    fn epoch(&self) -> u64 {
        self.tag & TAG_EPOCH_MASK
    }

    #[inline(always)]
    fn kind(&self) -> PermitKind {
        PermitKind::from_code(self.tag >> TAG_KIND_SHIFT)
    }

    #[inline(always)]
    fn reading(&self) -> Reading {
        AtomicReading::decode(((self.tag >> TAG_READING_SHIFT) & 0b11) as u8)
    }
}

impl CircuitPermit<'_> {
    /// The call succeeded.
    #[inline(always)]
    pub fn record_success(self) {
        self.finish(Finish::Success);
    }

    /// The call failed.
    #[inline(always)]
    pub fn record_failure(self) {
        self.finish(Finish::Failure);
    }

    /// The call ended in an error that counts as neither success nor failure (a half-open probe
    /// is given back).
    pub fn record_ignored(self) {
        self.finish(Finish::Ignored);
    }

    /// The call was rejected further in by another guard (a bulkhead inside this breaker): a
    /// failure if the configuration's `record_rejections` is set; otherwise nothing is recorded
    /// and a half-open probe is given back.
    pub fn record_rejected(self, rejection: &Rejected) {
        let _ = rejection;
        let finish = if self.shared.record_rejections.load(Ordering::Relaxed) {
            Finish::Failure
        } else {
            Finish::GiveBack
        };
        self.finish(finish);
    }

    /// The process-wide id of the breaker (re-entrancy tracking of the call chain).
    #[inline]
    pub(crate) fn instance_id(&self) -> u64 {
        self.shared.id
    }

    /// Whether this permit is one of the probe calls of the half-open state.
    pub fn is_probe(&self) -> bool {
        self.kind() == PermitKind::Probe
    }

    #[inline(always)]
    fn finish(self, finish: Finish) {
        let this = ManuallyDrop::new(self);
        match (this.kind(), finish) {
            // Nothing to record: no lock taken.
            (PermitKind::Unrecorded, _)
            | (PermitKind::Closed | PermitKind::Recorded, Finish::GiveBack) => {}
            // Only an event to emit, and nobody listens.
            (PermitKind::Closed | PermitKind::Recorded, Finish::Ignored)
                if !this.shared.subscribers.any() => {}
            (PermitKind::Closed, Finish::Success | Finish::Failure) => {
                let failed = finish == Finish::Failure;
                this.shared
                    .finish_closed(this.epoch(), this.start, this.reading(), failed);
            }
            _ => this
                .shared
                .finish(this.epoch(), this.start, this.reading(), finish),
        }
    }
}

impl Drop for CircuitPermit<'_> {
    fn drop(&mut self) {
        if self.kind() == PermitKind::Probe {
            self.shared
                .finish(self.epoch(), self.start, self.reading(), Finish::GiveBack);
        }
    }
}

impl fmt::Debug for CircuitPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitPermit")
            .field("breaker", &self.shared.name)
            .field("epoch", &self.epoch())
            .field("probe", &(self.kind() == PermitKind::Probe))
            .finish()
    }
}
