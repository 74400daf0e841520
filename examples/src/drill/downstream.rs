//! [`Downstream`]: the simulated dependency of the order service.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::DrillConfig;

/// The random draws of one request, made by the caller before it offers the order, so that a
/// request is the same whichever layout serves it (or refuses it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Work {
    /// Multiplies the downstream's current mean service time (0.75 to 1.25).
    pub jitter: f64,
    /// Whether the downstream fails this request.
    pub fails: bool,
}

/// A request the downstream failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DownstreamError;

impl std::fmt::Display for DownstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the downstream failed the request")
    }
}

impl std::error::Error for DownstreamError {}

/// A dependency with a fixed number of workers whose service time degrades over the run.
///
/// A request queues for a worker (first come, first served), holds it for the current mean
/// service time times its jitter, and succeeds or fails as drawn. Its latency therefore rises
/// twice over: with the degradation, and with the queue once more requests arrive than the
/// workers serve.
#[derive(Debug)]
pub struct Downstream {
    workers: Semaphore,
    /// Requests inside [`serve`](Self::serve): queued for a worker or being served.
    in_flight: AtomicU64,
    started: Instant,
    start: Duration,
    peak: Duration,
    degradation: Duration,
    /// When the service time falls back to `start`, if ever.
    recovery: Option<Duration>,
}

impl Downstream {
    /// The downstream of `config`, whose degradation starts now.
    pub fn new(config: &DrillConfig) -> Self {
        Downstream::starting_at(config, Instant::now())
    }

    /// The downstream of `config`, whose degradation starts at `started`.
    pub fn starting_at(config: &DrillConfig, started: Instant) -> Self {
        Downstream {
            workers: Semaphore::new(config.downstream_workers as usize),
            in_flight: AtomicU64::new(0),
            started,
            start: config.service_time_start,
            peak: config.service_time_peak,
            degradation: config.duration.mul_f64(config.degradation),
            recovery: config.recovery.map(|share| config.duration.mul_f64(share)),
        }
    }

    /// The mean service time `elapsed` into the run.
    pub fn service_time_at(&self, elapsed: Duration) -> Duration {
        if self.recovery.is_some_and(|recovery| elapsed >= recovery) {
            return self.start;
        }
        if elapsed >= self.degradation || self.degradation.is_zero() {
            return self.peak;
        }
        let progress = elapsed.as_secs_f64() / self.degradation.as_secs_f64();
        let start = self.start.as_secs_f64();
        let peak = self.peak.as_secs_f64();
        Duration::from_secs_f64(start + (peak - start) * progress)
    }

    /// The requests at the downstream now, queued for a worker or being served: what a
    /// bulkhead in front of it bounds.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Serves one request.
    ///
    /// # Errors
    ///
    /// [`DownstreamError`] when the request was drawn to fail.
    pub async fn serve(&self, work: Work) -> Result<(), DownstreamError> {
        let _counted = InFlight::enter(&self.in_flight);
        let _worker = self
            .workers
            .acquire()
            .await
            .expect("the downstream's semaphore is never closed");
        let service = self
            .service_time_at(self.started.elapsed())
            .mul_f64(work.jitter);
        tokio::time::sleep(service).await;
        if work.fails {
            Err(DownstreamError)
        } else {
            Ok(())
        }
    }
}

/// One request counted in [`Downstream::in_flight`] while it lives: until it is served, or
/// until its future is dropped (a time limiter cut it off).
pub(crate) struct InFlight<'a>(&'a AtomicU64);

impl<'a> InFlight<'a> {
    pub(crate) fn enter(count: &'a AtomicU64) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn requests_count_in_flight_while_queued_or_served_and_when_cut_off() {
        let config = DrillConfig {
            downstream_workers: 1,
            service_time_start: Duration::from_millis(100),
            service_time_peak: Duration::from_millis(100),
            ..DrillConfig::default()
        };
        let downstream = Downstream::new(&config);
        let work = Work {
            jitter: 1.0,
            fails: false,
        };
        let mut first = Box::pin(downstream.serve(work));
        let mut queued = Box::pin(downstream.serve(work));
        assert!(futures_poll(first.as_mut()).is_pending());
        assert!(futures_poll(queued.as_mut()).is_pending());
        assert_eq!(
            downstream.in_flight(),
            2,
            "one served, one queued for the worker"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(futures_poll(first.as_mut()).is_ready());
        assert_eq!(downstream.in_flight(), 1);
        // Dropped mid-call, as a time limiter does.
        drop(queued);
        assert_eq!(downstream.in_flight(), 0);
    }

    fn futures_poll<F: std::future::Future>(
        future: std::pin::Pin<&mut F>,
    ) -> std::task::Poll<F::Output> {
        future.poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    }

    #[test]
    fn the_service_time_climbs_linearly_then_holds() {
        let config = DrillConfig {
            duration: Duration::from_secs(10),
            degradation: 0.5,
            service_time_start: Duration::from_millis(20),
            service_time_peak: Duration::from_millis(220),
            ..DrillConfig::default()
        };
        let downstream = Downstream::new(&config);
        let ms = |d: Duration| (d.as_secs_f64() * 1000.0).round();
        assert_eq!(ms(downstream.service_time_at(Duration::ZERO)), 20.0);
        assert_eq!(
            ms(downstream.service_time_at(Duration::from_millis(2500))),
            120.0
        );
        assert_eq!(
            ms(downstream.service_time_at(Duration::from_secs(5))),
            220.0
        );
        assert_eq!(
            ms(downstream.service_time_at(Duration::from_secs(9))),
            220.0
        );
    }
}
