//! The circuit breaker against a reference model: a plain `Vec` window and a direct state
//! machine, driven by random sequences of calls (success, failure, slow, ignored, rejected
//! further in, abandoned), clock advances, manual transitions and reconfigurations.

use std::time::Duration;

use proptest::prelude::*;
use resilience_runtime::{
    CircuitBreaker, CircuitBreakerConfig, CircuitPermit, CircuitState, Clock, ManualClock,
    Rejected, SlidingWindow,
};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
/// `Settings::slow_ms` of no slow-call rule.
const SLOW_OFF: u64 = u64::MAX;

#[derive(Clone, Debug)]
struct Settings {
    window: SlidingWindow,
    minimum: u32,
    failure_threshold: f32,
    slow_threshold: f32,
    /// `SLOW_OFF`: no slow-call rule (`Duration::MAX`).
    slow_ms: u64,
    wait_ms: u64,
    backoff: bool,
    automatic: bool,
    probes: u32,
    half_open_max_ms: u64,
    record_rejections: bool,
    initial_state: CircuitState,
}

impl Settings {
    fn config(&self) -> CircuitBreakerConfig {
        let mut b = CircuitBreakerConfig::builder()
            .sliding_window(self.window)
            .minimum_number_of_calls(self.minimum)
            .failure_rate_threshold(self.failure_threshold)
            .slow_call_rate_threshold(self.slow_threshold)
            .slow_call_duration_threshold(if self.slow_ms == SLOW_OFF {
                Duration::MAX
            } else {
                Duration::from_millis(self.slow_ms)
            })
            .wait_duration_in_open_state(Duration::from_millis(self.wait_ms))
            .automatic_transition_from_open_to_half_open(self.automatic)
            .permitted_calls_in_half_open_state(self.probes)
            .max_wait_duration_in_half_open_state(Duration::from_millis(self.half_open_max_ms))
            .record_rejections(self.record_rejections)
            .initial_state(self.initial_state);
        if self.backoff {
            b = b.open_state_backoff(2.0, Duration::from_millis(self.wait_ms * 4));
        }
        b.build().expect("valid settings")
    }
}

fn settings() -> impl Strategy<Value = Settings> {
    (
        prop_oneof![
            (1u32..=6).prop_map(SlidingWindow::CountBased),
            (1u32..=4).prop_map(SlidingWindow::TimeBased),
        ],
        1u32..=6,
        prop_oneof![Just(20.0f32), Just(50.0), Just(100.0)],
        prop_oneof![Just(50.0f32), Just(100.0)],
        prop_oneof![Just(300u64), Just(1_000), Just(SLOW_OFF)],
        1_000u64..=5_000,
        any::<bool>(),
        any::<bool>(),
        1u32..=3,
        prop_oneof![Just(0u64), 2_000u64..=6_000],
        any::<bool>(),
        prop_oneof![
            4 => Just(CircuitState::Closed),
            1 => Just(CircuitState::Open),
            1 => Just(CircuitState::MetricsOnly),
        ],
    )
        .prop_map(
            |(
                window,
                minimum,
                failure_threshold,
                slow_threshold,
                slow_ms,
                wait_ms,
                backoff,
                automatic,
                probes,
                half_open_max_ms,
                record_rejections,
                initial_state,
            )| Settings {
                window,
                minimum,
                failure_threshold,
                slow_threshold,
                slow_ms,
                wait_ms,
                backoff,
                automatic,
                probes,
                half_open_max_ms,
                record_rejections,
                initial_state,
            },
        )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fin {
    Success,
    Failure,
    Ignored,
    Rejected,
    Abandoned,
}

#[derive(Clone, Debug)]
enum Op {
    Acquire,
    /// Ends the held permit at this index (modulo the number held).
    Finish(usize, Fin),
    Advance(u64),
    Manual(CircuitState),
    /// `transition_to_open_state_for` this many milliseconds.
    OpenFor(u64),
    Reset,
    Reconfigure(Settings),
}

fn op() -> impl Strategy<Value = Op> {
    let fin = prop_oneof![
        3 => Just(Fin::Success),
        3 => Just(Fin::Failure),
        1 => Just(Fin::Ignored),
        1 => Just(Fin::Rejected),
        1 => Just(Fin::Abandoned),
    ];
    let state = prop_oneof![
        Just(CircuitState::Closed),
        Just(CircuitState::Open),
        Just(CircuitState::HalfOpen),
        Just(CircuitState::Disabled),
        Just(CircuitState::ForcedOpen),
        Just(CircuitState::MetricsOnly),
    ];
    prop_oneof![
        6 => Just(Op::Acquire),
        8 => (any::<usize>(), fin).prop_map(|(i, f)| Op::Finish(i, f)),
        4 => prop_oneof![Just(0u64), 1u64..400, Just(1_000), 1_000u64..3_000]
            .prop_map(Op::Advance),
        1 => state.prop_map(Op::Manual),
        1 => (0u64..3_000).prop_map(Op::OpenFor),
        1 => Just(Op::Reset),
        1 => settings().prop_map(Op::Reconfigure),
    ]
}

/// What the model knows of a held permit.
#[derive(Clone, Copy, Debug)]
struct ModelPermit {
    epoch: u64,
    start: u64,
    kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Unrecorded,
    Recorded,
    Probe,
}

/// One recorded call: when it ended, whether it failed, whether it was slow.
type Call = (u64, bool, bool);

#[derive(Debug)]
struct Model {
    s: Settings,
    state: CircuitState,
    epoch: u64,
    deadline: Option<u64>,
    window: Vec<Call>,
    probes: Vec<Call>,
    probes_issued: u32,
    metrics_from_probes: bool,
    openings: u32,
    not_permitted: u64,
    rate_exceeded: bool,
}

#[derive(Debug, PartialEq)]
struct Seen {
    state: CircuitState,
    buffered: u32,
    failed: u32,
    slow: u32,
    slow_failed: u32,
    failure_rate: f32,
    slow_call_rate: f32,
    not_permitted: u64,
    remaining_open: Option<Duration>,
}

fn rate(part: usize, all: usize) -> f32 {
    part as f32 * 100.0 / all as f32
}

impl Model {
    fn new(s: Settings) -> Self {
        Model {
            s,
            state: CircuitState::Closed,
            epoch: 0,
            deadline: None,
            window: Vec::new(),
            probes: Vec::new(),
            probes_issued: 0,
            metrics_from_probes: false,
            openings: 0,
            not_permitted: 0,
            rate_exceeded: false,
        }
    }

    fn minimum(&self) -> usize {
        match self.s.window {
            SlidingWindow::CountBased(n) => self.s.minimum.min(n) as usize,
            _ => self.s.minimum as usize,
        }
    }

    /// The calls of the window at `now`.
    fn window_at(&mut self, now: u64) -> &[Call] {
        match self.s.window {
            SlidingWindow::CountBased(n) => {
                let n = n as usize;
                if self.window.len() > n {
                    self.window.drain(..self.window.len() - n);
                }
            }
            SlidingWindow::TimeBased(n) => {
                let now_s = now / SEC;
                self.window
                    .retain(|&(at, _, _)| at / SEC + u64::from(n) > now_s);
            }
        }
        &self.window
    }

    fn wait_ns(&self) -> u64 {
        let mut wait = self.s.wait_ms * MS;
        if self.s.backoff {
            for _ in 1..self.openings {
                wait = (wait * 2).min(self.s.wait_ms * 4 * MS);
            }
        }
        wait
    }

    /// Whether a manual transition is allowed: every pair but closed → half-open and
    /// metrics-only → open or half-open (Resilience4j's table).
    fn allowed(&self, to: CircuitState) -> bool {
        !matches!(
            (self.state, to),
            (CircuitState::Closed, CircuitState::HalfOpen)
                | (
                    CircuitState::MetricsOnly,
                    CircuitState::Open | CircuitState::HalfOpen
                )
        )
    }

    /// Starts over in `to` with nothing of the state left (a reset, a reconfiguration).
    fn restart(&mut self, to: CircuitState, now: u64) {
        self.window.clear();
        self.probes.clear();
        self.metrics_from_probes = false;
        self.rate_exceeded = false;
        self.not_permitted = 0;
        self.openings = 0;
        self.transition(to, now);
    }

    fn transition(&mut self, to: CircuitState, now: u64) {
        self.transition_with(to, None, now);
    }

    /// A transition; to open for `open_for` nanoseconds if given.
    fn transition_with(&mut self, to: CircuitState, open_for: Option<u64>, now: u64) {
        self.epoch += 1;
        self.deadline = None;
        match to {
            CircuitState::Open => {
                self.openings += 1;
                self.deadline = Some(now + open_for.unwrap_or_else(|| self.wait_ns()));
            }
            CircuitState::HalfOpen => {
                self.probes.clear();
                self.probes_issued = 0;
                self.metrics_from_probes = true;
                self.not_permitted = 0;
                if self.s.half_open_max_ms > 0 {
                    self.deadline = Some(now + self.s.half_open_max_ms * MS);
                }
            }
            _ => {
                if to == CircuitState::Closed {
                    self.openings = 0;
                }
                self.window.clear();
                self.metrics_from_probes = false;
                self.rate_exceeded = false;
                self.not_permitted = 0;
            }
        }
        self.state = to;
    }

    fn observe(&mut self, now: u64, call: bool) {
        let Some(deadline) = self.deadline else {
            return;
        };
        if now < deadline {
            return;
        }
        match self.state {
            CircuitState::Open if call || self.s.automatic => {
                self.transition(CircuitState::HalfOpen, now)
            }
            CircuitState::HalfOpen => self.transition(CircuitState::Open, now),
            _ => {}
        }
    }

    fn acquire(&mut self, now: u64) -> Result<ModelPermit, CircuitState> {
        self.observe(now, true);
        let kind = match self.state {
            CircuitState::Closed | CircuitState::MetricsOnly => Kind::Recorded,
            CircuitState::Disabled => Kind::Unrecorded,
            CircuitState::HalfOpen if self.probes_issued < self.s.probes => {
                self.probes_issued += 1;
                Kind::Probe
            }
            state => {
                self.not_permitted += 1;
                return Err(state);
            }
        };
        Ok(ModelPermit {
            epoch: self.epoch,
            start: now,
            kind,
        })
    }

    fn exceeded(&self, calls: &[Call]) -> bool {
        let failed = calls.iter().filter(|c| c.1).count();
        let slow = calls.iter().filter(|c| c.2).count();
        rate(failed, calls.len()) >= self.s.failure_threshold
            || rate(slow, calls.len()) >= self.s.slow_threshold
    }

    fn finish(&mut self, permit: ModelPermit, fin: Fin, now: u64) {
        let fin = match fin {
            Fin::Rejected if self.s.record_rejections => Fin::Failure,
            Fin::Rejected => Fin::Abandoned,
            other => other,
        };
        // The breaker takes its lock (and so observes the time) only when there is something
        // to record: not for a disabled permit, nor for a closed one that is given back or
        // ignored without subscribers.
        match (permit.kind, fin) {
            (Kind::Unrecorded, _) | (Kind::Recorded, Fin::Abandoned | Fin::Ignored) => return,
            _ => {}
        }
        self.observe(now, false);
        if permit.epoch != self.epoch {
            return;
        }
        let failed = match fin {
            Fin::Success => false,
            Fin::Failure => true,
            _ => {
                if self.state == CircuitState::HalfOpen {
                    self.probes_issued -= 1;
                }
                return;
            }
        };
        let slow = self.s.slow_ms != SLOW_OFF && now - permit.start > self.s.slow_ms * MS;
        let call = (now, failed, slow);
        match self.state {
            CircuitState::Closed | CircuitState::MetricsOnly => {
                self.window.push(call);
                let minimum = self.minimum();
                let calls = self.window_at(now).to_vec();
                if calls.len() < minimum {
                    return;
                }
                let exceeded = self.exceeded(&calls);
                if self.state == CircuitState::MetricsOnly {
                    self.rate_exceeded = exceeded;
                } else if exceeded {
                    self.transition(CircuitState::Open, now);
                }
            }
            CircuitState::HalfOpen => {
                self.probes.push(call);
                if self.probes.len() < self.s.probes as usize {
                    return;
                }
                let probes = self.probes.clone();
                if self.exceeded(&probes) {
                    self.transition(CircuitState::Open, now);
                } else {
                    self.transition(CircuitState::Closed, now);
                }
            }
            _ => unreachable!("no permit of this epoch records in {}", self.state),
        }
    }

    /// What `state()`, `metrics()` and `remaining_open_time()` report at `now`, in that order.
    fn seen(&mut self, now: u64) -> Seen {
        self.observe(now, false); // state()
        self.observe(now, false); // metrics()
        let state = self.state;
        let (calls, minimum) = if self.metrics_from_probes {
            (self.probes.clone(), self.s.probes as usize)
        } else {
            let minimum = self.minimum();
            (self.window_at(now).to_vec(), minimum)
        };
        let failed = calls.iter().filter(|c| c.1).count();
        let slow = calls.iter().filter(|c| c.2).count();
        let slow_failed = calls.iter().filter(|c| c.1 && c.2).count();
        let (failure_rate, slow_call_rate) = if calls.len() >= minimum && !calls.is_empty() {
            (rate(failed, calls.len()), rate(slow, calls.len()))
        } else {
            (-1.0, -1.0)
        };
        self.observe(now, false); // remaining_open_time()
        let remaining_open = (self.state == CircuitState::Open)
            .then(|| Duration::from_nanos(self.deadline.unwrap().saturating_sub(now)));
        Seen {
            state,
            buffered: calls.len() as u32,
            failed: failed as u32,
            slow: slow as u32,
            slow_failed: slow_failed as u32,
            failure_rate,
            slow_call_rate,
            not_permitted: self.not_permitted,
            remaining_open,
        }
    }
}

fn seen(cb: &CircuitBreaker) -> Seen {
    let state = cb.state();
    let m = cb.metrics();
    Seen {
        state,
        buffered: m.number_of_buffered_calls(),
        failed: m.number_of_failed_calls(),
        slow: m.number_of_slow_calls(),
        slow_failed: m.number_of_slow_failed_calls(),
        failure_rate: m.failure_rate(),
        slow_call_rate: m.slow_call_rate(),
        not_permitted: m.number_of_not_permitted_calls(),
        remaining_open: cb.remaining_open_time(),
    }
}

fn run(s: Settings, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let cb = CircuitBreaker::with_clock("model", s.config(), Clock::from(clock.clone()));
    let initial = s.initial_state;
    let mut model = Model::new(s);
    if initial != CircuitState::Closed {
        model.transition(initial, 0);
    }
    let mut held: Vec<(CircuitPermit<'_>, ModelPermit)> = Vec::new();
    let now = |clock: &ManualClock| clock.now().as_nanos() as u64;
    // A rejection by another guard further in (public code cannot build one directly).
    let inner_guard = CircuitBreaker::new("inner", CircuitBreakerConfig::default());
    inner_guard.transition_to_forced_open_state();
    let inner = inner_guard.try_acquire().unwrap_err();
    for (step, op) in ops.into_iter().enumerate() {
        let t = now(&clock);
        match op.clone() {
            Op::Acquire => {
                let expected = model.acquire(t);
                match (cb.try_acquire(), expected) {
                    (Ok(permit), Ok(m)) => {
                        prop_assert_eq!(permit.is_probe(), m.kind == Kind::Probe, "step {}", step);
                        held.push((permit, m));
                    }
                    (Err(Rejected::CallNotPermitted { state, .. }), Err(expected)) => {
                        prop_assert_eq!(state, expected, "step {}", step);
                    }
                    (got, expected) => {
                        prop_assert!(false, "step {step}: got {got:?}, model {expected:?}");
                    }
                }
            }
            Op::Finish(i, fin) => {
                if held.is_empty() {
                    continue;
                }
                let (permit, m) = held.remove(i % held.len());
                model.finish(m, fin, t);
                match fin {
                    Fin::Success => permit.record_success(),
                    Fin::Failure => permit.record_failure(),
                    Fin::Ignored => permit.record_ignored(),
                    Fin::Rejected => permit.record_rejected(&inner),
                    Fin::Abandoned => drop(permit),
                }
            }
            Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
            Op::Manual(to) => {
                let (from, allowed) = (model.state, model.allowed(to));
                if allowed {
                    model.transition(to, t);
                }
                let entered = match to {
                    CircuitState::Open => cb.transition_to_open_state(),
                    CircuitState::HalfOpen => cb.transition_to_half_open_state(),
                    // Allowed from every state.
                    CircuitState::Closed => {
                        cb.transition_to_closed_state();
                        Ok(())
                    }
                    CircuitState::Disabled => {
                        cb.transition_to_disabled_state();
                        Ok(())
                    }
                    CircuitState::ForcedOpen => {
                        cb.transition_to_forced_open_state();
                        Ok(())
                    }
                    CircuitState::MetricsOnly => {
                        cb.transition_to_metrics_only_state();
                        Ok(())
                    }
                };
                match entered {
                    Ok(()) => prop_assert!(allowed, "step {step}: {from} -> {to} allowed"),
                    Err(e) => {
                        prop_assert!(!allowed, "step {step}: {from} -> {to} refused");
                        prop_assert_eq!((e.from, e.to), (from, to), "step {}", step);
                    }
                }
            }
            Op::OpenFor(ms) => {
                let allowed = model.allowed(CircuitState::Open);
                if allowed {
                    model.transition_with(CircuitState::Open, Some(ms * MS), t);
                }
                let entered = cb.transition_to_open_state_for(Duration::from_millis(ms));
                prop_assert_eq!(entered.is_ok(), allowed, "step {}", step);
            }
            Op::Reset => {
                model.restart(CircuitState::Closed, t);
                cb.reset();
            }
            // The observable result of a fresh breaker of the new settings, except for the
            // epoch: permits of before record nothing.
            Op::Reconfigure(s) => {
                cb.reconfigure(s.config());
                let initial = s.initial_state;
                model.s = s;
                model.restart(initial, t);
            }
        }
        let t = now(&clock);
        prop_assert_eq!(seen(&cb), model.seen(t), "after step {} ({:?})", step, op);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, ..ProptestConfig::default() })]

    #[test]
    fn breaker_follows_the_reference_model(
        s in settings(),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        run(s, ops)?;
    }
}
