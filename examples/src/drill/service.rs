//! [`OrderService`]: the guarded handler the drill drives.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use resilience_runtime::{bulkhead, circuit_breaker, rate_limiter, retry, time_limiter, Rejected};

use super::downstream::{Downstream, DownstreamError, Work};

/// The instance name of every guard of the order service in the registry.
pub const ORDERS: &str = "orders";

/// An order placed by a simulated caller.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Order {
    /// The caller that placed it.
    pub caller: u32,
    /// Its number among the caller's orders.
    pub seq: u64,
    /// What the downstream will do with it.
    pub work: Work,
}

/// The id of a created order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OrderId(pub u64);

/// Why an order was not created: a guard refused it, or the downstream failed it.
#[derive(Clone, Debug, PartialEq)]
pub enum OrderError {
    /// The bulkhead or the circuit breaker refused the call; the handler did not run.
    Rejected(Rejected),
    /// The handler ran and the downstream failed.
    Downstream(DownstreamError),
}

impl From<Rejected> for OrderError {
    fn from(rejected: Rejected) -> Self {
        OrderError::Rejected(rejected)
    }
}

impl fmt::Display for OrderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OrderError::Rejected(r) => write!(f, "order refused: {r}"),
            OrderError::Downstream(e) => write!(f, "order failed: {e}"),
        }
    }
}

impl std::error::Error for OrderError {}

/// The in-process order service: one handler, guarded by the `orders` bulkhead and circuit
/// breaker of [`Registry::global`](resilience_runtime::Registry::global).
///
/// Which guard runs first is not written here: the two attributes make one guarded call whose
/// order comes from the registry's precedence table (bulkhead first by default), so the drill
/// reverses it for the incident layout with `set_precedence` alone, as a misconfigured service
/// would.
#[derive(Debug)]
pub struct OrderService {
    downstream: Downstream,
    /// Times a handler's body ran: one per attempt.
    attempts: AtomicU64,
}

impl OrderService {
    /// A service calling `downstream`.
    pub fn new(downstream: Downstream) -> Self {
        OrderService {
            downstream,
            attempts: AtomicU64::new(0),
        }
    }

    /// How many times a handler's body ran (each attempt of a retry counts).
    pub fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::Relaxed)
    }

    /// The downstream this service calls.
    pub fn downstream(&self) -> &Downstream {
        &self.downstream
    }

    /// Creates an order by calling the downstream; every downstream failure counts as a
    /// failure for the breaker.
    ///
    /// # Errors
    ///
    /// [`OrderError::Rejected`] when a guard refuses the call, [`OrderError::Downstream`] when
    /// the downstream fails it.
    #[bulkhead(name = "orders")]
    #[circuit_breaker(name = "orders")]
    pub async fn create_order(&self, order: Order) -> Result<OrderId, OrderError> {
        self.place(order).await
    }

    /// [`create_order`](Self::create_order) guarded by all five aspects, in the order the
    /// registry's precedence table gives them: a failure of the downstream is retried, and an
    /// attempt that takes longer than the time limiter's timeout is cut off (its downstream
    /// request dropped, its worker freed).
    ///
    /// # Errors
    ///
    /// As [`create_order`](Self::create_order), and [`OrderError::Rejected`] with
    /// `RequestNotPermitted` or `TimedOut` from the rate limiter or the time limiter.
    #[bulkhead(name = "orders")]
    #[rate_limiter(name = "orders")]
    #[retry(name = "orders")]
    #[circuit_breaker(name = "orders")]
    #[time_limiter(name = "orders")]
    pub async fn create_order_guarded_by_all(&self, order: Order) -> Result<OrderId, OrderError> {
        self.place(order).await
    }

    /// Creates an order with no guard of this library around the call: for a peer's
    /// limiter to wrap (the adaptive comparison).
    ///
    /// # Errors
    ///
    /// [`OrderError::Downstream`] when the downstream fails it.
    pub async fn create_order_unguarded(&self, order: Order) -> Result<OrderId, OrderError> {
        self.place(order).await
    }

    async fn place(&self, order: Order) -> Result<OrderId, OrderError> {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        self.downstream
            .serve(order.work)
            .await
            .map_err(OrderError::Downstream)?;
        Ok(OrderId((u64::from(order.caller) << 32) | order.seq))
    }
}
