//! [`Wait`]: how long a caller who finds no free permit waits, as the configuration says, in
//! one word the hot path reads.

use std::time::Duration;

/// How long a caller who finds no free permit waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wait {
    /// Not at all: rejected at once.
    Reject,
    /// Up to this long.
    For(Duration),
    /// Until a permit is free, with no timer.
    Forever,
}

impl Wait {
    /// A zero wait rejects at once; a wait as long as the clock can count in nanoseconds or
    /// longer (some 584 years, e.g. `Duration::MAX`) waits forever.
    pub(super) fn from_config(wait: Duration) -> Self {
        if wait.is_zero() {
            Wait::Reject
        } else if wait.as_nanos() >= u128::from(u64::MAX) {
            Wait::Forever
        } else {
            Wait::For(wait)
        }
    }

    /// The wait in one word: 0 rejects, `u64::MAX` waits forever, anything else is the wait
    /// in nanoseconds.
    pub(super) fn to_nanos(self) -> u64 {
        match self {
            Wait::Reject => 0,
            // Below u64::MAX nanoseconds (`from_config`): lossless.
            Wait::For(wait) => wait.as_nanos() as u64,
            Wait::Forever => u64::MAX,
        }
    }

    pub(super) fn from_nanos(nanos: u64) -> Self {
        match nanos {
            0 => Wait::Reject,
            u64::MAX => Wait::Forever,
            nanos => Wait::For(Duration::from_nanos(nanos)),
        }
    }
}
