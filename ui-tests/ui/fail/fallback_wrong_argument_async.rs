use resilience_runtime::{circuit_breaker, Rejected};
use resilience_ui_tests::CallError;

/// An extractor, as axum's `Path`.
pub struct Path<T>(pub T);

// The fallback takes the `u32` inside where the function takes the extractor: the error
// states the signature the fallback must have.
async fn cached_price(id: u32, _rejected: Rejected) -> Result<u32, CallError> {
    Ok(id)
}

#[circuit_breaker(name = "prices", fallback = cached_price)]
async fn price(id: Path<u32>) -> Result<u32, CallError> {
    Ok(id.0)
}

fn main() {
    let _ = price(Path(1));
}
