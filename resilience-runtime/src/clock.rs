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
/// [`ManualClock`] moves only when a test advances it, and drives everything a guard times.
///
/// **Paused tokio time drives waits only.** On the system clock, a circuit breaker's waits (the
/// open state's wait, the half-open state's maximum wait, their timers, `remaining_open_time`)
/// follow paused tokio time, but the durations of calls (slow calls, event durations) and its
/// time-based sliding window are read from the operating system's clock directly: on Linux from
/// `CLOCK_MONOTONIC_COARSE` where its resolution is fine enough (see
/// [`CircuitBreaker`](crate::CircuitBreaker)), which costs a fifth of a precise reading. Test
/// those with a [`ManualClock`].
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
                    .min(END)
            }
        }
    }
}

/// The last reading of any clock, in nanoseconds since its origin (about 584 years): a clock
/// that gets there stays there. `u64::MAX` is never read, so it can mean "no deadline".
pub(crate) const END: u64 = u64::MAX - 1;

/// The deadline `wait` after the reading `now`. One past the clock's [`END`] saturates to
/// `u64::MAX`, which no reading reaches: a wait that would end after the end of time never
/// ends, and a deadline at or before `END` is reached when the clock gets there.
#[inline]
pub(crate) fn deadline_after(now: u64, wait: Duration) -> u64 {
    let wait = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
    now.saturating_add(wait)
}

/// Which reading of a [`Clock`] a guard takes for one purpose (the time of a call, the time of
/// a sliding window), chosen once per guard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reading {
    /// No reading: nothing depends on the time (reads as zero).
    None,
    /// The operating system's coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`): a timeline of
    /// its own, a few milliseconds of resolution, never paused by tokio. Only chosen for the
    /// system clock where [`coarse_resolution_nanos`] is `Some`.
    Coarse,
    /// [`Clock::now_nanos`]: the manual clock, or the system clock at full precision.
    Precise,
}

impl Clock {
    /// Reads the clock as `reading` says. Two readings are comparable only if they were taken
    /// with the same `Reading`.
    #[inline]
    pub(crate) fn read(&self, reading: Reading) -> u64 {
        match reading {
            Reading::None => 0,
            Reading::Coarse => coarse_now_nanos(),
            Reading::Precise => self.now_nanos(),
        }
    }

    /// The resolution of the coarse clock when this clock may use it instead of a precise
    /// reading: the system clock on Linux. `None` for a [`ManualClock`] (which must drive every
    /// time a test observes) and elsewhere.
    pub(crate) fn coarse_resolution(&self) -> Option<u64> {
        if self.is_manual() {
            None
        } else {
            coarse_resolution_nanos()
        }
    }
}

/// The resolution of `CLOCK_MONOTONIC_COARSE` in nanoseconds (`clock_getres`, read once), or
/// `None` where it is not available (not Linux, or the call failed).
#[allow(unsafe_code)] // `clock_getres`
pub(crate) fn coarse_resolution_nanos() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        static RESOLUTION: Lazy<Option<u64>> = Lazy::new(|| {
            let mut res = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `res` is a valid, writable `timespec` that outlives the call.
            let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) };
            let nanos = timespec_nanos(&res);
            (rc == 0 && nanos > 0).then_some(nanos)
        });
        *RESOLUTION
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// `CLOCK_MONOTONIC_COARSE` in nanoseconds since its (unspecified) origin. Called only once
/// [`coarse_resolution_nanos`] found the clock, so `clock_gettime` cannot fail (it would read 0).
#[inline]
#[allow(unsafe_code)] // `clock_gettime`
fn coarse_now_nanos() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable `timespec` that outlives the call.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut now) };
        debug_assert_eq!(rc, 0, "CLOCK_MONOTONIC_COARSE was available at start");
        timespec_nanos(&now)
    }
    #[cfg(not(target_os = "linux"))]
    {
        // Never chosen: `coarse_resolution_nanos` is `None` here.
        0
    }
}

#[cfg(target_os = "linux")]
#[inline]
fn timespec_nanos(t: &libc::timespec) -> u64 {
    // A monotonic clock's fields are never negative; a negative one would read as zero.
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
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

    /// Moves the clock forward by `by`. A clock stops at its end, about 584 years after its
    /// origin (`advance(Duration::MAX)` takes it there): it never moves past it.
    pub fn advance(&self, by: Duration) {
        let mut current = self.nanos.load(Ordering::Relaxed);
        loop {
            let next = deadline_after(current, by).min(END);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_stops_at_its_end_below_no_deadline() {
        let manual = ManualClock::new();
        let clock = Clock::from(manual.clone());
        manual.advance(Duration::MAX);
        assert_eq!(clock.now_nanos(), END);
        manual.advance(Duration::from_secs(1));
        assert_eq!(clock.now_nanos(), END, "it stays at its end");
        assert!(clock.now_nanos() < u64::MAX);
        assert_eq!(deadline_after(END, Duration::ZERO), END, "reached");
        assert_eq!(
            deadline_after(END, Duration::from_nanos(1)),
            u64::MAX,
            "never"
        );
    }

    #[test]
    fn a_manual_clock_never_uses_the_coarse_clock() {
        assert_eq!(Clock::from(ManualClock::new()).coarse_resolution(), None);
        assert_eq!(
            Clock::system().coarse_resolution(),
            coarse_resolution_nanos()
        );
    }

    #[test]
    fn readings_of_each_kind_are_monotonic() {
        let clock = Clock::system();
        assert_eq!(clock.read(Reading::None), 0);
        let a = clock.read(Reading::Precise);
        let b = clock.read(Reading::Precise);
        assert!(b >= a);
        if coarse_resolution_nanos().is_some() {
            let a = clock.read(Reading::Coarse);
            std::thread::sleep(Duration::from_millis(20));
            let b = clock.read(Reading::Coarse);
            // The coarse clock moves at least once per resolution step (a few ms).
            assert!(b > a, "{a} then {b}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_coarse_clock_exists_on_linux_with_a_resolution_of_milliseconds() {
        let res = coarse_resolution_nanos().expect("CLOCK_MONOTONIC_COARSE on Linux");
        assert!(res <= 100_000_000, "{res} ns");
    }
}
