//! [`Watch`]: the breaker's story in one layout of a replay, from its events and those of the
//! guards inside it.

use std::collections::VecDeque;
use std::time::Duration;

use resilience_runtime::{CircuitState, SlidingWindow};

use super::Opening;

/// What the breaker recorded for one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Recorded {
    Success,
    /// A failure of the dependency (an error it returned).
    Dependency,
    /// The bulkhead's refusal, recorded as a failure (`record_rejections`).
    Bulkhead,
    /// The rate limiter's refusal, likewise.
    RateLimiter,
    /// The time limiter's cut-off (always a failure).
    TimeOut,
}

/// The breaker's story in one layout, from its events and those of the guards inside it.
///
/// A breaker's error event does not say what it recorded; a refusal by a guard inside the
/// breaker and the breaker's record of it happen in one poll of the call's task, one after the
/// other, so the refusal's event, kept with the task's id and the instant, names the next error
/// event of the same task at the same instant.
pub(super) struct Watch {
    window: SlidingWindow,
    /// The outcomes in the breaker's window, until it first opens.
    recent: VecDeque<(Duration, Recorded)>,
    pending: Option<(tokio::task::Id, Duration, Recorded)>,
    pub(super) openings: u32,
    pub(super) first_open: Option<Duration>,
    pub(super) open_since: Option<Duration>,
    pub(super) open_time: Duration,
    pub(super) opening: Option<Opening>,
    pub(super) failure_rate: Option<f32>,
    pub(super) slow_call_rate: Option<f32>,
}

impl Watch {
    pub(super) fn new(window: SlidingWindow) -> Watch {
        Watch {
            window,
            recent: VecDeque::new(),
            pending: None,
            openings: 0,
            first_open: None,
            open_since: None,
            open_time: Duration::ZERO,
            opening: None,
            failure_rate: None,
            slow_call_rate: None,
        }
    }

    /// A guard inside the breaker refused the call this task makes, at `now`, as `kind`.
    pub(super) fn refused(&mut self, now: Duration, kind: Recorded) {
        self.pending = tokio::task::try_id().map(|id| (id, now, kind));
    }

    /// The breaker recorded a call, at `now`.
    pub(super) fn recorded(&mut self, now: Duration, failed: bool) {
        let pending = self.pending.take();
        if self.first_open.is_some() {
            return;
        }
        let kind = match pending {
            _ if !failed => Recorded::Success,
            // The same task at the same instant: the refusal this record is of. (A refusal the
            // breaker did not record, a retry's inside it say, is left behind by the next.)
            Some((id, at, kind)) if at == now && tokio::task::try_id() == Some(id) => kind,
            _ => Recorded::Dependency,
        };
        self.recent.push_back((now, kind));
        match self.window {
            SlidingWindow::CountBased(calls) => {
                while self.recent.len() > calls as usize {
                    self.recent.pop_front();
                }
            }
            SlidingWindow::TimeBased(seconds) => {
                let since = now.saturating_sub(Duration::from_secs(u64::from(seconds)));
                while self.recent.front().is_some_and(|(t, _)| *t < since) {
                    self.recent.pop_front();
                }
            }
        }
    }

    pub(super) fn transition(&mut self, now: Duration, from: CircuitState, to: CircuitState) {
        if from == CircuitState::Open {
            if let Some(since) = self.open_since.take() {
                self.open_time += now - since;
            }
        }
        if to != CircuitState::Open {
            return;
        }
        self.openings += 1;
        self.open_since.get_or_insert(now);
        if self.first_open.is_some() {
            return;
        }
        self.first_open = Some(now);
        let count = |kind: Recorded| self.recent.iter().filter(|(_, k)| *k == kind).count() as u64;
        self.opening = Some(Opening {
            at: now,
            failure_rate: self.failure_rate,
            slow_call_rate: self.slow_call_rate,
            window_calls: self.recent.len() as u64,
            bulkhead_refusals: count(Recorded::Bulkhead),
            rate_limiter_refusals: count(Recorded::RateLimiter),
            time_outs: count(Recorded::TimeOut),
            dependency_failures: count(Recorded::Dependency),
        });
    }
}
