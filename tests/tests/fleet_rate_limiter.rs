//! A rate limiter whose limit is held in Redis, shared by replicas: against a real
//! `redis-server` (see `support/redis_server.rs`), several limiters and several processes on
//! one limit, refusals that cost no round trip, and every fallback while Redis is stopped,
//! paused or slowed.

#[path = "support/redis_server.rs"]
mod redis_server;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis_server::{connection, prefix, RedisServer};
use resilience_runtime::fleet::{Backend, FleetFallback, RedisConnection};
use resilience_runtime::{rate_limiter, RateLimiter, RateLimiterConfig, Rejected};

fn fleet_limiter(
    name: &str,
    connection: &RedisConnection,
    limit: u32,
    period: Duration,
    fallback: FleetFallback,
) -> RateLimiter {
    RateLimiter::new(
        name,
        RateLimiterConfig::builder()
            .limit_for_period(limit)
            .limit_refresh_period(period)
            .backend(Backend::redis_with(connection.clone()).fallback(fallback))
            .build()
            .unwrap(),
    )
}

/// Waits, if needed, until at least `margin` is left of the current cycle of `period` (the
/// fleet's cycles are counted from the epoch on Redis's clock, this machine's).
fn clear_of_a_cycle_boundary(period: Duration, margin: Duration) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let into = Duration::from_nanos((now.as_nanos() % period.as_nanos()) as u64);
    if period - into < margin {
        std::thread::sleep(period - into + Duration::from_millis(5));
    }
}

fn record(guard: &RateLimiter) -> Arc<Mutex<Vec<String>>> {
    redis_server::fleet_events(|sink| {
        guard.subscribe(sink);
    })
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn two_replicas_share_one_limit_and_a_refusal_costs_no_round_trip() {
    let Some(url) = redis_server::shared() else {
        return;
    };
    let prefix = prefix();
    let (first, second) = (connection(&url, &prefix), connection(&url, &prefix));
    let a = fleet_limiter("payments", &first, 5, HOUR, FleetFallback::Refuse);
    let b = fleet_limiter("payments", &second, 5, HOUR, FleetFallback::Refuse);
    clear_of_a_cycle_boundary(HOUR, Duration::from_secs(30));

    for _ in 0..3 {
        a.try_acquire().expect("within the fleet limit");
    }
    for _ in 0..2 {
        b.try_acquire().expect("within the fleet limit");
    }
    for limiter in [&a, &b] {
        match limiter.try_acquire() {
            Err(Rejected::RequestNotPermitted { retry_after, .. }) => {
                assert!(
                    retry_after > Duration::ZERO && retry_after <= HOUR,
                    "{retry_after:?}"
                );
            }
            other => panic!("the sixth call of the fleet must be refused, got {other:?}"),
        }
    }
    assert_eq!(a.available_permissions(), 0);

    // Refused again until the next cycle, without asking Redis.
    let sent = first.commands_sent();
    for _ in 0..100 {
        assert!(matches!(
            a.try_acquire(),
            Err(Rejected::RequestNotPermitted { .. })
        ));
    }
    assert_eq!(
        first.commands_sent(),
        sent,
        "a remembered refusal sends nothing"
    );

    let metrics = a.metrics();
    assert_eq!(metrics.permitted_calls(), 3);
    assert_eq!(metrics.rejected_calls(), 101);
    assert_eq!(metrics.fleet_fallback_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_may_wait_reserves_a_permission_of_the_next_cycle() {
    let Some(url) = redis_server::shared() else {
        return;
    };
    let connection = connection(&url, &prefix());
    let period = Duration::from_millis(500);
    let limiter = RateLimiter::new(
        "reserved",
        RateLimiterConfig::builder()
            .limit_for_period(1)
            .limit_refresh_period(period)
            .timeout_duration(Duration::from_secs(2))
            .backend(Backend::redis_with(connection))
            .build()
            .unwrap(),
    );
    clear_of_a_cycle_boundary(period, Duration::from_millis(200));
    limiter.acquire().await.unwrap();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let to_next_cycle = period - Duration::from_nanos((now.as_nanos() % period.as_nanos()) as u64);
    let start = Instant::now();
    limiter
        .acquire()
        .await
        .expect("a permission of the next cycle");
    // A reservation never runs before its cycle (a clock reading's rounding aside).
    assert!(
        start.elapsed() + Duration::from_millis(2) >= to_next_cycle,
        "waited {:?}, the next cycle was {to_next_cycle:?} away",
        start.elapsed()
    );
    assert_eq!(limiter.metrics().permitted_calls(), 2);
}

#[rate_limiter(name = "fleet_attribute")]
async fn pay(amount: u32) -> Result<u32, Rejected> {
    Ok(amount)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attribute_is_the_same_for_a_fleet_limit() {
    let Some(url) = redis_server::shared() else {
        return;
    };
    let registry = resilience_runtime::Registry::global();
    registry.set_redis(connection(&url, &prefix()));
    registry
        .configure_rate_limiter(
            "fleet_attribute",
            RateLimiterConfig::builder()
                .limit_for_period(2)
                .limit_refresh_period(HOUR)
                .backend(Backend::redis())
                .build()
                .unwrap(),
        )
        .unwrap();
    clear_of_a_cycle_boundary(HOUR, Duration::from_secs(30));
    assert_eq!(pay(1).await, Ok(1));
    assert_eq!(pay(2).await, Ok(2));
    assert!(matches!(
        pay(3).await,
        Err(Rejected::RequestNotPermitted { .. })
    ));
    let backend = registry.rate_limiter("fleet_attribute").config().backend();
    assert!(!backend.is_local());
}

#[test]
fn redis_stopped_the_local_share_decides_and_restarted_the_fleet_limit_holds_again() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let prefix = prefix();
    let (first, second) = (
        connection(&server.url(), &prefix),
        connection(&server.url(), &prefix),
    );
    let a = fleet_limiter("share", &first, 10, HOUR, FleetFallback::LocalShare);
    let b = fleet_limiter("share", &second, 10, HOUR, FleetFallback::LocalShare);
    let events = record(&a);
    clear_of_a_cycle_boundary(HOUR, Duration::from_secs(30));
    // Both replicas have heartbeaten and seen each other.
    std::thread::sleep(Duration::from_millis(400));

    server.stop();
    let start = Instant::now();
    a.try_acquire().expect("the local share admits");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "a call waits for Redis at most its command timeout (50 ms), took {:?}",
        start.elapsed()
    );
    for _ in 0..4 {
        a.try_acquire()
            .expect("within the share of 10 / 2 replicas");
    }
    assert!(
        matches!(a.try_acquire(), Err(Rejected::RequestNotPermitted { .. })),
        "the sixth call is over this replica's share"
    );
    assert_eq!(a.metrics().fleet_fallback_calls(), 6);
    assert_eq!(
        events.lock().unwrap().len(),
        1,
        "{:?}",
        events.lock().unwrap()
    );
    assert!(events.lock().unwrap()[0].contains("`local_share`"));

    server.restart();
    // The next try of Redis comes a heartbeat interval after the last failure.
    std::thread::sleep(Duration::from_millis(300));
    let mut granted = 0;
    for limiter in [&a, &b, &a, &b, &a, &b, &a, &b, &a, &b, &a, &b] {
        if limiter.try_acquire().is_ok() {
            granted += 1;
        }
    }
    assert_eq!(
        granted, 10,
        "the fleet limit holds again across both replicas"
    );
    assert!(
        events.lock().unwrap().last().unwrap().contains("again"),
        "{:?}",
        events.lock().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_admits_and_fail_closed_refuses_while_redis_is_away() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let connection = connection(&server.url(), &prefix());
    let open = fleet_limiter("open", &connection, 1, HOUR, FleetFallback::Admit);
    let closed = fleet_limiter("closed", &connection, 1, HOUR, FleetFallback::Refuse);
    server.stop();
    for _ in 0..5 {
        assert_eq!(open.acquire().await, Ok(()));
        assert!(matches!(
            closed.acquire().await,
            Err(Rejected::RequestNotPermitted { .. })
        ));
    }
    assert_eq!(open.metrics().permitted_calls(), 5);
    assert_eq!(closed.metrics().rejected_calls(), 5);
    assert_eq!(open.metrics().fleet_fallback_calls(), 5);
}

#[test]
fn a_paused_or_sleeping_redis_is_a_fallback_within_the_timeout() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let connection = connection(&server.url(), &prefix());
    let limiter = fleet_limiter("paused", &connection, 1000, HOUR, FleetFallback::Admit);
    let events = record(&limiter);
    limiter.try_acquire().unwrap();
    assert_eq!(limiter.metrics().fleet_fallback_calls(), 0);

    for (round, stall) in redis_server::stalls(1500).into_iter().enumerate() {
        let staller = redis_server::stall(&server.url(), &stall);
        let before = limiter.metrics().fleet_fallback_calls();
        let start = Instant::now();
        limiter.try_acquire().expect("fail open");
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{stall:?}: waited {:?} for a stalled Redis (timeout 50 ms)",
            start.elapsed()
        );
        assert_eq!(limiter.metrics().fleet_fallback_calls(), before + 1);
        staller.join().unwrap();
        // Back to Redis by itself once it answers: told once down, once back.
        let deadline = Instant::now() + Duration::from_secs(10);
        while events.lock().unwrap().len() < 2 * (round + 1) {
            assert!(Instant::now() < deadline, "{:?}", events.lock().unwrap());
            std::thread::sleep(Duration::from_millis(50));
            limiter
                .try_acquire()
                .expect("fail open, or the fleet limit");
        }
        let sent = connection.commands_sent();
        limiter.try_acquire().unwrap();
        assert_eq!(connection.commands_sent(), sent + 1, "asks Redis again");
    }
    let told = events.lock().unwrap().clone();
    assert_eq!(told.len(), 4, "{told:?}");
}

/// One replica of `run_replicas`, run as a child process of the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_child() {
    let Ok(url) = std::env::var("FLEET_REPLICA_URL") else {
        return;
    };
    let prefix = std::env::var("FLEET_REPLICA_PREFIX").unwrap();
    let batch = std::env::var("FLEET_REPLICA_BATCH")
        .unwrap()
        .parse()
        .unwrap();
    let limit = std::env::var("FLEET_REPLICA_LIMIT")
        .unwrap()
        .parse()
        .unwrap();
    let connection = connection(&url, &prefix);
    let limiter = Arc::new(RateLimiter::new(
        "processes",
        RateLimiterConfig::builder()
            .limit_for_period(limit)
            .limit_refresh_period(CHILD_PERIOD)
            .backend(
                Backend::redis_with(connection.clone())
                    .fallback(FleetFallback::Refuse)
                    .batch(batch),
            )
            .build()
            .unwrap(),
    ));
    let end = Instant::now() + CHILD_RUN;
    let mut callers = Vec::new();
    for _ in 0..8 {
        let limiter = Arc::clone(&limiter);
        callers.push(tokio::spawn(async move {
            let micros = || {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_micros()
            };
            let mut granted = Vec::new();
            while Instant::now() < end {
                let asked = micros();
                match limiter.acquire().await {
                    Ok(()) => granted.push((asked, micros())),
                    Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
                }
            }
            granted
        }));
    }
    for caller in callers {
        for (asked, granted) in caller.await.unwrap() {
            println!("GRANTED {asked} {granted}");
        }
    }
    println!("ROUND_TRIPS {}", connection.commands_sent());
}

const CHILD_LIMIT: u32 = 20;
const CHILD_PERIOD: Duration = Duration::from_millis(200);
const CHILD_RUN: Duration = Duration::from_secs(2);

#[test]
fn several_processes_hold_one_limit() {
    let Some(url) = redis_server::shared() else {
        return;
    };
    let (admitted, round_trips) = run_replicas(&url, 1, CHILD_LIMIT);
    let cycles_run = (CHILD_RUN.as_millis() / CHILD_PERIOD.as_millis()) as u64;
    assert!(
        admitted >= (cycles_run - 2) * u64::from(CHILD_LIMIT),
        "the limit is used, not just respected: {admitted} admitted in {cycles_run} cycles"
    );
    // One per admitted call; a refusal is remembered until the next cycle, so refusals cost
    // at most the callers in flight when it came, per replica and cycle (3 × 8 × 10 cycles),
    // however many calls are refused (thousands a cycle here).
    let cycles = (CHILD_RUN.as_millis() / CHILD_PERIOD.as_millis()) as u64 + 2;
    assert!(
        round_trips >= admitted && round_trips <= admitted + 3 * 8 * cycles,
        "{round_trips} round trips for {admitted} admitted calls"
    );
}

#[test]
fn several_processes_hold_one_limit_with_batches_and_fewer_round_trips() {
    let Some(url) = redis_server::shared() else {
        return;
    };
    // At the limit: batches never take a cycle over it (run_replicas checks every cycle).
    let (admitted, _) = run_replicas(&url, 5, CHILD_LIMIT);
    assert!(admitted > 0);
    // Under it, where batches matter: callers served from the batch, not by Redis.
    let (admitted, round_trips) = run_replicas(&url, 10, 1_000_000);
    assert!(
        round_trips * 3 <= admitted,
        "batches of 10: {round_trips} round trips for {admitted} admitted calls"
    );
}

/// Three child processes of this test on one limit, each with eight callers as fast as they
/// can; checks every cycle admitted at most the limit across them. Returns the calls admitted
/// and the round trips sent, in all.
fn run_replicas(url: &str, batch: u32, limit: u32) -> (u64, u64) {
    let prefix = prefix();
    let children: Vec<_> = (0..3)
        .map(|_| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "replica_child",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("FLEET_REPLICA_URL", url)
                .env("FLEET_REPLICA_PREFIX", &prefix)
                .env("FLEET_REPLICA_BATCH", batch.to_string())
                .env("FLEET_REPLICA_LIMIT", limit.to_string())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Redis granted each permission between the call's start and its end, on the same clock:
    // a call that started and ended in one cycle was granted in it. The others, whose cycle is
    // one of two, are counted apart.
    let mut per_cycle = std::collections::BTreeMap::<u128, u32>::new();
    let (mut across_a_boundary, mut round_trips) = (0u64, 0);
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        let stdout = String::from_utf8_lossy(&output.stdout);
        let granted: Vec<(u128, u128)> = stdout
            .lines()
            .filter_map(|l| l.split_once("GRANTED ").map(|(_, times)| times))
            .map(|t| {
                let (asked, granted) = t.split_once(' ').unwrap();
                (asked.parse().unwrap(), granted.parse().unwrap())
            })
            .collect();
        assert!(!granted.is_empty(), "every replica got permissions");
        let cycle = |micros: u128| micros / CHILD_PERIOD.as_micros();
        for (asked, granted) in granted {
            if cycle(asked) == cycle(granted) {
                *per_cycle.entry(cycle(granted)).or_default() += 1;
            } else {
                across_a_boundary += 1;
            }
        }
        round_trips += stdout
            .lines()
            .find_map(|l| l.strip_prefix("ROUND_TRIPS "))
            .map(|n| n.parse::<u64>().unwrap())
            .unwrap();
    }
    let most = per_cycle.values().max().copied().unwrap_or(0);
    assert!(
        most <= limit,
        "a cycle admitted {most} across the fleet, over its limit of {limit}: {per_cycle:?}"
    );
    let within: u64 = per_cycle.values().map(|&n| u64::from(n)).sum();
    assert!(
        across_a_boundary * 4 <= within,
        "too few calls placed in one cycle for the check to mean much: {across_a_boundary} \
         across a boundary, {within} within one"
    );
    (within + across_a_boundary, round_trips)
}

#[test]
fn a_configuration_file_gives_every_replica_one_fleet_limit() {
    let Some(url) = redis_server::shared() else {
        return;
    };
    let document = format!(
        r#"
        [redis]
        url = "{url}"
        key_prefix = "{prefix}"
        command_timeout = "50ms"

        [rate_limiter.instances.payments]
        backend = "redis"
        redis_fallback = "refuse"
        limit_for_period = 2
        limit_refresh_period = "1h"
        "#,
        prefix = prefix()
    );
    let replicas = [
        resilience_runtime::Registry::new(),
        resilience_runtime::Registry::new(),
    ];
    for registry in &replicas {
        registry.load_toml(&document).unwrap();
    }
    clear_of_a_cycle_boundary(HOUR, Duration::from_secs(30));
    let [a, b] = replicas.each_ref().map(|r| r.rate_limiter("payments"));
    a.try_acquire().unwrap();
    b.try_acquire().unwrap();
    assert!(a.try_acquire().is_err() && b.try_acquire().is_err());
    assert_eq!(
        a.config().backend().fallback_choice(),
        Some(FleetFallback::Refuse)
    );

    // Applied again, the document changes nothing: same connection, same limiter state.
    let changes = replicas[0].load_toml(&document).unwrap();
    assert!(changes.is_empty(), "{changes}");
    assert!(a.try_acquire().is_err());
}

#[test]
fn a_fleet_configuration_without_redis_is_refused_with_the_fix() {
    let registry = resilience_runtime::Registry::new();
    let cases = [
        (
            "[rate_limiter.instances.payments]\nbackend = \"redis\"\nlimit_refresh_period = \"1s\"\n",
            "rate_limiter.instances.payments.backend",
            "`redis` needs a connection: add a `[redis]` table with `url`",
        ),
        (
            "[redis]\nurl = \"redis://127.0.0.1:6379\"\n\n\
             [rate_limiter.instances.payments]\nbackend = \"redis\"\n",
            "rate_limiter.instances.payments.backend",
            "got the default 500ns; set `limit_refresh_period`",
        ),
        (
            "[rate_limiter.instances.payments]\nredis_fallback = \"admit\"\n",
            "rate_limiter.instances.payments.redis_fallback",
            "takes effect only with `backend = \"redis\"`",
        ),
        (
            "[rate_limiter.instances.payments]\nbackend = \"cluster\"\n",
            "rate_limiter.instances.payments.backend",
            "`cluster` is not a backend; write one of \"local\", \"redis\"",
        ),
        (
            "[redis]\nurl = \"http://127.0.0.1:6379\"\n",
            "redis.url",
            "not a Redis URL",
        ),
        (
            "[redis]\nurl = \"redis://127.0.0.1:6379\"\ncommand_timeout = \"0ms\"\n",
            "redis.command_timeout",
            "must be at least 1ms",
        ),
        (
            "[redis]\nurl = \"redis://127.0.0.1:6379\"\n\n[rate_limiter.instances.payments]\n\
             backend = \"redis\"\nlimit_refresh_period = \"100us\"\n",
            "rate_limiter.instances.payments.limit_refresh_period",
            "at least 1ms with a Redis backend",
        ),
    ];
    for (document, key, reason) in cases {
        if reason.contains("needs a connection")
            && std::env::var_os("RESILIENCE_REDIS_URL").is_some()
        {
            continue; // the environment gives every registry a connection
        }
        let error = registry.load_toml(document).unwrap_err();
        assert_eq!(error.key_path(), key, "{error}");
        assert!(error.to_string().contains(reason), "{error}");
    }
    assert!(registry
        .rate_limiter("payments")
        .config()
        .backend()
        .is_local());
}
