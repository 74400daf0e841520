//! A real Redis for the fleet tests: the one `.ci/run` started (`RESILIENCE_TEST_REDIS_URL`),
//! or one of the test's own on a free loopback port, without persistence, that it can stop and
//! start again. Without `redis-server` on the machine a test prints a visible skip, and fails
//! under `CI=true`, where a skip would hide a broken setup.

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use resilience_runtime::fleet::RedisConnection;

/// Keys of their own for every connection of a test run: a shared server keeps a key until its
/// last cycle or lease ends.
pub fn prefix() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "test-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A connection to `url` under `prefix`, with short timeouts and heartbeats, for the tests of
/// outages: a command times out after 50 ms, a heartbeat every 100 ms.
pub fn connection(url: &str, prefix: &str) -> RedisConnection {
    connection_with(
        url,
        prefix,
        Duration::from_millis(50),
        Duration::from_millis(100),
    )
}

/// A connection to `url` under `prefix` with this command timeout and heartbeat interval (a
/// replica, and a lease, counts for three intervals and a timeout after its last heartbeat).
pub fn connection_with(
    url: &str,
    prefix: &str,
    command_timeout: Duration,
    heartbeat_interval: Duration,
) -> RedisConnection {
    RedisConnection::builder(url)
        .command_timeout(command_timeout)
        .heartbeat_interval(heartbeat_interval)
        .key_prefix(prefix)
        .build()
        .unwrap()
}

/// A `redis-server` child process on `port`, stopped when dropped.
pub struct RedisServer {
    port: u16,
    child: Option<Child>,
}

/// The URL of a Redis the test may share with others (its keys must be its own), or `None`
/// after printing why the test is skipped.
pub fn shared() -> Option<String> {
    if let Ok(url) = std::env::var("RESILIENCE_TEST_REDIS_URL") {
        return Some(url);
    }
    static OWN: std::sync::OnceLock<Option<(String, std::sync::Mutex<RedisServer>)>> =
        std::sync::OnceLock::new();
    OWN.get_or_init(|| RedisServer::start().map(|s| (s.url(), std::sync::Mutex::new(s))))
        .as_ref()
        .map(|(url, _)| url.clone())
}

/// Prints the skip, or panics under CI.
fn unavailable(why: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(!ci, "the Redis tests cannot run under CI: {why}");
    eprintln!("SKIPPED: this Redis test needs `redis-server` ({why}); install it to run it");
}

impl RedisServer {
    /// A server of this test's own, or `None` after printing why the test is skipped.
    pub fn start() -> Option<RedisServer> {
        let port = free_port();
        let mut server = RedisServer { port, child: None };
        match server.spawn() {
            Ok(()) => Some(server),
            Err(why) => {
                unavailable(&why);
                None
            }
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server (as a crash would: no shutdown, nothing saved).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(("127.0.0.1", self.port)).is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts it again on the same port, empty.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn().expect("redis-server restarts");
    }

    /// Runs `redis-cli`-like commands through a plain connection (`CLIENT PAUSE`, `DEBUG SLEEP`).
    pub fn command(&self, args: &[&str]) -> String {
        command(&self.url(), args)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let port = self.port.to_string();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port,
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--enable-debug-command",
                "local",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start redis-server: {e}"))?;
        // A server outlives no test process, even one killed before its statics are dropped.
        let watchdog = format!(
            "while kill -0 {test} 2>/dev/null && kill -0 {redis} 2>/dev/null; do sleep 0.2; done; \
             kill -9 {redis} 2>/dev/null",
            test = std::process::id(),
            redis = child.id()
        );
        let _ = Command::new("sh")
            .args(["-c", &watchdog])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(format!(
            "redis-server did not listen on {} within 10 s",
            self.port
        ))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The lines of the events a guard tells of its fleet limit (Redis away, Redis back), collected
/// from the callback `subscribe` registers: `fleet_events(|sink| { limiter.subscribe(sink); })`.
pub fn fleet_events<E: std::fmt::Display>(
    subscribe: impl FnOnce(Box<dyn Fn(&E) + Send + Sync>),
) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = std::sync::Arc::clone(&seen);
    subscribe(Box::new(move |event: &E| {
        let line = event.to_string();
        if line.contains("fleet limit") {
            sink.lock().unwrap().push(line);
        }
    }));
    seen
}

/// The two ways a running Redis stops answering for `millis`: `CLIENT PAUSE` (it queues the
/// commands) and `DEBUG SLEEP` (its one thread is busy).
pub fn stalls(millis: u64) -> [Vec<String>; 2] {
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect();
    [
        words(&["CLIENT", "PAUSE", &millis.to_string(), "ALL"]),
        words(&["DEBUG", "SLEEP", &format!("{}", millis as f64 / 1000.0)]),
    ]
}

/// Starts `stall` (one of [`stalls`]) against `url` and returns once it has taken hold (the
/// thread ends when its reply comes: at once for a pause, at the end for a sleep).
pub fn stall(url: &str, stall: &[String]) -> std::thread::JoinHandle<String> {
    let (url, stall) = (url.to_owned(), stall.to_vec());
    let staller = std::thread::spawn(move || {
        let args: Vec<&str> = stall.iter().map(String::as_str).collect();
        command(&url, &args)
    });
    std::thread::sleep(Duration::from_millis(100));
    staller
}

/// Sends one command over a fresh connection and returns the reply as text (RESP, minimal).
pub fn command(url: &str, args: &[&str]) -> String {
    use std::io::{Read, Write};
    let address = url.trim_start_matches("redis://");
    let address = address.split('/').next().unwrap_or(address);
    let mut stream = TcpStream::connect(address).expect("connect to Redis");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!("*{}\r\n", args.len());
    for a in args {
        request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    stream.write_all(request.as_bytes()).unwrap();
    let mut reply = vec![0; 4096];
    let n = stream.read(&mut reply).unwrap_or(0);
    String::from_utf8_lossy(&reply[..n]).trim().to_owned()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}
