use resilience_runtime::bulkhead;
use resilience_ui_tests::CallError;

#[bulkhead(name = "a")]
#[bulkhead(name = "b")]
fn guarded() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
