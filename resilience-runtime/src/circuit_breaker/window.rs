//! The sliding windows of the closed state: a ring of one outcome byte per call
//! (count-based), or one small bucket per second (time-based). Both keep running totals, so
//! recording and reading are O(1) whatever the window size.

use super::config::SlidingWindow;

/// One recorded call: whether it failed and whether it was slow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Outcome(u8);

impl Outcome {
    const FAILED: u8 = 1;
    const SLOW: u8 = 2;

    pub(crate) fn new(failed: bool, slow: bool) -> Self {
        Outcome((u8::from(failed) * Self::FAILED) | (u8::from(slow) * Self::SLOW))
    }

    pub(crate) fn failed(self) -> bool {
        self.0 & Self::FAILED != 0
    }

    pub(crate) fn slow(self) -> bool {
        self.0 & Self::SLOW != 0
    }
}

/// Running totals of a set of recorded calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) calls: u64,
    pub(crate) failed: u64,
    pub(crate) slow: u64,
    pub(crate) slow_failed: u64,
}

impl Totals {
    pub(crate) fn add(&mut self, outcome: Outcome) {
        self.calls += 1;
        self.failed += u64::from(outcome.failed());
        self.slow += u64::from(outcome.slow());
        self.slow_failed += u64::from(outcome.failed() && outcome.slow());
    }

    fn remove(&mut self, outcome: Outcome) {
        self.calls -= 1;
        self.failed -= u64::from(outcome.failed());
        self.slow -= u64::from(outcome.slow());
        self.slow_failed -= u64::from(outcome.failed() && outcome.slow());
    }

    fn remove_bucket(&mut self, bucket: &Bucket) {
        self.calls -= u64::from(bucket.calls);
        self.failed -= u64::from(bucket.failed);
        self.slow -= u64::from(bucket.slow);
        self.slow_failed -= u64::from(bucket.slow_failed);
    }

    /// Failed calls in percent of all, as Resilience4j computes it.
    pub(crate) fn failure_rate(&self) -> f32 {
        rate(self.failed, self.calls)
    }

    /// Slow calls in percent of all.
    pub(crate) fn slow_call_rate(&self) -> f32 {
        rate(self.slow, self.calls)
    }
}

fn rate(part: u64, all: u64) -> f32 {
    if all == 0 {
        0.0
    } else {
        part as f32 * 100.0 / all as f32
    }
}

/// The sliding window of the closed (and metrics-only) state.
#[derive(Debug)]
pub(crate) enum Window {
    Count(CountWindow),
    Time(TimeWindow),
}

impl Window {
    pub(crate) fn new(kind: SlidingWindow) -> Self {
        match kind {
            SlidingWindow::CountBased(n) => Window::Count(CountWindow::new(n)),
            SlidingWindow::TimeBased(n) => Window::Time(TimeWindow::new(n)),
        }
    }

    /// Records one call that ended at `now_nanos`.
    #[inline]
    pub(crate) fn record(&mut self, outcome: Outcome, now_nanos: u64) {
        match self {
            Window::Count(w) => w.record(outcome),
            Window::Time(w) => w.record(outcome, now_nanos),
        }
    }

    /// The totals of the calls still in the window at `now_nanos`.
    #[inline]
    pub(crate) fn totals(&mut self, now_nanos: u64) -> Totals {
        match self {
            Window::Count(w) => w.totals,
            Window::Time(w) => {
                w.advance(second_of(now_nanos));
                w.totals
            }
        }
    }

    /// Forgets every call.
    pub(crate) fn clear(&mut self) {
        match self {
            Window::Count(w) => w.clear(),
            Window::Time(w) => w.clear(),
        }
    }
}

fn second_of(nanos: u64) -> u64 {
    nanos / 1_000_000_000
}

/// The last `slots.len()` calls, in a ring of outcome bytes.
#[derive(Debug)]
pub(crate) struct CountWindow {
    slots: Box<[Outcome]>,
    /// The slot the next call is written to.
    head: usize,
    /// The number of slots holding a call.
    len: usize,
    totals: Totals,
}

impl CountWindow {
    fn new(size: u32) -> Self {
        let size = usize::try_from(size.max(1)).unwrap_or(1);
        CountWindow {
            slots: vec![Outcome(0); size].into_boxed_slice(),
            head: 0,
            len: 0,
            totals: Totals::default(),
        }
    }

    fn record(&mut self, outcome: Outcome) {
        let size = self.slots.len();
        let slot = &mut self.slots[self.head];
        if self.len < size {
            self.len += 1;
            self.totals.add(outcome);
        } else if *slot != outcome {
            // A full window replacing a call by one of the same kind (the steady state of a
            // healthy dependency) leaves the totals as they are.
            self.totals.remove(*slot);
            self.totals.add(outcome);
        }
        *slot = outcome;
        self.head += 1;
        if self.head == size {
            self.head = 0;
        }
    }

    /// O(1): the slots past `len` are overwritten before they are read again.
    fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
        self.totals = Totals::default();
    }
}

/// The calls of one second of a time-based window.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// The second (since the clock's origin) the counts belong to. A bucket whose second is
    /// not within the window holds stale counts that are not part of the totals.
    second: u64,
    calls: u32,
    failed: u32,
    slow: u32,
    slow_failed: u32,
}

impl Bucket {
    const EMPTY: Bucket = Bucket {
        second: u64::MAX,
        calls: 0,
        failed: 0,
        slow: 0,
        slow_failed: 0,
    };

    fn add(&mut self, outcome: Outcome) {
        self.calls = self.calls.saturating_add(1);
        self.failed = self.failed.saturating_add(u32::from(outcome.failed()));
        self.slow = self.slow.saturating_add(u32::from(outcome.slow()));
        self.slow_failed = self
            .slow_failed
            .saturating_add(u32::from(outcome.failed() && outcome.slow()));
    }
}

/// The calls of the last `buckets.len()` seconds, in one bucket per second.
///
/// Invariant: `totals` is the sum of the buckets whose `second` lies in
/// `(latest - len, latest]`; bucket `s % len` is the only one that can hold second `s`.
#[derive(Debug)]
pub(crate) struct TimeWindow {
    buckets: Box<[Bucket]>,
    /// The latest second seen.
    latest: u64,
    /// `index(latest)`, kept so that a call of the latest second (nearly every call) costs no
    /// division.
    latest_index: usize,
    totals: Totals,
}

impl TimeWindow {
    fn new(seconds: u32) -> Self {
        let seconds = usize::try_from(seconds.max(1)).unwrap_or(1);
        TimeWindow {
            buckets: vec![Bucket::EMPTY; seconds].into_boxed_slice(),
            latest: 0,
            latest_index: 0,
            totals: Totals::default(),
        }
    }

    fn len(&self) -> u64 {
        self.buckets.len() as u64
    }

    fn index(&self, second: u64) -> usize {
        // The remainder is below `buckets.len()`, so it fits a usize.
        (second % self.len()) as usize
    }

    /// Moves the window's end to `second`, evicting the seconds that leave it: O(seconds
    /// elapsed) up to the window length, O(1) for a gap of a whole window or more.
    fn advance(&mut self, second: u64) {
        if second <= self.latest {
            return;
        }
        let len = self.len();
        if second - self.latest >= len {
            // Every bucket is now out of the window; their stale counts are reset lazily.
            self.totals = Totals::default();
        } else {
            for leaving_at in self.latest + 1..=second {
                let Some(expired) = leaving_at.checked_sub(len) else {
                    continue; // before the clock's origin: nothing to evict
                };
                let index = self.index(leaving_at);
                let bucket = self.buckets[index];
                if bucket.second == expired {
                    self.totals.remove_bucket(&bucket);
                    self.buckets[index] = Bucket::EMPTY;
                }
            }
        }
        self.latest = second;
        self.latest_index = self.index(second);
    }

    fn record(&mut self, outcome: Outcome, now_nanos: u64) {
        let second = second_of(now_nanos);
        self.advance(second);
        // A call that ended before the window's start (a racing thread moved it on) is dropped.
        if second + self.len() <= self.latest {
            return;
        }
        let index = if second == self.latest {
            self.latest_index
        } else {
            self.index(second)
        };
        let bucket = &mut self.buckets[index];
        if bucket.second != second {
            *bucket = Bucket {
                second,
                ..Bucket::EMPTY
            };
        }
        bucket.add(outcome);
        self.totals.add(outcome);
    }

    fn clear(&mut self) {
        self.buckets.fill(Bucket::EMPTY);
        self.totals = Totals::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;
    const OK: Outcome = Outcome(0);
    const FAIL: Outcome = Outcome(Outcome::FAILED);
    const SLOW_FAIL: Outcome = Outcome(Outcome::FAILED | Outcome::SLOW);
    const SLOW_OK: Outcome = Outcome(Outcome::SLOW);

    #[test]
    fn an_outcome_is_one_byte() {
        assert_eq!(std::mem::size_of::<Outcome>(), 1);
        assert!(std::mem::size_of::<Bucket>() <= 24);
        assert!(Outcome::new(true, true).failed() && Outcome::new(true, true).slow());
        assert_eq!(Outcome::new(false, false), OK);
    }

    #[test]
    fn count_window_evicts_the_oldest_call() {
        let mut w = Window::new(SlidingWindow::CountBased(3));
        w.record(FAIL, 0);
        w.record(SLOW_OK, 0);
        w.record(OK, 0);
        let t = w.totals(0);
        assert_eq!((t.calls, t.failed, t.slow, t.slow_failed), (3, 1, 1, 0));
        w.record(SLOW_FAIL, 0); // evicts FAIL
        let t = w.totals(0);
        assert_eq!((t.calls, t.failed, t.slow, t.slow_failed), (3, 1, 2, 1));
        w.record(OK, 0); // evicts SLOW_OK
        w.record(OK, 0); // evicts OK
        let t = w.totals(0);
        assert_eq!((t.calls, t.failed, t.slow, t.slow_failed), (3, 1, 1, 1));
        w.clear();
        assert_eq!(w.totals(0), Totals::default());
        w.record(FAIL, 0);
        assert_eq!(w.totals(0).calls, 1);
        assert_eq!(w.totals(0).failed, 1);
    }

    #[test]
    fn a_large_count_window_is_one_byte_per_call() {
        let w = CountWindow::new(10_000);
        assert_eq!(std::mem::size_of_val(&*w.slots), 10_000);
    }

    #[test]
    fn time_window_expires_whole_seconds() {
        let mut w = Window::new(SlidingWindow::TimeBased(3));
        w.record(FAIL, 0); // second 0
        w.record(OK, SECOND / 2); // second 0
        w.record(OK, SECOND); // second 1
        w.record(SLOW_OK, 2 * SECOND + 999_999_999); // second 2
        assert_eq!(w.totals(2 * SECOND).calls, 4);
        // Second 3 starts: second 0 leaves the window.
        let t = w.totals(3 * SECOND);
        assert_eq!((t.calls, t.failed, t.slow), (2, 0, 1));
        // Second 4: second 1 leaves.
        assert_eq!(w.totals(4 * SECOND + 5).calls, 1);
        // Second 5: second 2 leaves.
        assert_eq!(w.totals(5 * SECOND).calls, 0);
    }

    #[test]
    fn time_window_long_gap_resets_and_reuses_stale_buckets() {
        let mut w = Window::new(SlidingWindow::TimeBased(4));
        for s in 0..4 {
            w.record(FAIL, s * SECOND);
        }
        assert_eq!(w.totals(3 * SECOND).calls, 4);
        // A gap of exactly the window length empties it.
        assert_eq!(w.totals(7 * SECOND).calls, 0);
        // Buckets still holding seconds 0..4 are stale: recording at second 8 (bucket 0)
        // must not count second 0, and advancing past bucket 1 must not subtract second 1.
        w.record(OK, 8 * SECOND);
        let t = w.totals(8 * SECOND);
        assert_eq!((t.calls, t.failed), (1, 0));
        w.record(OK, 9 * SECOND);
        w.record(OK, 10 * SECOND);
        w.record(OK, 11 * SECOND);
        assert_eq!(w.totals(11 * SECOND).calls, 4);
        assert_eq!(w.totals(12 * SECOND).calls, 3);
        assert_eq!(w.totals(1_000 * SECOND).calls, 0);
    }

    #[test]
    fn time_window_accepts_a_late_call_within_the_window_and_drops_an_older_one() {
        let mut w = Window::new(SlidingWindow::TimeBased(3));
        w.record(OK, 10 * SECOND);
        // A racing thread read the clock at second 9, before the call of second 10 was
        // recorded: it still belongs to the window.
        w.record(FAIL, 9 * SECOND);
        assert_eq!(w.totals(10 * SECOND).failed, 1);
        // Second 7 is out of the window (8, 9, 10): dropped.
        w.record(FAIL, 7 * SECOND);
        assert_eq!(w.totals(10 * SECOND).calls, 2);
        // Second 9 leaves at second 12.
        assert_eq!(w.totals(12 * SECOND).failed, 0);
    }

    #[test]
    fn time_window_clear_forgets_calls_of_the_current_seconds() {
        let mut w = Window::new(SlidingWindow::TimeBased(2));
        w.record(FAIL, 5 * SECOND);
        w.clear();
        assert_eq!(w.totals(5 * SECOND).calls, 0);
        w.record(OK, 5 * SECOND);
        assert_eq!(w.totals(6 * SECOND).calls, 1);
        assert_eq!(w.totals(7 * SECOND).calls, 0);
    }

    #[test]
    fn rates_are_percentages() {
        let mut t = Totals::default();
        for o in [FAIL, OK, SLOW_OK, SLOW_FAIL] {
            t.add(o);
        }
        assert_eq!(t.failure_rate(), 50.0);
        assert_eq!(t.slow_call_rate(), 50.0);
        assert_eq!(Totals::default().failure_rate(), 0.0);
    }
}
