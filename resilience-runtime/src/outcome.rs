//! [`CallOutcome`]: how a call that ran to completion counts for the guards around it.

/// How a call that ran to completion counts for the circuit breakers around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallOutcome {
    /// A success.
    Success,
    /// A failure (counts toward the failure rate).
    Failure,
    /// Neither a success nor a failure (an error the breaker ignores, such as a client error).
    Ignored,
}

impl CallOutcome {
    /// The default classification of a `Result`: `Ok` is a success, every `Err` a failure.
    pub fn of_result<T, E>(result: &Result<T, E>) -> CallOutcome {
        match result {
            Ok(_) => CallOutcome::Success,
            Err(_) => CallOutcome::Failure,
        }
    }
}
