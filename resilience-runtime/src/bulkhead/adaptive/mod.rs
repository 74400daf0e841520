//! An adaptive bulkhead limit: the limit follows the dependency's measured latency.
//! `limit.rs` is its configuration ([`AdaptiveLimit`]); `algorithms.rs` the limit algorithms
//! (Netflix's three, and `knee.rs`, this library's); `controller.rs` takes the samples of the
//! calls and moves the bulkhead's limit.

mod algorithms;
mod controller;
mod knee;
mod limit;
mod sample;

pub(crate) use controller::{Controller, Sample};
pub use limit::{AdaptiveLimit, AdaptiveSettings, LimitAlgorithm};
