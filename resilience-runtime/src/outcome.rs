//! [`CallOutcome`]: how a call that ran to completion counts for the guards around it.

/// How a call that ran to completion counts for the guards around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallOutcome {
    /// A success.
    Success,
    /// A failure (counts toward the failure rate).
    Failure,
    /// Neither a success nor a failure (an error the breaker ignores, such as a client error).
    Ignored,
    /// The dependency shed the call for load (a `429`, a `503` with `Retry-After`, an error
    /// `#[bulkhead(overload = ..)]` accepts): as [`Ignored`](Self::Ignored) for breakers and
    /// retries — a refusal is not a failure, this library's own or the dependency's — and a
    /// drop for an adaptive bulkhead limit, which backs off.
    Overloaded,
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
