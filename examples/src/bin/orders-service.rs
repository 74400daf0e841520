//! `orders-service`: the HTTP service example (see `resilience_examples::service`).
//!
//! ```sh
//! cargo run -p resilience-examples --bin orders-service -- --port 8080 \
//!     --max-concurrent-calls 2 --max-wait-ms 0 --downstream-latency-ms 300
//! ```

use std::time::Duration;

use clap::Parser;
use resilience_examples::service::{self, Settings};
use resilience_runtime::Registry;

/// An order service whose `POST /orders` runs through a bulkhead and a circuit breaker;
/// `GET /resilience` shows their state.
#[derive(Debug, Parser)]
#[command(name = "orders-service", version)]
struct Args {
    /// The port to listen on, on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// The bulkhead's maximum number of concurrent orders.
    #[arg(long, default_value_t = 80)]
    max_concurrent_calls: u32,
    /// How long an order waits for a bulkhead permit before a 503 (0: reject at once).
    #[arg(long, default_value_t = 500)]
    max_wait_ms: u64,
    /// How long the simulated downstream takes per order.
    #[arg(long, default_value_t = 50)]
    downstream_latency_ms: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    service::configure(&Settings {
        max_concurrent_calls: args.max_concurrent_calls,
        max_wait: Duration::from_millis(args.max_wait_ms),
        downstream_latency: Duration::from_millis(args.downstream_latency_ms),
    })?;
    // Guard names used by an annotation but never configured run on the default: say so.
    if let Err(report) = Registry::global().validate() {
        eprint!("warning: {report}");
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await?;
    println!(
        "orders-service listening on http://{}",
        listener.local_addr()?
    );
    axum::serve(listener, service::app())
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
