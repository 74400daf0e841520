//! [`RetryBudget`]: at most a ratio of a retry instance's first attempts may be retried (plus a
//! floor per second), over a sliding window of whole seconds, and the state that counts them.
//!
//! Why by hand: tower's `TpsBudget` keeps its balance in scaled integers and over-allocates for
//! fractional percentages (tower issue #857), and Polly has no budget. Here the ratio is held
//! in millionths and every comparison is an integer one, so a ratio of 0.1 allows exactly one
//! retry per ten first attempts; the property test in `tests/tests/retry_budget.rs` holds it to
//! a plain reference.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;

use crate::clock::{Clock, Reading};

use crate::error::ConfigError;

/// Millionths: the ratio's unit.
const MILLION: u64 = 1_000_000;

/// A retry budget: the retries of an instance, over its last `window`, are at most `ratio`
/// times its first attempts in that window plus `min_retries_per_second` per second of it.
/// Shared by every call of the instance, so that a fleet of retrying clients cannot multiply an
/// outage's load (Envoy's retry budget; Finagle's `RetryBudget`). A retry over budget is not
/// made: the call ends with its last attempt's error. A retry's allowance is spent when the
/// retry is decided, before its wait.
///
/// ```
/// use resilience_runtime::{RetryBudget, RetryConfig};
///
/// let config = RetryConfig::builder()
///     .max_attempts(3)
///     .budget(RetryBudget::ratio(0.2).min_retries_per_second(10))
///     .build()?;
/// assert_eq!(config.budget().map(|b| b.ratio_value()), Some(0.2));
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryBudget {
    ratio: f64,
    min_retries_per_second: u32,
    window: Duration,
}

impl RetryBudget {
    /// The default window: ten seconds (Finagle's).
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
    /// The longest window.
    pub const MAX_WINDOW: Duration = Duration::from_secs(3600);

    /// Retries of at most `ratio` times the first attempts (0.2: one retry per five calls),
    /// to the millionth; no floor; a window of ten seconds.
    pub fn ratio(ratio: f64) -> Self {
        RetryBudget {
            ratio,
            min_retries_per_second: 0,
            window: Self::DEFAULT_WINDOW,
        }
    }

    /// Retries allowed per second of the window whatever the first attempts, so that a
    /// quiet instance can still retry (default 0).
    #[must_use]
    pub fn min_retries_per_second(mut self, retries: u32) -> Self {
        self.min_retries_per_second = retries;
        self
    }

    /// The window over which first attempts and retries are counted, in whole seconds (1 s to
    /// 1 h; default 10 s).
    #[must_use]
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// The ratio.
    pub fn ratio_value(&self) -> f64 {
        self.ratio
    }

    /// The floor, in retries per second.
    pub fn min_retries_per_second_value(&self) -> u32 {
        self.min_retries_per_second
    }

    /// The window.
    pub fn window_value(&self) -> Duration {
        self.window
    }

    /// Checks the ratio (finite, from 0 to 1000) and the window (whole seconds, 1 s to 1 h).
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if !self.ratio.is_finite() || !(0.0..=1000.0).contains(&self.ratio) {
            return Err(ConfigError::new(
                "budget.ratio",
                format!(
                    "the ratio must be a number from 0 to 1000 (retries per first attempt), got {}",
                    self.ratio
                ),
            ));
        }
        let whole = self.window.subsec_nanos() == 0;
        if !whole || self.window < Duration::from_secs(1) || self.window > Self::MAX_WINDOW {
            return Err(ConfigError::new(
                "budget.window",
                format!(
                    "the window must be whole seconds from 1s to 1h, got {:?}",
                    self.window
                ),
            ));
        }
        Ok(())
    }

    /// The ratio in millionths, rounded down, so that the budget never allows more than the
    /// ratio (a ratio written with six decimals or fewer, such as 0.35, is exact: the nudge of
    /// a millionth of a millionth undoes its binary representation falling just short).
    fn ratio_millionths(&self) -> u64 {
        // Validated from 0 to 1000: the product fits.
        (self.ratio * MILLION as f64 + 1e-6).floor() as u64
    }
}

/// The counts of a [`RetryBudget`] for one retry instance: first attempts and retries per
/// second of the window, in a ring of one slot per second.
pub(crate) struct Budget {
    settings: RetryBudget,
    ratio: u64,
    seconds: u64,
    /// The slots are a power of two (at least `seconds`): a second's slot is `second & mask`.
    mask: u64,
    /// First attempts, per slot: the second (high 32 bits) and the count (low 32 bits), so
    /// that a deposit is one compare-and-swap and a slot of an earlier second reads as empty.
    firsts: Box<[AtomicU64]>,
    /// Retries, per slot, the same way; written only under `spend`, so that two retries never
    /// spend the same allowance.
    retries: Box<[AtomicU64]>,
    /// The latest second a retry was spent at: a caller whose reading is older counts as of
    /// it, so that no window a later caller sees lacks a retry spent before it.
    spend: Mutex<u64>,
}

const COUNT_BITS: u32 = 32;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

fn second_of(slot: u64) -> u64 {
    slot >> COUNT_BITS
}

fn count_of(slot: u64) -> u64 {
    slot & COUNT_MASK
}

impl Budget {
    /// The counts of `settings`, starting from `previous`'s when its window is the same (a
    /// reconfiguration of the ratio or the floor keeps what the window has seen).
    pub(crate) fn new(settings: RetryBudget, previous: Option<&Budget>) -> Self {
        let seconds = settings.window.as_secs().max(1);
        let slots = seconds.next_power_of_two();
        let kept = previous.filter(|p| p.seconds == seconds);
        let copy = |of: Option<&[AtomicU64]>| -> Box<[AtomicU64]> {
            (0..slots as usize)
                .map(|i| AtomicU64::new(of.map_or(0, |of| of[i].load(Ordering::Relaxed))))
                .collect()
        };
        Budget {
            ratio: settings.ratio_millionths(),
            seconds,
            mask: slots - 1,
            firsts: copy(kept.map(|p| &*p.firsts)),
            retries: copy(kept.map(|p| &*p.retries)),
            spend: Mutex::new(
                kept.map_or(0, |p| *p.spend.lock().unwrap_or_else(|e| e.into_inner())),
            ),
            settings,
        }
    }

    /// The settings it counts by.
    pub(crate) fn settings(&self) -> &RetryBudget {
        &self.settings
    }

    /// Counts a first attempt at clock second `second`.
    pub(crate) fn deposit(&self, second: u64) {
        add(&self.firsts, self.mask, second);
    }

    /// Spends one retry at clock second `second` if the window allows it: `false` if not.
    pub(crate) fn try_spend(&self, second: u64) -> bool {
        let mut latest = self.spend.lock().unwrap_or_else(|p| p.into_inner());
        let second = second.max(*latest);
        *latest = second;
        let firsts = sum(&self.firsts, self.seconds, second);
        let retries = sum(&self.retries, self.seconds, second);
        // In 128 bits: a ratio of 1000 over billions of first attempts does not wrap.
        let floor = u128::from(self.settings.min_retries_per_second) * u128::from(self.seconds);
        let allowed = u128::from(self.ratio) * u128::from(firsts) + floor * u128::from(MILLION);
        if allowed < (u128::from(retries) + 1) * u128::from(MILLION) {
            return false;
        }
        add(&self.retries, self.mask, second);
        true
    }
}

/// The budget of an instance (a retry's, a hedge's), if its configuration has one: the
/// counts, whether there are any (a call without a budget reads the flag alone), and the
/// clock the seconds are read from.
pub(crate) struct Budgeted {
    counts: ArcSwapOption<Budget>,
    present: AtomicBool,
    clock: Clock,
    /// The coarse clock where there is one (the budget counts whole seconds).
    reading: Reading,
}

impl Budgeted {
    /// The budget of `settings` (none without), on `clock`.
    pub(crate) fn new(settings: Option<&RetryBudget>, clock: &Clock) -> Self {
        let counts = settings.map(|b| Arc::new(Budget::new(*b, None)));
        Budgeted {
            present: AtomicBool::new(counts.is_some()),
            counts: ArcSwapOption::new(counts),
            reading: match clock.coarse_resolution() {
                Some(_) => Reading::Coarse,
                None => Reading::Precise,
            },
            clock: clock.clone(),
        }
    }

    /// Whether there is a budget: the one read a call without one makes.
    #[inline]
    pub(crate) fn present(&self) -> bool {
        self.present.load(Ordering::Relaxed)
    }

    /// A new configuration's budget: the counts kept while the window stays the same (a new
    /// ratio or floor applies to the counts so far); a new window starts empty.
    pub(crate) fn reconfigure(&self, settings: Option<&RetryBudget>) {
        let current = self.counts.load_full();
        if current.as_deref().map(Budget::settings) != settings {
            let counts = settings.map(|b| Arc::new(Budget::new(*b, current.as_deref())));
            self.present.store(counts.is_some(), Ordering::Relaxed);
            self.counts.store(counts);
        }
    }

    fn second(&self) -> u64 {
        self.clock.read(self.reading) / 1_000_000_000
    }

    /// Counts a call (a first attempt) against the budget. Out of line: only an instance
    /// with a budget calls it.
    #[inline(never)]
    pub(crate) fn deposit(&self) {
        if let Some(counts) = self.counts.load().as_deref() {
            counts.deposit(self.second());
        }
    }

    /// Whether the budget allows one more attempt now (spending it); `true` without one.
    pub(crate) fn try_spend(&self) -> bool {
        match self.counts.load().as_deref() {
            Some(counts) => counts.try_spend(self.second()),
            None => true,
        }
    }
}

/// Adds one to the slot of `second`, restarting it if it held an earlier second.
fn add(slots: &[AtomicU64], mask: u64, second: u64) {
    // A second fits 32 bits for 136 years of a clock's life.
    let second = second & COUNT_MASK;
    let slot = &slots[(second & mask) as usize];
    let mut current = slot.load(Ordering::Relaxed);
    loop {
        let next = match second_of(current) {
            s if s == second => current + 1,
            s if s < second || current == 0 => (second << COUNT_BITS) | 1,
            // A reading of a second already passed by another caller: counted in its slot's
            // second, within a second of its own.
            _ => current + 1,
        };
        match slot.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(now) => current = now,
        }
    }
}

/// The counts of the window ending at `second` (its last `seconds` seconds, this one included).
fn sum(slots: &[AtomicU64], seconds: u64, second: u64) -> u64 {
    let second = second & COUNT_MASK;
    slots
        .iter()
        .map(|slot| slot.load(Ordering::Relaxed))
        .filter(|&slot| {
            let s = second_of(slot);
            s <= second && second - s < seconds && count_of(slot) > 0
        })
        .map(count_of)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenth_allows_exactly_one_retry_per_ten_first_attempts() {
        let budget = Budget::new(RetryBudget::ratio(0.1), None);
        for _ in 0..9 {
            budget.deposit(5);
        }
        assert!(!budget.try_spend(5), "nine first attempts: 0.9 of a retry");
        budget.deposit(5);
        assert!(budget.try_spend(5), "ten: one retry");
        assert!(!budget.try_spend(5), "and only one");
        for _ in 0..10 {
            budget.deposit(6);
        }
        assert!(
            budget.try_spend(6),
            "20 first attempts in the window: a second retry"
        );
        // Second 5 has left the window at 15: 10 first attempts and 1 retry are left in it.
        assert!(!budget.try_spend(15));
        // And second 6 at 16: nothing is left.
        assert!(!budget.try_spend(16));
        for _ in 0..10 {
            budget.deposit(16);
        }
        assert!(budget.try_spend(16));
    }

    #[test]
    fn the_floor_allows_retries_without_first_attempts() {
        let budget = Budget::new(
            RetryBudget::ratio(0.0)
                .min_retries_per_second(1)
                .window(Duration::from_secs(2)),
            None,
        );
        assert!(budget.try_spend(0));
        assert!(budget.try_spend(0));
        assert!(!budget.try_spend(0), "1 a second over a window of 2");
        assert!(budget.try_spend(2), "the first two have left the window");
    }
}
