//! Shared pieces of the examples.
//!
//! - [`drill`]: the overload drill (`cargo run --release --bin overload-drill`), this
//!   project's main job.

pub mod drill;
