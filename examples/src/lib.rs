//! Shared pieces of the examples.
//!
//! - [`drill`]: the overload drill (`cargo run --release --bin overload-drill`), this
//!   project's main job.
//! - [`service`]: the orders HTTP service (`cargo run --release --bin orders-service`).
//! - [`client`]: a client of it through the runtime's reqwest middleware
//!   (`cargo run --release --bin orders-client`).

pub mod client;
pub mod drill;
pub mod service;
