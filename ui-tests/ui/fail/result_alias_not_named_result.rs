use resilience_runtime::bulkhead;
use resilience_ui_tests::CallError;

type Outcome<T> = Result<T, CallError>;

#[bulkhead(name = "orders")]
fn guarded() -> Outcome<u32> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
