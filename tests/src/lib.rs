//! Helpers shared by the workspace-level tests.

use resilience_runtime::Rejected;

/// The error type of the guarded functions in the tests: a rejection, or a failure of the
/// (simulated) dependency.
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

impl CallError {
    /// The rejection, if this is one.
    pub fn rejection(&self) -> Option<&Rejected> {
        match self {
            CallError::Rejected(r) => Some(r),
            CallError::Downstream(_) => None,
        }
    }
}
