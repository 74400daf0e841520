//! [`Instance`]: what a fleet guard of either kind keeps of its Redis: the connection, whether
//! it answers, what to do while it does not, and this replica's place among the instance's
//! replicas (with the leases it holds, for a bulkhead).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::connection::{heartbeat, Member};
use super::health::{Health, Route};
use super::lock;
use super::{Backend, FleetFallback, RedisConnection};

/// A fleet guard's Redis side, shared by the rate limiter's and the bulkhead's.
pub(crate) struct Instance {
    connection: Option<RedisConnection>,
    fallback: FleetFallback,
    health: Health,
    replica: Arc<Replica>,
    /// The keys' common part, such as `resilience:{bulkhead:orders}:`.
    keys: String,
}

/// This replica in one instance, as its heartbeats keep it in Redis.
struct Replica {
    replicas_key: String,
    alive: AtomicU32,
    /// A bulkhead's leases: their key, and the numbers this replica holds.
    leases: Option<(String, Mutex<HashSet<u32>>)>,
}

impl Member for Replica {
    fn replicas_key(&self) -> &str {
        &self.replicas_key
    }

    fn seen_alive(&self, replicas: u32) {
        self.alive.store(replicas, Ordering::Relaxed);
    }

    fn leases(&self) -> Option<(&str, Vec<u32>)> {
        let (key, held) = self.leases.as_ref()?;
        Some((key, lock(held).iter().copied().collect()))
    }

    fn holds(&self, lease: u32) -> bool {
        self.leases
            .as_ref()
            .is_some_and(|(_, held)| lock(held).contains(&lease))
    }
}

impl Instance {
    /// The instance `name` of `kind` (`rate_limiter`, `bulkhead`) if `backend` is Redis: over
    /// its connection, else the environment's, else none (then every call falls back). With
    /// `leases`, it keeps the leases this replica holds, renewed by its heartbeats. On the same
    /// Redis as `previous` (a reconfiguration), it keeps `previous`'s place among the replicas,
    /// its leases and its view of whether Redis answers.
    pub(crate) fn new(
        kind: &str,
        name: &str,
        backend: &Backend,
        leases: bool,
        previous: Option<&Instance>,
    ) -> Option<Instance> {
        let fallback = backend.fallback_choice()?;
        let connection = match backend.redis_parts() {
            Some((connection, _)) => Some(connection.clone()),
            None => super::connection_from_env(),
        };
        let keys = connection
            .as_ref()
            .map(|c| c.key(kind, name, ""))
            .unwrap_or_default();
        let same = previous.filter(|previous| previous.connection == connection);
        let (replica, health) = match same {
            Some(previous) => (Arc::clone(&previous.replica), previous.health.carried()),
            None => {
                let replica = Arc::new(Replica {
                    replicas_key: format!("{keys}replicas"),
                    alive: AtomicU32::new(1),
                    leases: leases.then(|| (format!("{keys}leases"), Mutex::default())),
                });
                if let Some(connection) = &connection {
                    let member: Arc<dyn Member> = replica.clone();
                    heartbeat::join(connection, &member);
                }
                (replica, Health::new())
            }
        };
        Some(Instance {
            connection,
            fallback,
            health,
            replica,
            keys,
        })
    }

    /// What decides the calls while Redis does not answer.
    pub(crate) fn fallback(&self) -> FleetFallback {
        self.fallback
    }

    /// The key of `part` of this instance.
    pub(crate) fn key(&self, part: &str) -> String {
        format!("{}{part}", self.keys)
    }

    /// The replicas alive at the last heartbeat, this one included (1 before the first).
    pub(crate) fn alive(&self) -> u32 {
        self.replica.alive.load(Ordering::Relaxed).max(1)
    }

    /// The connection to ask, if a call at `now` asks Redis (`None`: the fallback decides).
    pub(crate) fn ask(&self, now: u64) -> Option<&RedisConnection> {
        let connection = self.connection.as_ref()?;
        match self.health.route(now) {
            Route::Redis | Route::Probe => Some(connection),
            Route::Fallback => None,
        }
    }

    /// Redis answered: `true` if it had not, so that the guard tells it is back.
    pub(crate) fn answered(&self) -> bool {
        self.health.answered()
    }

    /// Redis did not answer at `now`: `true` the first time, so that the guard tells it.
    pub(crate) fn failed(&self, now: u64) -> bool {
        self.health.failed(now, self.retry_interval())
    }

    /// The interval between tries of Redis while it does not answer.
    pub(crate) fn retry_interval(&self) -> Duration {
        self.connection
            .as_ref()
            .map_or(Duration::from_secs(1), RedisConnection::heartbeat_interval)
    }

    /// The connection, if there is one.
    pub(crate) fn connection(&self) -> Option<&RedisConnection> {
        self.connection.as_ref()
    }

    /// The key of a bulkhead's leases.
    pub(crate) fn lease_key(&self) -> &str {
        self.replica.leases.as_ref().map_or("", |(key, _)| key)
    }

    /// Records lease `lease` as held by this replica: its heartbeats renew it.
    pub(crate) fn hold(&self, lease: u32) {
        if let Some((_, held)) = &self.replica.leases {
            lock(held).insert(lease);
        }
    }

    /// Gives back lease `lease`, if this replica holds it (`false` if not).
    pub(crate) fn give_back(&self, lease: u32) -> bool {
        let Some((key, held)) = &self.replica.leases else {
            return false;
        };
        if !lock(held).remove(&lease) {
            return false;
        }
        if let Some(connection) = &self.connection {
            connection.release_leases(key, &[lease]);
        }
        true
    }
}

/// `duration` in whole microseconds, as the scripts count time (saturating).
pub(crate) fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}
