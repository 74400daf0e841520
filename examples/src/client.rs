//! `orders-client`: places orders with `orders-service` over HTTP through the runtime's
//! reqwest middleware (`resilience_runtime::reqwest::GuardMiddleware`), and tallies how each
//! one ended.
//!
//! The client's own bulkhead and circuit breaker, named [`CLIENT`], guard every request to
//! the service's host. When the service sheds load (its bulkhead full: `503` with
//! `Retry-After`), the client sees a refusal by the server, not a failure: its breaker stays
//! closed, the incident this library exists for avoided one hop away. A failing service
//! (`502`) is what opens it.
//!
//! ```no_run
//! use resilience_examples::client::{self, ClientSettings};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let settings = ClientSettings::default();
//! client::configure(&settings)?;
//! let tally = client::place_orders(&client::client(&settings)?, &settings).await;
//! println!("{tally}");
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::Arc;

use reqwest::StatusCode;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use resilience_runtime::reqwest::{GuardMiddleware, RequestError};
use resilience_runtime::{
    Aspect, BulkheadConfig, CircuitBreakerConfig, ConfigError, Registry, SlidingWindow,
};
use serde_json::json;

/// The instance name of the client's bulkhead and circuit breaker.
pub const CLIENT: &str = "orders-service";

/// What the client does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientSettings {
    /// The service's base URL, such as `http://127.0.0.1:8080`.
    pub base_url: String,
    /// How many orders to place.
    pub orders: u32,
    /// How many are in flight at once (the client's bulkhead allows as many).
    pub concurrency: u32,
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            base_url: "http://127.0.0.1:8080".to_owned(),
            orders: 100,
            concurrency: 8,
        }
    }
}

/// How the orders ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// `200 OK`: the order was placed.
    pub placed: u32,
    /// The service refused it (`503` or `429` with `Retry-After`): shed, not failed.
    pub shed_by_service: u32,
    /// The client's own guards refused it (its breaker open, its bulkhead full): not sent.
    pub refused_by_client: u32,
    /// Anything else: a `5xx` of the service, no answer.
    pub failed: u32,
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "placed {}, shed by the service {}, refused by the client {}, failed {}",
            self.placed, self.shed_by_service, self.refused_by_client, self.failed
        )
    }
}

/// Configures the client's guards in the global registry: a bulkhead of `concurrency`
/// requests, and a breaker over the last 20 requests that opens at half of them failed.
///
/// # Errors
///
/// A [`ConfigError`] for a concurrency of 0.
pub fn configure(settings: &ClientSettings) -> Result<(), ConfigError> {
    let registry = Registry::global();
    registry.configure_bulkhead(
        CLIENT,
        BulkheadConfig::builder()
            .max_concurrent_calls(settings.concurrency)
            .build()?,
    )?;
    registry.configure_circuit_breaker(
        CLIENT,
        CircuitBreakerConfig::builder()
            .sliding_window(SlidingWindow::CountBased(20))
            .minimum_number_of_calls(20)
            .failure_rate_threshold(50.0)
            .build()?,
    )
}

/// The HTTP client: every request to the service's host runs through the [`CLIENT`]
/// instances.
///
/// # Errors
///
/// If `base_url` is not a URL with a host.
pub fn client(settings: &ClientSettings) -> Result<ClientWithMiddleware, String> {
    let url = reqwest::Url::parse(&settings.base_url).map_err(|e| format!("{e}"))?;
    let host = url
        .host_str()
        .ok_or_else(|| format!("{} has no host", settings.base_url))?;
    let guards =
        GuardMiddleware::new(&[Aspect::Bulkhead, Aspect::CircuitBreaker]).host(host, CLIENT);
    // No proxy, whatever the environment says: the service is on this machine.
    let inner = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| format!("{e}"))?;
    Ok(ClientBuilder::new(inner).with(guards).build())
}

/// Places `settings.orders` orders, `settings.concurrency` at a time, and tallies them.
pub async fn place_orders(client: &ClientWithMiddleware, settings: &ClientSettings) -> Tally {
    let url = Arc::new(format!(
        "{}/orders",
        settings.base_url.trim_end_matches('/')
    ));
    let workers = settings.concurrency.max(1);
    let mut handles = Vec::new();
    for worker in 0..workers {
        let (client, url) = (client.clone(), Arc::clone(&url));
        // Each worker places its share, one after another.
        let share = settings.orders / workers + u32::from(worker < settings.orders % workers);
        handles.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            for _ in 0..share {
                let sent = client
                    .post(url.as_str())
                    .json(&json!({ "item": "book", "qty": 1 }))
                    .send()
                    .await;
                match sent {
                    Ok(response) if response.status() == StatusCode::OK => tally.placed += 1,
                    Ok(_) => tally.failed += 1,
                    Err(error) => match RequestError::of(&error) {
                        Some(RequestError::ServerRefused { .. }) => tally.shed_by_service += 1,
                        Some(RequestError::Rejected(_)) => tally.refused_by_client += 1,
                        _ => tally.failed += 1,
                    },
                }
            }
            tally
        }));
    }
    let mut total = Tally::default();
    for handle in handles {
        let tally = handle.await.expect("an order worker");
        total.placed += tally.placed;
        total.shed_by_service += tally.shed_by_service;
        total.refused_by_client += tally.refused_by_client;
        total.failed += tally.failed;
    }
    total
}
