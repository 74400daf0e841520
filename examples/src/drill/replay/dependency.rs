//! [`Dependency`]: the simulated dependency of a replay, following its profile step by step.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::{CallError, Profile};
use crate::drill::downstream::InFlight;
use crate::drill::SplitMix64;

/// The simulated dependency: the profile's service times and errors, its workers if it gives
/// them.
pub(super) struct Dependency {
    pub(super) profile: Profile,
    pub(super) seed: u64,
    pub(super) started: Instant,
    /// `None`: as many workers as requests.
    pub(super) workers: Option<Arc<Semaphore>>,
    /// Requests at the dependency, queued for a worker or served.
    pub(super) in_flight: AtomicU64,
    /// Requests it began serving, answered, and failed.
    pub(super) served: AtomicU64,
    pub(super) answered: AtomicU64,
    pub(super) failed: AtomicU64,
}

impl Dependency {
    /// Serves attempt `attempt` of request `id`: its draws depend on those two alone, so every
    /// layout offers the same requests; the step is the one in force when a worker takes it.
    pub(super) async fn serve(&self, id: u64, attempt: u32) -> Result<(), CallError> {
        let _counted = InFlight::enter(&self.in_flight);
        let _worker = match &self.workers {
            Some(workers) => Some(
                workers
                    .acquire()
                    .await
                    .expect("the workers are never closed"),
            ),
            None => None,
        };
        self.served.fetch_add(1, Ordering::Relaxed);
        let step = self.profile.step_at(self.started.elapsed());
        let mut rng = SplitMix64::for_stream(self.seed, (id << 8) | u64::from(attempt.min(255)));
        let z = standard_normal(&mut rng);
        let fails = rng.chance(step.error_rate);
        tokio::time::sleep(step.service_time(z)).await;
        self.answered.fetch_add(1, Ordering::Relaxed);
        if fails {
            self.failed.fetch_add(1, Ordering::Relaxed);
            Err(CallError::Dependency)
        } else {
            Ok(())
        }
    }

    /// Follows the profile's workers, step by step: more are added at once; fewer take effect
    /// as workers come free (after the requests already queued).
    pub(super) async fn follow_workers(self: Arc<Self>) {
        let Some(workers) = self.workers.clone() else {
            return;
        };
        let mut current = self.profile.steps()[0].workers.unwrap_or(1);
        for step in &self.profile.steps()[1..] {
            tokio::time::sleep_until(self.started + step.at).await;
            let next = step.workers.unwrap_or(current);
            if next > current {
                workers.add_permits((next - current) as usize);
            } else if next < current {
                let workers = Arc::clone(&workers);
                tokio::spawn(async move {
                    if let Ok(permits) = workers.acquire_many(current - next).await {
                        permits.forget();
                    }
                });
            }
            current = next;
        }
    }
}

/// A standard normal draw (Box–Muller).
fn standard_normal(rng: &mut SplitMix64) -> f64 {
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}
