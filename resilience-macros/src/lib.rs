//! Attribute macros of `resilience`; use them through `resilience-runtime`.
