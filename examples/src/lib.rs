//! Shared pieces of the examples.

pub mod service;
