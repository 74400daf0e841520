//! [`Clock`]: where guards read the time. The system clock by default, a [`ManualClock`]
//! advanced by hand in tests.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use once_cell::sync::Lazy;

use std::sync::atomic::{AtomicU64, Ordering};

/// The source of time for the guards of a registry: monotonic, read as the [`Duration`] since
/// the clock's origin.
///
/// The system clock reads `tokio::time::Instant`, which is the operating system's monotonic
/// clock, except inside a tokio runtime whose time is paused (`#[tokio::test(start_paused =
/// true)]`, with tokio's `test-util` feature), where it follows the runtime's paused time. A
/// [`ManualClock`] moves only when a test advances it.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{Clock, ManualClock};
///
/// let manual = ManualClock::new();
/// let clock = Clock::from(manual.clone());
/// let before = clock.now();
/// manual.advance(Duration::from_secs(5));
/// assert_eq!(clock.now() - before, Duration::from_secs(5));
/// ```
#[derive(Clone, Default)]
pub struct Clock {
    manual: Option<ManualClock>,
}

/// The system clock's origin, a day before first use, so that a paused tokio runtime whose
/// frozen time began before the first reading still reads a positive duration.
static ORIGIN: Lazy<tokio::time::Instant> = Lazy::new(|| {
    let now = tokio::time::Instant::now();
    now.checked_sub(Duration::from_secs(86_400)).unwrap_or(now)
});

impl Clock {
    /// The operating system's monotonic clock (or a paused tokio runtime's time).
    pub fn system() -> Self {
        Clock { manual: None }
    }

    /// Whether this clock is a [`ManualClock`].
    pub fn is_manual(&self) -> bool {
        self.manual.is_some()
    }

    /// Time since the clock's origin.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.now_nanos())
    }

    /// Time since the clock's origin, in nanoseconds.
    #[inline]
    pub(crate) fn now_nanos(&self) -> u64 {
        match &self.manual {
            Some(manual) => manual.nanos.load(Ordering::Acquire),
            None => {
                let elapsed = tokio::time::Instant::now().saturating_duration_since(*ORIGIN);
                // Seconds and nanoseconds apart: cheaper than `as_nanos()`'s 128-bit product,
                // and a u64 of nanoseconds lasts 584 years.
                elapsed
                    .as_secs()
                    .saturating_mul(1_000_000_000)
                    .saturating_add(u64::from(elapsed.subsec_nanos()))
            }
        }
    }
}

impl From<ManualClock> for Clock {
    fn from(manual: ManualClock) -> Self {
        Clock {
            manual: Some(manual),
        }
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.manual {
            Some(m) => f.debug_tuple("Clock::Manual").field(&m.now()).finish(),
            None => f.write_str("Clock::System"),
        }
    }
}

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
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A manual clock at its origin (time zero).
    pub fn new() -> Self {
        ManualClock::default()
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let mut current = self.nanos.load(Ordering::Relaxed);
        loop {
            let next = current.saturating_add(by);
            match self.nanos.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// The time since the clock's origin.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Acquire))
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManualClock").field(&self.now()).finish()
    }
}
