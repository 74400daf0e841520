//! An adaptive bulkhead limit: the limit follows the dependency's measured latency.
//! `limit.rs` is its configuration ([`AdaptiveLimit`]); `algorithms.rs` the limit algorithms;
//! `controller.rs` takes the samples of the calls and moves the bulkhead's limit.

mod algorithms;
mod controller;
mod limit;

pub(crate) use controller::Controller;
pub use limit::{AdaptiveLimit, AdaptiveSettings, LimitAlgorithm};
