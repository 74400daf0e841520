//! What the bench binaries call: the bare call, the error type of the guarded calls, the
//! one-poll executor, and the two-thread run.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Barrier;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use resilience_runtime::Rejected;

/// Polls a future once with a no-op waker; every future measured here completes at once.
#[inline(always)]
pub fn poll_now<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a measured call must complete in one poll"),
    }
}

thread_local! {
    /// The executor's round: how many times [`poll_to_end`] found its future pending.
    static ROUND: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Polls a future with a no-op waker until it completes, one round at a time: for calls that
/// suspend.
#[allow(dead_code)] // not every bench binary measures calls that suspend
#[inline(always)]
pub fn poll_to_end<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        ROUND.set(ROUND.get() + 1);
    }
}

/// [`bare`], suspended until the executor's next round, as a call that waits on its
/// dependency is: polled again before then, it is still pending.
#[allow(dead_code)] // not every bench binary measures calls that suspend
#[inline(never)]
pub async fn bare_pending(x: u32) -> Result<u32, CallError> {
    let start = ROUND.get();
    std::future::poll_fn(|cx| {
        if ROUND.get() > start {
            Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await;
    Ok(black_box(x) + 1)
}

/// The error of the guarded calls: a rejection. `Clone`, for tower-resilience's hedge, which
/// keeps an attempt's error to return if every attempt fails.
#[derive(Clone, Debug)]
pub struct CallError(#[allow(dead_code)] pub Rejected);

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

// tower's `LoadShed` wants errors it can box.
impl std::error::Error for CallError {}

impl From<Rejected> for CallError {
    fn from(r: Rejected) -> Self {
        CallError(r)
    }
}

/// The call every guarded case wraps, unguarded.
#[inline(never)]
pub async fn bare(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// Runs `op` `iters` times on each of two threads at once, on one shared value, and returns the
/// time from their common start until both are done: divided by `iters`, the time per call of
/// one thread under contention. Each thread times itself from the moment both are released, so
/// a third thread (the caller) descheduled around the start does not shorten the figure.
#[allow(dead_code)] // not every bench binary measures two threads
pub fn two_threads<S: Sync>(iters: u64, shared: &S, op: impl Fn(&S) + Sync) -> Duration {
    let barrier = Barrier::new(2);
    std::thread::scope(|scope| {
        let threads = [(); 2].map(|()| {
            scope.spawn(|| {
                barrier.wait();
                let start = Instant::now();
                for _ in 0..iters {
                    op(shared);
                }
                (start, Instant::now())
            })
        });
        let [a, b] = threads.map(|t| t.join().expect("the thread runs"));
        a.1.max(b.1) - a.0.min(b.0)
    })
}
