//! The adaptive comparison's peers: the same order service and downstream behind another
//! crate's adaptive concurrency limit instead of this library's bulkhead and breaker:
//! `tower-acc`'s Gradient2 (a port of Netflix's) and `tower-resilience-adaptive`'s Vegas.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt};
use tower_resilience_adaptive::ConcurrencyAlgorithm as _;

use super::service::{Order, OrderError, OrderId, OrderService};
use super::Layout;

/// `tower-acc`'s algorithm with its limit published after each update: the crate does not
/// expose the limit it enforces, and the drill draws it.
#[derive(Clone, Debug)]
struct Watched<A> {
    algorithm: A,
    limit: Arc<AtomicU32>,
}

impl<A: tower_acc::Algorithm> tower_acc::Algorithm for Watched<A> {
    fn max_concurrency(&self) -> usize {
        self.algorithm.max_concurrency()
    }

    fn update(&mut self, rtt: Duration, num_inflight: usize, is_error: bool, is_canceled: bool) {
        self.algorithm
            .update(rtt, num_inflight, is_error, is_canceled);
        let limit = u32::try_from(self.algorithm.max_concurrency()).unwrap_or(u32::MAX);
        self.limit.store(limit, Ordering::Relaxed);
    }
}

/// `tower-resilience-adaptive`'s algorithm with its limit published after each record, for the
/// same reason.
struct WatchedVegas {
    algorithm: tower_resilience_adaptive::Vegas,
    limit: Arc<AtomicU32>,
}

impl WatchedVegas {
    fn publish(&self) {
        let limit = u32::try_from(self.algorithm.limit()).unwrap_or(u32::MAX);
        self.limit.store(limit, Ordering::Relaxed);
    }
}

impl tower_resilience_adaptive::ConcurrencyAlgorithm for WatchedVegas {
    fn record_success(&self, latency: Duration) {
        self.algorithm.record_success(latency);
        self.publish();
    }

    fn record_failure(&self) {
        self.algorithm.record_failure();
        self.publish();
    }

    fn record_dropped(&self) {
        self.algorithm.record_dropped();
        self.publish();
    }

    fn limit(&self) -> usize {
        self.algorithm.limit()
    }

    fn min_limit(&self) -> usize {
        self.algorithm.min_limit()
    }

    fn max_limit(&self) -> usize {
        self.algorithm.max_limit()
    }
}

/// The order service behind a peer's limiter, with the limit it enforces now.
#[derive(Clone)]
pub(crate) struct PeerService {
    /// The error `None` is the limiter's refusal.
    service: BoxCloneSyncService<Order, OrderId, Option<OrderError>>,
    limit: Arc<AtomicU32>,
    /// How long a call waits for the limiter to admit it: the bulkhead's `max_wait_duration`.
    wait: Duration,
}

impl PeerService {
    /// The peer of `layout` around `orders`, its callers waiting up to `wait` for admission;
    /// `None` for the layouts of this library.
    pub(crate) fn of(layout: Layout, orders: &Arc<OrderService>, wait: Duration) -> Option<Self> {
        let (Layout::TowerAcc(initial) | Layout::TowerResilience(initial)) = layout else {
            return None;
        };
        let limit = Arc::new(AtomicU32::new(initial));
        let initial = usize::try_from(initial).unwrap_or(usize::MAX);
        let max = Layout::ADAPTIVE_MAX_LIMIT as usize;
        let orders = Arc::clone(orders);
        let inner = tower::service_fn(move |order: Order| {
            let orders = Arc::clone(&orders);
            async move { orders.create_order_unguarded(order).await }
        });
        let service = if let Layout::TowerAcc(_) = layout {
            let algorithm = tower_acc::Gradient2::builder()
                .initial_limit(initial)
                .min_limit(1)
                .max_limit(max)
                .build();
            BoxCloneSyncService::new(
                tower::ServiceBuilder::new()
                    .layer(tower_acc::ConcurrencyLimitLayer::new(Watched {
                        algorithm,
                        limit: Arc::clone(&limit),
                    }))
                    .service(inner)
                    .map_err(Some),
            )
        } else {
            let algorithm = tower_resilience_adaptive::Vegas::builder()
                .initial_limit(initial)
                .min_limit(1)
                .max_limit(max)
                .build();
            let limited = tower::ServiceBuilder::new()
                .layer(tower_resilience_adaptive::AdaptiveLimiterLayer::new(
                    WatchedVegas {
                        algorithm,
                        limit: Arc::clone(&limit),
                    },
                ))
                .service(inner)
                .map_err(|error| match error {
                    tower_resilience_adaptive::AdaptiveError::Service(error) => Some(error),
                    // A refusal (the version measured waits in `poll_ready` instead).
                    tower_resilience_adaptive::AdaptiveError::LimitReached => None,
                });
            BoxCloneSyncService::new(limited)
        };
        Some(PeerService {
            service,
            limit,
            wait,
        })
    }

    /// Places `order` through the limiter: `Ok(None)` if it did not admit the call within the
    /// wait (its refusal), else the order service's outcome.
    pub(crate) async fn call(&self, order: Order) -> Option<Result<OrderId, OrderError>> {
        let mut service = self.service.clone();
        let outcome = match tokio::time::timeout(self.wait, service.ready()).await {
            Ok(Ok(ready)) => ready.call(order).await,
            Ok(Err(error)) => Err(error),
            Err(_elapsed) => Err(None),
        };
        match outcome {
            Ok(id) => Some(Ok(id)),
            Err(Some(error)) => Some(Err(error)),
            Err(None) => None,
        }
    }

    /// The limit the peer enforces now.
    pub(crate) fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }
}
