//! What a fleet rate limiter and a fleet bulkhead cost, against a real Redis on loopback, in one
//! run: the latency of an admission (a lease) beside a bare `INCR` through the same client
//! crate, the commands per admitted call, throughput at 1, 16 and 256 callers, what a refused
//! caller costs, and the server's CPU per command (its `INFO commandstats`).
//!
//! `cargo run --release -p resilience-benches --features fleet --bin fleet-cost [redis://…]`
//! (without a URL it starts a `redis-server` of its own on a free port).

use std::future::Future;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use resilience_runtime::fleet::{Backend, RedisConnection};
use resilience_runtime::{Bulkhead, BulkheadConfig, RateLimiter, RateLimiterConfig};

fn main() {
    let (url, _server) = match std::env::args().nth(1) {
        Some(url) => (url, None),
        None => {
            let (url, child) = start_server();
            (url, Some(KillOnDrop(child)))
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(&url));
    runtime.block_on(run_bulkhead(&url));
}

async fn run(url: &str) {
    let connection = connection(url, "bench");
    let limiter = Arc::new(fleet_limiter(
        &connection,
        1_000_000_000,
        Duration::from_secs(1),
    ));
    let mut bare = bare(url).await;
    let admit = move || {
        let limiter = Arc::clone(&limiter);
        async move {
            let start = Instant::now();
            limiter.acquire().await.ok().map(|()| start.elapsed())
        }
    };

    warm(&admit, &mut bare).await;
    println!("## latency of one call (best of 5 rounds of 4000, sequential)\n");
    let (ours, incr) = side_by_side(&admit, &mut bare).await;
    print_latency("fleet admission (script by SHA)", &ours, &incr);

    // Round trips and server commands per admitted call.
    let stats_before = commandstats(&mut bare).await;
    let sent_before = connection.commands_sent();
    let admitted = 10_000u64;
    for _ in 0..admitted {
        assert!(admit().await.is_some());
    }
    let stats_after = commandstats(&mut bare).await;
    println!("## per admitted call\n");
    println!(
        "round trips: {:.3}; server commands: {:.3} EVALSHA (heartbeats aside)\n",
        (connection.commands_sent() - sent_before) as f64 / admitted as f64,
        stats_after.since(&stats_before, "evalsha", admitted)
    );

    println!("## throughput (2 s each, 2 worker threads)\n");
    println!("| callers | admissions/s |\n|---|---|");
    throughput(&admit).await;

    // A refused caller: no round trip while the refusal holds.
    let refused = fleet_limiter(&connection, 1, Duration::from_secs(3600));
    let _ = refused.try_acquire();
    let _ = refused.try_acquire();
    let sent_before = connection.commands_sent();
    let n = 1_000_000u32;
    let start = Instant::now();
    for _ in 0..n {
        assert!(refused.try_acquire().is_err());
    }
    let per = start.elapsed() / n;
    println!(
        "\n## a refused caller within retry_after\n\n{} round trips for {n} refusals, {:.0} ns each\n",
        connection.commands_sent() - sent_before,
        per.as_nanos()
    );

    println!("## Redis CPU per command (INFO commandstats, this run)\n");
    print_cpu(&commandstats(&mut bare).await, &["evalsha", "incr"]);
}

/// The same figures for a fleet bulkhead: a lease taken (one script call, waited for) and given
/// back (one `ZREM`, not waited for).
async fn run_bulkhead(url: &str) {
    let connection = connection(url, "bench-bulkhead");
    let bulkhead = Arc::new(fleet_bulkhead("bench", &connection, 1_000_000));
    let mut bare = bare(url).await;
    // Timed until the lease is taken; given back after, without waiting for Redis.
    let lease = move || {
        let bulkhead = Arc::clone(&bulkhead);
        async move {
            let start = Instant::now();
            let permit = bulkhead.acquire().await.ok()?;
            let taken = start.elapsed();
            drop(permit);
            Some(taken)
        }
    };
    warm(&lease, &mut bare).await;
    // The server's counters from here on are the bulkhead's (and the `INCR`s').
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut bare)
        .await
        .unwrap();

    println!("\n# fleet bulkhead\n");
    println!("## latency of taking a lease (best of 5 rounds of 4000, sequential)\n");
    let (ours, incr) = side_by_side(&lease, &mut bare).await;
    print_latency("lease taken (script by SHA)", &ours, &incr);

    let stats_before = commandstats(&mut bare).await;
    let sent_before = connection.commands_sent();
    let leases = 10_000u64;
    for _ in 0..leases {
        assert!(lease().await.is_some());
    }
    // The last releases are on their way.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stats_after = commandstats(&mut bare).await;
    println!("## per lease\n");
    println!(
        "commands sent: {:.3}; server commands: {:.3} EVALSHA, {:.3} ZREM (heartbeats aside)\n",
        (connection.commands_sent() - sent_before) as f64 / leases as f64,
        stats_after.since(&stats_before, "evalsha", leases),
        stats_after.since(&stats_before, "zrem", leases)
    );

    println!("## throughput of leases taken and given back (2 s each, 2 worker threads)\n");
    println!("| callers | leases/s |\n|---|---|");
    throughput(&lease).await;

    // Refused callers of a full fleet, 16 at once: asks while the memory of a full fleet lasts,
    // one caller at a time, no more.
    let full = Arc::new(fleet_bulkhead("bench-full", &connection, 1));
    let held = full.acquire().await.unwrap();
    let sent_before = connection.commands_sent();
    let refused = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let callers: Vec<_> = (0..16)
        .map(|_| {
            let (full, refused) = (Arc::clone(&full), Arc::clone(&refused));
            tokio::spawn(async move {
                while start.elapsed() < Duration::from_secs(1) {
                    assert!(full.acquire().await.is_err());
                    refused.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap();
    }
    let elapsed = start.elapsed();
    drop(held);
    let refused = refused.load(Ordering::Relaxed);
    println!(
        "\n## refused callers of a full fleet, 16 callers for one second\n\n{refused} refusals, \
         {} commands, {:.0} ns of the second each\n",
        connection.commands_sent() - sent_before,
        elapsed.as_nanos() as f64 / refused as f64
    );

    println!("## Redis CPU per command (INFO commandstats, since the reset)\n");
    print_cpu(&commandstats(&mut bare).await, &["evalsha", "zrem", "incr"]);
}

fn connection(url: &str, prefix: &str) -> RedisConnection {
    RedisConnection::builder(url)
        .command_timeout(Duration::from_millis(200))
        .key_prefix(format!("{prefix}-{}", std::process::id()))
        .build()
        .unwrap()
}

/// The baseline: the redis crate's own connection manager, for bare `INCR`s.
async fn bare(url: &str) -> redis::aio::ConnectionManager {
    let client = redis::Client::open(url).unwrap();
    redis::aio::ConnectionManager::new(client).await.unwrap()
}

async fn incr(bare: &mut redis::aio::ConnectionManager) {
    let _: i64 = redis::cmd("INCR")
        .arg("bench:incr")
        .query_async(bare)
        .await
        .unwrap();
}

/// Loads the scripts and opens the connections.
async fn warm<F, Fut>(call: &F, bare: &mut redis::aio::ConnectionManager)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<Duration>>,
{
    for _ in 0..2_000 {
        assert!(call().await.is_some());
        incr(bare).await;
    }
}

/// `call` (which times its own admission) and a bare `INCR`, alternating in 5 rounds of
/// 4 000; the best round of each, sorted.
async fn side_by_side<F, Fut>(
    call: &F,
    bare: &mut redis::aio::ConnectionManager,
) -> (Vec<Duration>, Vec<Duration>)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<Duration>>,
{
    let (mut best_call, mut best_incr) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let mut a = Vec::with_capacity(4_000);
        let mut b = Vec::with_capacity(4_000);
        for _ in 0..4_000 {
            a.push(call().await.expect("admitted"));
            let start = Instant::now();
            incr(bare).await;
            b.push(start.elapsed());
        }
        for (round, best) in [(a, &mut best_call), (b, &mut best_incr)] {
            let mut round = round;
            round.sort();
            if best.is_empty() || round[round.len() / 2] < best[best.len() / 2] {
                *best = round;
            }
        }
    }
    (best_call, best_incr)
}

fn print_latency(label: &str, ours: &[Duration], incr: &[Duration]) {
    let p = |v: &[Duration], q: f64| micros(v[((v.len() as f64 * q) as usize).min(v.len() - 1)]);
    println!("| | p50 | p99 |\n|---|---|---|");
    println!(
        "| {label} | {:.1} µs | {:.1} µs |",
        p(ours, 0.5),
        p(ours, 0.99)
    );
    println!(
        "| bare `INCR`, redis crate's ConnectionManager | {:.1} µs | {:.1} µs |",
        p(incr, 0.5),
        p(incr, 0.99)
    );
    println!(
        "| ratio | {:.2}× | {:.2}× |\n",
        p(ours, 0.5) / p(incr, 0.5),
        p(ours, 0.99) / p(incr, 0.99)
    );
}

/// Prints the calls a second `call` makes with 1, 16 and 256 concurrent callers, 2 s each.
async fn throughput<F, Fut>(call: &F)
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Option<Duration>> + Send,
{
    for callers in [1usize, 16, 256] {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..callers)
            .map(|_| {
                let (call, stop, count) = (call.clone(), stop.clone(), count.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        if call().await.is_some() {
                            count.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let start_count = count.load(Ordering::Relaxed);
        let start = Instant::now();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let done = count.load(Ordering::Relaxed) - start_count;
        let rate = done as f64 / start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        println!("| {callers} | {rate:.0} |");
    }
}

fn print_cpu(stats: &Stats, commands: &[&str]) {
    println!("| command | µs per call | calls per second of one core |\n|---|---|---|");
    for command in commands {
        let usec = stats.usec_per_call(command);
        println!("| {command} | {usec:.2} | {:.0} |", 1e6 / usec);
    }
}

fn fleet_bulkhead(name: &str, connection: &RedisConnection, limit: u32) -> Bulkhead {
    Bulkhead::new(
        name,
        BulkheadConfig::builder()
            .max_concurrent_calls(limit)
            .backend(Backend::redis_with(connection.clone()))
            .build()
            .unwrap(),
    )
}

fn fleet_limiter(connection: &RedisConnection, limit: u32, period: Duration) -> RateLimiter {
    RateLimiter::new(
        "bench",
        RateLimiterConfig::builder()
            .limit_for_period(limit)
            .limit_refresh_period(period)
            .backend(Backend::redis_with(connection.clone()))
            .build()
            .unwrap(),
    )
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

struct Stats(String);

impl Stats {
    fn field(&self, command: &str, field: &str) -> f64 {
        let line = self
            .0
            .lines()
            .find(|l| l.starts_with(&format!("cmdstat_{command}:")))
            .unwrap_or("");
        line.split([':', ','])
            .find_map(|kv| kv.strip_prefix(&format!("{field}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }

    fn calls(&self, command: &str) -> u64 {
        self.field(command, "calls") as u64
    }

    /// The calls of `command` since `before`, per one of `per`.
    fn since(&self, before: &Stats, command: &str, per: u64) -> f64 {
        (self.calls(command) - before.calls(command)) as f64 / per as f64
    }

    fn usec_per_call(&self, command: &str) -> f64 {
        self.field(command, "usec_per_call")
    }
}

async fn commandstats(connection: &mut redis::aio::ConnectionManager) -> Stats {
    let text: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await
        .unwrap();
    Stats(text)
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server() -> (String, Child) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server on the PATH, or a URL as the first argument");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    (format!("redis://127.0.0.1:{port}"), child)
}
