//! What both bench binaries call: the bare call, the error type of the guarded calls, and the
//! one-poll executor.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

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

/// The error of the guarded calls: a rejection.
#[derive(Debug)]
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
