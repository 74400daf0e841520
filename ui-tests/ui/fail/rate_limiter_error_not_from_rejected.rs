use resilience_runtime::rate_limiter;

#[derive(Debug)]
struct PayError;

#[rate_limiter(name = "payments")]
fn pay() -> Result<u32, PayError> {
    Ok(1)
}

fn main() {
    let _ = pay();
}
