//! Fleet-wide limits: a rate limiter or bulkhead instance whose state is in Redis, shared by
//! every replica that names it (feature `redis`).
//!
//! A bulkhead or rate limiter in one process protects that process. A dependency shared by a
//! fleet (a payment provider with a contract of 500 requests/s, a database that falls over past
//! 200 connections) needs one limit across every replica, while replicas come and go. Give the
//! instance a Redis [`Backend`]; the attributes do not change:
//!
//! ```no_run
//! # #[cfg(feature = "redis")] {
//! use std::time::Duration;
//! use resilience_runtime::fleet::{Backend, RedisConnection};
//! use resilience_runtime::{rate_limiter, RateLimiterConfig, Registry};
//!
//! let registry = Registry::global();
//! registry.set_redis(RedisConnection::open("redis://127.0.0.1:6379")?);
//! registry.configure_rate_limiter("payments", RateLimiterConfig::builder()
//!     .limit_for_period(500)
//!     .limit_refresh_period(Duration::from_secs(1))
//!     .backend(Backend::redis())
//!     .build()?)?;
//! # }
//! # Ok::<(), resilience_runtime::ConfigError>(())
//! ```
//!
//! or, in a configuration file:
//!
//! ```toml
//! [redis]
//! url = "redis://127.0.0.1:6379"     # else the environment's RESILIENCE_REDIS_URL
//!
//! [rate_limiter.instances.payments]
//! backend = "redis"
//! limit_for_period = 500
//! limit_refresh_period = "1s"
//! ```
//!
//! **The rate limiter** means what the local one means, across the fleet: time is cut into
//! cycles of `limit_refresh_period` (on Redis's clock, counted from the epoch, so every replica
//! sees the same cycles), each with `limit_for_period` permissions, and a caller that finds none
//! left reserves one of a later cycle when it starts within `timeout_duration`, or is refused
//! with the same [`Rejected::RequestNotPermitted`](crate::Rejected) and its `retry_after`. One
//! admission is one round trip: a Lua script, loaded once and called by its SHA, that reads
//! Redis's `TIME` and updates one small key (or takes a batch of permissions for this
//! replica's next callers: [`Backend::batch`]). A refusal is remembered until the moment a caller
//! could be admitted again, so a caller over the limit costs Redis nothing.
//!
//! **The bulkhead** admits at most `max_concurrent_calls` calls at once across the fleet. A
//! permit is a lease in a sorted set of lease ids scored by their expiry on Redis's clock: one
//! script call takes it (or refuses the call with the same
//! [`Rejected::BulkheadFull`](crate::Rejected)), one `ZREM` gives it back when the call ends,
//! without the call waiting for it. The heartbeats renew the leases a replica holds, so a call
//! may outlast a lease, and a replica that dies mid-call stops renewing them: they lapse within
//! three heartbeat intervals and a command timeout. A caller that may wait asks again after jittered pauses within its
//! `max_wait_duration`. A fleet found full is remembered for 10 ms (unless this replica gives a
//! lease back), so an overloaded replica asks Redis about a hundred times a second, not once per
//! refused call.
//!
//! **When Redis is unreachable or slow** (no answer within the connection's
//! `command_timeout`), the instance does what its [`FleetFallback`] says: by default it
//! admits by a local limit, its share of the fleet limit (the limit divided by the replicas it
//! last saw alive in the heartbeats every replica keeps in Redis); or it admits every call
//! (fail open); or it refuses them (fail closed). It tells its subscribers, counts the calls it
//! decided without Redis, and tries Redis again after a heartbeat interval, by itself.
//!
//! Keys are under one hash tag per instance (`resilience:{rate_limiter:payments}:…`), so an
//! instance runs unchanged on Redis Cluster.

#[cfg(feature = "redis")]
pub(crate) mod connection;
#[cfg(feature = "redis")]
pub(crate) mod health;
#[cfg(feature = "redis")]
pub(crate) mod instance;

#[cfg(feature = "redis")]
pub use connection::{RedisConnection, RedisConnectionBuilder};

use std::fmt;

/// The registry's Redis connection: one with the `redis` feature, none without.
#[cfg(feature = "redis")]
pub(crate) type Connection = RedisConnection;
/// The registry's Redis connection: one with the `redis` feature, none without.
#[cfg(not(feature = "redis"))]
pub(crate) type Connection = std::convert::Infallible;

/// A configuration that may name a [`Backend`]: the registry gives a Redis one its connection
/// when it installs the configuration.
pub(crate) trait HasBackend {
    /// The backend as set, if this kind has one.
    fn backend_mut(&mut self) -> Option<&mut Backend> {
        None
    }
}

impl HasBackend for crate::BulkheadConfig {
    fn backend_mut(&mut self) -> Option<&mut Backend> {
        self.backend_field()
    }
}

impl HasBackend for crate::RetryConfig {}
impl HasBackend for crate::CircuitBreakerConfig {}
impl HasBackend for crate::TimeLimiterConfig {}
impl HasBackend for crate::HedgeConfig {}
impl HasBackend for crate::FaultConfig {}

impl HasBackend for crate::RateLimiterConfig {
    fn backend_mut(&mut self) -> Option<&mut Backend> {
        self.backend_field()
    }
}

/// `mutex` locked; a panic elsewhere while it was held does not make its state unusable (each
/// holder leaves it whole).
#[cfg(feature = "redis")]
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The connection the environment's `RESILIENCE_REDIS_URL` names, opened once per process
/// (`None` when it is unset or not a Redis URL).
#[cfg(feature = "redis")]
pub(crate) fn connection_from_env() -> Option<RedisConnection> {
    static FROM_ENV: once_cell::sync::OnceCell<Option<RedisConnection>> =
        once_cell::sync::OnceCell::new();
    FROM_ENV
        .get_or_init(|| {
            let url = std::env::var(RedisConnection::URL_VARIABLE).ok()?;
            RedisConnection::open(&url).ok()
        })
        .clone()
}

/// Where a rate limiter's or a bulkhead's state lives: in this process ([`Backend::local`], the
/// default), or in Redis, shared by every replica configured alike ([`Backend::redis`], feature
/// `redis`).
///
/// ```
/// use resilience_runtime::fleet::Backend;
/// use resilience_runtime::RateLimiterConfig;
///
/// assert!(RateLimiterConfig::default().backend().is_local());
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Backend(Repr);

#[derive(Clone, Default, PartialEq, Eq)]
enum Repr {
    #[default]
    Local,
    #[cfg(feature = "redis")]
    Redis {
        /// `None`: the registry's connection, filled in when the registry installs it.
        connection: Option<RedisConnection>,
        fallback: FleetFallback,
        /// Permissions a rate limiter takes per round trip when it can.
        batch: u32,
    },
}

impl Backend {
    /// State in this process: the guard limits this process alone.
    pub fn local() -> Self {
        Backend(Repr::Local)
    }

    /// State in Redis, over the registry's connection
    /// ([`Registry::set_redis`](crate::Registry::set_redis), the `[redis]` table of a
    /// configuration file, or the environment's `RESILIENCE_REDIS_URL`), falling back to the
    /// local share of the limit when Redis does not answer.
    #[cfg(feature = "redis")]
    pub fn redis() -> Self {
        Backend(Repr::Redis {
            connection: None,
            fallback: FleetFallback::default(),
            batch: 1,
        })
    }

    /// State in Redis, over `connection` rather than the registry's.
    #[cfg(feature = "redis")]
    pub fn redis_with(connection: RedisConnection) -> Self {
        Backend(Repr::Redis {
            connection: Some(connection),
            fallback: FleetFallback::default(),
            batch: 1,
        })
    }

    /// What the guard does while Redis does not answer (a local backend ignores it).
    #[must_use]
    pub fn fallback(self, fallback: FleetFallback) -> Self {
        self.with_redis(|choice, _| *choice = fallback)
    }

    /// How many permissions a fleet rate limiter takes from Redis in one round trip when its
    /// current cycle has them (1, the default: one per call). The others serve this replica's
    /// next callers without a round trip until the cycle ends; the ones left unused then are
    /// lost. So a cycle never admits more than its limit across the fleet (a batch's
    /// permissions are never used after their cycle), but it may admit fewer, up to
    /// `batch - 1` per replica, and the replicas that ask first get more. At least 1 (checked
    /// by the configuration's `build`). A local backend ignores it.
    #[must_use]
    pub fn batch(self, permissions: u32) -> Self {
        self.with_redis(|_, batch| *batch = permissions)
    }

    /// This backend with `change` applied to a Redis one's fallback and batch.
    fn with_redis(mut self, change: impl FnOnce(&mut FleetFallback, &mut u32)) -> Self {
        match &mut self.0 {
            Repr::Local => drop(change),
            #[cfg(feature = "redis")]
            Repr::Redis {
                fallback, batch, ..
            } => change(fallback, batch),
        }
        self
    }

    /// The permissions taken per round trip, for a Redis backend.
    pub fn batch_size(&self) -> Option<u32> {
        match &self.0 {
            Repr::Local => None,
            #[cfg(feature = "redis")]
            Repr::Redis { batch, .. } => Some(*batch),
        }
    }

    /// Whether the state is in this process.
    pub fn is_local(&self) -> bool {
        matches!(self.0, Repr::Local)
    }

    /// The fallback, for a Redis backend.
    pub fn fallback_choice(&self) -> Option<FleetFallback> {
        match &self.0 {
            Repr::Local => None,
            #[cfg(feature = "redis")]
            Repr::Redis { fallback, .. } => Some(*fallback),
        }
    }

    /// The connection of a Redis backend: its own, else `registry`'s (`None` for a local
    /// backend).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`](crate::ConfigError) on `backend` when neither has one.
    #[cfg(feature = "redis")]
    pub(crate) fn resolve(
        &mut self,
        registry: impl FnOnce() -> Option<RedisConnection>,
    ) -> Result<(), crate::ConfigError> {
        if let Repr::Redis { connection, .. } = &mut self.0 {
            if connection.is_none() {
                *connection = Some(registry().ok_or_else(|| {
                    crate::ConfigError::new(
                        "backend",
                        format!(
                            "`redis` needs a connection: add a `[redis]` table with `url`, set \
                             the environment's {}, or call `Registry::set_redis` first",
                            RedisConnection::URL_VARIABLE
                        ),
                    )
                })?);
            }
        }
        Ok(())
    }

    /// The connection and the fallback of a Redis backend whose connection is known.
    #[cfg(feature = "redis")]
    pub(crate) fn redis_parts(&self) -> Option<(&RedisConnection, FleetFallback)> {
        match &self.0 {
            Repr::Local => None,
            Repr::Redis {
                connection,
                fallback,
                ..
            } => connection.as_ref().map(|c| (c, *fallback)),
        }
    }
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Local => f.write_str("local"),
            #[cfg(feature = "redis")]
            Repr::Redis {
                connection,
                fallback,
                batch,
            } => f
                .debug_struct("redis")
                .field("url", &connection.as_ref().map(RedisConnection::url))
                .field("fallback", fallback)
                .field("batch", batch)
                .finish(),
        }
    }
}

/// The line of a fleet guard's event (`kind` `name`): its Redis does not answer (`reason`),
/// and calls go by `fallback`.
pub(crate) fn write_unavailable(
    f: &mut fmt::Formatter<'_>,
    kind: &str,
    name: &str,
    fallback: FleetFallback,
    reason: &str,
) -> fmt::Result {
    write!(
        f,
        "{kind} `{name}` cannot reach its fleet limit ({reason}); calls go by its fallback, \
         `{fallback}`"
    )
}

/// The line of a fleet guard's event: its Redis answers again.
pub(crate) fn write_restored(f: &mut fmt::Formatter<'_>, kind: &str, name: &str) -> fmt::Result {
    write!(f, "{kind} `{name}` reaches its fleet limit again")
}

/// What a fleet guard does while Redis does not answer within the command timeout.
///
/// | choice | while Redis is away | who does it |
/// |---|---|---|
/// | `LocalShare` (default) | a local limit: the fleet limit divided by the replicas seen alive | Sentinel |
/// | `Admit` | admits every call (fail open) | Stripe, Envoy, Spring Cloud Gateway |
/// | `Refuse` | refuses every call (fail closed) | |
///
/// The local share is the default because this library's promise is admission control: a
/// fleet that fails open the moment its Redis does sends the whole offered load to the
/// dependency the limit protects, at the worst time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FleetFallback {
    /// A local limit of the fleet limit divided by the replicas this one last saw alive (at
    /// least 1 each; the whole limit if it never reached Redis).
    #[default]
    LocalShare,
    /// Every call is admitted.
    Admit,
    /// Every call is refused, as by the limit itself.
    Refuse,
}

impl FleetFallback {
    /// Its name in a configuration file: `local_share`, `admit`, `refuse`.
    pub fn as_str(self) -> &'static str {
        match self {
            FleetFallback::LocalShare => "local_share",
            FleetFallback::Admit => "admit",
            FleetFallback::Refuse => "refuse",
        }
    }
}

impl fmt::Display for FleetFallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
