//! `orders-client`: places orders with `orders-service` through the runtime's reqwest
//! middleware and tallies them (see `resilience_examples::client`).
//!
//! ```sh
//! cargo run -p resilience-examples --bin orders-service -- --max-concurrent-calls 2 --max-wait-ms 0 &
//! cargo run -p resilience-examples --bin orders-client -- --orders 100 --concurrency 8
//! ```

use std::process::ExitCode;

use clap::Parser;
use resilience_examples::client::{self, ClientSettings};
use resilience_runtime::Registry;

/// Places orders with `orders-service` through a client-side bulkhead and circuit breaker.
#[derive(Debug, Parser)]
#[command(name = "orders-client", version)]
struct Args {
    /// The service's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// How many orders to place.
    #[arg(long, default_value_t = 100)]
    orders: u32,
    /// How many are in flight at once.
    #[arg(long, default_value_t = 8)]
    concurrency: u32,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let settings = ClientSettings {
        base_url: args.url,
        orders: args.orders,
        concurrency: args.concurrency,
    };
    if let Err(e) = client::configure(&settings) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let http = match client::client(&settings) {
        Ok(http) => http,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let tally = runtime.block_on(client::place_orders(&http, &settings));
    println!("{tally}");
    let breaker = Registry::global().circuit_breaker(client::CLIENT);
    println!("the client's breaker is {:?}", breaker.state());
    ExitCode::SUCCESS
}
