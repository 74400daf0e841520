use resilience_runtime::retry;
use resilience_ui_tests::CallError;

#[retry(name = "inventory")]
async fn fill(buffer: &mut Vec<u8>) -> Result<usize, CallError> {
    buffer.push(1);
    Ok(buffer.len())
}

fn main() {
    let mut buffer = Vec::new();
    let _ = fill(&mut buffer);
}
