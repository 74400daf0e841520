//! `FileWatcher`: an edited configuration file is reapplied, in place or replaced by a rename
//! as editors save; a bad edit changes nothing. Waits are bounded polls of the outcomes the
//! watcher reports, never a sleep that must be long enough.

use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use resilience_runtime::document::FileWatcher;
use resilience_runtime::Registry;

type Outcome = Result<String, String>;

/// The next outcome `wanted` accepts, skipping the others (a reload of a half-written file, a
/// second batch of events of one save); panics after 20 s without one.
fn next(outcomes: &Receiver<Outcome>, wanted: impl Fn(&Outcome) -> bool) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match outcomes.recv_timeout(left) {
            Ok(outcome) if wanted(&outcome) => return outcome,
            Ok(other) => seen.push(other),
            Err(_) => break,
        }
    }
    panic!("no such reload within 20 s; saw {seen:?}");
}

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "resilience-watch-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn an_edit_is_reapplied_and_a_bad_one_leaves_the_configuration_in_force() {
    let dir = scratch_dir();
    let file = dir.join("resilience.toml");
    let document =
        |calls: u32| format!("[bulkhead.instances.orders]\nmax_concurrent_calls = {calls}\n");
    std::fs::write(&file, document(3)).unwrap();
    let registry = Arc::new(Registry::new());
    registry.load_file(&file).unwrap();
    let bulkhead = registry.bulkhead("orders");

    let (sender, outcomes) = channel();
    let watcher = FileWatcher::start_with(
        Arc::clone(&registry),
        &file,
        Duration::from_millis(50),
        move |outcome| {
            let _ = sender.send(outcome.map(|c| c.to_string()).map_err(|e| e.to_string()));
        },
    )
    .unwrap();
    assert_eq!(watcher.path(), file.as_path());

    // Saved in place.
    std::fs::write(&file, document(5)).unwrap();
    let changed = next(&outcomes, |o| o.as_ref().is_ok_and(|c| c != "no change"));
    assert_eq!(changed, Ok("bulkhead `orders`: changed".to_owned()));
    assert_eq!(
        bulkhead.max_allowed_concurrent_calls(),
        5,
        "the same instance, reconfigured"
    );

    // A bad edit: reported with its line and key, and nothing changes.
    std::fs::write(&file, document(0)).unwrap();
    let refused = next(&outcomes, |o| {
        o.as_ref()
            .is_err_and(|e| e.contains("max_concurrent_calls"))
    });
    let refused = refused.unwrap_err();
    assert!(
        refused.contains(":2:24: bulkhead.instances.orders.max_concurrent_calls"),
        "{refused}"
    );
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 5);

    // Saved as editors often do: a new file renamed over the old one.
    let staged = dir.join("resilience.toml.swp");
    std::fs::write(&staged, document(7)).unwrap();
    std::fs::rename(&staged, &file).unwrap();
    let changed = next(&outcomes, |o| o.as_ref().is_ok_and(|c| c != "no change"));
    assert_eq!(changed, Ok("bulkhead `orders`: changed".to_owned()));
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 7);
    drop(watcher);
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 7);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_directory_that_cannot_be_watched_is_an_error_naming_the_file() {
    let missing = std::env::temp_dir()
        .join(format!("resilience-no-such-dir-{}", std::process::id()))
        .join("resilience.toml");
    let err =
        FileWatcher::start(Registry::global(), &missing, Duration::from_millis(50)).unwrap_err();
    assert_eq!(err.file(), Some(missing.as_path()));
    assert!(err.reason().contains("cannot watch"), "{err}");
}
