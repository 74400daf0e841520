//! The load generator: seeded callers ramping up against the order service, one layout at a
//! time.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use resilience_runtime::{CircuitBreakerEvent, CircuitState, Registry, Rejected, RetryEvent};

use super::downstream::{Downstream, Work};
use super::peer::PeerService;
use super::report::{Attempts, BreakerSummary, Counts, Latencies, Outcome, RunReport, Sample};
use super::rng::SplitMix64;
use super::service::{Order, OrderError, OrderService, ORDERS};
use super::{DrillConfig, DrillError, Layout, Observer, Progress};

/// How `result` ended, for the report.
fn outcome_of(result: &Result<super::OrderId, OrderError>) -> Outcome {
    match result {
        Ok(_) => Outcome::Succeeded,
        Err(OrderError::Downstream(_)) => Outcome::Failed,
        Err(OrderError::Rejected(Rejected::BulkheadFull { .. })) => Outcome::RejectedByBulkhead,
        Err(OrderError::Rejected(Rejected::CallNotPermitted { .. })) => Outcome::NotPermitted,
        Err(OrderError::Rejected(Rejected::RequestNotPermitted { .. })) => Outcome::RateLimited,
        Err(OrderError::Rejected(Rejected::TimedOut { .. })) => Outcome::TimedOut,
        Err(OrderError::Rejected(_)) => Outcome::OtherRejection,
    }
}

/// Outcome counters shared with the progress display.
#[derive(Debug, Default)]
struct LiveCounts {
    offered: AtomicU64,
    succeeded: AtomicU64,
    failed: AtomicU64,
    rejected_bulkhead: AtomicU64,
    not_permitted: AtomicU64,
    rate_limited: AtomicU64,
    timed_out: AtomicU64,
    other_rejected: AtomicU64,
}

impl LiveCounts {
    fn record(&self, outcome: Outcome) {
        let counter = match outcome {
            Outcome::Succeeded => &self.succeeded,
            Outcome::Failed => &self.failed,
            Outcome::RejectedByBulkhead => &self.rejected_bulkhead,
            Outcome::NotPermitted => &self.not_permitted,
            Outcome::RateLimited => &self.rate_limited,
            Outcome::TimedOut => &self.timed_out,
            Outcome::OtherRejection => &self.other_rejected,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> Counts {
        Counts {
            offered: self.offered.load(Ordering::Relaxed),
            succeeded: self.succeeded.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            rejected_bulkhead: self.rejected_bulkhead.load(Ordering::Relaxed),
            not_permitted: self.not_permitted.load(Ordering::Relaxed),
            rate_limited: self.rate_limited.load(Ordering::Relaxed),
            timed_out: self.timed_out.load(Ordering::Relaxed),
            other_rejected: self.other_rejected.load(Ordering::Relaxed),
        }
    }
}

/// When the breaker opened and how long it stayed open, from its events.
#[derive(Debug)]
struct BreakerWatch {
    started: Instant,
    /// Nanoseconds from `started` to the first transition to open; `u64::MAX` while it has not
    /// happened.
    first_open_nanos: AtomicU64,
    openings: AtomicU32,
    open: Mutex<OpenTime>,
}

/// Time spent open: the closed intervals, and the start of the current one.
#[derive(Debug, Default)]
struct OpenTime {
    total: Duration,
    since: Option<Instant>,
}

impl BreakerWatch {
    fn new(started: Instant) -> Self {
        BreakerWatch {
            started,
            first_open_nanos: AtomicU64::new(u64::MAX),
            openings: AtomicU32::new(0),
            open: Mutex::new(OpenTime::default()),
        }
    }

    fn observe(&self, event: &CircuitBreakerEvent) {
        let CircuitBreakerEvent::StateTransition { from, to, .. } = event else {
            return;
        };
        let now = Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if *from == CircuitState::Open {
            if let Some(since) = open.since.take() {
                open.total += now - since;
            }
        }
        if *to == CircuitState::Open {
            open.since.get_or_insert(now);
            let nanos = u64::try_from((now - self.started).as_nanos()).unwrap_or(u64::MAX - 1);
            let _ = self.first_open_nanos.compare_exchange(
                u64::MAX,
                nanos,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            self.openings.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn first_open(&self) -> Option<Duration> {
        match self.first_open_nanos.load(Ordering::Relaxed) {
            u64::MAX => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }

    /// The time spent open between `started` and `until`.
    fn open_time(&self, until: Instant) -> Duration {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total
            + open.since.map_or(Duration::ZERO, |since| {
                until.saturating_duration_since(since)
            })
    }
}

/// What one caller saw.
#[derive(Debug, Default)]
pub(crate) struct CallerStats {
    pub(crate) counts: Counts,
    pub(crate) latencies: Latencies,
}

impl CallerStats {
    fn record(&mut self, outcome: Outcome, latency: Duration) {
        let c = &mut self.counts;
        match outcome {
            Outcome::Succeeded => c.succeeded += 1,
            Outcome::Failed => c.failed += 1,
            Outcome::RejectedByBulkhead => c.rejected_bulkhead += 1,
            Outcome::NotPermitted => c.not_permitted += 1,
            Outcome::RateLimited => c.rate_limited += 1,
            Outcome::TimedOut => c.timed_out += 1,
            Outcome::OtherRejection => c.other_rejected += 1,
        }
        self.latencies.record(outcome, latency);
    }
}

/// The fixed part of every caller's schedule.
#[derive(Debug)]
struct Schedule {
    seed: u64,
    callers: u32,
    started: Instant,
    ramp: Duration,
    deadline: Instant,
    think_low: f64,
    think_high: f64,
    failure_probability: f64,
}

/// One caller: starts at its place in the ramp, then thinks and orders until the deadline.
///
/// The caller draws its think time and its order's work before looking at the clock, so the
/// n-th order of a caller is the same in every layout.
async fn caller(
    index: u32,
    schedule: Arc<Schedule>,
    service: Arc<OrderService>,
    live: Arc<LiveCounts>,
    all_five: bool,
    peer: Option<PeerService>,
) -> CallerStats {
    let mut rng = SplitMix64::for_stream(schedule.seed, u64::from(index));
    let offset = schedule
        .ramp
        .mul_f64(f64::from(index) / f64::from(schedule.callers));
    tokio::time::sleep_until((schedule.started + offset).into()).await;

    let mut stats = CallerStats::default();
    for seq in 0.. {
        let think = Duration::from_secs_f64(rng.uniform(schedule.think_low, schedule.think_high));
        let work = Work {
            jitter: rng.uniform(0.75, 1.25),
            fails: rng.chance(schedule.failure_probability),
        };
        tokio::time::sleep(think).await;
        if Instant::now() >= schedule.deadline {
            break;
        }
        stats.counts.offered += 1;
        live.offered.fetch_add(1, Ordering::Relaxed);
        let order = Order {
            caller: index,
            seq,
            work,
        };
        let sent = Instant::now();
        let outcome = if let Some(peer) = &peer {
            // The peer's refusal is its limiter's: counted with the bulkhead's.
            peer.call(order)
                .await
                .map_or(Outcome::RejectedByBulkhead, |result| outcome_of(&result))
        } else if all_five {
            outcome_of(&service.create_order_guarded_by_all(order).await)
        } else {
            outcome_of(&service.create_order(order).await)
        };
        let latency = sent.elapsed();
        stats.record(outcome, latency);
        live.record(outcome);
    }
    stats
}

/// Runs one layout: configures the `orders` guards, offers the load, waits for every call to
/// end, and reports.
pub(crate) async fn run_layout(
    registry: &Registry,
    config: &DrillConfig,
    layout: Layout,
    observer: &dyn Observer,
) -> Result<RunReport, DrillError> {
    for (aspect, precedence) in layout.precedence() {
        registry.set_precedence(aspect, precedence)?;
    }
    // Reconfigured in place: the breaker starts over with fresh metrics; the bulkhead keeps its
    // counters (they only grow), so this layout's rejections are counted from here.
    registry.configure_bulkhead(ORDERS, config.bulkhead_for(layout)?)?;
    registry.configure_circuit_breaker(ORDERS, config.circuit_breaker_for(layout)?)?;
    registry.configure_rate_limiter(ORDERS, config.rate_limiter()?)?;
    registry.configure_retry(ORDERS, config.retry_for(layout)?)?;
    registry.configure_time_limiter(ORDERS, config.time_limiter()?)?;
    let bulkhead = registry.bulkhead(ORDERS);
    let breaker = registry.circuit_breaker(ORDERS);
    let rejected_before = bulkhead.metrics().rejected_calls();
    let time_limiter = registry.time_limiter(ORDERS);
    let cut_off_before = time_limiter.metrics().number_of_timed_out_calls();

    observer.layout_started(layout, config.duration);
    let started = Instant::now();
    let watch = Arc::new(BreakerWatch::new(started));
    let subscription = breaker.subscribe({
        let watch = Arc::clone(&watch);
        move |event| watch.observe(event)
    });
    // Each retry event is one more attempt of a call.
    let retry = registry.retry(ORDERS);
    let retries = Arc::new(AtomicU64::new(0));
    let retry_subscription = retry.subscribe({
        let retries = Arc::clone(&retries);
        move |event| {
            if let RetryEvent::Retry { .. } = event {
                retries.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let schedule = Arc::new(Schedule {
        seed: config.seed,
        callers: config.callers,
        started,
        ramp: config.duration.mul_f64(config.ramp),
        deadline: started + config.duration,
        think_low: config.think_time.0.as_secs_f64(),
        think_high: config.think_time.1.as_secs_f64(),
        failure_probability: config.failure_probability,
    });
    let service = Arc::new(OrderService::new(Downstream::starting_at(config, started)));
    let peer = PeerService::of(layout, &service, config.bulkhead_max_wait);
    let live = Arc::new(LiveCounts::default());

    let handles: Vec<_> = (0..config.callers)
        .map(|index| {
            tokio::spawn(caller(
                index,
                Arc::clone(&schedule),
                Arc::clone(&service),
                Arc::clone(&live),
                layout.all_five(),
                peer.clone(),
            ))
        })
        .collect();
    let all_done = async {
        let mut stats = Vec::with_capacity(handles.len());
        for handle in handles {
            stats.push(handle.await.expect("a drill caller panicked"));
        }
        stats
    };
    tokio::pin!(all_done);
    let mut ticks = tokio::time::interval(Duration::from_millis(100));
    let mut timeline = Vec::new();
    let stats = loop {
        tokio::select! {
            stats = &mut all_done => break stats,
            _ = ticks.tick() => {
                let sample = Sample {
                    elapsed: started.elapsed(),
                    counts: live.snapshot(),
                    breaker: breaker.state(),
                    in_flight: service.downstream().in_flight(),
                    limit: peer
                        .as_ref()
                        .map_or_else(|| bulkhead.max_allowed_concurrent_calls(), PeerService::limit),
                };
                timeline.push(sample);
                observer.progress(layout, &Progress {
                    elapsed: sample.elapsed,
                    duration: config.duration,
                    counts: sample.counts,
                    breaker: sample.breaker,
                });
            }
        }
    };
    let finished = Instant::now();
    breaker.unsubscribe(subscription);
    retry.unsubscribe(retry_subscription);

    let mut counts = Counts::default();
    let mut latencies = Latencies::default();
    for caller in stats {
        counts.add(&caller.counts);
        latencies.merge(caller.latencies);
    }
    let bulkhead_metrics = bulkhead.metrics();
    let mut report = RunReport::new(
        layout,
        counts,
        latencies,
        BreakerSummary {
            first_open: watch.first_open(),
            openings: watch.openings.load(Ordering::Relaxed),
            open_time: watch.open_time(finished),
        },
        finished - started,
        config.duration,
        bulkhead_metrics.rejected_calls() - rejected_before,
        Attempts {
            retries: retries.load(Ordering::Relaxed),
            handler_runs: service.attempts(),
            cut_off: time_limiter.metrics().number_of_timed_out_calls() - cut_off_before,
        },
    );
    report.timeline = timeline;
    Ok(report)
}
