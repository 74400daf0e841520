//! Timeouts for async waits on any executor: tokio's timer inside a tokio runtime (so paused
//! test time applies), else one shared timer thread.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use once_cell::sync::Lazy;

/// `future`'s output, or `None` if `limit` passed first. Inside a tokio runtime this is
/// `tokio::time::timeout` (the runtime must have its time driver enabled, as
/// `#[tokio::main]` does); on any other executor a shared timer thread wakes the caller.
pub(crate) async fn timeout<F: Future>(limit: Duration, future: F) -> Option<F::Output> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return tokio::time::timeout(limit, future).await.ok();
    }
    let Some(deadline) = Instant::now().checked_add(limit) else {
        return Some(future.await);
    };
    let mut future = pin!(future);
    let mut sleep = Sleep {
        deadline,
        registration: None,
    };
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        match Pin::new(&mut sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// The shared timer: deadlines in a heap, the wakers of the sleeps still waiting.
struct Timer {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    next_id: u64,
    deadlines: BinaryHeap<Reverse<(Instant, u64)>>,
    wakers: HashMap<u64, Waker>,
    running: bool,
}

static TIMER: Lazy<Timer> = Lazy::new(|| Timer {
    state: Mutex::new(State::default()),
    changed: Condvar::new(),
});

fn lock() -> MutexGuard<'static, State> {
    TIMER.state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The timer thread: wakes each sleep at its deadline. A sleep dropped before its deadline
/// removes its waker; its heap entry is discarded when it comes up.
fn run() {
    let mut state = lock();
    loop {
        let now = Instant::now();
        let mut due = Vec::new();
        while let Some(Reverse((deadline, id))) = state.deadlines.peek().copied() {
            if !state.wakers.contains_key(&id) {
                state.deadlines.pop();
            } else if deadline <= now {
                state.deadlines.pop();
                due.extend(state.wakers.remove(&id));
            } else {
                break;
            }
        }
        if !due.is_empty() {
            drop(state);
            due.into_iter().for_each(Waker::wake);
            state = lock();
            continue;
        }
        state = match state.deadlines.peek() {
            Some(Reverse((deadline, _))) => {
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
    registration: Option<u64>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        let mut state = lock();
        match self.registration {
            Some(id) => {
                // Still waiting (the timer removes the waker when it fires).
                match state.wakers.get_mut(&id) {
                    Some(waker) => waker.clone_from(cx.waker()),
                    None => return Poll::Ready(()),
                }
            }
            None => {
                let id = state.next_id;
                state.next_id += 1;
                state.wakers.insert(id, cx.waker().clone());
                state.deadlines.push(Reverse((self.deadline, id)));
                self.registration = Some(id);
                if !state.running {
                    state.running = true;
                    let spawned = std::thread::Builder::new()
                        .name("resilience-timer".into())
                        .spawn(run);
                    if spawned.is_err() {
                        // No thread to wait on: give up waiting rather than hang.
                        state.running = false;
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
        if let Some(id) = self.registration {
            lock().wakers.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::task::Wake;
    use std::thread::Thread;

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

    #[test]
    fn a_timeout_outside_tokio_fires_without_a_runtime() {
        let out = block_on(timeout(
            Duration::from_millis(20),
            std::future::pending::<()>(),
        ));
        assert_eq!(out, None);
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
