use resilience_runtime::hedge;
use resilience_ui_tests::CallError;

#[hedge(name = "search")]
fn search(query: u32) -> Result<u32, CallError> {
    Ok(query)
}

fn main() {
    let _ = search(1);
}
