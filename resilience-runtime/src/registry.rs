//! The registry.

/// Registry (skeleton).
pub struct Registry {}
