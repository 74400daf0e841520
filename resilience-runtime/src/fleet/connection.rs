//! [`RedisConnection`]: one multiplexed connection to Redis, driven by a thread of its own,
//! with a timeout on every command.
//!
//! Every command runs as a task on the connection's own single-thread tokio runtime, and the
//! caller waits for its answer on a channel: an async caller on whatever executor it runs on
//! (its clock, paused or not, does not bound a round trip to Redis), a blocking caller on a
//! plain thread. So a connection outlives the runtime that opened it (a `#[tokio::test]` runtime
//! ends with its test; the global registry's connection must not), and a caller that gives up
//! never leaves a command half done: the task still sees the answer, and undoes what the caller
//! can no longer use (a lease it acquired).

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::sync::oneshot;

use super::lock;
use crate::error::ConfigError;

/// A connection to Redis for the fleet-wide guards: what a rate limiter or bulkhead with a
/// [`Backend::redis`](super::Backend::redis) backend sends its commands over.
///
/// One multiplexed connection (the `redis` crate's reconnecting `ConnectionManager`), driven by
/// a thread of its own, so it serves async callers on any executor and blocking callers alike;
/// every command has its own timeout (`command_timeout`, 20 ms by default, as Envoy's rate
/// limit client). A clone shares the connection. The thread ends when the last clone, and the
/// last guard using it, is dropped.
///
/// Opening parses the URL and starts nothing on the network: the first command connects, and
/// a Redis that is down when the service starts is a fallback like any other outage, not a
/// failure to start.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::fleet::RedisConnection;
///
/// let redis = RedisConnection::builder("redis://127.0.0.1:6379")
///     .command_timeout(Duration::from_millis(20))
///     .build()?;
/// assert_eq!(redis.command_timeout(), Duration::from_millis(20));
///
/// let err = RedisConnection::open("http://127.0.0.1:6379").unwrap_err();
/// assert_eq!(err.field(), "url");
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct RedisConnection {
    inner: Arc<Inner>,
}

struct Inner {
    url: String,
    command_timeout: Duration,
    heartbeat_interval: Duration,
    key_prefix: String,
    /// This process's name among the replicas of every fleet instance.
    replica: String,
    manager: ConnectionManager,
    runtime: tokio::runtime::Handle,
    /// Ends the connection's thread when the last clone is dropped.
    _stop: oneshot::Sender<()>,
    /// The instances whose replicas this process heartbeats for.
    members: Mutex<Vec<Weak<dyn heartbeat::Member>>>,
    /// Round trips the guards sent, for the cost figures and the tests that count them.
    commands: AtomicU64,
}

/// Builds a [`RedisConnection`]; see there.
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()` is called"]
pub struct RedisConnectionBuilder {
    url: String,
    command_timeout: Duration,
    heartbeat_interval: Duration,
    key_prefix: String,
}

/// Why a command to Redis did not give an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CommandError {
    /// No answer within the command timeout.
    TimedOut(Duration),
    /// Redis or the network said no (refused, reset, a script error).
    Failed(String),
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::TimedOut(t) => write!(f, "no answer from Redis within {t:?}"),
            CommandError::Failed(reason) => write!(f, "Redis: {reason}"),
        }
    }
}

impl RedisConnection {
    /// Default `command_timeout`: 20 ms (Envoy's rate limit service client uses the same).
    pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_millis(20);
    /// Default `heartbeat_interval`: 1 s. A replica is counted alive for three of them.
    pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
    /// Default `key_prefix`.
    pub const DEFAULT_KEY_PREFIX: &'static str = "resilience";
    /// The environment variable a registry reads the URL from when no `[redis]` table or
    /// [`Registry::set_redis`](crate::Registry::set_redis) gave one.
    pub const URL_VARIABLE: &'static str = "RESILIENCE_REDIS_URL";

    /// A connection to `url` (`redis://host:port/db`, `rediss://` is refused: this build has no
    /// TLS), with the default options.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] on `url` when it is not a Redis URL.
    pub fn open(url: &str) -> Result<Self, ConfigError> {
        Self::builder(url).build()
    }

    /// A builder for a connection to `url`.
    pub fn builder(url: impl Into<String>) -> RedisConnectionBuilder {
        RedisConnectionBuilder {
            url: url.into(),
            command_timeout: Self::DEFAULT_COMMAND_TIMEOUT,
            heartbeat_interval: Self::DEFAULT_HEARTBEAT_INTERVAL,
            key_prefix: Self::DEFAULT_KEY_PREFIX.to_owned(),
        }
    }

    /// The URL it connects to.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// How long a command may take before the guard gives up on Redis and falls back.
    pub fn command_timeout(&self) -> Duration {
        self.inner.command_timeout
    }

    /// How often this process tells Redis it is alive, for every fleet instance it uses.
    pub fn heartbeat_interval(&self) -> Duration {
        self.inner.heartbeat_interval
    }

    /// The first part of every key.
    pub fn key_prefix(&self) -> &str {
        &self.inner.key_prefix
    }

    /// This process's id among the replicas (random, fixed for the connection's life).
    pub fn replica_id(&self) -> &str {
        &self.inner.replica
    }

    /// The commands the guards sent over this connection so far (heartbeats not counted): one
    /// per admission asked of Redis, and one per lease given back.
    pub fn commands_sent(&self) -> u64 {
        self.inner.commands.load(Ordering::Relaxed)
    }

    /// The key of `part` of the instance `name` of `kind`, under one hash tag per instance so
    /// that all of an instance's keys are in one slot of a Redis Cluster.
    pub(crate) fn key(&self, kind: &str, name: &str, part: &str) -> String {
        format!("{}:{{{kind}:{name}}}:{part}", self.inner.key_prefix)
    }

    /// The id in Redis of this process's lease number `lease`: unique across the fleet.
    pub(crate) fn lease_id(&self, lease: u32) -> String {
        format!("{}:{lease}", self.inner.replica)
    }

    /// Removes the leases `leases` from the sorted set `key`, without waiting for the answer:
    /// a release that does not arrive leaves the lease to expire by itself.
    pub(crate) fn release_leases(&self, key: &str, leases: &[u32]) {
        if !leases.is_empty() {
            self.inner.commands.fetch_add(1, Ordering::Relaxed);
            self.remove_leases(key, leases);
        }
    }

    /// [`release_leases`](Self::release_leases), not counted (the heartbeat's).
    fn remove_leases(&self, key: &str, leases: &[u32]) {
        if leases.is_empty() {
            return;
        }
        let mut zrem = redis::cmd("ZREM");
        zrem.arg(key);
        for &lease in leases {
            zrem.arg(self.lease_id(lease));
        }
        let mut manager = self.manager();
        let timeout = self.inner.command_timeout;
        self.spawn_task(async move {
            let _ = tokio::time::timeout(timeout, zrem.query_async::<()>(&mut manager)).await;
        });
    }

    /// A handle that does not keep the connection open (the heartbeat task's).
    fn downgrade(&self) -> Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    /// The connection of `weak`, if it is still open.
    fn upgrade(weak: &Weak<Inner>) -> Option<Self> {
        weak.upgrade().map(|inner| RedisConnection { inner })
    }

    /// Runs `task` on the connection's thread.
    fn spawn_task(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.inner.runtime.spawn(task);
    }

    /// The multiplexed connection (a clone shares it).
    fn manager(&self) -> ConnectionManager {
        self.inner.manager.clone()
    }

    fn inner_members(&self) -> &Mutex<Vec<Weak<dyn heartbeat::Member>>> {
        &self.inner.members
    }

    /// Runs `command` on the connection's thread within the command timeout. `unclaimed` gets
    /// the answer, or the failure, if the caller gave up waiting for it (so that a lease the
    /// command may have taken is released): once, on whichever side last held the answer.
    pub(crate) fn send<T, F, Fut>(
        &self,
        command: F,
        unclaimed: impl Fn(Result<T, CommandError>) + Send + Sync + 'static,
    ) -> Reply<T>
    where
        T: Send + 'static,
        F: FnOnce(ConnectionManager) -> Fut + Send + 'static,
        Fut: Future<Output = redis::RedisResult<T>> + Send + 'static,
    {
        let unclaimed: Unclaimed<T> = Arc::new(unclaimed);
        let (to_async, from_task) = oneshot::channel();
        self.spawn(command, Arc::clone(&unclaimed), Sink::Async(to_async));
        Reply {
            answer: from_task,
            unclaimed: Some(unclaimed),
        }
    }

    /// [`send`](Self::send), for a caller that blocks its thread for the answer.
    pub(crate) fn send_blocking<T, F, Fut>(
        &self,
        command: F,
        unclaimed: impl Fn(Result<T, CommandError>) + Send + Sync + 'static,
    ) -> Result<T, CommandError>
    where
        T: Send + 'static,
        F: FnOnce(ConnectionManager) -> Fut + Send + 'static,
        Fut: Future<Output = redis::RedisResult<T>> + Send + 'static,
    {
        let (to_thread, from_task) = mpsc::sync_channel(1);
        self.spawn(command, Arc::new(unclaimed), Sink::Blocking(to_thread));
        // The task answers within the command timeout; the margin covers a thread that died.
        let margin = self.inner.command_timeout + Duration::from_secs(1);
        from_task
            .recv_timeout(margin)
            .unwrap_or(Err(CommandError::TimedOut(self.inner.command_timeout)))
    }

    fn spawn<T, F, Fut>(&self, command: F, unclaimed: Unclaimed<T>, sink: Sink<T>)
    where
        T: Send + 'static,
        F: FnOnce(ConnectionManager) -> Fut + Send + 'static,
        Fut: Future<Output = redis::RedisResult<T>> + Send + 'static,
    {
        self.inner.commands.fetch_add(1, Ordering::Relaxed);
        let manager = self.inner.manager.clone();
        let timeout = self.inner.command_timeout;
        self.inner.runtime.spawn(async move {
            let answer = match tokio::time::timeout(timeout, command(manager)).await {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(error)) => Err(CommandError::Failed(error.to_string())),
                Err(_) => Err(CommandError::TimedOut(timeout)),
            };
            if let Err(answer) = sink.answer(answer) {
                unclaimed(answer);
            }
        });
    }
}

/// Where a command's answer goes.
enum Sink<T> {
    Async(oneshot::Sender<Result<T, CommandError>>),
    Blocking(mpsc::SyncSender<Result<T, CommandError>>),
}

impl<T> Sink<T> {
    /// Delivers `answer`; gives it back if the caller is gone.
    fn answer(self, answer: Result<T, CommandError>) -> Result<(), Result<T, CommandError>> {
        match self {
            Sink::Async(to) => to.send(answer),
            Sink::Blocking(to) => to.try_send(answer).map_err(|e| match e {
                mpsc::TrySendError::Full(a) | mpsc::TrySendError::Disconnected(a) => a,
            }),
        }
    }
}

/// What a command's answer goes to when its caller gave up waiting for it.
type Unclaimed<T> = Arc<dyn Fn(Result<T, CommandError>) + Send + Sync>;

/// The answer of a command sent with [`RedisConnection::send`], for an async caller. Dropped
/// unread, it hands an answer already there to the command's `unclaimed` (one not there yet
/// goes to it from the task, which finds the channel closed).
pub(crate) struct Reply<T> {
    answer: oneshot::Receiver<Result<T, CommandError>>,
    /// `None` once the answer is read.
    unclaimed: Option<Unclaimed<T>>,
}

impl<T> Reply<T> {
    /// Waits for the answer (at most the command timeout: the task times the command out).
    pub(crate) async fn answer(mut self) -> Result<T, CommandError> {
        let answer = (&mut self.answer).await;
        self.unclaimed = None;
        answer.unwrap_or_else(|_| {
            Err(CommandError::Failed(
                "the connection's thread has stopped".to_owned(),
            ))
        })
    }
}

impl<T> Drop for Reply<T> {
    fn drop(&mut self) {
        if let Some(unclaimed) = self.unclaimed.take() {
            self.answer.close();
            if let Ok(answer) = self.answer.try_recv() {
                unclaimed(answer);
            }
        }
    }
}

impl RedisConnectionBuilder {
    /// How long one command may take (at least 1 ms): past it, the guard falls back as its
    /// configuration says. Also the connection timeout of a reconnection.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// How often this process heartbeats for the fleet instances it uses (at least 10 ms);
    /// a replica is counted alive, and a lease it holds lasts, for three intervals and a command
    /// timeout after its last heartbeat.
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// The first part of every key (`resilience` by default): keys are
    /// `{prefix}:{{{kind}:{name}}}:{part}`, such as `resilience:{rate_limiter:payments}:next`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Checks the options and starts the connection's thread (nothing is sent yet).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field: a URL that is not `redis://` or `redis+unix://`,
    /// a command timeout under 1 ms or over 1 h, a heartbeat interval under 10 ms or over 1 h,
    /// an empty key prefix or
    /// one with `{` or `}` (they would break the hash tag); or `connection` when the thread
    /// cannot be started.
    pub fn build(self) -> Result<RedisConnection, ConfigError> {
        if self.command_timeout < Duration::from_millis(1) {
            return Err(ConfigError::new(
                "command_timeout",
                format!("must be at least 1ms, got {:?}", self.command_timeout),
            ));
        }
        if self.heartbeat_interval < Duration::from_millis(10) {
            return Err(ConfigError::new(
                "heartbeat_interval",
                format!("must be at least 10ms, got {:?}", self.heartbeat_interval),
            ));
        }
        for (field, value) in [
            ("command_timeout", self.command_timeout),
            ("heartbeat_interval", self.heartbeat_interval),
        ] {
            // A dead replica's leases lapse after three intervals and a timeout.
            if value > Duration::from_secs(3600) {
                return Err(ConfigError::new(
                    field,
                    format!("must be at most 1h, got {value:?}"),
                ));
            }
        }
        if self.key_prefix.is_empty() || self.key_prefix.contains(['{', '}']) {
            return Err(ConfigError::new(
                "key_prefix",
                format!(
                    "must be non-empty and without `{{` or `}}` (the instance's hash tag \
                     follows it), got {:?}",
                    self.key_prefix
                ),
            ));
        }
        let scheme_ok = ["redis://", "redis+unix://", "unix://"]
            .iter()
            .any(|s| self.url.starts_with(s));
        let client = redis::Client::open(self.url.as_str())
            .ok()
            .filter(|_| scheme_ok)
            .ok_or_else(|| {
                ConfigError::new(
                    "url",
                    format!(
                        "not a Redis URL: {:?} (write `redis://host:port` or \
                         `redis://host:port/db`)",
                        redact(&self.url)
                    ),
                )
            })?;
        let (runtime, stop) = start_thread()?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.command_timeout))
            .set_response_timeout(Some(self.command_timeout))
            // Reconnection is the manager's; a command never waits for more than one attempt.
            .set_number_of_retries(1);
        let manager = {
            let _entered = runtime.enter();
            redis::aio::ConnectionManager::new_lazy_with_config(client, config)
                .map_err(|e| ConfigError::new("connection", e.to_string()))?
        };
        let connection = RedisConnection {
            inner: Arc::new(Inner {
                url: self.url,
                command_timeout: self.command_timeout,
                heartbeat_interval: self.heartbeat_interval,
                key_prefix: self.key_prefix,
                replica: replica_id(),
                manager,
                runtime,
                _stop: stop,
                members: Mutex::new(Vec::new()),
                commands: AtomicU64::new(0),
            }),
        };
        heartbeat::start(&connection);
        Ok(connection)
    }
}

/// The connection's thread: a single-thread runtime running until `stop`'s sender is dropped.
fn start_thread() -> Result<(tokio::runtime::Handle, oneshot::Sender<()>), ConfigError> {
    let cannot = |e: std::io::Error| ConfigError::new("connection", format!("{e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(cannot)?;
    let handle = runtime.handle().clone();
    let (stop, stopped) = oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("resilience-redis".to_owned())
        .spawn(move || {
            let _ = runtime.block_on(stopped);
        })
        .map_err(cannot)?;
    Ok((handle, stop))
}

/// A replica id unique across processes and hosts: the process id and 64 random bits.
fn replica_id() -> String {
    format!("{}-{:016x}", std::process::id(), fastrand::u64(..))
}

/// `url` without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// Two handles are equal when they share one connection.
impl PartialEq for RedisConnection {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for RedisConnection {}

impl fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConnection")
            .field("url", &redact(&self.inner.url))
            .field("command_timeout", &self.inner.command_timeout)
            .field("heartbeat_interval", &self.inner.heartbeat_interval)
            .field("replica", &self.inner.replica)
            .finish_non_exhaustive()
    }
}

pub(crate) use heartbeat::Member;

/// Heartbeats: every replica keeps its id in each fleet instance's replica set, so that a
/// replica cut off from Redis knows its share of the fleet limit (the limit divided by the
/// replicas it last saw alive).
pub(crate) mod heartbeat {
    use std::sync::{Arc, Weak};
    use std::time::Duration;

    use redis::Script;

    use super::{lock, RedisConnection};

    static HEARTBEAT: once_cell::sync::Lazy<Script> =
        once_cell::sync::Lazy::new(|| Script::new(include_str!("scripts/heartbeat.lua")));

    /// A fleet instance, as the heartbeat sees it.
    pub(crate) trait Member: Send + Sync {
        /// The key of the instance's replica set.
        fn replicas_key(&self) -> &str;

        /// The replicas alive at the last heartbeat, this one included.
        fn seen_alive(&self, replicas: u32);

        /// The key of the instance's leases and the numbers of those this replica holds now,
        /// renewed by each heartbeat (a bulkhead's; `None` for an instance without leases).
        fn leases(&self) -> Option<(&str, Vec<u32>)> {
            None
        }

        /// Whether this replica still holds lease `lease`.
        fn holds(&self, lease: u32) -> bool {
            let _ = lease;
            false
        }
    }

    /// How long a heartbeat, and a lease, counts: three intervals, so that one lost heartbeat
    /// drops no replica and no lease, and a command timeout, so that a renewal that takes all
    /// of its timeout is still in time.
    pub(crate) fn ttl(connection: &RedisConnection) -> Duration {
        connection
            .heartbeat_interval()
            .saturating_mul(3)
            .saturating_add(connection.command_timeout())
    }

    /// Adds `member` to the instances this process heartbeats for, and sends its first
    /// heartbeat now.
    pub(crate) fn join(connection: &RedisConnection, member: &Arc<dyn Member>) {
        lock(connection.inner_members()).push(Arc::downgrade(member));
        spawn_beat(connection, Arc::clone(member));
    }

    /// One heartbeat of `member` as a task of its own: a slow one delays no other member's,
    /// so that no lease goes unrenewed for longer than an interval and a command timeout.
    fn spawn_beat(connection: &RedisConnection, member: Arc<dyn Member>) {
        let task_connection = connection.clone();
        connection.spawn_task(async move {
            let mut manager = task_connection.manager();
            beat(&task_connection, &mut manager, &*member).await;
        });
    }

    /// Starts the heartbeat task of `connection`, which ends with the connection.
    pub(crate) fn start(connection: &RedisConnection) {
        let weak = connection.downgrade();
        connection.spawn_task(async move {
            loop {
                let Some(connection) = RedisConnection::upgrade(&weak) else {
                    return;
                };
                let interval = connection.heartbeat_interval();
                let members: Vec<Arc<dyn Member>> = {
                    let mut members = lock(connection.inner_members());
                    members.retain(|m| m.strong_count() > 0);
                    members.iter().filter_map(Weak::upgrade).collect()
                };
                for member in members {
                    spawn_beat(&connection, member);
                }
                drop(connection);
                tokio::time::sleep(interval).await;
            }
        });
    }

    /// One heartbeat of `member`, renewing its leases; a failed one changes nothing (the count
    /// seen last stays, and the leases expire at their time).
    async fn beat(
        connection: &RedisConnection,
        manager: &mut redis::aio::ConnectionManager,
        member: &dyn Member,
    ) {
        let ttl = ttl(connection);
        let mut invocation = HEARTBEAT.key(member.replicas_key());
        invocation
            .arg(connection.replica_id())
            .arg(u64::try_from(ttl.as_micros()).unwrap_or(u64::MAX));
        let leases = member.leases();
        if let Some((key, held)) = &leases {
            invocation.key(*key);
            for &lease in held {
                invocation.arg(connection.lease_id(lease));
            }
        }
        let answer = tokio::time::timeout(
            connection.command_timeout(),
            invocation.invoke_async::<u32>(manager),
        )
        .await;
        if let Ok(Ok(replicas)) = answer {
            member.seen_alive(replicas.max(1));
        }
        // A renewal re-adds a lease a restarted Redis lost; one released while the renewal was
        // on its way may be re-added by it too, so it is released again after it.
        if let Some((key, held)) = leases {
            let released: Vec<u32> = held.into_iter().filter(|&l| !member.holds(l)).collect();
            connection.remove_leases(key, &released);
        }
    }
}
