//! Heartbeats: every replica keeps its id in each fleet instance's replica set, so that a
//! replica cut off from Redis knows its share of the fleet limit (the limit divided by the
//! replicas it last saw alive).

use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::Script;

use super::connection::{lock, RedisConnection};

static HEARTBEAT: once_cell::sync::Lazy<Script> =
    once_cell::sync::Lazy::new(|| Script::new(include_str!("scripts/heartbeat.lua")));

/// A fleet instance, as the heartbeat sees it.
pub(crate) trait Member: Send + Sync {
    /// The key of the instance's replica set.
    fn replicas_key(&self) -> &str;

    /// The replicas alive at the last heartbeat, this one included.
    fn seen_alive(&self, replicas: u32);
}

/// How long a heartbeat counts: three intervals, so one lost heartbeat does not drop a replica.
pub(crate) fn ttl(interval: Duration) -> Duration {
    interval * 3
}

/// Adds `member` to the instances this process heartbeats for, and sends its first
/// heartbeat now.
pub(crate) fn join(connection: &RedisConnection, member: &Arc<dyn Member>) {
    lock(connection.inner_members()).push(Arc::downgrade(member));
    let member = Arc::clone(member);
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
            let mut manager = connection.manager();
            for member in members {
                beat(&connection, &mut manager, &*member).await;
            }
            drop(connection);
            tokio::time::sleep(interval).await;
        }
    });
}

/// One heartbeat of `member`; a failed one changes nothing (the count seen last stays).
async fn beat(
    connection: &RedisConnection,
    manager: &mut redis::aio::ConnectionManager,
    member: &dyn Member,
) {
    let ttl = ttl(connection.heartbeat_interval());
    let mut invocation = HEARTBEAT.key(member.replicas_key());
    invocation
        .arg(connection.replica_id())
        .arg(u64::try_from(ttl.as_micros()).unwrap_or(u64::MAX));
    let answer = tokio::time::timeout(
        connection.command_timeout(),
        invocation.invoke_async::<u32>(manager),
    )
    .await;
    if let Ok(Ok(replicas)) = answer {
        member.seen_alive(replicas.max(1));
    }
}
