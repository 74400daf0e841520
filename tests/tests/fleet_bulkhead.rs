//! A bulkhead whose limit is held in Redis as leases, shared by replicas: against a real
//! `redis-server` (see `support/redis_server.rs`), several bulkheads and several processes on
//! one limit, a replica killed mid-call, a caller that gives up, and the fallbacks while Redis
//! is stopped or paused.

#[path = "support/redis_server.rs"]
mod redis_server;

use std::io::BufRead;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis_server::{connection, connection_with, prefix, RedisServer};
use resilience_runtime::fleet::{Backend, FleetFallback, RedisConnection};
use resilience_runtime::{bulkhead, Bulkhead, BulkheadConfig, Clock, ManualClock, Rejected};

/// A connection for the tests that are not about outages: a round trip that takes a second
/// (a loaded machine) is still an answer.
fn steady(url: &str, prefix: &str) -> RedisConnection {
    connection_with(
        url,
        prefix,
        Duration::from_secs(1),
        Duration::from_millis(100),
    )
}

fn fleet_bulkhead(
    name: &str,
    connection: &RedisConnection,
    limit: u32,
    wait: Duration,
    fallback: FleetFallback,
) -> Bulkhead {
    Bulkhead::new(
        name,
        BulkheadConfig::builder()
            .max_concurrent_calls(limit)
            .max_wait_duration(wait)
            .backend(Backend::redis_with(connection.clone()).fallback(fallback))
            .build()
            .unwrap(),
    )
}

/// The leases of `name` in Redis now.
fn leases_in_redis(url: &str, prefix: &str, name: &str) -> u32 {
    let key = format!("{prefix}:{{bulkhead:{name}}}:leases");
    let reply = redis_server::command(url, &["ZCARD", &key]);
    reply.trim_start_matches(':').parse().unwrap()
}

/// Waits up to 5 s for `done`, checking every 10 ms.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "not within 5 s: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn record(guard: &Bulkhead) -> Arc<Mutex<Vec<String>>> {
    redis_server::fleet_events(|sink| {
        guard.subscribe(sink);
    })
}

fn is_full(result: Result<impl Sized, Rejected>) -> bool {
    matches!(result, Err(Rejected::BulkheadFull { .. }))
}

#[test]
fn two_replicas_share_one_limit_and_a_lease_costs_two_commands() {
    let Some(url) = redis_server::shared() else {
        return;
    };
    let prefix = prefix();
    let (first, second) = (steady(&url, &prefix), steady(&url, &prefix));
    let config = |connection: &RedisConnection| {
        BulkheadConfig::builder()
            .max_concurrent_calls(3)
            .backend(Backend::redis_with(connection.clone()).fallback(FleetFallback::Refuse))
            .build()
            .unwrap()
    };
    // A clock of the test's own: how long a replica takes the fleet for full.
    let manual = ManualClock::new();
    let a = Bulkhead::with_clock("db", config(&first), Clock::from(manual.clone()));
    let b = Bulkhead::with_clock("db", config(&second), Clock::from(manual.clone()));

    let one = a.try_acquire().expect("within the fleet limit");
    let two = a.try_acquire().expect("within the fleet limit");
    let three = b.try_acquire().expect("within the fleet limit");
    assert!(is_full(a.try_acquire()) && is_full(b.try_acquire()));
    assert_eq!(a.available_concurrent_calls(), 0);
    assert_eq!(leases_in_redis(&url, &prefix, "db"), 3);
    let (a_sent, b_sent) = (first.commands_sent(), second.commands_sent());
    assert_eq!(a_sent, 3, "one command per lease asked for");
    for _ in 0..100 {
        assert!(is_full(a.try_acquire()));
    }
    assert_eq!(first.commands_sent(), a_sent, "a full fleet is remembered");

    // A lease given back: the replica that gave it back asks at once, the other one after
    // its memory of a full fleet (10 ms).
    drop(one);
    assert_eq!(
        first.commands_sent(),
        a_sent + 1,
        "one command per lease given back"
    );
    eventually("the lease is back in Redis", || {
        leases_in_redis(&url, &prefix, "db") == 2
    });
    assert!(is_full(b.try_acquire()));
    assert_eq!(second.commands_sent(), b_sent, "remembered");
    manual.advance(Duration::from_millis(10));
    let four = b.try_acquire().expect("the lease a gave back");
    drop((two, three, four));
    eventually("every lease is back", || {
        leases_in_redis(&url, &prefix, "db") == 0
    });

    let metrics = a.metrics();
    assert_eq!(metrics.permitted_calls(), 2);
    assert_eq!(metrics.rejected_calls(), 101);
    assert_eq!(metrics.finished_calls(), 2);
    assert_eq!(metrics.fleet_fallback_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_may_wait_gets_the_lease_another_replica_gives_back() {
    let Some(url) = redis_server::shared() else {
        return;
    };
    let prefix = prefix();
    let (first, second) = (steady(&url, &prefix), steady(&url, &prefix));
    let wait = Duration::from_secs(5);
    let a = fleet_bulkhead("inventory", &first, 1, wait, FleetFallback::Refuse);
    let b = Arc::new(fleet_bulkhead(
        "inventory",
        &second,
        1,
        wait,
        FleetFallback::Refuse,
    ));
    let held = a.acquire().await.unwrap();
    let waiter = {
        let b = Arc::clone(&b);
        tokio::spawn(async move {
            let start = Instant::now();
            b.acquire().await.map(|_| start.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "the fleet's only lease is held");
    drop(held);
    let waited = waiter.await.unwrap().expect("the lease given back");
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    // Pauses between asks: far fewer commands than a tight loop would send in 200 ms.
    assert!(
        second.commands_sent() < 40,
        "{} commands while waiting",
        second.commands_sent()
    );

    // Without a wait, a full fleet refuses at once.
    eventually_async("the waiter's lease is given back", || {
        leases_in_redis(&url, &prefix, "inventory") == 0
    })
    .await;
    let c = fleet_bulkhead(
        "inventory",
        &first,
        1,
        Duration::ZERO,
        FleetFallback::Refuse,
    );
    let held = c.acquire().await.unwrap();
    let sent = first.commands_sent();
    assert!(is_full(c.acquire().await));
    assert_eq!(
        first.commands_sent(),
        sent,
        "its own lease filled the fleet (Redis said so): refused without asking, or pausing"
    );
    assert_eq!(c.metrics().fleet_fallback_calls(), 0);
    drop(held);
}

#[bulkhead(name = "fleet_attribute")]
async fn query(hold: Duration) -> Result<(), Rejected> {
    tokio::time::sleep(hold).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attribute_is_the_same_and_a_dropped_call_gives_its_lease_back() {
    let Some(url) = redis_server::shared() else {
        return;
    };
    let prefix = prefix();
    let registry = resilience_runtime::Registry::global();
    registry
        .configure_bulkhead(
            "fleet_attribute",
            BulkheadConfig::builder()
                .max_concurrent_calls(1)
                .max_wait_duration(Duration::from_secs(5))
                // Heartbeats 10 s apart: a lease left behind would last 31 s, not go at once.
                .backend(Backend::redis_with(connection_with(
                    &url,
                    &prefix,
                    Duration::from_secs(1),
                    Duration::from_secs(10),
                )))
                .build()
                .unwrap(),
        )
        .unwrap();
    assert_eq!(query(Duration::ZERO).await, Ok(()));

    // A call holding the lease, dropped mid-call, gives it back.
    let running = tokio::spawn(query(Duration::from_secs(60)));
    eventually_async("the call holds the lease", || {
        leases_in_redis(&url, &prefix, "fleet_attribute") == 1
    })
    .await;
    // A caller waiting for the lease, dropped, takes none.
    let waiting = tokio::spawn(query(Duration::ZERO));
    tokio::time::sleep(Duration::from_millis(100)).await;
    waiting.abort();
    running.abort();
    eventually_async("no lease is left", || {
        leases_in_redis(&url, &prefix, "fleet_attribute") == 0
    })
    .await;
    assert_eq!(query(Duration::ZERO).await, Ok(()));
    let bulkhead = registry.bulkhead("fleet_attribute");
    assert!(!bulkhead.config().backend().is_local());
    assert_eq!(bulkhead.metrics().permitted_calls(), 3);
    assert_eq!(bulkhead.metrics().finished_calls(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_gives_up_while_its_ask_is_on_its_way_leaves_no_lease() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = prefix();
    // Heartbeats 10 s apart: a lease left behind would last 32 s, not go at once.
    let connection = connection_with(
        &server.url(),
        &prefix,
        Duration::from_secs(2),
        Duration::from_secs(10),
    );
    let bulkhead = fleet_bulkhead(
        "slow",
        &connection,
        1,
        Duration::ZERO,
        FleetFallback::Refuse,
    );
    drop(bulkhead.acquire().await.unwrap());
    let url = server.url();
    let sleeper =
        std::thread::spawn(move || redis_server::command(&url, &["DEBUG", "SLEEP", "0.5"]));
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The script waits behind the sleep; the caller gives up first.
    let gave_up = tokio::time::timeout(Duration::from_millis(100), bulkhead.acquire()).await;
    assert!(gave_up.is_err(), "still waiting for Redis");
    sleeper.join().unwrap();
    eventually_async("the lease the script took is given back", || {
        leases_in_redis(&server.url(), &prefix, "slow") == 0
    })
    .await;
    assert!(bulkhead.acquire().await.is_ok());
}

async fn eventually_async(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "not within 5 s: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn redis_stopped_leases_held_count_against_the_local_share_and_restarted_they_are_back() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let prefix = prefix();
    let (first, second) = (
        connection(&server.url(), &prefix),
        connection(&server.url(), &prefix),
    );
    let a = fleet_bulkhead("db", &first, 4, Duration::ZERO, FleetFallback::LocalShare);
    let b = fleet_bulkhead("db", &second, 4, Duration::ZERO, FleetFallback::LocalShare);
    let events = record(&a);
    let replicas = format!("{prefix}:{{bulkhead:db}}:replicas");
    eventually("both replicas have heartbeaten", || {
        server.command(&["ZCARD", &replicas]) == ":2"
    });
    // And each has read the count since.
    std::thread::sleep(Duration::from_millis(250));
    let (held, dropped) = (a.try_acquire().unwrap(), a.try_acquire().unwrap());

    server.stop();
    let start = Instant::now();
    assert!(
        is_full(a.try_acquire()),
        "the share is 4 / 2 replicas, and this replica's 2 calls in flight count against it"
    );
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "a call waits for Redis at most its command timeout (50 ms), took {:?}",
        start.elapsed()
    );
    assert_eq!(a.max_allowed_concurrent_calls(), 2, "the local share");
    drop(dropped);
    let fallback_admitted = a.try_acquire().expect("the share has room again");
    assert!(is_full(a.try_acquire()));
    assert_eq!(a.metrics().fleet_fallback_calls(), 3);
    assert_eq!(events.lock().unwrap().len(), 1);
    assert!(events.lock().unwrap()[0].contains("`local_share`"));

    server.restart();
    // The heartbeats renew the lease still held, and add the call the fallback admitted: the
    // restarted Redis counts both.
    eventually(
        "this replica's calls are leases in the restarted Redis",
        || leases_in_redis(&server.url(), &prefix, "db") == 2,
    );
    // The next try of Redis comes a heartbeat interval after the last failure.
    let mut again = None;
    eventually("the fleet limit, back", || {
        again = a.try_acquire().ok();
        again.is_some()
    });
    assert!(
        events.lock().unwrap().last().unwrap().contains("again"),
        "{:?}",
        events.lock().unwrap()
    );
    assert_eq!(a.max_allowed_concurrent_calls(), 4, "the fleet limit");
    let others: Vec<_> = (0..4).map_while(|_| b.try_acquire().ok()).collect();
    assert_eq!(
        others.len(),
        1,
        "4 leases across the fleet, 3 of them this replica's (the call the fallback admitted \
         counts too)"
    );
    drop((held, fallback_admitted, again, others));
}

#[test]
fn a_paused_or_sleeping_redis_is_a_fallback_within_the_timeout_and_leaks_no_lease() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let prefix = prefix();
    let connection = connection(&server.url(), &prefix);
    let closed = fleet_bulkhead(
        "paused",
        &connection,
        5,
        Duration::ZERO,
        FleetFallback::Refuse,
    );
    let open = fleet_bulkhead("open", &connection, 3, Duration::ZERO, FleetFallback::Admit);
    let events = record(&closed);
    drop(closed.try_acquire().unwrap());

    for (round, stall) in redis_server::stalls(2000).into_iter().enumerate() {
        let staller = redis_server::stall(&server.url(), &stall);
        let start = Instant::now();
        assert!(is_full(closed.try_acquire()), "{stall:?}: fail closed");
        assert!(
            start.elapsed() < Duration::from_millis(1500),
            "{stall:?}: waited {:?} for a stalled Redis (timeout 50 ms)",
            start.elapsed()
        );
        let admitted: Vec<_> = (0..3).map(|_| open.try_acquire()).collect();
        assert!(
            admitted.iter().all(Result::is_ok),
            "{stall:?}: fail open admits (up to the whole fleet limit in this replica)"
        );
        assert!(
            is_full(open.try_acquire()),
            "over the whole limit in one replica"
        );
        drop(admitted);
        staller.join().unwrap();

        // Back to Redis by itself once it answers; the lease the timed-out script took when
        // the stall ended was given back after it.
        eventually("back to Redis", || {
            drop(closed.try_acquire());
            events.lock().unwrap().len() == 2 * (round + 1)
        });
        eventually("no lease leaked", || {
            leases_in_redis(&server.url(), &prefix, "paused") == 0
        });
        assert_eq!(
            open.metrics().fleet_fallback_calls(),
            4 * (round as u64 + 1)
        );
    }
}

/// A replica run as a child process of the test: `work` runs eight callers against the fleet
/// bulkhead and prints when each held a lease; `hold` takes every lease and holds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulkhead_child() {
    let Ok(url) = std::env::var("FLEET_CHILD_URL") else {
        return;
    };
    let prefix = std::env::var("FLEET_CHILD_PREFIX").unwrap();
    let limit = std::env::var("FLEET_CHILD_LIMIT").unwrap().parse().unwrap();
    let connection = connection_with(
        &url,
        &prefix,
        Duration::from_millis(100),
        Duration::from_millis(100),
    );
    let bulkhead = Arc::new(fleet_bulkhead(
        "processes",
        &connection,
        limit,
        Duration::from_millis(20),
        FleetFallback::Refuse,
    ));
    if std::env::var("FLEET_CHILD_MODE").unwrap() == "hold" {
        let held: Vec<_> = (0..limit)
            .map(|_| bulkhead.try_acquire().unwrap())
            .collect();
        println!("HOLDING {}", held.len());
        tokio::time::sleep(Duration::from_secs(60)).await;
        return;
    }
    let micros = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros()
    };
    let end = Instant::now() + Duration::from_millis(1500);
    let mut callers = Vec::new();
    for _ in 0..8 {
        let bulkhead = Arc::clone(&bulkhead);
        callers.push(tokio::spawn(async move {
            let mut held = Vec::new();
            while Instant::now() < end {
                if let Ok(permit) = bulkhead.acquire().await {
                    let from = micros();
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    held.push((from, micros()));
                    drop(permit);
                }
            }
            held
        }));
    }
    for caller in callers {
        for (from, to) in caller.await.unwrap() {
            println!("HELD {from} {to}");
        }
    }
}

fn child(url: &str, prefix: &str, limit: u32, mode: &str) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "bulkhead_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("FLEET_CHILD_URL", url)
        .env("FLEET_CHILD_PREFIX", prefix)
        .env("FLEET_CHILD_LIMIT", limit.to_string())
        .env("FLEET_CHILD_MODE", mode)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn several_processes_never_hold_more_leases_than_the_limit() {
    let Some(url) = redis_server::shared() else {
        return;
    };
    const LIMIT: u32 = 5;
    let prefix = prefix();
    let children: Vec<_> = (0..3)
        .map(|_| child(&url, &prefix, LIMIT, "work"))
        .collect();
    // Each call as its caller saw it: taken after Redis granted the lease, ended before it was
    // given back, so calls seen at once were leases held at once.
    let mut edges = Vec::new();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        let stdout = String::from_utf8_lossy(&output.stdout);
        let held: Vec<(u128, u128)> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("HELD "))
            .map(|l| {
                let (from, to) = l.split_once(' ').unwrap();
                (from.parse().unwrap(), to.parse().unwrap())
            })
            .collect();
        assert!(held.len() > 10, "every replica got leases: {}", held.len());
        for (from, to) in held {
            // At one instant, a start counts before an end.
            edges.push((from, 0, 1i32));
            edges.push((to, 1, -1i32));
        }
    }
    edges.sort_unstable();
    let (mut now, mut most) = (0, 0);
    for (_, _, step) in edges {
        now += step;
        most = most.max(now);
    }
    assert_eq!(
        most, LIMIT as i32,
        "24 callers in 3 processes on a fleet limit of {LIMIT}: at most {LIMIT} at once, and \
         the limit used"
    );
}

#[test]
fn a_replica_killed_mid_call_gives_its_leases_back_within_one_lease() {
    let Some(url) = redis_server::shared() else {
        return;
    };
    const LIMIT: u32 = 3;
    let prefix = prefix();
    let mut holder = child(&url, &prefix, LIMIT, "hold");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = holder.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the child holds its leases");
        // After the harness's "test bulkhead_child ... ", on the same line.
        if let Some(at) = line.find("HOLDING ") {
            assert_eq!(line[at..], format!("HOLDING {LIMIT}"));
            break;
        }
    }

    let connection = connection_with(
        &url,
        &prefix,
        Duration::from_millis(100),
        Duration::from_millis(100),
    );
    let here = fleet_bulkhead(
        "processes",
        &connection,
        LIMIT,
        Duration::ZERO,
        FleetFallback::Refuse,
    );
    assert!(is_full(here.try_acquire()));
    // Held for longer than a lease (400 ms): the child's heartbeats renew its leases.
    std::thread::sleep(Duration::from_millis(900));
    assert!(is_full(here.try_acquire()), "renewed leases are still held");
    assert_eq!(here.metrics().fleet_fallback_calls(), 0, "Redis said so");

    holder.kill().unwrap(); // SIGKILL: no release, no drop
    holder.wait().unwrap();
    let killed = Instant::now();
    eventually("the killed replica's leases lapse", || {
        here.try_acquire().is_ok()
    });
    let lapsed = killed.elapsed();
    // Its last renewal was at most a heartbeat (100 ms) before the kill: its leases end at
    // most a lease (400 ms) after it, whatever the machine's load adds to the polling.
    assert!(lapsed < Duration::from_millis(1400), "{lapsed:?}");
    eventually("every lease is free again", || {
        leases_in_redis(&url, &prefix, "processes") == 0
    });
    let all: Vec<_> = (0..LIMIT).map(|_| here.try_acquire()).collect();
    assert!(all.iter().all(Result::is_ok), "the capacity is back");
}

#[test]
fn a_configuration_file_gives_every_replica_one_fleet_bulkhead() {
    let Some(url) = redis_server::shared() else {
        return;
    };
    let document = format!(
        r#"
        [redis]
        url = "{url}"
        key_prefix = "{prefix}"
        command_timeout = "1s"

        [bulkhead.instances.db]
        backend = "redis"
        redis_fallback = "refuse"
        max_concurrent_calls = 2
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
    let [a, b] = replicas.each_ref().map(|r| r.bulkhead("db"));
    let held = (a.try_acquire().unwrap(), b.try_acquire().unwrap());
    assert!(is_full(a.try_acquire()) && is_full(b.try_acquire()));

    // Applied again, the document changes nothing: the leases held are still held.
    let changes = replicas[0].load_toml(&document).unwrap();
    assert!(changes.is_empty(), "{changes}");
    assert!(is_full(a.try_acquire()));
    drop(held);
}

#[test]
fn a_fleet_bulkhead_configuration_that_cannot_work_is_refused_with_the_fix() {
    let registry = resilience_runtime::Registry::new();
    let redis = "[redis]\nurl = \"redis://127.0.0.1:6379\"\n\n";
    let cases = [
        (
            format!(
                "{redis}[bulkhead.instances.db]\nbackend = \"redis\"\n\n\
                 [bulkhead.instances.db.adaptive]\nalgorithm = \"aimd\"\n"
            ),
            "bulkhead.instances.db.backend",
            "a fleet bulkhead's limit is fixed",
        ),
        (
            format!("{redis}[bulkhead.instances.db]\nbackend = \"redis\"\nredis_batch = 5\n"),
            "bulkhead.instances.db.redis_batch",
            "redis_batch",
        ),
        (
            "[bulkhead.instances.db]\nredis_fallback = \"admit\"\n".to_owned(),
            "bulkhead.instances.db.redis_fallback",
            "takes effect only with `backend = \"redis\"`",
        ),
    ];
    for (document, key, reason) in cases {
        let error = registry.load_toml(&document).unwrap_err();
        assert_eq!(error.key_path(), key, "{error}");
        assert!(error.to_string().contains(reason), "{error}");
    }
    assert!(registry.bulkhead("db").config().backend().is_local());

    let batch = BulkheadConfig::builder()
        .backend(Backend::redis().batch(5))
        .build()
        .unwrap_err();
    assert_eq!(batch.field(), "backend");
}
