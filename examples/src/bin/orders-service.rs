//! `orders-service`: the HTTP service example (see `resilience_examples::service`).
//!
//! ```sh
//! cargo run -p resilience-examples --bin orders-service -- --port 8080 \
//!     --max-concurrent-calls 2 --max-wait-ms 0 --downstream-latency-ms 300
//! cargo run -p resilience-examples --bin orders-service -- --config examples/config/incident.toml --watch
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use resilience_examples::service::{self, Settings};
use resilience_runtime::document::FileWatcher;
use resilience_runtime::Registry;

/// An order service whose `POST /orders` runs through a bulkhead and a circuit breaker;
/// `GET /actuator` shows their state, `PUT /downstream` makes its downstream fail.
#[derive(Debug, Parser)]
#[command(name = "orders-service", version)]
struct Args {
    /// The port to listen on, on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// The guards' configuration file (TOML, Resilience4j's keys in snake_case), such as
    /// examples/config/incident.toml; instead of the two flags below.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["max_concurrent_calls", "max_wait_ms"])]
    config: Option<PathBuf>,
    /// With --config: reapply the file whenever it changes (a bad edit is logged and changes
    /// nothing).
    #[arg(long, requires = "config")]
    watch: bool,
    /// The bulkhead's maximum number of concurrent orders.
    #[arg(long, default_value_t = 80)]
    max_concurrent_calls: u32,
    /// How long an order waits for a bulkhead permit before a 503 (0: reject at once).
    #[arg(long, default_value_t = 500)]
    max_wait_ms: u64,
    /// How long the simulated downstream takes per order.
    #[arg(long, default_value_t = 50)]
    downstream_latency_ms: u64,
    /// Start with the simulated downstream failing every order (502); switch it at run time
    /// with `PUT /downstream` and `{"failing": true}` or `{"failing": false}`.
    #[arg(long)]
    downstream_failing: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    // Errors as their `Display` says them: a configuration error names the file, line and key.
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

async fn serve(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let downstream_latency = Duration::from_millis(args.downstream_latency_ms);
    // Kept for as long as the service runs: dropped, it stops watching.
    let mut _watcher = None;
    match &args.config {
        Some(path) => {
            let changes = service::configure_from_file(path, downstream_latency)?;
            service::set_downstream_failing(args.downstream_failing);
            println!("configured from {}:\n{changes}", path.display());
            if args.watch {
                _watcher = Some(FileWatcher::start_with(
                    Registry::global(),
                    path,
                    Duration::from_millis(500),
                    |outcome| match outcome {
                        Ok(changes) if !changes.is_empty() => println!("reloaded:\n{changes}"),
                        Ok(_) => {}
                        Err(e) => eprintln!("warning: {e}; the configuration in force stays"),
                    },
                )?);
                println!("watching {} for changes", path.display());
            }
        }
        None => service::configure(&Settings {
            max_concurrent_calls: args.max_concurrent_calls,
            max_wait: Duration::from_millis(args.max_wait_ms),
            downstream_latency,
            downstream_failing: args.downstream_failing,
        })?,
    }
    // Guard names used by an annotation but never configured run on the default: say so.
    // Only the service's own: the drill, in the same library, has guarded functions of its own.
    if let Err(report) = Registry::global().validate_module("resilience_examples::service") {
        eprint!("warning: {report}");
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await?;
    println!(
        "orders-service listening on http://{}",
        listener.local_addr()?
    );
    axum::serve(listener, service::app())
        .with_graceful_shutdown(shutdown())
        .await?;
    Ok(())
}

/// Resolves on Ctrl-C, or on SIGTERM (what a container runtime or systemd sends to stop a
/// service), whichever comes first: in-flight orders then finish before the process exits.
async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            // No SIGTERM handler: wait for Ctrl-C alone.
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    println!("shutting down: finishing the orders in flight");
}
