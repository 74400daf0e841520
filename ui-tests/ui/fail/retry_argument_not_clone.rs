use resilience_runtime::retry;
use resilience_ui_tests::CallError;

struct Ticket(u32);

#[retry(name = "inventory")]
fn redeem(ticket: Ticket) -> Result<u32, CallError> {
    Ok(ticket.0)
}

fn main() {
    let _ = redeem(Ticket(1));
}
