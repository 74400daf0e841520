//! [`Knee`]: the limit algorithm of this library. It finds the most calls the dependency
//! holds before they queue (the knee of its latency curve) by running a probe limit between
//! two phases at the current estimate and comparing their latencies.
//!
//! Why another beside Netflix's three: those read a latency above a baseline as a queue. A
//! dependency that slows down (a colder cache, a busier database) raises every call's latency
//! whatever their number, so they either cut the limit as it slows or, with a long-term
//! average for baseline, follow the latency up and let a queue grow (the drill shows both,
//! docs/overload-drill.md). A queue raises latency with the number of calls: phases a few
//! round trips apart see the same service time, so the ratio of their latencies reads the
//! queue alone; a probe between two phases at the estimate cancels a service time that moves
//! steadily meanwhile. The knee of a dependency with a fixed number of workers is that
//! number, whatever its service time.
//!
//! ```text
//! phase   at one limit, until 1.25 × the average latency, 8 samples and 3 calls admitted in
//!         it have ended; a sample belongs to the phase its call was admitted in; a phase's
//!         calls: its calls in flight on average, at most its limit
//! cycle   phases at the knee (4 once it holds, else 1), a probe phase, a phase at the knee,
//!         one more while the probe's calls end; then the probe is judged against the two
//!         phases at the knee around it (their latencies averaged: a steady drift cancels)
//! probe   up: knee × width;  down: min(knee, the calls the demand made) / width (it must
//!         bind); always down while the demand does not fill the limit (an up probe cannot
//!         bind); the first goes toward the demand (up if it filled the initial limit);
//!         width 4 until a queue is first seen, then within [1.15, 2]
//! judge   lo, hi = the probe and the knee phases, fewer calls first
//!         est  = hi.calls × rtt(lo) / rtt(hi)   (no queue at lo: rtt(lo) is the service
//!                time; past the knee a call waits for those ahead, rtt grows with calls)
//!         flat = rtt(hi) within 2 σ of rtt(lo) (σ: their means' noise), or est ≥ 0.95 hi
//!         skip (and probe the other way) if hi < 1.1 lo (the demand held the probe); skip
//!         if a step (the knee phases' latencies 2× apart, beyond their calls' ratio) or
//!         more latency than calls (no queue does that)
//!   up probe:   flat → knee = hi.calls, width² (the demand held hi: knee = max(knee,
//!               min(2 hi.calls, the probe's limit)), room for the demand; down next)
//!               est ≥ 1.05 lo → knee = est, narrower, down next
//!               else → a queue at the knee already: narrower, down next
//!   down probe: flat → no queue at the knee: narrower, up next (the demand held the knee
//!               phases: no probe until that demand grows 15 %)
//!               est ≤ 1.05 lo → a queue at the probe too: knee = est, width², down again
//!               else → knee = est, narrower, up next
//!   narrower = √width; once narrow, knee moves half way to est (one probe's noise, half)
//! a drop (a time-out, a call given up, an overload), at the end of its phase: knee = 0.9 ×
//!   min(knee, limit), a probe down after one phase; no startup steps after
//! ```

use super::sample::{Estimates, Sample};

#[derive(Clone, Debug)]
pub(super) struct Knee {
    limit: f64,
    bounds: (f64, f64),
    knee: f64,
    /// The probe's distance from the knee, as a factor.
    width: f64,
    /// Whether the next probe goes below the knee.
    down: bool,
    step: Step,
    /// A call was dropped since the last phase began.
    dropped: bool,
    /// Calls the demand held that a probe found no queue at (0: none).
    free_below: f64,
    /// Whether a probe was judged yet, and whether one found a queue.
    judged: bool,
    queue_seen: bool,
    /// The last four phases, the current one last.
    phases: [Phase; 4],
    /// An average of the latencies, for the length of a phase; 0 before the first sample.
    rtt_avg: f64,
    /// The latency of the last judgement's lower phase, and of the last sample (metrics).
    baseline_rtt: f64,
    last_rtt: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// At the knee for this many more phases, the probe after.
    Hold(u8),
    Probe,
    After,
    Judge,
}

#[derive(Clone, Copy, Debug, Default)]
struct Phase {
    start: u64,
    /// The limit in force, in whole calls.
    limit: f64,
    /// The latencies of the calls admitted in it: sum, sum of squares, count.
    rtt_sum: f64,
    rtt_squares: f64,
    admitted: u32,
    /// Its releases, those with the limit full, and their calls in flight.
    released: u32,
    full: u32,
    inflight_sum: f64,
}

impl Phase {
    fn new(start: u64, limit: f64) -> Self {
        Phase {
            start,
            limit: limit.floor(),
            ..Phase::default()
        }
    }

    /// Whether the calls filled the limit: the demand, not the limit, held them otherwise.
    fn filled(&self) -> bool {
        self.released > 0 && f64::from(self.full) >= 0.5 * f64::from(self.released)
    }

    /// The calls in flight with the calls admitted in it: on average over its releases, and
    /// at most its limit (above it, calls admitted before it are still ending).
    fn calls(&self) -> f64 {
        (self.inflight_sum / f64::from(self.released.max(1))).min(self.limit)
    }

    fn rtt(&self) -> Option<f64> {
        (self.admitted >= 3).then(|| self.rtt_sum / f64::from(self.admitted))
    }

    /// The variance of its mean latency relative to the mean squared: how far chance moves
    /// it.
    fn noise(&self) -> f64 {
        let n = f64::from(self.admitted.max(2));
        let mean = self.rtt_sum / n;
        let variance = (self.rtt_squares / n - mean * mean).max(0.0) * n / (n - 1.0);
        variance / n / (mean * mean).max(f64::MIN_POSITIVE)
    }
}

/// What a judgement compares: calls, latency and its noise (relative variance of the mean).
#[derive(Clone, Copy, Debug)]
struct Point {
    calls: f64,
    rtt: f64,
    noise: f64,
    filled: bool,
}

/// A phase's length, in average latencies, and its fewest samples.
const PHASE: f64 = 1.25;
const MIN_SAMPLES: u32 = 8;
const MIN_WIDTH: f64 = 1.15;
const MAX_WIDTH: f64 = 2.0;
/// The widest step until a probe first finds a queue: the knee may be far from the start.
const STARTUP_WIDTH: f64 = 4.0;
/// The phases at the knee before the next probe once the knee holds.
const HOLD: u8 = 4;

impl Knee {
    pub(super) fn new(limit: f64, bounds: (f64, f64)) -> Self {
        Knee {
            limit,
            bounds,
            knee: limit,
            width: STARTUP_WIDTH,
            down: false,
            step: Step::Hold(1),
            dropped: false,
            free_below: 0.0,
            judged: false,
            queue_seen: false,
            phases: [Phase::default(); 4],
            rtt_avg: 0.0,
            baseline_rtt: 0.0,
            last_rtt: 0.0,
        }
    }

    pub(super) fn limit(&self) -> f64 {
        self.limit
    }

    pub(super) fn estimates(&self) -> Estimates {
        Estimates {
            baseline_rtt: self.baseline_rtt,
            sample_rtt: self.last_rtt,
        }
    }

    pub(super) fn sample(&mut self, s: &Sample) -> f64 {
        let rtt = s.rtt as f64;
        self.last_rtt = rtt;
        if self.rtt_avg == 0.0 {
            self.rtt_avg = rtt;
            self.phases[3] = Phase::new(s.now, self.limit);
        }
        self.rtt_avg += (rtt - self.rtt_avg) * 0.05;
        self.dropped |= s.dropped;
        let admitted_at = s.now.saturating_sub(s.rtt);
        if let Some(phase) = self
            .phases
            .iter_mut()
            .rev()
            .find(|p| p.start <= admitted_at)
        {
            phase.rtt_sum += rtt;
            phase.rtt_squares += rtt * rtt;
            phase.admitted += 1;
        }
        let current = &mut self.phases[3];
        current.released += 1;
        current.inflight_sum += f64::from(s.inflight);
        if f64::from(s.inflight) >= 0.9 * current.limit {
            current.full += 1;
        }
        // Until calls admitted in it have ended too: after a fall of the limit, the calls
        // admitted before it end first.
        if current.released >= MIN_SAMPLES
            && current.admitted >= 3
            && s.now.saturating_sub(current.start) as f64 >= PHASE * self.rtt_avg
        {
            self.next_phase(s.now);
        }
        self.limit
    }

    fn next_phase(&mut self, now: u64) {
        self.step = match self.step {
            Step::Hold(n) if n > 1 => Step::Hold(n - 1),
            Step::Hold(_) => {
                let held = self.phases[3];
                if !self.judged {
                    // The first probe goes toward the demand: up if it filled the initial
                    // limit, down (below the calls it made) if not.
                    self.down = !held.filled();
                }
                if held.filled() {
                    Step::Probe
                } else if held.calls() <= 1.15 * self.free_below {
                    // The demand holds the calls where no queue was found: a probe below
                    // it would hold callers back to learn nothing new. Until it grows.
                    Step::Hold(1)
                } else {
                    // The demand does not fill the limit: a probe above cannot bind.
                    self.down = true;
                    Step::Probe
                }
            }
            Step::Probe => Step::After,
            Step::After => Step::Judge,
            Step::Judge => {
                let moved = self.judge();
                Step::Hold(if moved { 1 } else { HOLD })
            }
        };
        if self.dropped {
            self.dropped = false;
            self.knee = (0.9 * self.knee.min(self.limit)).max(self.bounds.0);
            self.down = true;
            // Overload seen: the knee is near, no startup steps.
            self.judged = true;
            self.queue_seen = true;
            self.width = self.width.min(MAX_WIDTH);
            self.step = Step::Hold(1);
        }
        let target = match self.step {
            // Below the calls the demand makes, if fewer than the knee: a probe must bind.
            Step::Probe if self.down => self.knee.min(self.phases[3].calls()) / self.width,
            Step::Probe => self.knee * self.width,
            _ => self.knee,
        };
        self.limit = target.clamp(self.bounds.0, self.bounds.1);
        let [_, a, b, c] = self.phases;
        self.phases = [a, b, c, Phase::new(now, self.limit)];
    }

    /// Judges the probe: the phases before the one ending are the knee, the probe, the knee.
    /// Returns whether the knee moved by more than a tenth (or cannot tell yet).
    fn judge(&mut self) -> bool {
        let [before, probe, after, _] = self.phases;
        let probe_limit = probe.limit;
        let (Some(rtt_before), Some(rtt_probe), Some(rtt_after)) =
            (before.rtt(), probe.rtt(), after.rtt())
        else {
            return true;
        };
        // A latency that doubled across the probe, more than the calls explain (the demand
        // may have moved them), is a service time that moved by a step, not steadily: it
        // does not cancel; probe again.
        let calls = before.calls().max(after.calls()) / before.calls().min(after.calls()).max(1.0);
        if rtt_before.max(rtt_after) > 2.0 * calls.max(1.0) * rtt_before.min(rtt_after) {
            return true;
        }
        let knee = Point {
            calls: (before.calls() + after.calls()) / 2.0,
            rtt: (rtt_before + rtt_after) / 2.0,
            noise: (before.noise() + after.noise()) / 4.0,
            filled: before.filled() && after.filled(),
        };
        let probe = Point {
            calls: probe.calls(),
            rtt: rtt_probe,
            noise: probe.noise(),
            filled: probe.filled(),
        };
        let (lo, hi) = if probe.calls < knee.calls {
            (probe, knee)
        } else {
            (knee, probe)
        };
        // The demand held the calls too close to compare, or latency grew more than the calls
        // (a queue cannot): nothing to learn.
        if hi.calls < 1.1 * lo.calls || hi.rtt > 1.15 * lo.rtt * hi.calls / lo.calls {
            // A probe the demand did not let bind: the other way next.
            self.down = !self.down;
            return true;
        }
        self.baseline_rtt = lo.rtt;
        self.judged = true;
        let before = self.knee;
        let est = hi.calls * lo.rtt / hi.rtt.max(lo.rtt);
        // Flat: latency not above lo's by more than twice what chance gives.
        let flat =
            hi.rtt <= lo.rtt * (1.0 + 2.0 * (lo.noise + hi.noise).sqrt()) || est >= 0.95 * hi.calls;
        self.queue_seen |= !flat;
        if !flat {
            self.free_below = 0.0;
        }
        let narrow = (self.width.sqrt()).max(MIN_WIDTH);
        // Once narrow, half way to each estimate: the noise of one probe moves it half.
        let toward = |knee: f64| {
            if self.width <= 1.2 {
                (knee + est) / 2.0
            } else {
                est
            }
        };
        let wide = (self.width * self.width).min(MAX_WIDTH);
        // An up probe can only find the knee above the estimate, a down probe below it: at
        // the knee both find it where it is. So they alternate once it holds.
        if self.down {
            if flat {
                // No queue at the knee: the knee is at or above it (unless the demand held
                // the calls below it: then only the demand is known to be below).
                self.down = false;
                if hi.filled {
                    self.width = narrow;
                } else {
                    // The demand held the calls: below them again once they grow.
                    self.free_below = hi.calls;
                    return true;
                }
            } else if est <= 1.05 * lo.calls {
                // A queue at the probe too: further down.
                self.knee = est;
                self.width = wide;
            } else {
                self.knee = toward(self.knee);
                self.width = narrow;
                self.down = false;
            }
        } else if flat {
            // No queue up to the probe: further up, unless the demand held the probe.
            if hi.filled {
                self.knee = hi.calls;
                // Until a queue is first seen, the knee may be far: a wider step.
                self.width = if self.queue_seen {
                    wide
                } else {
                    (self.width * self.width).min(STARTUP_WIDTH)
                };
            } else {
                // No queue up to the demand: room for it to grow, up to twice, at no cost
                // while it does not.
                self.knee = self.knee.max((2.0 * hi.calls).min(probe_limit));
                self.down = true;
            }
        } else if est >= 1.05 * lo.calls {
            self.knee = toward(self.knee);
            self.width = narrow;
            self.down = true;
        } else {
            // A queue at the knee already: it is at or below the estimate.
            self.width = narrow;
            self.down = true;
        }
        self.knee = self.knee.clamp(self.bounds.0, self.bounds.1);
        (self.knee - before).abs() > 0.1 * before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000 * MS;

    fn knee(initial: u32) -> Knee {
        Knee::new(f64::from(initial), (1.0, 500.0))
    }

    /// A dependency with `workers(now)` workers serving first come, first served, in front of
    /// `callers` callers that call again as soon as a call ends (admitted while the limit
    /// allows), in virtual time, every call a sample (as on a manual clock). `service(now)` is
    /// the mean service time at `now`, each call's jittered by ±25 %. Returns the limit every
    /// `every` nanoseconds until `until`.
    fn closed_loop(
        k: &mut Knee,
        workers: impl Fn(u64) -> usize,
        callers: u32,
        service: impl Fn(u64) -> u64,
        until: u64,
        every: u64,
    ) -> Vec<u32> {
        use std::cmp::Reverse;
        use std::collections::{BinaryHeap, VecDeque};
        let mut rng = 0x9E37_79B9_7F4A_7C15_u64;
        let mut jitter = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            0.75 + (rng >> 11) as f64 / (1u64 << 53) as f64 / 2.0
        };
        // (end, admitted) of the calls being served; admission times of those queued.
        let mut serving: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
        let mut queued: VecDeque<u64> = VecDeque::new();
        let (mut now, mut held, mut trace, mut next_trace) = (0u64, 0u32, Vec::new(), 0u64);
        let limit = |k: &Knee| k.limit() as u32;
        while now < until {
            while held < limit(k) && held < callers {
                held += 1;
                queued.push_back(now);
            }
            while serving.len() < workers(now) {
                let Some(admitted) = queued.pop_front() else {
                    break;
                };
                let end = now + (service(now) as f64 * jitter()) as u64;
                serving.push(Reverse((end, admitted)));
            }
            let Reverse((end, admitted)) = serving.pop().expect("a call in flight");
            now = end;
            while next_trace <= now {
                trace.push(limit(k));
                next_trace += every;
            }
            k.sample(&Sample {
                now,
                rtt: now - admitted,
                inflight: held,
                dropped: false,
            });
            held -= 1;
        }
        trace
    }

    fn median(values: &[u32]) -> u32 {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        sorted[sorted.len() / 2]
    }

    #[test]
    fn finds_the_workers_from_far_below_and_far_above_whatever_the_service_time() {
        for (start, service) in [
            (10, 20 * MS),
            (10, 200 * MS),
            (400, 20 * MS),
            (400, 200 * MS),
        ] {
            let mut k = knee(start);
            let trace = closed_loop(&mut k, |_| 60, 500, |_| service, 60 * S, S / 2);
            let settled = &trace[trace.len() - 40..];
            // The pairs' phases (a seventh of the time) sit at 0.87 and 1.15 times the knee.
            assert!(
                (57..=63).contains(&median(settled)),
                "from {start} at {service} ns: {trace:?}"
            );
            assert!(
                settled.iter().all(|l| (45..=75).contains(l)),
                "from {start} at {service} ns: {trace:?}"
            );
        }
    }

    #[test]
    fn holds_the_workers_while_the_service_time_climbs_tenfold_and_falls_back() {
        // The drill's downstream: 20 ms climbing to 200 ms over 6 s, back to 20 ms at 11 s.
        let service = |now: u64| match now {
            t if t >= 11 * S => 20 * MS,
            t if t >= 6 * S => 200 * MS,
            t => 20 * MS + 180 * MS * t / (6 * S),
        };
        let mut k = knee(10);
        let trace = closed_loop(&mut k, |_| 60, 500, service, 15 * S, S / 10);
        for (from, to) in [(10, 60), (60, 110), (120, 150)] {
            let window = &trace[from..to];
            assert!(
                (54..=66).contains(&median(window)),
                "{}-{} s: {window:?}",
                from / 10,
                to / 10
            );
        }
    }

    #[test]
    fn follows_the_workers_down_and_up_again() {
        // Half the workers go away at 20 s and come back at 40 s; the service time holds.
        let workers = |now: u64| {
            if (20 * S..40 * S).contains(&now) {
                30
            } else {
                60
            }
        };
        let mut k = knee(60);
        let trace = closed_loop(&mut k, workers, 500, |_| 50 * MS, 60 * S, S / 2);
        for (from, to, around) in [(20, 40, 60), (60, 80, 30), (100, 120, 60)] {
            let window = &trace[from..to];
            let median = median(window);
            assert!(
                median.abs_diff(around) <= around / 10,
                "{}-{} s: {window:?}",
                from / 2,
                to / 2
            );
        }
    }

    #[test]
    fn a_limit_the_demand_does_not_fill_is_kept() {
        // 30 callers before 60 workers: no queue at any limit the demand reaches.
        let mut k = knee(40);
        let trace = closed_loop(&mut k, |_| 60, 30, |_| 20 * MS, 20 * S, S / 2);
        // The first pair tries below the knee; once it finds the demand holding the calls,
        // no pair goes below it.
        assert!(
            trace[2..].iter().all(|&l| l >= 30),
            "never below what the callers use: {trace:?}"
        );
    }

    #[test]
    fn a_drop_backs_off_by_a_tenth_at_the_next_phase() {
        let mut k = knee(50);
        // A call of 2 ms ends every millisecond, 50 in flight; the one ending at 15 ms dropped.
        let mut limits = Vec::new();
        for t in 10..40 {
            k.sample(&Sample {
                now: t * MS,
                rtt: 2 * MS,
                inflight: 50,
                dropped: t == 15,
            });
            limits.push(k.limit() as u32);
        }
        limits.dedup();
        // The first phase ends with its 8th sample: the knee falls to 45 and holds a phase,
        // then a probe below it (of width 2: a drop ends the wide steps of the start).
        assert_eq!(limits[..3], [50, 45, 22], "{limits:?}");
    }
}
