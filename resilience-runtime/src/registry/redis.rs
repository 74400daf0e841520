//! The registry's Redis connection: the one its fleet instances use when their backend names
//! none (feature `redis`).

use super::kind::Config;
use super::Registry;
use crate::error::ConfigError;
#[cfg(feature = "redis")]
use crate::fleet::RedisConnection;

impl Registry {
    /// Sets the connection of the fleet instances ([`Backend::redis`](crate::fleet::Backend))
    /// configured from now on; the instances configured already keep theirs. A `[redis]` table
    /// in a configuration file does the same.
    ///
    /// ```
    /// use resilience_runtime::fleet::RedisConnection;
    /// use resilience_runtime::Registry;
    ///
    /// let registry = Registry::new();
    /// registry.set_redis(RedisConnection::open("redis://127.0.0.1:6379")?);
    /// assert_eq!(registry.redis().unwrap().url(), "redis://127.0.0.1:6379");
    /// # Ok::<(), resilience_runtime::ConfigError>(())
    /// ```
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn set_redis(&self, connection: RedisConnection) {
        *self
            .redis
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(connection);
    }

    /// The connection [`set_redis`](Self::set_redis) (or a `[redis]` table) gave, else the one
    /// the environment's `RESILIENCE_REDIS_URL` names, else `None`.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn redis(&self) -> Option<RedisConnection> {
        self.redis
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .or_else(crate::fleet::connection_from_env)
    }

    /// The connection a fleet instance without its own gets (never one without the feature).
    pub(super) fn fleet_connection(&self) -> Option<crate::fleet::Connection> {
        #[cfg(feature = "redis")]
        return self.redis();
        #[cfg(not(feature = "redis"))]
        return None;
    }

    /// Gives a Redis backend of `config` the connection `redis` finds, if it names none.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] on `backend` when there is none.
    pub(super) fn resolve_backend<C: Config>(
        &self,
        config: &mut C,
        redis: impl FnOnce() -> Option<crate::fleet::Connection>,
    ) -> Result<(), ConfigError> {
        match config.backend_mut() {
            #[cfg(feature = "redis")]
            Some(backend) => backend.resolve(redis),
            #[cfg(not(feature = "redis"))]
            Some(_) => {
                let _ = redis;
                Ok(())
            }
            None => Ok(()),
        }
    }
}
