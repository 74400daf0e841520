//! A refusal as an HTTP response: `impl axum::response::IntoResponse for Rejected` (cargo
//! feature `axum`).
//!
//! A handler whose error type carries a [`Rejected`] hands it to this mapping in one line, so
//! every service answers a refusal the same way:
//!
//! | rejection | status | `Retry-After` (whole seconds, rounded up, at least 1) |
//! |---|---|---|
//! | [`BulkheadFull`](Rejected::BulkheadFull) | `503 Service Unavailable` | [`BULKHEAD_FULL_RETRY_AFTER`] (1 s) |
//! | [`CallNotPermitted`](Rejected::CallNotPermitted), open | `503 Service Unavailable` | the rest of the open state's wait |
//! | [`CallNotPermitted`](Rejected::CallNotPermitted), half-open, every probe taken | `503 Service Unavailable` | [`HALF_OPEN_RETRY_AFTER`] (1 s) |
//! | [`CallNotPermitted`](Rejected::CallNotPermitted), forced open | `503 Service Unavailable` | [`FORCED_OPEN_RETRY_AFTER`] (30 s) |
//! | [`RequestNotPermitted`](Rejected::RequestNotPermitted) | `429 Too Many Requests` | the time until the rate limiter's next free permission |
//! | [`TimedOut`](Rejected::TimedOut) | `504 Gateway Timeout` | none: nothing says when the dependency will be faster |
//! | [`WouldBlock`](Rejected::WouldBlock) | `503 Service Unavailable` | none: the guard was busy, but a sync handler on a current-thread runtime should not wait |
//! | [`Reentrant`](Rejected::Reentrant) | `500 Internal Server Error` | none: a retry would be refused again |
//! | [`Unconfigured`](Rejected::Unconfigured) | `500 Internal Server Error` | none: the service is misconfigured until it is redeployed |
//!
//! The body is a JSON object (`Content-Type: application/json`) with these keys, always all
//! present:
//!
//! | key | value |
//! |---|---|
//! | `error` | `"bulkhead_full"`, `"call_not_permitted"`, `"request_not_permitted"`, `"timed_out"`, `"would_block"`, `"reentrant"` or `"unconfigured"` |
//! | `aspect` | the kind of guard that refused the call, as in attributes: `"bulkhead"`, `"circuit_breaker"`, `"rate_limiter"` |
//! | `instance` | the instance name (`"orders"`) |
//! | `message` | the rejection's `Display` text, for people; not meant to be parsed |
//! | `retry_after_seconds` | the `Retry-After` value as a number, or `null` without the header |
//!
//! ```json
//! {"error":"bulkhead_full","aspect":"bulkhead","instance":"orders",
//!  "message":"bulkhead `orders` is full (waited 0 ms for a permit)","retry_after_seconds":1}
//! ```
//!
//! An error type of a guarded handler delegates its rejections:
//!
//! ```
//! use axum::http::StatusCode;
//! use axum::response::{IntoResponse, Response};
//! use resilience_runtime::Rejected;
//!
//! #[derive(Debug)]
//! enum OrderError {
//!     Rejected(Rejected),
//!     OutOfStock,
//! }
//!
//! impl From<Rejected> for OrderError {
//!     fn from(rejected: Rejected) -> Self {
//!         OrderError::Rejected(rejected)
//!     }
//! }
//!
//! impl IntoResponse for OrderError {
//!     fn into_response(self) -> Response {
//!         match self {
//!             OrderError::Rejected(rejected) => rejected.into_response(),
//!             OrderError::OutOfStock => (StatusCode::CONFLICT, "out of stock").into_response(),
//!         }
//!     }
//! }
//! # let response = OrderError::OutOfStock.into_response();
//! # assert_eq!(response.status(), StatusCode::CONFLICT);
//! ```

mod actuator;
mod route;

pub use actuator::{actuator, actuator_at, report, Actuator, ACTUATOR_EVENTS};
pub use route::{GuardRouteLayer, GuardRouteService, RouteFuture};

use std::time::Duration;

use ::axum::http::{header, HeaderValue, StatusCode};
use ::axum::response::{IntoResponse, Response};

use crate::circuit_breaker::CircuitState;
use crate::error::Rejected;

/// The `Retry-After` of a full bulkhead: a short hint, as permits free up as soon as calls end.
pub const BULKHEAD_FULL_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The `Retry-After` of a half-open breaker whose probe calls are all taken: a short hint, as
/// the breaker decides once they are recorded.
pub const HALF_OPEN_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The `Retry-After` of a forced-open breaker (and of any breaker refusal without a known
/// remaining time): a fallback hint, as it refuses calls until someone moves it by hand.
pub const FORCED_OPEN_RETRY_AFTER: Duration = Duration::from_secs(30);

/// What a rejection looks like over HTTP: its status, its `Retry-After` hint and its
/// `error` code.
fn parts(rejected: &Rejected) -> (StatusCode, Option<Duration>, &'static str) {
    match rejected {
        Rejected::BulkheadFull { .. } => (
            StatusCode::SERVICE_UNAVAILABLE,
            Some(BULKHEAD_FULL_RETRY_AFTER),
            "bulkhead_full",
        ),
        Rejected::CallNotPermitted {
            state, retry_after, ..
        } => {
            let hint = retry_after.unwrap_or(match state {
                CircuitState::HalfOpen => HALF_OPEN_RETRY_AFTER,
                _ => FORCED_OPEN_RETRY_AFTER,
            });
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Some(hint),
                "call_not_permitted",
            )
        }
        // 429, not 503: the service is healthy, this client is over its rate.
        Rejected::RequestNotPermitted { retry_after, .. } => (
            StatusCode::TOO_MANY_REQUESTS,
            Some(*retry_after),
            "request_not_permitted",
        ),
        // 504: the dependency behind this service was too slow; no hint, as nothing says
        // when it will be faster.
        Rejected::TimedOut { .. } => (StatusCode::GATEWAY_TIMEOUT, None, "timed_out"),
        Rejected::WouldBlock { .. } => (StatusCode::SERVICE_UNAVAILABLE, None, "would_block"),
        // As what they stand for: a refusal as a full bulkhead's, an error as a failing
        // dependency's (502, the gateway's word for a bad answer from upstream).
        Rejected::Injected { error: None, .. } => {
            (StatusCode::SERVICE_UNAVAILABLE, None, "injected_refusal")
        }
        Rejected::Injected { error: Some(_), .. } => {
            (StatusCode::BAD_GATEWAY, None, "injected_error")
        }
        Rejected::Reentrant { .. } => (StatusCode::INTERNAL_SERVER_ERROR, None, "reentrant"),
        // 500: a name the registry requires configured was not; only a deployment fixes it.
        Rejected::Unconfigured { .. } => (StatusCode::INTERNAL_SERVER_ERROR, None, "unconfigured"),
    }
}

/// Whole seconds, rounded up, at least 1: `Retry-After` has no fractions, and `0` would invite
/// an immediate retry.
fn whole_seconds(wait: Duration) -> u64 {
    let seconds = wait
        .as_secs()
        .saturating_add(u64::from(wait.subsec_nanos() > 0));
    seconds.max(1)
}

/// A refusal becomes `503 Service Unavailable` (`429 Too Many Requests` from a rate limiter)
/// with a `Retry-After` header and a JSON body
/// naming the guard and the reason; see the [module docs](self) for the statuses, the hints
/// and the body's keys.
///
/// ```
/// use axum::http::{header, StatusCode};
/// use axum::response::IntoResponse;
/// use resilience_runtime::{Bulkhead, BulkheadConfig};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let bulkhead = Bulkhead::new("orders", BulkheadConfig::builder().max_concurrent_calls(1).build()?);
/// let _held = bulkhead.try_acquire()?;
/// let rejected = bulkhead.try_acquire().unwrap_err();
///
/// let response = rejected.into_response();
/// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(response.headers()[header::RETRY_AFTER], "1");
/// assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
///
/// # let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// # let body = runtime.block_on(axum::body::to_bytes(response.into_body(), 4096))?;
/// let body: serde_json::Value = serde_json::from_slice(&body)?;
/// assert_eq!(body["error"], "bulkhead_full");
/// assert_eq!(body["aspect"], "bulkhead");
/// assert_eq!(body["instance"], "orders");
/// assert_eq!(body["retry_after_seconds"], 1);
/// # Ok(())
/// # }
/// ```
impl IntoResponse for Rejected {
    fn into_response(self) -> Response {
        let (status, retry_after, error) = parts(&self);
        let retry_after = retry_after.map(whole_seconds);
        let body = serde_json::json!({
            "error": error,
            "aspect": self.aspect().as_str(),
            "instance": self.name().as_str(),
            "message": self.to_string(),
            "retry_after_seconds": retry_after,
        });
        let mut response = (status, body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(seconds) = retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aspect::Aspect;
    use crate::name::Name;

    /// The status, the `Retry-After` header and the JSON body of `rejected`'s response.
    fn respond(rejected: Rejected) -> (StatusCode, Option<String>, serde_json::Value) {
        let response = rejected.into_response();
        let status = response.status();
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(::axum::body::to_bytes(response.into_body(), 4096))
            .unwrap();
        (status, retry_after, serde_json::from_slice(&body).unwrap())
    }

    fn not_permitted(state: CircuitState, retry_after: Option<Duration>) -> Rejected {
        Rejected::CallNotPermitted {
            name: Name::from("orders"),
            state,
            retry_after,
        }
    }

    #[test]
    fn the_http_docs_list_every_error_code_status_and_aspect() {
        let name = || Name::from("orders");
        let every = [
            Rejected::BulkheadFull {
                name: name(),
                waited: Duration::ZERO,
            },
            not_permitted(CircuitState::Open, None),
            Rejected::RequestNotPermitted {
                name: name(),
                retry_after: Duration::ZERO,
            },
            Rejected::TimedOut {
                name: name(),
                timeout: Duration::ZERO,
            },
            Rejected::WouldBlock {
                aspect: Aspect::Bulkhead,
                name: name(),
            },
            Rejected::Reentrant {
                aspect: Aspect::Bulkhead,
                name: name(),
            },
            Rejected::Unconfigured {
                aspect: Aspect::Retry,
                name: name(),
            },
            Rejected::Injected {
                name: name(),
                error: None,
            },
            Rejected::Injected {
                name: name(),
                error: Some(crate::error::InjectedError::new("down".into())),
            },
        ];
        // A new variant does not compile here until it has a sample above.
        let index = |rejected: &Rejected| match rejected {
            Rejected::BulkheadFull { .. } => 0,
            Rejected::CallNotPermitted { .. } => 1,
            Rejected::RequestNotPermitted { .. } => 2,
            Rejected::TimedOut { .. } => 3,
            Rejected::WouldBlock { .. } => 4,
            Rejected::Reentrant { .. } => 5,
            Rejected::Unconfigured { .. } => 6,
            Rejected::Injected { error: None, .. } => 7,
            Rejected::Injected { error: Some(_), .. } => 8,
        };
        assert!(every.iter().map(index).eq(0..every.len()));
        let readme = include_str!("../docs/http.md");
        for rejected in &every {
            let (status, _, code) = parts(rejected);
            assert!(
                readme.contains(&format!("`{code}`")),
                "docs/http.md lacks `{code}`"
            );
            let row = format!("| {} |", status.as_u16());
            assert!(
                readme.contains(&row),
                "the table of docs/http.md lacks {row}"
            );
        }
        for aspect in Aspect::ALL {
            let listed = format!("`{}`", aspect.as_str());
            assert!(
                readme.contains(&listed),
                "docs/http.md lacks the aspect {listed}"
            );
        }
    }

    #[test]
    fn a_rate_limiter_refusal_is_429_with_its_wait_rounded_up() {
        for (wait, header) in [
            (Duration::from_millis(12), "1"),
            (Duration::from_millis(2_001), "3"),
        ] {
            let rejected = Rejected::RequestNotPermitted {
                name: Name::from("payments"),
                retry_after: wait,
            };
            let message = rejected.to_string();
            let (status, retry_after, body) = respond(rejected);
            assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(retry_after.as_deref(), Some(header));
            assert_eq!(
                body,
                serde_json::json!({
                    "error": "request_not_permitted",
                    "aspect": "rate_limiter",
                    "instance": "payments",
                    "message": message,
                    "retry_after_seconds": header.parse::<u64>().unwrap(),
                })
            );
        }
    }

    #[test]
    fn a_full_bulkhead_is_503_with_a_short_retry_after() {
        let rejected = Rejected::BulkheadFull {
            name: Name::from("orders"),
            waited: Duration::from_millis(20),
        };
        let message = rejected.to_string();
        let (status, retry_after, body) = respond(rejected);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry_after.as_deref(), Some("1"));
        assert_eq!(
            body,
            serde_json::json!({
                "error": "bulkhead_full",
                "aspect": "bulkhead",
                "instance": "orders",
                "message": message,
                "retry_after_seconds": 1,
            })
        );
    }

    #[test]
    fn an_open_breaker_is_503_with_the_rest_of_its_wait_rounded_up() {
        let rejected = not_permitted(CircuitState::Open, Some(Duration::from_millis(9_001)));
        let message = rejected.to_string();
        let (status, retry_after, body) = respond(rejected);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry_after.as_deref(), Some("10"));
        assert_eq!(
            body,
            serde_json::json!({
                "error": "call_not_permitted",
                "aspect": "circuit_breaker",
                "instance": "orders",
                "message": message,
                "retry_after_seconds": 10,
            })
        );
    }

    #[test]
    fn a_breaker_without_a_known_wait_gets_the_documented_hints() {
        let (status, retry_after, body) = respond(not_permitted(CircuitState::ForcedOpen, None));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry_after.as_deref(), Some("30"));
        assert_eq!(body["retry_after_seconds"], 30);
        assert_eq!(body["error"], "call_not_permitted");

        let (_, retry_after, _) = respond(not_permitted(CircuitState::HalfOpen, None));
        assert_eq!(retry_after.as_deref(), Some("1"));
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_and_at_least_one() {
        assert_eq!(whole_seconds(Duration::ZERO), 1);
        assert_eq!(whole_seconds(Duration::from_nanos(1)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(1)), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1_001)), 2);
        assert_eq!(whole_seconds(Duration::from_secs(60)), 60);
        assert_eq!(whole_seconds(Duration::MAX), u64::MAX);
        let (_, retry_after, _) = respond(not_permitted(CircuitState::Open, Some(Duration::ZERO)));
        assert_eq!(retry_after.as_deref(), Some("1"));
    }

    #[test]
    fn a_reentrant_call_is_500_without_retry_after() {
        let (status, retry_after, body) = respond(Rejected::Reentrant {
            aspect: Aspect::Bulkhead,
            name: Name::from("orders"),
        });
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(retry_after, None);
        assert_eq!(body["error"], "reentrant");
        assert_eq!(body["aspect"], "bulkhead");
        assert_eq!(body["retry_after_seconds"], serde_json::Value::Null);
    }

    #[test]
    fn an_unconfigured_guard_is_500_without_retry_after() {
        let (status, retry_after, body) = respond(Rejected::Unconfigured {
            aspect: Aspect::CircuitBreaker,
            name: Name::from("orders"),
        });
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(retry_after, None);
        assert_eq!(body["error"], "unconfigured");
        assert_eq!(body["aspect"], "circuit_breaker");
        assert_eq!(body["retry_after_seconds"], serde_json::Value::Null);
    }

    #[test]
    fn a_time_out_is_504_without_retry_after() {
        let (status, retry_after, body) = respond(Rejected::TimedOut {
            name: Name::from("inventory"),
            timeout: Duration::from_secs(1),
        });
        assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(retry_after, None);
        assert_eq!(body["error"], "timed_out");
        assert_eq!(body["aspect"], "time_limiter");
    }

    #[test]
    fn the_message_is_the_display_text() {
        let rejected = not_permitted(CircuitState::Open, Some(Duration::from_millis(1500)));
        let (_, _, body) = respond(rejected);
        assert_eq!(
            body["message"],
            "circuit breaker `orders` does not permit calls (open, 1500 ms left to wait)"
        );
    }
}
