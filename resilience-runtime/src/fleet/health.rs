//! Whether an instance's Redis answers, and when to try it again if not.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::deadline_after;

/// An instance's view of Redis: up, or down until a reading of its clock, after which one
/// call tries Redis again (the probe) while the others keep to the fallback.
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// 0 while Redis answers; else the reading (ns, at least 1) after which to try it again.
    down_until: AtomicU64,
}

/// Where a call goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// Redis answers: ask it.
    Redis,
    /// Redis did not answer; this call tries it again.
    Probe,
    /// Redis did not answer; the fallback decides.
    Fallback,
}

impl Health {
    pub(crate) fn new() -> Self {
        Health::default()
    }

    /// A new instance's view, the same as `self`'s (a reconfigured instance on the same Redis).
    pub(crate) fn carried(&self) -> Self {
        Health {
            down_until: AtomicU64::new(self.down_until.load(Ordering::Acquire)),
        }
    }

    /// Where a call at `now` goes. Of the calls after the retry time, one wins the probe.
    pub(crate) fn route(&self, now: u64) -> Route {
        let until = self.down_until.load(Ordering::Acquire);
        if until == 0 {
            return Route::Redis;
        }
        if now < until {
            return Route::Fallback;
        }
        // The next probe a little later, in case this one hangs for its whole timeout.
        let next = deadline_after(now, Duration::from_millis(100)).max(1);
        match self
            .down_until
            .compare_exchange(until, next, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Route::Probe,
            Err(_) => Route::Fallback,
        }
    }

    /// Redis did not answer at `now`: down for `retry` (the first time, `true`: tell it).
    pub(crate) fn failed(&self, now: u64, retry: Duration) -> bool {
        let until = deadline_after(now, retry).max(1);
        self.down_until.swap(until, Ordering::AcqRel) == 0
    }

    /// Redis answered: up (`true` if it was down: tell it).
    pub(crate) fn answered(&self) -> bool {
        self.down_until.load(Ordering::Relaxed) != 0
            && self.down_until.swap(0, Ordering::AcqRel) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn one_call_probes_after_the_retry_time_the_others_fall_back() {
        let health = Health::new();
        assert_eq!(health.route(5), Route::Redis);
        assert!(
            health.failed(10, Duration::from_secs(1)),
            "the first failure is told"
        );
        assert!(
            !health.failed(11, Duration::from_secs(1)),
            "a second one is not"
        );
        assert_eq!(health.route(SECOND), Route::Fallback);
        assert_eq!(health.route(11 + SECOND), Route::Probe);
        assert_eq!(
            health.route(12 + SECOND),
            Route::Fallback,
            "one probe at a time"
        );
        assert!(health.answered(), "back up is told");
        assert!(!health.answered());
        assert_eq!(health.route(13 + SECOND), Route::Redis);
    }
}
