//! What a fleet rate limiter and a fleet bulkhead cost, against a real Redis on loopback, in one
//! run: the latency of an admission (a lease) beside a bare `INCR` through the same client
//! crate, the commands per admitted call, throughput at 1, 16 and 256 callers, what a refused
//! caller costs, and the server's CPU per command (its `INFO commandstats`).
//!
//! `cargo run --release -p resilience-benches --features fleet --bin fleet-cost [redis://…]`
//! (without a URL it starts a `redis-server` of its own on a free port).

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
    let prefix = format!("bench-{}", std::process::id());
    let connection = RedisConnection::builder(url)
        .command_timeout(Duration::from_millis(200))
        .key_prefix(prefix)
        .build()
        .unwrap();
    let limiter = Arc::new(fleet_limiter(
        &connection,
        1_000_000_000,
        Duration::from_secs(1),
    ));
    let client = redis::Client::open(url).unwrap();
    let mut bare = redis::aio::ConnectionManager::new(client).await.unwrap();

    // Warm both (script loaded, connections open).
    for _ in 0..2_000 {
        limiter.acquire().await.unwrap();
        let _: i64 = redis::cmd("INCR")
            .arg("bench:incr")
            .query_async(&mut bare)
            .await
            .unwrap();
    }

    // Latency, side by side: rounds alternate, the best round of each is kept.
    let (mut admission, mut incr) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let mut a = Vec::with_capacity(4_000);
        let mut b = Vec::with_capacity(4_000);
        for _ in 0..4_000 {
            let start = Instant::now();
            limiter.acquire().await.unwrap();
            a.push(start.elapsed());
            let start = Instant::now();
            let _: i64 = redis::cmd("INCR")
                .arg("bench:incr")
                .query_async(&mut bare)
                .await
                .unwrap();
            b.push(start.elapsed());
        }
        a.sort();
        b.sort();
        if admission.is_empty() || a[a.len() / 2] < admission[admission.len() / 2] {
            admission = a;
        }
        if incr.is_empty() || b[b.len() / 2] < incr[incr.len() / 2] {
            incr = b;
        }
    }
    let p = |v: &[Duration], q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
    println!("## latency of one call (best of 5 rounds of 4000, sequential)\n");
    println!("| | p50 | p99 |\n|---|---|---|");
    println!(
        "| fleet admission (script by SHA) | {:.1} µs | {:.1} µs |",
        micros(p(&admission, 0.5)),
        micros(p(&admission, 0.99))
    );
    println!(
        "| bare `INCR`, redis crate's ConnectionManager | {:.1} µs | {:.1} µs |",
        micros(p(&incr, 0.5)),
        micros(p(&incr, 0.99))
    );
    println!(
        "| ratio | {:.2}× | {:.2}× |\n",
        micros(p(&admission, 0.5)) / micros(p(&incr, 0.5)),
        micros(p(&admission, 0.99)) / micros(p(&incr, 0.99))
    );

    // Round trips and server commands per admitted call.
    let stats_before = commandstats(&mut bare).await;
    let sent_before = connection.commands_sent();
    let admitted = 10_000u64;
    for _ in 0..admitted {
        limiter.acquire().await.unwrap();
    }
    let stats_after = commandstats(&mut bare).await;
    let sent = connection.commands_sent() - sent_before;
    let evalsha = stats_after.calls("evalsha") - stats_before.calls("evalsha");
    println!("## per admitted call\n");
    println!(
        "round trips: {:.3}; server commands: {:.3} EVALSHA (heartbeats aside)\n",
        sent as f64 / admitted as f64,
        evalsha as f64 / admitted as f64
    );

    // Throughput with concurrent callers.
    println!("## throughput (2 s each, 2 worker threads)\n");
    println!("| callers | admissions/s |\n|---|---|");
    for callers in [1usize, 16, 256] {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..callers)
            .map(|_| {
                let (limiter, stop, count) = (limiter.clone(), stop.clone(), count.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        if limiter.acquire().await.is_ok() {
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

    // The server's CPU per command.
    let stats = commandstats(&mut bare).await;
    println!("## Redis CPU per command (INFO commandstats, this run)\n");
    println!("| command | µs per call | calls per second of one core |\n|---|---|---|");
    for command in ["evalsha", "incr"] {
        let usec = stats.usec_per_call(command);
        println!("| {command} | {usec:.2} | {:.0} |", 1e6 / usec);
    }
}

/// The same figures for a fleet bulkhead: a lease taken (one script call, waited for) and given
/// back (one `ZREM`, not waited for).
async fn run_bulkhead(url: &str) {
    let connection = RedisConnection::builder(url)
        .command_timeout(Duration::from_millis(200))
        .key_prefix(format!("bench-bulkhead-{}", std::process::id()))
        .build()
        .unwrap();
    let bulkhead = Arc::new(Bulkhead::new(
        "bench",
        BulkheadConfig::builder()
            .max_concurrent_calls(1_000_000)
            .backend(Backend::redis_with(connection.clone()))
            .build()
            .unwrap(),
    ));
    let client = redis::Client::open(url).unwrap();
    let mut bare = redis::aio::ConnectionManager::new(client).await.unwrap();
    for _ in 0..2_000 {
        drop(bulkhead.acquire().await.unwrap());
        let _: i64 = redis::cmd("INCR")
            .arg("bench:incr")
            .query_async(&mut bare)
            .await
            .unwrap();
    }
    // The server's counters from here on are the bulkhead's (and the `INCR`s').
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut bare)
        .await
        .unwrap();

    let (mut lease, mut incr) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let mut a = Vec::with_capacity(4_000);
        let mut b = Vec::with_capacity(4_000);
        for _ in 0..4_000 {
            let start = Instant::now();
            let permit = bulkhead.acquire().await.unwrap();
            a.push(start.elapsed());
            drop(permit);
            let start = Instant::now();
            let _: i64 = redis::cmd("INCR")
                .arg("bench:incr")
                .query_async(&mut bare)
                .await
                .unwrap();
            b.push(start.elapsed());
        }
        a.sort();
        b.sort();
        if lease.is_empty() || a[a.len() / 2] < lease[lease.len() / 2] {
            lease = a;
        }
        if incr.is_empty() || b[b.len() / 2] < incr[incr.len() / 2] {
            incr = b;
        }
    }
    let p = |v: &[Duration], q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
    println!("\n# fleet bulkhead\n");
    println!("## latency of taking a lease (best of 5 rounds of 4000, sequential)\n");
    println!("| | p50 | p99 |\n|---|---|---|");
    println!(
        "| lease taken (script by SHA; given back without waiting) | {:.1} µs | {:.1} µs |",
        micros(p(&lease, 0.5)),
        micros(p(&lease, 0.99))
    );
    println!(
        "| bare `INCR` | {:.1} µs | {:.1} µs |",
        micros(p(&incr, 0.5)),
        micros(p(&incr, 0.99))
    );
    println!(
        "| ratio | {:.2}× | {:.2}× |\n",
        micros(p(&lease, 0.5)) / micros(p(&incr, 0.5)),
        micros(p(&lease, 0.99)) / micros(p(&incr, 0.99))
    );

    let stats_before = commandstats(&mut bare).await;
    let sent_before = connection.commands_sent();
    let leases = 10_000u64;
    for _ in 0..leases {
        drop(bulkhead.acquire().await.unwrap());
    }
    // The last releases are on their way.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stats_after = commandstats(&mut bare).await;
    let per =
        |command| (stats_after.calls(command) - stats_before.calls(command)) as f64 / leases as f64;
    println!("## per lease\n");
    println!(
        "commands sent: {:.3}; server commands: {:.3} EVALSHA, {:.3} ZREM (heartbeats aside)\n",
        (connection.commands_sent() - sent_before) as f64 / leases as f64,
        per("evalsha"),
        per("zrem")
    );

    println!("## throughput of leases taken and given back (2 s each, 2 worker threads)\n");
    println!("| callers | leases/s |\n|---|---|");
    for callers in [1usize, 16, 256] {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..callers)
            .map(|_| {
                let (bulkhead, stop, count) = (bulkhead.clone(), stop.clone(), count.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        if bulkhead.acquire().await.is_ok() {
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

    // Refused callers of a full fleet: asks while the memory of a full fleet lasts, no more.
    let full = Bulkhead::new(
        "bench-full",
        BulkheadConfig::builder()
            .max_concurrent_calls(1)
            .backend(Backend::redis_with(connection.clone()))
            .build()
            .unwrap(),
    );
    let held = full.acquire().await.unwrap();
    let sent_before = connection.commands_sent();
    let (mut refused, start) = (0u64, Instant::now());
    while start.elapsed() < Duration::from_secs(1) {
        assert!(full.acquire().await.is_err());
        refused += 1;
    }
    let elapsed = start.elapsed();
    drop(held);
    println!(
        "\n## refused callers of a full fleet, one second\n\n{refused} refusals, {} commands, \
         {:.0} ns each\n",
        connection.commands_sent() - sent_before,
        elapsed.as_nanos() as f64 / refused as f64
    );

    let stats = commandstats(&mut bare).await;
    println!("\n## Redis CPU per command (INFO commandstats, since the reset)\n");
    println!("| command | µs per call | calls per second of one core |\n|---|---|---|");
    for command in ["evalsha", "zrem", "incr"] {
        let usec = stats.usec_per_call(command);
        println!("| {command} | {usec:.2} | {:.0} |", 1e6 / usec);
    }
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
