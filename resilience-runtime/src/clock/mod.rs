//! [`Clock`]: where guards read the time. The system clock by default, a [`ManualClock`]
//! advanced by hand in tests.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use once_cell::sync::Lazy;

mod manual;

pub use manual::ManualClock;

use std::sync::atomic::Ordering;

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
/// those with a [`ManualClock`], or run them on [`Clock::precise`], which paused tokio time
/// drives entirely.
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
    /// [`Clock::precise`]: never the coarse clock, read from its own origin.
    precise: Option<Arc<Origin>>,
}

/// The system clock's origin, a day before first use (where that instant exists: on Windows
/// not until the machine has been up a day, and then the first use), so that a paused tokio
/// runtime whose frozen time began before the first reading still reads a positive duration;
/// with its [`Fields`] when they can be read (see [`fields`]).
static ORIGIN: Lazy<Origin> = Lazy::new(|| Origin::day_before(tokio::time::Instant::now()));

struct Origin {
    instant: tokio::time::Instant,
    /// The origin's [`fields`], once [`fields_agree`] found that they measure what
    /// `Instant::duration_since` does; `None` otherwise (then every reading takes
    /// `duration_since`).
    fields: Option<(i64, u32)>,
}

impl Origin {
    /// A day before `now`, where that instant exists (else `now`).
    fn day_before(now: tokio::time::Instant) -> Origin {
        let instant = now.checked_sub(Duration::from_secs(86_400)).unwrap_or(now);
        Origin {
            instant,
            fields: fields(instant).filter(|&origin| fields_agree(instant, origin)),
        }
    }
}

/// An `Instant`'s seconds and nanoseconds, read through its `Hash`.
///
/// std gives no cheaper way to turn an `Instant` into a number than `duration_since`, which runs
/// `Timespec::sub_timespec` and `Duration::new`'s normalising out of line: 55 instructions and
/// about 8 ns here, a third of a precise reading of the clock (the breaker's open state reads
/// it on every refusal). `Instant` (tokio's and std's) derives `Hash` from its fields: on
/// Linux and macOS a `timespec`'s seconds (`i64`) then nanoseconds (`u32`), on Windows a
/// `Duration`'s (`u64`, `u32`). That is not a promise of std's, so what this reads is used only
/// after [`fields_agree`] checked it against `duration_since` at the origin; a representation
/// that hashes anything else reads as `None`.
#[derive(Default)]
struct Fields {
    secs: i64,
    nanos: u32,
    /// The writes so far: 1 after the seconds, 2 after the nanoseconds, `u8::MAX` after any
    /// other write (another representation).
    writes: u8,
}

impl Fields {
    #[inline]
    fn field(&mut self, at: u8) -> bool {
        let ok = self.writes == at;
        self.writes = if ok { at + 1 } else { u8::MAX };
        ok
    }
}

impl std::hash::Hasher for Fields {
    fn write(&mut self, _: &[u8]) {
        self.writes = u8::MAX;
    }
    #[inline]
    fn write_i64(&mut self, secs: i64) {
        if self.field(0) {
            self.secs = secs;
        }
    }
    #[inline]
    fn write_u64(&mut self, secs: u64) {
        match i64::try_from(secs) {
            Ok(secs) if self.field(0) => self.secs = secs,
            _ => self.writes = u8::MAX,
        }
    }
    #[inline]
    fn write_u32(&mut self, nanos: u32) {
        if self.field(1) {
            self.nanos = nanos;
        }
    }
    fn finish(&self) -> u64 {
        0
    }
}

/// `instant`'s seconds and nanoseconds (from an unspecified origin; the seconds of an instant
/// before it are negative), or `None` if it does not hash as seconds then nanoseconds.
#[inline]
fn fields(instant: tokio::time::Instant) -> Option<(i64, u32)> {
    use std::hash::Hash;
    let mut fields = Fields::default();
    instant.hash(&mut fields);
    (fields.writes == 2 && fields.nanos < 1_000_000_000).then_some((fields.secs, fields.nanos))
}

/// Nanoseconds from `origin` to `now`, both read by [`fields`]; zero if `now` is earlier.
#[inline]
fn nanos_between(origin: (i64, u32), now: (i64, u32)) -> u64 {
    match now.0.checked_sub(origin.0).map(u64::try_from) {
        Some(Ok(secs)) => secs
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::from(now.1))
            .saturating_sub(u64::from(origin.1)),
        _ => 0,
    }
}

/// Whether [`fields`] measure what `duration_since` does, from `origin` (read as
/// `origin_fields`) to three later instants, a carry of the nanoseconds among them.
fn fields_agree(origin: tokio::time::Instant, origin_fields: (i64, u32)) -> bool {
    [
        Duration::from_nanos(1),
        Duration::new(1, 999_999_999),
        Duration::new(86_400, 500_000_001),
    ]
    .into_iter()
    .all(|step| {
        let later = origin + step;
        fields(later).map(|later| nanos_between(origin_fields, later))
            == u64::try_from(later.duration_since(origin).as_nanos()).ok()
    })
}

impl Clock {
    /// The operating system's monotonic clock (or a paused tokio runtime's time).
    pub fn system() -> Self {
        Clock::default()
    }

    /// The system clock, read at full precision for every purpose: call durations, sliding
    /// windows, budgets and an adaptive limit's samples too, which [`Clock::system`] reads from
    /// the operating system's coarse clock. Inside a tokio runtime whose time is paused, then,
    /// everything a guard times follows the runtime's time: what a simulation in virtual time
    /// needs (the overload drill's replay of a traffic profile runs its guards on it). Every
    /// reading is a precise one, which costs several times a coarse one (BENCHMARKS.md,
    /// "components").
    ///
    /// Its origin is a day before its creation, where [`Clock::system`]'s is a day before the
    /// process first read the time: created inside a paused runtime, its readings are the same
    /// from one run to the next (a paused runtime's time starts where the operating system's
    /// clock was when it started), so a simulation on it repeats exactly.
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilience_runtime::{Clock, Registry};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
    /// let registry = Registry::with_clock(Clock::precise());
    /// let before = registry.clock().now();
    /// tokio::time::sleep(Duration::from_secs(60)).await; // paused: returns at once
    /// assert_eq!(registry.clock().now() - before, Duration::from_secs(60));
    /// # });
    /// ```
    pub fn precise() -> Self {
        Clock {
            manual: None,
            precise: Some(Arc::new(Origin::day_before(tokio::time::Instant::now()))),
        }
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
            Some(manual) => manual.inner.nanos.load(Ordering::Acquire),
            None => system_now_nanos(self.precise.as_deref()),
        }
    }
}

/// The system clock's reading since `origin`, its own (a [`Clock::precise`]) or the process's
/// [`ORIGIN`]: out of line, so that the callers that inline [`Clock::read`] for a coarse
/// reading, or for none, stay small.
#[inline(never)]
fn system_now_nanos(origin: Option<&Origin>) -> u64 {
    let origin = origin.unwrap_or(&ORIGIN);
    let now = tokio::time::Instant::now();
    if let (Some(origin), Some(now)) = (origin.fields, fields(now)) {
        return nanos_between(origin, now).min(END);
    }
    let elapsed = now.saturating_duration_since(origin.instant);
    // Seconds and nanoseconds apart: cheaper than `as_nanos()`'s 128-bit product, and a u64 of
    // nanoseconds lasts 584 years.
    elapsed
        .as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(elapsed.subsec_nanos()))
        .min(END)
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
    #[inline(always)]
    pub(crate) fn read(&self, reading: Reading) -> u64 {
        match reading {
            Reading::None => 0,
            Reading::Coarse => coarse_now_nanos(),
            Reading::Precise => self.now_nanos(),
        }
    }

    /// The resolution of the coarse clock when this clock may use it instead of a precise
    /// reading: the system clock on Linux. `None` for a [`ManualClock`] (which must drive every
    /// time a test observes), for [`Clock::precise`], and elsewhere.
    pub(crate) fn coarse_resolution(&self) -> Option<u64> {
        if self.is_manual() || self.precise.is_some() {
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
    // Miri has no `clock_getres`: the clock's usual resolution (4 ms), so that its
    // `clock_gettime` still runs under Miri.
    #[cfg(all(target_os = "linux", miri))]
    {
        Some(4_000_000)
    }
    #[cfg(all(target_os = "linux", not(miri)))]
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
    // A monotonic clock's fields are never negative; a negative one would read as zero. The
    // kernel keeps the monotonic clocks as a signed 64-bit count of nanoseconds (`ktime_t`),
    // so seconds times 10⁹ plus nanoseconds stay below 2⁶³: the product and the sum need no
    // overflow checks, which every coarse reading would pay for.
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.wrapping_mul(1_000_000_000).wrapping_add(nanos)
}

impl From<ManualClock> for Clock {
    fn from(manual: ManualClock) -> Self {
        Clock {
            manual: Some(manual),
            precise: None,
        }
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.manual {
            Some(m) => f.debug_tuple("Clock::Manual").field(&m.now()).finish(),
            None if self.precise.is_some() => f.write_str("Clock::Precise"),
            None => f.write_str("Clock::System"),
        }
    }
}

impl Clock {
    /// Blocks the current thread until this clock's `reading` reaches `deadline` (a reading
    /// taken with the same [`Reading`], e.g. `clock.read(reading) + wait`). Needs no runtime.
    ///
    /// A [`ManualClock`] wakes the thread from [`ManualClock::advance`] (from another thread);
    /// the system clock sleeps the remaining time once on the operating system's clock, so on
    /// the coarse reading it may return up to one coarse step before the deadline reads as
    /// reached. `Reading::None` never waits.
    pub(crate) fn sleep_until_blocking(&self, reading: Reading, deadline: u64) {
        match &self.manual {
            Some(manual) => manual.sleep_until_blocking(deadline),
            None => {
                if let Some(left) = self.left_until(reading, deadline) {
                    std::thread::sleep(left);
                }
            }
        }
    }

    /// Waits until this clock's `reading` reaches `deadline`, as
    /// [`sleep_until_blocking`](Self::sleep_until_blocking) does but without blocking: on a
    /// [`ManualClock`] the task is woken by [`ManualClock::advance`]; on the system clock it
    /// sleeps the remaining time on tokio's timer inside a tokio runtime (so paused test time
    /// applies), else on the crate's shared timer thread. Dropping the future cancels the
    /// sleep and leaves nothing registered.
    pub(crate) async fn sleep_until(&self, reading: Reading, deadline: u64) {
        match &self.manual {
            Some(manual) => manual.sleep_until(deadline).await,
            None => {
                if let Some(left) = self.left_until(reading, deadline) {
                    crate::timer::sleep(left).await;
                }
            }
        }
    }

    /// The time left until `deadline` on the system clock's `reading`, if any. A deadline of
    /// `u64::MAX` (never) is the longest sleep a `Duration` of nanoseconds holds.
    fn left_until(&self, reading: Reading, deadline: u64) -> Option<Duration> {
        if reading == Reading::None {
            return None;
        }
        let left = deadline.saturating_sub(self.read(reading));
        (left > 0).then(|| Duration::from_nanos(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::{Context, Waker};

    #[test]
    fn the_system_clock_reads_what_duration_since_measures() {
        let origin = &*ORIGIN;
        // Where std hashes an `Instant` as its fields (every platform it builds on today), the
        // fast reading must be the one taken; elsewhere the fallback is.
        #[cfg(any(target_os = "linux", target_os = "macos", windows))]
        assert!(
            origin.fields.is_some(),
            "std::time::Instant no longer hashes as (seconds, nanoseconds): every precise \
             reading now takes duration_since (correct, but slower)"
        );
        for _ in 0..1_000 {
            let now = tokio::time::Instant::now();
            let expected = u64::try_from(now.duration_since(origin.instant).as_nanos()).unwrap();
            if let (Some(origin), Some(now)) = (origin.fields, fields(now)) {
                assert_eq!(nanos_between(origin, now), expected);
            }
        }
        let clock = Clock::system();
        let (a, b) = (clock.now_nanos(), clock.now_nanos());
        assert!(b >= a, "{a} then {b}");
        // The origin is a day back where an instant a day back exists (not on a Windows
        // machine up for less than a day: there the origin is the first reading).
        if tokio::time::Instant::now()
            .checked_sub(Duration::from_secs(86_400))
            .is_some()
        {
            assert!(
                a > 86_400_000_000_000,
                "{a} is less than a day after the origin"
            );
        }
    }

    #[test]
    fn a_representation_hashed_otherwise_reads_as_none() {
        use std::hash::Hasher;
        let mut fields = Fields::default();
        fields.write_u32(5);
        fields.write_i64(1);
        assert_eq!(fields.writes, u8::MAX);
        let mut fields = Fields::default();
        fields.write_u64(u64::MAX);
        assert_eq!(fields.writes, u8::MAX);
        let mut fields = Fields::default();
        fields.write_u64(3);
        fields.write_u32(7);
        assert_eq!((fields.secs, fields.nanos, fields.writes), (3, 7, 2));
        fields.write_u8(0);
        assert_eq!(fields.writes, u8::MAX);
        // An instant before the origin (negative seconds) and a borrow of the nanoseconds.
        assert_eq!(
            nanos_between((-2, 900_000_000), (1, 100_000_000)),
            2_200_000_000
        );
        assert_eq!(nanos_between((5, 10), (5, 9)), 0);
        assert_eq!(nanos_between((5, 10), (4, 999_999_999)), 0);
    }

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

    fn sleeping(manual: &ManualClock) -> (usize, usize) {
        (
            manual.inner.sleepers.load(Ordering::SeqCst),
            manual.inner.lock().sleeping.len(),
        )
    }

    #[test]
    fn a_thread_sleeping_on_a_manual_clock_wakes_when_an_advance_reaches_its_deadline() {
        let manual = ManualClock::new();
        let clock = Clock::from(manual.clone());
        std::thread::scope(|s| {
            let sleeper = s.spawn(|| clock.sleep_until_blocking(Reading::Precise, 2_000));
            while sleeping(&manual).0 == 0 {
                std::thread::yield_now();
            }
            manual.advance(Duration::from_nanos(1_999));
            std::thread::sleep(Duration::from_millis(20));
            assert!(!sleeper.is_finished(), "woken before its deadline");
            manual.advance(Duration::from_nanos(1));
            sleeper.join().unwrap();
        });
        assert_eq!(sleeping(&manual), (0, 0));
        // A deadline already reached does not wait.
        clock.sleep_until_blocking(Reading::Precise, 2_000);
    }

    #[test]
    fn a_task_sleeping_on_a_manual_clock_is_woken_by_advance_and_a_dropped_one_leaves_nothing() {
        use std::sync::atomic::AtomicBool;
        use std::task::Wake;

        struct Flag(AtomicBool);
        impl Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(Arc::clone(&flag));
        let mut cx = Context::from_waker(&waker);

        let manual = ManualClock::new();
        let clock = Clock::from(manual.clone());
        let mut sleep = Box::pin(clock.sleep_until(Reading::Precise, 1_000));
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        assert_eq!(sleeping(&manual), (1, 1));
        manual.advance(Duration::from_nanos(500));
        assert!(!flag.0.load(Ordering::SeqCst), "not due: not woken");
        manual.advance(Duration::from_nanos(500));
        assert!(flag.0.load(Ordering::SeqCst), "woken at its deadline");
        assert!(sleep.as_mut().poll(&mut cx).is_ready());
        drop(sleep);
        assert_eq!(sleeping(&manual), (0, 0));

        let mut cancelled = Box::pin(clock.sleep_until(Reading::Precise, 5_000));
        assert!(cancelled.as_mut().poll(&mut cx).is_pending());
        drop(cancelled);
        assert_eq!(
            sleeping(&manual),
            (0, 0),
            "a cancelled sleep leaves nothing behind"
        );
    }

    #[test]
    fn a_system_sleep_waits_until_its_reading() {
        let clock = Clock::system();
        let deadline = clock.read(Reading::Precise) + 20_000_000;
        clock.sleep_until_blocking(Reading::Precise, deadline);
        assert!(clock.read(Reading::Precise) >= deadline);
        // `Reading::None` never waits.
        clock.sleep_until_blocking(Reading::None, u64::MAX);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_coarse_clock_exists_on_linux_with_a_resolution_of_milliseconds() {
        let res = coarse_resolution_nanos().expect("CLOCK_MONOTONIC_COARSE on Linux");
        assert!(res <= 100_000_000, "{res} ns");
    }
}
