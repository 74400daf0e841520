//! The error type the ui cases' guarded functions return.
//!
//! The same as the integration tests' `resilience_tests::CallError`, written again on purpose:
//! depending on that crate would put its dependencies (axum, proptest, …) back into the build
//! trybuild makes for these cases.

use resilience_runtime::Rejected;

/// A rejection, or a failure of the (simulated) dependency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// A guard refused the call.
    Rejected(Rejected),
    /// The dependency failed.
    Downstream(&'static str),
}

impl From<Rejected> for CallError {
    fn from(rejected: Rejected) -> Self {
        CallError::Rejected(rejected)
    }
}
