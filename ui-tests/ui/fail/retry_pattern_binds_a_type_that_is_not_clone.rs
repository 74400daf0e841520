use resilience_runtime::retry;
use resilience_ui_tests::CallError;

struct Extracted<T>(T);

struct Body(Vec<u8>);

#[retry(name = "uploads")]
async fn upload(Extracted(body): Extracted<Body>) -> Result<usize, CallError> {
    Ok(body.0.len())
}

fn main() {
    let _ = upload(Extracted(Body(Vec::new())));
}
