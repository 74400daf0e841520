use resilience_runtime::hedge;
use resilience_ui_tests::CallError;

struct Query(u32);

#[hedge(name = "search")]
async fn search(query: Query) -> Result<u32, CallError> {
    Ok(query.0)
}

fn main() {
    let _ = search(Query(1));
}
