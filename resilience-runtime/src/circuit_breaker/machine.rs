//! The state machine of a breaker ([`Shared`]'s operations): permits taken under the lock,
//! transitions and their timers, records on the fast path and under the lock, and the events
//! they emit once the lock is released.

use std::mem;
use std::sync::Arc;
use std::time::Duration;

use super::derived::{AtomicReading, Thresholds};
use super::durations;
use super::events::{Ev, EventBuf};
use super::permit::{CircuitPermit, PermitKind};
use super::state::pack;
#[cfg(not(loom))]
use super::state::unpack;
use super::window::{Outcome, Totals, Window};
use super::{
    CircuitBreakerConfig, CircuitState, Core, Effects, Finish, Recorder, Replacement, Shared,
    NEVER, NO_EPOCH,
};
use crate::clock::{deadline_after, Reading};
use crate::error::Rejected;
use crate::sync::{lock, Ordering};

impl Shared {
    /// Refuses a call on the lock-free path; `retry_after` is the rest of an open state's wait.
    pub(super) fn refuse(&self, state: CircuitState, retry_after: Option<Duration>) -> Rejected {
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
    pub(super) fn acquire_locked(
        self: &Arc<Self>,
        now: u64,
    ) -> Result<CircuitPermit<'_>, Rejected> {
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
    pub(super) fn restart(self: &Arc<Self>, replacement: Option<Replacement>) {
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
        self.record_call_durations
            .store(derived.record_call_durations, Ordering::Relaxed);
        recorder.minimum_calls = derived.minimum_calls;
        recorder.thresholds = derived.thresholds;
        let window = mem::replace(&mut recorder.window, window);
        (mem::replace(&mut core.config, config), window)
    }

    /// Applies elapsed waits and returns the state.
    pub(super) fn observe(self: &Arc<Self>, now: u64) -> CircuitState {
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
    pub(super) fn observe_time(&self, core: &mut Core, now: u64, call: bool, fx: &mut Effects) {
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
    pub(super) fn transition_with(
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
                self.not_permitted_at_clear.store(
                    self.not_permitted.load(Ordering::Relaxed),
                    Ordering::Relaxed,
                );
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
        self.not_permitted_at_clear.store(
            self.not_permitted.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
    }

    /// The time of the window for an operation that read `end` with `reading`: `end` itself
    /// when that is the window's reading, else a reading of the window's own.
    #[inline]
    pub(super) fn window_time(&self, reading: Reading, end: u64) -> u64 {
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
    pub(super) fn finish_closed(
        self: &Arc<Self>,
        epoch: u64,
        start: u64,
        reading: Reading,
        failed: bool,
    ) {
        let end = self.clock.read(reading);
        let elapsed = end.saturating_sub(start);
        let window_now = self.window_time(reading, end);
        let outcome = Outcome::new(failed, self.is_slow(elapsed));
        let timed = self.record_call_durations.load(Ordering::Relaxed);
        let exceeded = {
            let mut recorder = self.window.lock();
            if recorder.recording_epoch != epoch {
                // The breaker left the closed state this permit was taken in.
                return;
            }
            recorder.window.record(outcome, window_now);
            recorder.recorded[usize::from(failed)] += 1;
            if timed {
                recorder.durations.record(usize::from(failed), elapsed);
            }
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
        // Built only if someone takes it: most records neither trip nor have subscribers.
        let event = || {
            let elapsed = Duration::from_nanos(elapsed);
            if failed {
                Ev::Error(elapsed)
            } else {
                Ev::Success(elapsed)
            }
        };
        if let Some((totals, rates)) = exceeded {
            self.trip(epoch, totals, rates, event());
        } else if self.subscribers.per_call() {
            let mut events = EventBuf::new(true);
            events.push(event());
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
        // The call's own event, for the callbacks that want every call's.
        if self.subscribers.per_call() {
            fx.events.push(event);
        }
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
    pub(super) fn finish(
        self: &Arc<Self>,
        epoch: u64,
        start: u64,
        reading: Reading,
        finish: Finish,
    ) {
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

    /// Counts a call that ended in an ignored error: out of line, so that the permit's
    /// finish, inlined into every guarded call, keeps the shape it has without it.
    #[cold]
    #[inline(never)]
    pub(super) fn count_ignored(&self) {
        self.ignored.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds a call of outcome `kind` that took `elapsed` to the histogram, if the breaker keeps
    /// one: for the records that do not take the window's lock anyway.
    fn time_call(&self, kind: usize, elapsed: u64) {
        if self.record_call_durations.load(Ordering::Relaxed) {
            self.window.lock().durations.record(kind, elapsed);
        }
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
                    self.count_ignored();
                    self.time_call(durations::IGNORED, elapsed);
                    if self.subscribers.per_call() {
                        fx.events.push(Ev::Ignored(elapsed_duration));
                    }
                }
                return;
            }
        };
        if self.subscribers.per_call() {
            fx.events.push(if failed {
                Ev::Error(elapsed_duration)
            } else {
                Ev::Success(elapsed_duration)
            });
        }
        let outcome = Outcome::new(failed, self.is_slow(elapsed));
        match core.state {
            CircuitState::Closed | CircuitState::MetricsOnly => {
                let mut window = self.window.lock();
                window.window.record(outcome, window_now);
                window.recorded[usize::from(failed)] += 1;
                if self.record_call_durations.load(Ordering::Relaxed) {
                    window.durations.record(usize::from(failed), elapsed);
                }
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
                core.recorded_probes[usize::from(failed)] += 1;
                self.time_call(usize::from(failed), elapsed);
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
    pub(super) fn after_unlock(self: &Arc<Self>, fx: &Effects) {
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
