//! Ordered execution.
