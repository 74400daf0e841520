//! The error type the ui cases' guarded functions return.

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
