//! Shared pieces of the examples.
//!
//! - [`drill`]: the overload drill (`cargo run --release --bin overload-drill`), this
//!   project's main job.
//! - [`service`]: the orders HTTP service (`cargo run --release --bin orders-service`).

pub mod drill;
pub mod service;
