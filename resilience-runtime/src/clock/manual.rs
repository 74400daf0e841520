//! [`ManualClock`]: a clock that moves only when a test advances it, and the sleeps of threads
//! and tasks on it.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::{deadline_after, END};

/// A clock that moves only when told to, for tests of time-dependent behaviour (sliding time
/// windows, the wait in the open state). Clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{ManualClock, Registry};
///
/// let clock = ManualClock::new();
/// let registry = Registry::with_clock(clock.clone());
/// clock.advance(Duration::from_secs(60));
/// # let _ = registry;
/// ```
#[derive(Clone, Default)]
pub struct ManualClock {
    pub(super) inner: Arc<Manual>,
}

/// The shared state of a [`ManualClock`] and its clones.
#[derive(Default)]
pub(super) struct Manual {
    pub(super) nanos: AtomicU64,
    /// Threads and tasks sleeping on this clock ([`Clock::sleep_until`]): while zero,
    /// [`ManualClock::advance`] wakes nobody and takes no lock.
    pub(super) sleepers: AtomicUsize,
    /// The wakers of the tasks sleeping, by `(deadline, id)`, so that an advance wakes the due
    /// ones in one split.
    tasks: Mutex<Tasks>,
    /// Notified (all) on every advance while anyone sleeps: sleeping threads wait on it under
    /// the `tasks` lock and recheck their deadline.
    advanced: Condvar,
}

#[derive(Default)]
pub(super) struct Tasks {
    next_id: u64,
    pub(super) sleeping: BTreeMap<(u64, u64), Waker>,
}

impl Manual {
    pub(super) fn lock(&self) -> MutexGuard<'_, Tasks> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ManualClock {
    /// A manual clock at its origin (time zero).
    pub fn new() -> Self {
        ManualClock::default()
    }

    /// Moves the clock forward by `by`. A clock stops at its end, about 584 years after its
    /// origin (`advance(Duration::MAX)` takes it there): it never moves past it.
    pub fn advance(&self, by: Duration) {
        let mut current = self.inner.nanos.load(Ordering::Relaxed);
        loop {
            let next = deadline_after(current, by).min(END);
            // SeqCst, with the sleepers' count below: a sleeper counts itself, then reads the
            // time (both SeqCst), so either it sees this advance or this advance sees it.
            match self.inner.nanos.compare_exchange_weak(
                current,
                next,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => current = actual,
            }
        }
        if self.inner.sleepers.load(Ordering::SeqCst) != 0 {
            self.wake_due();
        }
    }

    /// The time since the clock's origin.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.inner.nanos.load(Ordering::Acquire))
    }

    fn now_nanos(&self) -> u64 {
        self.inner.nanos.load(Ordering::SeqCst)
    }

    /// Wakes the sleepers whose deadline the clock has reached.
    #[cold]
    fn wake_due(&self) {
        let mut tasks = self.inner.lock();
        let now = self.now_nanos();
        // Everything at or before `now`: the keys `(deadline, id)` below `(now + 1, 0)`.
        let later = match now.checked_add(1) {
            Some(after) => tasks.sleeping.split_off(&(after, 0)),
            None => BTreeMap::new(),
        };
        let due = std::mem::replace(&mut tasks.sleeping, later);
        // Threads recheck their own deadline under the lock.
        self.inner.advanced.notify_all();
        drop(tasks);
        due.into_values().for_each(Waker::wake);
    }

    /// Blocks the thread until the clock reads `deadline` or later.
    pub(super) fn sleep_until_blocking(&self, deadline: u64) {
        let _counted = Counted::new(&self.inner.sleepers);
        let mut tasks = self.inner.lock();
        while self.now_nanos() < deadline {
            tasks = self
                .inner
                .advanced
                .wait(tasks)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl ManualClock {
    /// A task's sleep until the clock reads `deadline`.
    pub(super) fn sleep_until(&self, deadline: u64) -> ManualSleep {
        ManualSleep {
            clock: self.clone(),
            deadline,
            counted: false,
            key: None,
        }
    }
}

/// One sleeper counted in [`Manual::sleepers`] while it lives (also on unwinding).
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Counted(count)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A task's sleep on a [`ManualClock`]: ready once the clock reads `deadline`. Dropping it
/// removes its waker, so a cancelled sleep leaves nothing behind.
pub(super) struct ManualSleep {
    clock: ManualClock,
    deadline: u64,
    /// Counted in the sleepers from the first poll that found the deadline ahead.
    counted: bool,
    /// The key of its waker in [`Tasks::sleeping`], while registered.
    key: Option<(u64, u64)>,
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if this.clock.now_nanos() >= this.deadline {
            return Poll::Ready(());
        }
        if !this.counted {
            this.clock.inner.sleepers.fetch_add(1, Ordering::SeqCst);
            this.counted = true;
        }
        let mut tasks = this.clock.inner.lock();
        // Rechecked under the lock: an advance that missed the count wakes under it too.
        if this.clock.now_nanos() >= this.deadline {
            if let Some(key) = this.key.take() {
                tasks.sleeping.remove(&key);
            }
            return Poll::Ready(());
        }
        let registered = this.key.and_then(|key| tasks.sleeping.get_mut(&key));
        match registered {
            Some(waker) => waker.clone_from(cx.waker()),
            None => {
                // First poll, or woken (the advance took the waker) but not due: register.
                let key = (this.deadline, tasks.next_id);
                tasks.next_id += 1;
                tasks.sleeping.insert(key, cx.waker().clone());
                this.key = Some(key);
            }
        }
        Poll::Pending
    }
}

impl Drop for ManualSleep {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.clock.inner.lock().sleeping.remove(&key);
        }
        if self.counted {
            self.clock.inner.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManualClock").field(&self.now()).finish()
    }
}
