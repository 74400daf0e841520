//! The state a guarded `async fn` adds to its future stays small: a call's future is moved at
//! least once on its way to being polled, and a future larger than 128 bytes is moved by a
//! call to `memcpy` rather than a few register moves (about a tenth of a guarded call's cost
//! when it was 216 bytes; see BENCHMARKS.md). A test of sizes, not of time.

use std::mem::size_of_val;

use resilience_runtime::{bulkhead, circuit_breaker, rate_limiter, retry, time_limiter};
use resilience_tests::CallError;

async fn bare(x: u32) -> Result<u32, CallError> {
    Ok(x + 1)
}

#[bulkhead(name = "future-size")]
#[circuit_breaker(name = "future-size")]
async fn guarded(x: u32) -> Result<u32, CallError> {
    Ok(x + 1)
}

#[bulkhead(name = "future-size-fallback", fallback = on_rejected)]
#[circuit_breaker(name = "future-size-fallback")]
async fn with_fallback(x: u32) -> Result<u32, CallError> {
    Ok(x + 1)
}

#[circuit_breaker(name = "future-size-three")]
#[rate_limiter(name = "future-size-three")]
#[bulkhead(name = "future-size-three")]
async fn three_gates(x: u32) -> Result<u32, CallError> {
    Ok(x + 1)
}

async fn on_rejected(x: u32, _rejected: resilience_runtime::Rejected) -> Result<u32, CallError> {
    Ok(x)
}

#[test]
fn a_guarded_async_fn_with_a_small_body_has_a_future_of_at_most_128_bytes() {
    let bare = size_of_val(&bare(1));
    for (name, size) in [
        ("guarded", size_of_val(&guarded(1))),
        ("with_fallback", size_of_val(&with_fallback(1))),
        ("three_gates", size_of_val(&three_gates(1))),
    ] {
        assert!(
            size <= 128,
            "`{name}`'s future is {size} bytes (the bare function's: {bare}); what does it keep \
             across `.await` that it did not before?"
        );
    }
}

#[bulkhead(name = "future-size-five")]
#[rate_limiter(name = "future-size-five")]
#[retry(name = "future-size-five")]
#[circuit_breaker(name = "future-size-five")]
#[time_limiter(name = "future-size-five")]
async fn five_aspects(x: u32) -> Result<u32, CallError> {
    Ok(x + 1)
}

#[retry(name = "future-size-retry")]
async fn retried(x: u32) -> Result<u32, CallError> {
    Ok(x + 1)
}

#[test]
fn the_nested_model_of_a_call_through_wrappers_is_not_in_its_future() {
    // A retry or a time limiter makes more than 128 bytes unavoidable (the call's permits, its
    // future in its place, the time limiter's timer), but the nested model's states, which
    // only a call that waits for a gate or is retried reaches, are boxed: in the call's
    // future they were about 450 bytes more (five aspects 760 bytes, a lone retry 784).
    for (name, size) in [
        ("five_aspects", size_of_val(&five_aspects(1))),
        ("retried", size_of_val(&retried(1))),
    ] {
        assert!(
            size <= 384,
            "`{name}`'s future is {size} bytes: are the nested model's segments laid out in it \
             again?"
        );
    }
}
