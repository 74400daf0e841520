//! A service's `main` that fails the way a misconfigured service does, for
//! `tests/tests/main_errors.rs`: what `?` prints must be the readable message.

use std::error::Error;

use resilience_runtime::{bulkhead, BulkheadConfig, Registry};

#[bulkhead(name = "quotes")]
fn quote(symbol: &str) -> Result<usize, resilience_runtime::Rejected> {
    Ok(symbol.len())
}

fn main() -> Result<(), Box<dyn Error>> {
    let registry = Registry::global();
    match std::env::args().nth(1).as_deref() {
        Some("config") => {
            BulkheadConfig::builder().max_concurrent_calls(0).build()?;
        }
        Some("document") => {
            let path =
                std::env::temp_dir().join(format!("main-errors-{}.toml", std::process::id()));
            std::fs::write(
                &path,
                "[bulkhead.instances.quotes]\nmax_concurent_calls = 5\n",
            )?;
            let loaded = registry.load_file(&path);
            std::fs::remove_file(&path)?;
            loaded?;
        }
        Some("validation") => {
            quote("ACME")?;
            registry.validate()?;
        }
        other => return Err(format!("unknown case {other:?}").into()),
    }
    Ok(())
}
