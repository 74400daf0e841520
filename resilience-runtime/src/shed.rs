//! A server shedding load, as an HTTP response says it: a `429`, or a `503` that carries
//! `Retry-After` (what this library's own axum responses send). Not a failure of the server:
//! the rule of the tower layer's HTTP classifier and of the reqwest middleware, written once.

use std::time::Duration;

use http::header::RETRY_AFTER;
use http::{HeaderMap, StatusCode};

/// `Some` of the server's hint (its `Retry-After` in seconds; the HTTP-date form reads as no
/// hint) if a response of `status` and `headers` sheds load; `None` for any other.
pub(crate) fn shed(status: StatusCode, headers: &HeaderMap) -> Option<Option<Duration>> {
    let retry_after = || {
        headers
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(Duration::from_secs)
    };
    match status {
        StatusCode::TOO_MANY_REQUESTS => Some(retry_after()),
        StatusCode::SERVICE_UNAVAILABLE if headers.contains_key(RETRY_AFTER) => Some(retry_after()),
        _ => None,
    }
}
