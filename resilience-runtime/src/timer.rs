//! Sleeps for async waits on any executor: tokio's timer inside a tokio runtime (so paused
//! test time applies), else one shared timer thread.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use once_cell::sync::Lazy;

/// Completes after `duration`: `tokio::time::sleep` inside a tokio runtime (the runtime must
/// have its time driver enabled; paused test time applies), else the shared timer thread. A
/// duration past the end of `Instant` never completes. Dropping it cancels the sleep and leaves
/// no entry in the shared timer.
pub(crate) async fn sleep(duration: Duration) {
    if tokio::runtime::Handle::try_current().is_ok() {
        return tokio::time::sleep(duration).await;
    }
    match Instant::now().checked_add(duration) {
        Some(deadline) => {
            Sleep {
                deadline,
                registration: None,
            }
            .await
        }
        None => std::future::pending().await,
    }
}

/// The shared timer: the wakers of the sleeps still waiting, ordered by deadline.
///
/// Written here rather than taken from `futures-timer` (which also removes a dropped delay's
/// entry): it is one ordered map and one thread, and it lets the tests check that the timer
/// holds exactly the sleeps still waiting.
struct Timer {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    next_id: u64,
    /// One entry per sleep still waiting, keyed by `(deadline, id)`: the first entry is the
    /// next to wake, and a sleep dropped before its deadline removes its own entry, so the map
    /// never holds more than the sleeps alive (a long sleep does not pin finished ones).
    sleeps: BTreeMap<(Instant, u64), Waker>,
    running: bool,
}

static TIMER: Lazy<Timer> = Lazy::new(|| Timer {
    state: Mutex::new(State::default()),
    changed: Condvar::new(),
});

fn lock() -> MutexGuard<'static, State> {
    TIMER.state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The timer thread: wakes each sleep at its deadline.
fn run() {
    let mut state = lock();
    loop {
        let now = Instant::now();
        let mut due = Vec::new();
        while let Some(entry) = state.sleeps.first_entry() {
            if entry.key().0 > now {
                break;
            }
            due.push(entry.remove());
        }
        if !due.is_empty() {
            drop(state);
            due.into_iter().for_each(Waker::wake);
            state = lock();
            continue;
        }
        state = match state.sleeps.first_key_value() {
            Some(((deadline, _), _)) => {
                let wait = deadline.saturating_duration_since(now);
                TIMER
                    .changed
                    .wait_timeout(state, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => TIMER.changed.wait(state).unwrap_or_else(|e| e.into_inner()),
        };
    }
}

/// A future that completes at `deadline`.
struct Sleep {
    deadline: Instant,
    /// The key of its entry in [`State::sleeps`], once registered.
    registration: Option<(Instant, u64)>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        let mut state = lock();
        match self.registration {
            Some(key) => {
                // Still waiting (the timer removes the entry when it fires).
                match state.sleeps.get_mut(&key) {
                    Some(waker) => waker.clone_from(cx.waker()),
                    None => return Poll::Ready(()),
                }
            }
            None => {
                let key = (self.deadline, state.next_id);
                state.next_id += 1;
                state.sleeps.insert(key, cx.waker().clone());
                self.registration = Some(key);
                if !state.running {
                    state.running = true;
                    let spawned = std::thread::Builder::new()
                        .name("resilience-timer".into())
                        .spawn(run);
                    if spawned.is_err() {
                        // No thread to wait on: give up waiting rather than hang.
                        state.running = false;
                        state.sleeps.remove(&key);
                        self.registration = None;
                        return Poll::Ready(());
                    }
                }
            }
        }
        drop(state);
        TIMER.changed.notify_one();
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.registration {
            lock().sleeps.remove(&key);
        }
    }
}

/// The number of sleeps the shared timer holds (for tests).
#[cfg(test)]
fn sleeps_held() -> usize {
    lock().sleeps.len()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::task::Wake;
    use std::thread::Thread;

    use std::pin::pin;

    use super::*;

    /// A minimal executor with no tokio runtime: parks the thread until woken.
    fn block_on<F: Future>(future: F) -> F::Output {
        struct Unpark(Thread);
        impl Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        loop {
            if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
                return output;
            }
            std::thread::park();
        }
    }

    /// `future`'s output, or `None` if `limit` passed first: a sleep of the shared timer raced
    /// against a future, the way the guards' waits use it.
    async fn timeout<F: Future>(limit: Duration, future: F) -> Option<F::Output> {
        let deadline = Instant::now() + limit;
        let mut future = pin!(future);
        let mut sleep = Sleep {
            deadline,
            registration: None,
        };
        std::future::poll_fn(|cx| {
            if let Poll::Ready(output) = future.as_mut().poll(cx) {
                return Poll::Ready(Some(output));
            }
            Pin::new(&mut sleep).poll(cx).map(|()| None)
        })
        .await
    }

    #[test]
    fn a_timeout_outside_tokio_fires_without_a_runtime() {
        let out = block_on(timeout(
            Duration::from_millis(20),
            std::future::pending::<()>(),
        ));
        assert_eq!(out, None);
    }

    #[test]
    fn a_sleep_outside_tokio_completes_after_its_duration() {
        // (A dropped sleep removes its entry: `Sleep`'s drop, tested with the timeouts below.)
        let start = Instant::now();
        block_on(sleep(Duration::from_millis(20)));
        assert!(start.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn a_ready_future_wins_over_its_timeout() {
        let out = block_on(timeout(Duration::from_secs(60), async { 7 }));
        assert_eq!(out, Some(7));
    }

    #[test]
    fn many_sleeps_wake_each_at_its_deadline() {
        let handles: Vec<_> = (1..=8u64)
            .map(|i| {
                std::thread::spawn(move || {
                    let start = Instant::now();
                    let limit = Duration::from_millis(5 * i);
                    assert_eq!(block_on(timeout(limit, std::future::pending::<()>())), None);
                    assert!(start.elapsed() >= limit);
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
    }

    /// A future that is pending once (it wakes itself), then ready: its timeout registers.
    fn pending_once() -> impl Future<Output = ()> {
        let mut polled = false;
        std::future::poll_fn(move |cx| {
            if polled {
                Poll::Ready(())
            } else {
                polled = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        })
    }

    #[test]
    fn finished_waits_leave_nothing_behind_a_long_one() {
        use std::sync::atomic::{AtomicBool, Ordering};

        // A wait of an hour registers first; then 2 000 waits with later deadlines finish one
        // after the other. The timer holds the long one and nothing of the others. (Before,
        // a finished wait's entry was discarded only once it reached the head of the queue,
        // which the long wait held: the queue grew by one entry per finished wait.)
        let done = Arc::new(AtomicBool::new(false));
        let long = {
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let until_done = std::future::poll_fn(|_| {
                    if done.load(Ordering::Acquire) {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                });
                block_on(timeout(Duration::from_secs(3_600), until_done))
            })
        };
        while sleeps_held() == 0 {
            std::thread::yield_now();
        }
        let before = sleeps_held();
        for _ in 0..2_000 {
            let finished = block_on(timeout(Duration::from_secs(7_200), pending_once()));
            assert_eq!(finished, Some(()));
        }
        // Other tests of this binary may hold a few sleeps of their own meanwhile.
        let after = sleeps_held();
        assert!(
            after < before + 100,
            "{after} sleeps held after 2 000 finished waits, {before} before"
        );
        done.store(true, Ordering::Release);
        long.thread().unpark();
        assert_eq!(long.join().unwrap(), Some(()));
    }

    #[test]
    fn an_async_bulkhead_waits_and_times_out_on_an_executor_without_tokio() {
        use crate::{Bulkhead, BulkheadConfig, Rejected};

        let of_one = |wait: Duration| {
            let config = BulkheadConfig::builder()
                .max_concurrent_calls(1)
                .max_wait_duration(wait)
                .build()
                .unwrap();
            Arc::new(Bulkhead::new("no-tokio", config))
        };

        // Times out: nobody releases within 20 ms.
        let impatient = of_one(Duration::from_millis(20));
        let _held = impatient.try_acquire().unwrap();
        let rejected = block_on(impatient.acquire()).unwrap_err();
        assert!(matches!(rejected, Rejected::BulkheadFull { .. }));

        // Gets the permit another thread releases while it waits.
        let patient = of_one(Duration::from_secs(30));
        let held = patient.try_acquire().unwrap();
        let waiter = {
            let patient = Arc::clone(&patient);
            std::thread::spawn(move || block_on(async { patient.acquire().await.map(|_| ()) }))
        };
        std::thread::sleep(Duration::from_millis(20));
        drop(held);
        assert_eq!(waiter.join().unwrap(), Ok(()));
        assert_eq!(patient.available_concurrent_calls(), 1, "no permit lost");
    }
}
