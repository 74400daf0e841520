//! Model checks of the rate limiter's permission accounting with loom: concurrent acquisitions
//! racing a cycle refresh, a give-back racing the clock, and reconfigurations racing
//! acquisitions, a give-back and each other.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p resilience-runtime --test loom_rate_limiter --release
//! ```
//!
//! The manual clock is plain std atomics, not loom's: loom switches threads only at its own
//! operations, so an advance happens atomically between two of them, at every point loom
//! explores. A caller reads the clock before and after its acquisition; a grant whose two
//! readings fall in one cycle belongs to that cycle, and no cycle may have more than its limit.
//!
//! The models of reconfiguration keep the clock still while they race, and tell the
//! configurations apart by their periods: a refusal's `retry_after` says which configuration
//! judged it (a value of neither is a call judged by a mix), and after the race the test takes
//! what the new configuration's first cycle has left, so that the permissions it granted
//! in all are counted exactly.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use resilience_runtime::{Clock, ManualClock, RateLimiter, RateLimiterConfig, Rejected};

const PERIOD: Duration = Duration::from_secs(1);

fn check(preemptions: usize, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(preemptions);
    }
    builder.check(model);
}

fn config(limit: u32, period: Duration, timeout: Duration) -> RateLimiterConfig {
    RateLimiterConfig::builder()
        .limit_for_period(limit)
        .limit_refresh_period(period)
        .timeout_duration(timeout)
        .build()
        .unwrap()
}

fn limiter(limit: u32, timeout: Duration) -> (Arc<RateLimiter>, ManualClock) {
    limiter_with(config(limit, PERIOD, timeout))
}

fn limiter_with(config: RateLimiterConfig) -> (Arc<RateLimiter>, ManualClock) {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock("loom", config, Clock::from(clock.clone()));
    (Arc::new(limiter), clock)
}

/// The cycle the clock is in.
fn cycle(clock: &ManualClock) -> u64 {
    (clock.now().as_nanos() / PERIOD.as_nanos()) as u64
}

/// Grants of two concurrent callers of a limiter of one, while the clock moves into the next
/// cycle: never two in one cycle, and each cycle's permission granted at most once.
#[test]
fn acquisitions_racing_a_cycle_refresh_never_exceed_the_limit_of_a_cycle() {
    check(3, || {
        let (limiter, clock) = limiter(1, Duration::ZERO);
        // Grants seen entirely within cycle 0 / cycle 1, and all grants.
        let in_cycle = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let all = Arc::new(AtomicUsize::new(0));
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let (limiter, clock) = (Arc::clone(&limiter), clock.clone());
                let (in_cycle, all) = (Arc::clone(&in_cycle), Arc::clone(&all));
                thread::spawn(move || {
                    let before = cycle(&clock);
                    if limiter.try_acquire().is_ok() {
                        all.fetch_add(1, Ordering::SeqCst);
                        if cycle(&clock) == before {
                            in_cycle[before as usize].fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        let advancer = {
            let clock = clock.clone();
            thread::spawn(move || clock.advance(PERIOD))
        };
        for caller in callers {
            caller.join().unwrap();
        }
        advancer.join().unwrap();

        for n in in_cycle.iter() {
            assert!(n.load(Ordering::SeqCst) <= 1, "two grants in one cycle");
        }
        let all = all.load(Ordering::SeqCst);
        assert!(
            (1..=2).contains(&all),
            "{all} grants over two cycles of one"
        );
        // What cycle 1 has left matches what it granted.
        let left = limiter.available_permissions();
        assert!(left == 0 || left == 1, "{left}");
        if limiter.try_acquire().is_ok() {
            assert_eq!(left, 1);
        }
        assert!(limiter.try_acquire().is_err(), "cycle 1 granted twice");
        assert_eq!(
            limiter.metrics().permitted_calls() as usize,
            all + usize::from(left == 1)
        );
    });
}

/// A waiter for cycle 1 gives up while the clock jumps to cycle 2: its permission goes back to
/// cycle 1 if that cycle is not over, and never adds one to cycle 2.
#[test]
fn a_give_back_racing_the_clock_never_grants_into_a_past_or_extra_cycle() {
    for jump in [1u32, 2] {
        check(3, move || {
            let (limiter, clock) = limiter(1, PERIOD * 2);
            limiter.try_acquire().unwrap();
            let waiter = {
                let limiter = Arc::clone(&limiter);
                thread::spawn(move || {
                    let mut acquire = pin!(limiter.acquire());
                    let mut cx = Context::from_waker(Waker::noop());
                    // Pending if it reserved and its cycle has not started; else granted (or
                    // refused, as of a reading taken before the clock moved).
                    matches!(acquire.as_mut().poll(&mut cx), Poll::Ready(Ok(())))
                    // Dropped here: gives back a reservation still waiting.
                })
            };
            let advancer = {
                let clock = clock.clone();
                thread::spawn(move || clock.advance(PERIOD * jump))
            };
            let newcomer = {
                let limiter = Arc::clone(&limiter);
                thread::spawn(move || limiter.try_acquire().is_ok())
            };
            let waiter_granted = waiter.join().unwrap();
            advancer.join().unwrap();
            let newcomer_granted = newcomer.join().unwrap();

            // The current cycle never holds more than its one permission.
            let left = limiter.available_permissions();
            assert!(left <= 1, "{left} permissions in a cycle of one");
            let granted_now = limiter.try_acquire().is_ok();
            assert!(
                limiter.try_acquire().is_err(),
                "a cycle of one granted twice"
            );
            assert_eq!(granted_now, left == 1);
            // Every grant counted, and a given-back reservation not (a give-back into a past
            // cycle would show as a grant lost from the count).
            let permitted = limiter.metrics().permitted_calls();
            let granted = [true, waiter_granted, newcomer_granted, granted_now];
            assert_eq!(
                permitted,
                granted.iter().filter(|g| **g).count() as u64,
                "jump {jump}, grants {granted:?}: {limiter:?}"
            );
            // One permission per cycle the clock went through (cycle 0's went to the test).
            assert!(permitted <= 1 + u64::from(jump), "{permitted} grants");
            assert!(
                !(newcomer_granted && granted_now && jump == 1),
                "cycle 1 granted twice"
            );
            assert_eq!(limiter.metrics().number_of_waiting_threads(), 0);
        });
    }
}

const SEC: Duration = Duration::from_secs(1);

/// What one call came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Granted,
    /// A permission of a later cycle reserved (the future was pending), then given back.
    Reserved,
    Refused(Duration),
}

fn outcome(result: Result<(), Rejected>) -> Outcome {
    match result {
        Ok(()) => Outcome::Granted,
        Err(Rejected::RequestNotPermitted { retry_after, .. }) => Outcome::Refused(retry_after),
        Err(other) => panic!("a rate limiter refused with {other:?}"),
    }
}

/// One poll of `acquire` (the reserving path), then the future is dropped: a reservation still
/// waiting is given back.
fn acquire_once(limiter: &RateLimiter) -> Outcome {
    let mut acquire = pin!(limiter.acquire());
    let mut cx = Context::from_waker(Waker::noop());
    match acquire.as_mut().poll(&mut cx) {
        Poll::Ready(result) => outcome(result),
        Poll::Pending => Outcome::Reserved,
    }
}

/// Which configuration judged a call, as far as its outcome tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Judge {
    Old,
    New,
    /// A grant: either could have.
    Either,
}

/// The configurations of a race, and what each one's refusals and reservations look like.
struct Race {
    old_retries: Vec<Duration>,
    new_retries: Vec<Duration>,
    /// Which configuration reserves (at most one of them has a timeout).
    reserver: Judge,
}

impl Race {
    fn judge(&self, outcome: Outcome) -> Judge {
        match outcome {
            Outcome::Granted => Judge::Either,
            Outcome::Reserved => {
                assert_ne!(
                    self.reserver,
                    Judge::Either,
                    "a call reserved with no timeout"
                );
                self.reserver
            }
            Outcome::Refused(retry) if self.old_retries.contains(&retry) => Judge::Old,
            Outcome::Refused(retry) if self.new_retries.contains(&retry) => Judge::New,
            Outcome::Refused(retry) => {
                panic!("a refusal with retry_after {retry:?}: judged by neither configuration")
            }
        }
    }
}

/// Takes what the current cycle has left; the refusal that ends it must wait `retry`.
fn take_the_rest(limiter: &RateLimiter, retry: Duration) -> u64 {
    let mut granted = 0;
    loop {
        match outcome(limiter.try_acquire()) {
            Outcome::Granted => granted += 1,
            Outcome::Refused(after) => {
                assert_eq!(after, retry, "the cycle left behind ends elsewhere");
                return granted;
            }
            Outcome::Reserved => unreachable!(),
        }
        assert!(granted <= 8, "a cycle that never runs out");
    }
}

/// A reconfiguration races an acquisition, `try_acquire` or the reserving `acquire` (polled
/// once, then dropped), and the reconfiguring thread calls `try_acquire` once it is done (a call
/// begun after the reconfiguration, racing the first), three seconds into the old configuration
/// (one permission per second, none taken yet in cycle 3, so an old caller may still take one):
/// each call is judged wholly by the old configuration or wholly by the new one (its refusal
/// waits for a cycle of one of them, and a call begun after the reconfiguration is judged by the
/// new one), the new configuration's first cycle grants its limit exactly (no more, counting
/// every grant of a call begun after the reconfiguration, and none lost to a late caller of the
/// old one), and the counters hold every call once.
///
/// Two threads only: with two callers spinning in the parameters' sequence lock while the
/// writer is in, the interleavings of their yields make the model run for many minutes.
#[test]
fn a_reconfiguration_racing_acquisitions_judges_each_by_one_configuration() {
    // (the first caller reserves, old timeout, new limit, new timeout)
    let races = [
        (false, Duration::ZERO, 2, Duration::ZERO),
        (true, 2 * SEC, 1, Duration::ZERO),
        (true, Duration::ZERO, 1, 10 * SEC),
    ];
    for (reserving, old_timeout, new_limit, new_timeout) in races {
        check(2, move || {
            let (limiter, clock) = limiter_with(config(1, SEC, old_timeout));
            limiter.try_acquire().unwrap();
            clock.advance(3 * SEC);
            let new = config(new_limit, 5 * SEC, new_timeout);
            let race = Race {
                // The old cycle 4 starts in one second, 5 in two (after a reservation of 4).
                old_retries: vec![SEC, 2 * SEC],
                // The new cycle 1 starts in five seconds, 2 in ten.
                new_retries: vec![5 * SEC, 10 * SEC],
                reserver: match (old_timeout.is_zero(), new_timeout.is_zero()) {
                    (true, true) => Judge::Either,
                    (false, true) => Judge::Old,
                    (true, false) => Judge::New,
                    (false, false) => unreachable!(),
                },
            };
            // The reconfigurer then calls again: a call begun after the reconfiguration.
            let reconfigurer = {
                let (limiter, new) = (Arc::clone(&limiter), new.clone());
                thread::spawn(move || {
                    limiter.reconfigure(new);
                    outcome(limiter.try_acquire())
                })
            };
            let racing = if reserving {
                acquire_once(&limiter)
            } else {
                outcome(limiter.try_acquire())
            };
            let after = reconfigurer.join().unwrap();
            let calls = [(false, racing), (true, after)];

            let judged: Vec<Judge> = calls.iter().map(|(_, o)| race.judge(*o)).collect();
            for ((after, outcome), judge) in calls.iter().zip(&judged) {
                assert!(
                    !(*after && *judge == Judge::Old),
                    "a call begun after the reconfiguration judged by the old one: {outcome:?}"
                );
            }
            let granted = |(_, o): &&(bool, Outcome)| *o == Outcome::Granted;
            let grants = calls.iter().filter(granted).count() as u64;
            let grants_after = calls.iter().filter(|c| c.0).filter(granted).count() as u64;
            // The old cycle 3 had one permission; the refusal of an old caller means the other
            // took it, a reservation of the new one means the other took its first cycle's.
            for (i, judge) in judged.iter().enumerate() {
                let other = calls[1 - i].1;
                match (judge, calls[i].1) {
                    (Judge::Old, Outcome::Refused(_)) | (Judge::New, Outcome::Reserved) => {
                        assert_eq!(other, Outcome::Granted, "{calls:?}")
                    }
                    _ => {}
                }
            }

            let rest = take_the_rest(&limiter, 5 * SEC);
            let new_limit = u64::from(new_limit);
            assert!(
                grants_after + rest <= new_limit,
                "{grants_after} + {rest} grants in a first cycle of {new_limit}: {calls:?}"
            );
            assert!(
                (new_limit..=new_limit + 1).contains(&(grants + rest)),
                "{grants} + {rest} grants, the new cycle's {new_limit} and the old one's 1: \
                 {calls:?}"
            );
            assert_eq!(limiter.available_permissions(), 0);
            assert_eq!(limiter.config(), new);
            let metrics = limiter.metrics();
            let refused = calls
                .iter()
                .filter(|(_, o)| matches!(o, Outcome::Refused(_)))
                .count() as u64;
            assert_eq!(metrics.permitted_calls(), 1 + grants + rest, "{calls:?}");
            assert_eq!(metrics.rejected_calls(), refused + 1, "{calls:?}");
            assert_eq!(metrics.number_of_waiting_threads(), 0);
        });
    }
}

/// A waiter that reserved a permission of the old configuration's next cycle gives up while the
/// limiter is reconfigured and another caller (reserving, polled once, then dropped) races both:
/// the new configuration's first cycle grants exactly its one permission, the give-back adds
/// none to it (it gives back only within the configuration it reserved in), and a late caller
/// of the old configuration takes none of it.
#[test]
fn a_give_back_across_a_reconfiguration_adds_nothing_to_the_new_cycle() {
    check(2, || {
        // One permission a second, waits of up to two seconds; cycle 0's permission taken.
        let (limiter, _clock) = limiter_with(config(1, SEC, 2 * SEC));
        limiter.try_acquire().unwrap();
        let new = config(1, 3 * SEC, Duration::ZERO);
        let race = Race {
            old_retries: vec![],
            new_retries: vec![3 * SEC],
            reserver: Judge::Old,
        };
        let waiter = {
            let (limiter, new) = (Arc::clone(&limiter), new.clone());
            thread::spawn(move || {
                let mut acquire = pin!(limiter.acquire());
                let mut cx = Context::from_waker(Waker::noop());
                // Reserved under the old configuration (not yet changed): cycle 1 or 2.
                assert!(acquire.as_mut().poll(&mut cx).is_pending());
                let reconfigurer = {
                    let limiter = Arc::clone(&limiter);
                    thread::spawn(move || limiter.reconfigure(new))
                };
                drop(acquire);
                reconfigurer.join().unwrap();
            })
        };
        let call = acquire_once(&limiter);
        waiter.join().unwrap();
        race.judge(call);

        let rest = take_the_rest(&limiter, 3 * SEC);
        let granted = u64::from(call == Outcome::Granted);
        assert_eq!(
            granted + rest,
            1,
            "the new first cycle of one granted {granted} + {rest} ({call:?})"
        );
        let metrics = limiter.metrics();
        assert_eq!(metrics.permitted_calls(), 1 + granted + rest);
        let refused = u64::from(matches!(call, Outcome::Refused(_)));
        assert_eq!(metrics.rejected_calls(), refused + 1);
        assert_eq!(metrics.number_of_waiting_threads(), 0);
    });
}

/// Two reconfigurations race each other and an acquisition (the old configuration's cycle
/// spent, so only a new one grants): the limiter ends with one of the two configurations whole,
/// and its permissions, cycle and timeout are that configuration's (its first cycle less the
/// acquisition, if that configuration granted it), with every call counted once.
#[test]
fn two_reconfigurations_racing_leave_one_configuration_whole() {
    check(1, || {
        let (limiter, _clock) = limiter_with(config(1, SEC, Duration::ZERO));
        limiter.try_acquire().unwrap();
        let first = config(2, 3 * SEC, Duration::ZERO);
        let second = config(3, 5 * SEC, 10 * SEC);
        let reconfigurers: Vec<_> = [first.clone(), second.clone()]
            .into_iter()
            .map(|config| {
                let limiter = Arc::clone(&limiter);
                thread::spawn(move || limiter.reconfigure(config))
            })
            .collect();
        let call = outcome(limiter.try_acquire());
        for reconfigurer in reconfigurers {
            reconfigurer.join().unwrap();
        }
        // Each new configuration's first cycle has a permission to spare: only the old one,
        // spent, refuses (its cycle 1 starts in a second).
        assert!(
            matches!(call, Outcome::Granted | Outcome::Refused(SEC)),
            "{call:?}"
        );

        let last = limiter.config();
        assert!(last == first || last == second, "a mix: {last:?}");
        let limit = i64::from(last.limit_for_period());
        let granted = i64::from(call == Outcome::Granted);
        let left = limiter.available_permissions();
        // The acquisition was judged by the configuration in force, or by the one it replaced.
        assert!(
            left == limit || (granted == 1 && left == limit - 1),
            "{left} left of {last:?} after {call:?}"
        );
        let rest = take_the_rest(&limiter, last.limit_refresh_period());
        assert_eq!(rest as i64, left);
        // The timeout is the same configuration's: the second waits for its next cycle.
        let reserving = acquire_once(&limiter);
        if last == second {
            assert_eq!(reserving, Outcome::Reserved);
        } else {
            assert_eq!(reserving, Outcome::Refused(last.limit_refresh_period()));
        }
        assert_eq!(limiter.available_permissions(), 0);
        let metrics = limiter.metrics();
        assert_eq!(metrics.permitted_calls() as i64, 1 + granted + rest as i64);
        let refused = u64::from(call != Outcome::Granted) + 1 + u64::from(last == first);
        assert_eq!(metrics.rejected_calls(), refused);
        assert_eq!(metrics.number_of_waiting_threads(), 0);
    });
}

/// A waiter that reserved the old configuration's next cycle gives up and the limiter is then
/// reconfigured (one thread, in that order), while a caller that may have decided on the old
/// configuration and the value of `next` before the give-back reserves (polled once, then
/// dropped): the reconfiguration starts its positions above every value `next` ever held, so
/// that caller's stale swap fails and the new first cycle keeps exactly its one permission.
#[test]
fn a_stale_reservation_after_a_give_back_takes_nothing_from_the_new_cycle() {
    check(2, || {
        let (limiter, _clock) = limiter_with(config(1, SEC, 2 * SEC));
        limiter.try_acquire().unwrap();
        let new = config(1, 3 * SEC, Duration::ZERO);
        let race = Race {
            old_retries: vec![],
            new_retries: vec![3 * SEC],
            reserver: Judge::Old,
        };
        // Reserved under the old configuration, before the race: cycle 1's permission.
        let mut waiting = Box::pin({
            let limiter = Arc::clone(&limiter);
            async move { limiter.acquire().await }
        });
        let mut cx = Context::from_waker(Waker::noop());
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        let reconfigurer = {
            let (limiter, new) = (Arc::clone(&limiter), new.clone());
            thread::spawn(move || {
                drop(waiting);
                limiter.reconfigure(new);
            })
        };
        let call = acquire_once(&limiter);
        reconfigurer.join().unwrap();
        race.judge(call);

        let rest = take_the_rest(&limiter, 3 * SEC);
        let granted = u64::from(call == Outcome::Granted);
        assert_eq!(
            granted + rest,
            1,
            "the new first cycle of one granted {granted} + {rest} ({call:?})"
        );
        let metrics = limiter.metrics();
        assert_eq!(metrics.permitted_calls(), 1 + granted + rest);
        let refused = u64::from(matches!(call, Outcome::Refused(_)));
        assert_eq!(metrics.rejected_calls(), refused + 1);
        assert_eq!(metrics.number_of_waiting_threads(), 0);
    });
}
