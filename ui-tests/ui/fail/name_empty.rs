use resilience_runtime::bulkhead;
use resilience_ui_tests::CallError;

#[bulkhead(name = "")]
fn guarded() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
