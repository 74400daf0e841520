//! What a breaker derives from its configuration and its clock, computed before any lock is
//! taken: how it times calls and reads its window (its clock policy), and its thresholds.

use std::fmt;

use super::window::Totals;
use super::{duration_nanos, CircuitBreakerConfig, SlidingWindow, NEVER_SLOW};
use crate::clock::{Clock, Reading};
use crate::sync::{AtomicU8, Ordering};

/// How a breaker times its calls for the slow-call rule, chosen once: no clock when the rule is
/// off, the coarse clock when its resolution is at most 1 % of the threshold, else the precise
/// clock. `coarse_resolution` is [`Clock::coarse_resolution`]: `None` for a manual clock.
pub(super) fn call_reading(slow_call_nanos: u64, coarse_resolution: Option<u64>) -> Reading {
    if slow_call_nanos == NEVER_SLOW {
        return Reading::None;
    }
    match coarse_resolution {
        Some(resolution) if resolution.saturating_mul(100) <= slow_call_nanos => Reading::Coarse,
        _ => Reading::Precise,
    }
}

/// The one clock reading every operation of a breaker's sliding window uses (a record and
/// every read of the totals: they must share one timeline). A count-based window needs none; a
/// time-based one takes the coarse clock when its resolution is at most 10 ms (1 % of a bucket
/// of one second), else the precise clock.
pub(super) fn window_reading(window: SlidingWindow, coarse_resolution: Option<u64>) -> Reading {
    const MAX_COARSE_RESOLUTION: u64 = 10_000_000;
    match window {
        SlidingWindow::CountBased(_) => Reading::None,
        SlidingWindow::TimeBased(_) => match coarse_resolution {
            Some(resolution) if resolution <= MAX_COARSE_RESOLUTION => Reading::Coarse,
            _ => Reading::Precise,
        },
    }
}

/// `minimum_number_of_calls` as the breaker applies it: capped by the size of a count window.
pub(super) fn minimum_calls(config: &CircuitBreakerConfig) -> u64 {
    let minimum = match config.sliding_window() {
        SlidingWindow::CountBased(size) => config.minimum_number_of_calls().min(size),
        SlidingWindow::TimeBased(_) => config.minimum_number_of_calls(),
    };
    u64::from(minimum)
}

/// A [`Reading`] that can change while other threads read it: one byte, loaded `Relaxed` (a
/// plain load on the platforms we run on). Written only under both of the breaker's locks.
pub(super) struct AtomicReading(AtomicU8);

impl AtomicReading {
    pub(super) fn new(reading: Reading) -> Self {
        AtomicReading(AtomicU8::new(Self::code(reading)))
    }

    pub(super) const fn code(reading: Reading) -> u8 {
        match reading {
            Reading::None => 0,
            Reading::Coarse => 1,
            Reading::Precise => 2,
        }
    }

    #[inline(always)]
    pub(super) fn load(&self) -> Reading {
        Self::decode(self.load_code())
    }

    /// The reading's code: compare it with [`code`](Self::code) of another reading rather than
    /// decoding it (the compiler does not know the byte is a valid code, so a decoded
    /// comparison costs a few instructions on the closed path).
    #[inline(always)]
    pub(super) fn load_code(&self) -> u8 {
        self.0.load(Ordering::Relaxed)
    }

    #[inline(always)]
    pub(super) fn decode(code: u8) -> Reading {
        match code {
            0 => Reading::None,
            1 => Reading::Coarse,
            _ => Reading::Precise,
        }
    }

    pub(super) fn store(&self, reading: Reading) {
        self.0.store(Self::code(reading), Ordering::Relaxed);
    }
}

impl fmt::Debug for AtomicReading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.load(), f)
    }
}

/// The rate thresholds of a configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Thresholds {
    pub(super) failure_rate: f32,
    pub(super) slow_call_rate: f32,
}

impl Thresholds {
    pub(super) fn of(config: &CircuitBreakerConfig) -> Self {
        Thresholds {
            failure_rate: config.failure_rate_threshold(),
            slow_call_rate: config.slow_call_rate_threshold(),
        }
    }

    /// `Some((failure rate exceeded, slow-call rate exceeded))` if either is.
    #[inline]
    pub(super) fn exceeded(self, totals: Totals) -> Option<(bool, bool)> {
        let failure = totals.failure_rate() >= self.failure_rate;
        let slow = totals.slow_call_rate() >= self.slow_call_rate;
        (failure || slow).then_some((failure, slow))
    }
}

/// What a breaker derives from its configuration and its clock, computed before any lock is
/// taken (at creation and by [`CircuitBreaker::reconfigure`]), then installed under both locks.
pub(super) struct Derived {
    pub(super) call_reading: Reading,
    pub(super) window_reading: Reading,
    pub(super) slow_call_nanos: u64,
    pub(super) automatic: bool,
    pub(super) record_rejections: bool,
    pub(super) record_call_durations: bool,
    pub(super) minimum_calls: u64,
    pub(super) thresholds: Thresholds,
}

impl Derived {
    pub(super) fn new(config: &CircuitBreakerConfig, clock: &Clock) -> Self {
        let slow_call_nanos = duration_nanos(config.slow_call_duration_threshold());
        let coarse_resolution = clock.coarse_resolution();
        let record_call_durations = config.record_call_durations();
        Derived {
            // A histogram of durations from 1 ms up needs the precise clock.
            call_reading: if record_call_durations {
                Reading::Precise
            } else {
                call_reading(slow_call_nanos, coarse_resolution)
            },
            window_reading: window_reading(config.sliding_window(), coarse_resolution),
            slow_call_nanos,
            automatic: config.automatic_transition_from_open_to_half_open(),
            record_rejections: config.record_rejections(),
            record_call_durations,
            minimum_calls: minimum_calls(config),
            thresholds: Thresholds::of(config),
        }
    }
}
