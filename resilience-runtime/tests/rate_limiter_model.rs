//! The rate limiter against a reference model: a plain count per cycle and a list of waiters,
//! driven by random sequences of acquisitions (at once, waiting, and waiting then giving up),
//! clock advances, drains and reconfigurations on a manual clock.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use proptest::prelude::*;
use resilience_runtime::{Clock, ManualClock, RateLimiter, RateLimiterConfig, Rejected};

const MS: u64 = 1_000_000;

/// A waiting `acquire()`.
type Waiting<'a> = Pin<Box<dyn Future<Output = Result<(), Rejected>> + 'a>>;

#[derive(Clone, Copy, Debug)]
struct Settings {
    limit: u32,
    period_ms: u64,
    timeout_ms: u64,
}

impl Settings {
    fn config(self) -> RateLimiterConfig {
        RateLimiterConfig::builder()
            .limit_for_period(self.limit)
            .limit_refresh_period(Duration::from_millis(self.period_ms))
            .timeout_duration(Duration::from_millis(self.timeout_ms))
            .build()
            .expect("valid settings")
    }
}

fn settings() -> impl Strategy<Value = Settings> {
    (
        1u32..=4,
        prop_oneof![Just(1u64), Just(3), Just(10)],
        prop_oneof![Just(0u64), Just(2), Just(7), Just(25)],
    )
        .prop_map(|(limit, period_ms, timeout_ms)| Settings {
            limit,
            period_ms,
            timeout_ms,
        })
}

#[derive(Clone, Debug)]
enum Op {
    TryAcquire,
    /// `acquire()`, polled once; a waiter stays pending until its cycle.
    Acquire,
    /// Drops the waiter at this index (modulo the number of waiters), if any.
    GiveUp(usize),
    Advance(u64),
    Drain,
    Reconfigure(Settings),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::TryAcquire),
        4 => Just(Op::Acquire),
        1 => any::<usize>().prop_map(Op::GiveUp),
        3 => (0u64..=12).prop_map(Op::Advance),
        1 => Just(Op::Drain),
        1 => settings().prop_map(Op::Reconfigure),
    ]
}

/// The reference: the permissions used in each cycle of the configuration in force (counting
/// reservations), and the waiters with their deadlines.
struct Model {
    settings: Settings,
    t0: u64,
    now: u64,
    used: BTreeMap<u64, u32>,
    /// `(deadline, of the configuration in force)` per waiter, in the order of `futures`.
    waiters: Vec<(u64, bool)>,
    permitted: u64,
    rejected: u64,
}

impl Model {
    fn period(&self) -> u64 {
        self.settings.period_ms * MS
    }

    fn cycle(&self) -> u64 {
        (self.now - self.t0) / self.period()
    }

    fn forget_past(&mut self) {
        let cycle = self.cycle();
        self.used.retain(|&k, _| k >= cycle);
    }

    /// The first cycle from now with a permission left.
    fn first_free(&self) -> u64 {
        let mut k = self.cycle();
        while self.used.get(&k).copied().unwrap_or(0) >= self.settings.limit {
            k += 1;
        }
        k
    }

    fn start_of(&self, cycle: u64) -> u64 {
        self.t0 + cycle * self.period()
    }

    fn available(&self) -> i64 {
        let used: u64 = self.used.values().map(|&n| u64::from(n)).sum();
        i64::from(self.settings.limit) - used as i64
    }
}

fn poll(
    future: &mut Pin<Box<dyn Future<Output = Result<(), Rejected>> + '_>>,
) -> Poll<Result<(), Rejected>> {
    future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
}

fn retry_after(result: Result<(), Rejected>) -> Result<(), u64> {
    match result {
        Ok(()) => Ok(()),
        Err(Rejected::RequestNotPermitted { retry_after, .. }) => {
            Err(u64::try_from(retry_after.as_nanos()).unwrap())
        }
        Err(other) => panic!("unexpected rejection {other:?}"),
    }
}

fn run(initial: Settings, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock("model", initial.config(), Clock::from(clock.clone()));
    let mut futures: Vec<Waiting<'_>> = Vec::new();
    let mut model = Model {
        settings: initial,
        t0: 0,
        now: 0,
        used: BTreeMap::new(),
        waiters: Vec::new(),
        permitted: 0,
        rejected: 0,
    };

    for op in ops {
        match op {
            Op::TryAcquire | Op::Acquire => {
                let k = model.first_free();
                let expected = if k == model.cycle() {
                    *model.used.entry(k).or_default() += 1;
                    model.permitted += 1;
                    Some(Ok(()))
                } else {
                    let wait = model.start_of(k) - model.now;
                    let timeout = model.settings.timeout_ms * MS;
                    if matches!(op, Op::Acquire) && timeout > 0 && wait <= timeout {
                        *model.used.entry(k).or_default() += 1;
                        model.waiters.push((model.start_of(k), true));
                        None
                    } else {
                        model.rejected += 1;
                        Some(Err(wait))
                    }
                };
                let actual = match op {
                    Op::TryAcquire => Some(retry_after(limiter.try_acquire())),
                    _ => {
                        let mut future: Waiting<'_> = Box::pin(limiter.acquire());
                        match poll(&mut future) {
                            Poll::Ready(result) => Some(retry_after(result)),
                            Poll::Pending => {
                                futures.push(future);
                                None
                            }
                        }
                    }
                };
                prop_assert_eq!(actual, expected, "{:?} at {} ns", op, model.now);
            }
            Op::GiveUp(i) => {
                if !futures.is_empty() {
                    let i = i % futures.len();
                    drop(futures.remove(i));
                    let (_, current) = model.waiters.remove(i);
                    // The last permission taken goes back (waiters are all in later cycles:
                    // ready ones were polled to completion on the advance), unless it is of a
                    // past cycle: earlier give-backs may have moved this waiter's permission
                    // into a cycle that has gone by since, and the limiter never hands back a
                    // permission of the past.
                    if let (true, Some((&last, _))) = (current, model.used.iter().next_back()) {
                        let n = model.used.get_mut(&last).unwrap();
                        *n -= 1;
                        if *n == 0 {
                            model.used.remove(&last);
                        }
                    }
                }
            }
            Op::Advance(ms) => {
                clock.advance(Duration::from_millis(ms));
                model.now += ms * MS;
                model.forget_past();
                let mut i = 0;
                while i < futures.len() {
                    let due = model.waiters[i].0 <= model.now;
                    let polled = poll(&mut futures[i]);
                    if due {
                        prop_assert_eq!(
                            polled,
                            Poll::Ready(Ok(())),
                            "waiter {} at {}",
                            i,
                            model.now
                        );
                        drop(futures.remove(i));
                        model.waiters.remove(i);
                        model.permitted += 1;
                    } else {
                        prop_assert!(polled.is_pending(), "waiter {} early at {}", i, model.now);
                        i += 1;
                    }
                }
            }
            Op::Drain => {
                let c = model.cycle();
                let n = model.used.entry(c).or_default();
                *n = (*n).max(model.settings.limit);
                limiter.drain_permissions();
            }
            Op::Reconfigure(settings) => {
                limiter.reconfigure(settings.config());
                // The same configuration keeps the cycle; another starts a fresh one now.
                if settings.config() != model.settings.config() {
                    model.settings = settings;
                    model.t0 = model.now;
                    model.used.clear();
                    for waiter in &mut model.waiters {
                        waiter.1 = false;
                    }
                }
            }
        }
        prop_assert_eq!(
            limiter.available_permissions(),
            model.available(),
            "available at {}",
            model.now
        );
        let metrics = limiter.metrics();
        prop_assert_eq!(metrics.permitted_calls(), model.permitted);
        prop_assert_eq!(metrics.rejected_calls(), model.rejected);
        prop_assert_eq!(metrics.number_of_waiting_threads(), futures.len() as u64);
    }
    Ok(())
}

/// Found by the property test: three waiters, two give up (the last two permissions taken
/// go back), time passes the cycles left, and the third gives up with nothing of the present
/// to give back.
#[test]
fn a_waiter_giving_up_after_its_permission_moved_into_the_past_gives_nothing_back() {
    let settings = |timeout_ms| Settings {
        limit: 1,
        period_ms: 1,
        timeout_ms,
    };
    let ops = vec![
        Op::Reconfigure(settings(7)),
        Op::TryAcquire,
        Op::Acquire,
        Op::Acquire,
        Op::Acquire,
        Op::GiveUp(4_265_384_122_708_018_380),
        Op::GiveUp(1_196_903_516_756_277_770),
        Op::Advance(2),
        Op::GiveUp(0),
        Op::TryAcquire,
        Op::Advance(5),
        Op::TryAcquire,
    ];
    run(settings(0), ops).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 800, ..ProptestConfig::default() })]

    #[test]
    fn the_rate_limiter_matches_the_model(initial in settings(), ops in proptest::collection::vec(op(), 1..60)) {
        run(initial, ops)?;
    }
}
