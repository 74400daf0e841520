//! An adaptive bulkhead in a storm: threads and tasks making calls that succeed, fail, panic,
//! time out inside a time limiter or are dropped by their callers, while another thread keeps
//! switching the bulkhead between fixed and adaptive limits (Gradient2, Vegas, AIMD) and
//! fairness settings. No call is admitted past the highest limit any of those allow, and
//! afterwards every permit is back. Waits are bounded (2 ms per waiter, 3 ms per call).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use resilience_runtime::{
    AdaptiveLimit, BulkheadConfig, Guard, Plan, Registry, Rejected, TimeLimiterConfig,
};
use resilience_tests::{quiet_injected_panics, CallError, Rng};

/// The highest limit of any configuration the storm switches to.
const HIGHEST: usize = 8;

/// The calls inside the bulkhead, and the most ever seen at once. (Counted, not asserted in
/// the call: the calls' own panics are caught.)
#[derive(Default)]
struct Inside {
    now: AtomicUsize,
    peak: AtomicUsize,
    ran: AtomicU64,
}

impl Inside {
    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        self.ran.fetch_add(1, Ordering::Relaxed);
    }

    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Leaves on every path out of a call, a panic and a dropped future included.
struct InsideGuard<'a>(&'a Inside);

impl Drop for InsideGuard<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

fn configs(seed: u64) -> Vec<BulkheadConfig> {
    let wait = Duration::from_millis(2);
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for _ in 0..16 {
        let fair = rng.below(2) == 0;
        let base = BulkheadConfig::builder()
            .max_wait_duration(wait)
            .fair_call_handling(fair);
        let config = match rng.below(5) {
            0 => base.max_concurrent_calls(3),
            1 => base.adaptive(
                AdaptiveLimit::gradient2()
                    .min_limit(1)
                    .initial_limit(4)
                    .max_limit(8),
            ),
            2 => base.adaptive(
                AdaptiveLimit::vegas()
                    .min_limit(1)
                    .initial_limit(2)
                    .max_limit(8),
            ),
            3 => base.adaptive(
                AdaptiveLimit::aimd()
                    .min_limit(1)
                    .initial_limit(8)
                    .max_limit(8),
            ),
            _ => base.adaptive(
                AdaptiveLimit::knee()
                    .min_limit(1)
                    .initial_limit(3)
                    .max_limit(8),
            ),
        };
        out.push(config.build().unwrap());
    }
    out
}

fn sync_worker(plan: &Plan, inside: &Inside, seed: u64, calls: usize) {
    let mut rng = Rng(seed);
    for _ in 0..calls {
        let action = rng.below(10);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            plan.call(|| -> Result<(), CallError> {
                inside.enter();
                let _leave = InsideGuard(inside);
                std::thread::sleep(Duration::from_micros(50 * action));
                match action {
                    0..=6 => Ok(()),
                    7 | 8 => Err(CallError::Downstream("boom")),
                    _ => panic!("injected panic"),
                }
            })
        }));
    }
}

async fn async_worker(plan: Arc<Plan>, inside: Arc<Inside>, seed: u64, calls: usize) {
    let mut rng = Rng(seed);
    for _ in 0..calls {
        let action = rng.below(10);
        let (plan, inside) = (plan.clone(), inside.clone());
        let call = tokio::spawn(async move {
            let call = plan.call_future(async move {
                inside.enter();
                let _leave = InsideGuard(&inside);
                match action {
                    0..=5 => {
                        tokio::time::sleep(Duration::from_micros(200)).await;
                        Ok(())
                    }
                    6 => Err(CallError::Downstream("boom")),
                    7 => panic!("injected panic"),
                    // Longer than the time limiter's 3 ms: cut off, a drop.
                    _ => {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        Ok(())
                    }
                }
            });
            // Action 9 is given up by its caller first, mid-call, or while it waits.
            let patience = if action == 9 { 1 } else { 50 };
            tokio::time::timeout(Duration::from_millis(patience), call).await
        });
        match call.await {
            Ok(Ok(Ok(()) | Err(CallError::Downstream(_)))) => {}
            Ok(Ok(Err(CallError::Rejected(
                Rejected::BulkheadFull { .. } | Rejected::TimedOut { .. },
            )))) => {}
            Ok(Ok(Err(other))) => panic!("unexpected {other:?}"),
            Ok(Err(_elapsed)) => {}
            Err(panic) if panic.is_panic() => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_calls_and_switches_admits_within_the_limits_and_returns_every_permit() {
    quiet_injected_panics();
    let registry = Arc::new(Registry::new());
    let configs = configs(0x5eed);
    registry
        .configure_bulkhead("storm", configs[0].clone())
        .unwrap();
    registry
        .configure_time_limiter(
            "storm",
            TimeLimiterConfig::builder()
                .timeout_duration(Duration::from_millis(3))
                .build()
                .unwrap(),
        )
        .unwrap();
    let sync_plan = Arc::new(registry.plan(&[Guard::bulkhead("storm")]).unwrap());
    let async_plan = Arc::new(
        registry
            .plan(&[Guard::bulkhead("storm"), Guard::time_limiter("storm")])
            .unwrap(),
    );
    let inside = Arc::new(Inside::default());
    let done = Arc::new(AtomicBool::new(false));

    let switcher = {
        let (registry, done) = (registry.clone(), done.clone());
        std::thread::spawn(move || {
            let mut switches = 0;
            for config in configs.iter().cycle() {
                if done.load(Ordering::Relaxed) {
                    break;
                }
                registry
                    .configure_bulkhead("storm", config.clone())
                    .unwrap();
                switches += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            switches
        })
    };
    let threads: Vec<_> = (0..3)
        .map(|t| {
            let (plan, inside) = (sync_plan.clone(), inside.clone());
            std::thread::spawn(move || sync_worker(&plan, &inside, 0x9e37 + t, 300))
        })
        .collect();
    let tasks: Vec<_> = (0..12)
        .map(|t| {
            tokio::spawn(async_worker(
                async_plan.clone(),
                inside.clone(),
                0x51_7c + t,
                200,
            ))
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    for thread in threads {
        thread.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let switches = switcher.join().unwrap();

    assert_eq!(inside.now.load(Ordering::SeqCst), 0);
    let bulkhead = registry.bulkhead("storm");
    let metrics = bulkhead.metrics();
    assert_eq!(
        metrics.finished_calls(),
        metrics.permitted_calls(),
        "every permit released"
    );
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        bulkhead.max_allowed_concurrent_calls(),
        "every permit back"
    );
    // Back to a fixed limit: all of its permits are free.
    registry
        .configure_bulkhead(
            "storm",
            BulkheadConfig::builder()
                .max_concurrent_calls(5)
                .build()
                .unwrap(),
        )
        .unwrap();
    assert_eq!(bulkhead.available_concurrent_calls(), 5);
    assert!(
        switches > 10,
        "the configuration kept changing ({switches} switches)"
    );
    assert!(
        metrics.rejected_calls() > 0,
        "the bulkhead was full at times"
    );
    let peak = inside.peak.load(Ordering::SeqCst);
    assert!(
        (2..=HIGHEST).contains(&peak),
        "{peak} calls inside at once; no limit is above {HIGHEST}"
    );
    assert!(inside.ran.load(Ordering::Relaxed) > 500);
}
