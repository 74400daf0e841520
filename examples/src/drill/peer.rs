//! The adaptive comparison's peer: the same order service and downstream behind `tower-acc`'s
//! Gradient2 concurrency limit, another crate's port of Netflix's algorithm, instead of this
//! library's bulkhead and breaker.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt};

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

/// The order service behind a peer's limiter, with the limit it enforces now.
#[derive(Clone)]
pub(crate) struct PeerService {
    service: BoxCloneSyncService<Order, OrderId, OrderError>,
    limit: Arc<AtomicU32>,
    /// How long a call waits for the limiter to admit it: the bulkhead's `max_wait_duration`.
    wait: Duration,
}

impl PeerService {
    /// The peer of `layout` around `orders`, its callers waiting up to `wait` for admission;
    /// `None` for the layouts of this library.
    pub(crate) fn of(layout: Layout, orders: &Arc<OrderService>, wait: Duration) -> Option<Self> {
        let Layout::TowerAcc(initial) = layout else {
            return None;
        };
        let initial = usize::try_from(initial).unwrap_or(usize::MAX);
        let algorithm = tower_acc::Gradient2::builder()
            .initial_limit(initial)
            .min_limit(1)
            .max_limit(Layout::ADAPTIVE_MAX_LIMIT as usize)
            .build();
        let limit = Arc::new(AtomicU32::new(u32::try_from(initial).unwrap_or(u32::MAX)));
        let orders = Arc::clone(orders);
        let inner = tower::service_fn(move |order: Order| {
            let orders = Arc::clone(&orders);
            async move { orders.create_order_unguarded(order).await }
        });
        let limited = tower::ServiceBuilder::new()
            .layer(tower_acc::ConcurrencyLimitLayer::new(Watched {
                algorithm,
                limit: Arc::clone(&limit),
            }))
            .service(inner);
        Some(PeerService {
            service: BoxCloneSyncService::new(limited),
            limit,
            wait,
        })
    }

    /// Places `order` through the limiter: `Ok(None)` if it did not admit the call within the
    /// wait (its refusal), else the order service's outcome.
    pub(crate) async fn call(&self, order: Order) -> Option<Result<OrderId, OrderError>> {
        let mut service = self.service.clone();
        match tokio::time::timeout(self.wait, service.ready()).await {
            Ok(Ok(ready)) => Some(ready.call(order).await),
            Ok(Err(error)) => Some(Err(error)),
            Err(_elapsed) => None,
        }
    }

    /// The limit the peer enforces now.
    pub(crate) fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }
}
