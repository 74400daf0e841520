//! What a service's `main` prints when it fails with `?` on this library's errors: the
//! readable message, as `Display` writes it, not a `Debug` dump of the error's fields.

use std::process::Command;

/// Runs `main_errors` with `case`, and returns its stderr.
fn stderr_of(case: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_main_errors"))
        .arg(case)
        .output()
        .expect("the binary runs");
    assert!(!output.status.success(), "`main_errors {case}` succeeded");
    String::from_utf8(output.stderr).expect("stderr is UTF-8")
}

#[test]
fn a_config_error_from_main_prints_its_message() {
    assert_eq!(
        stderr_of("config"),
        "Error: invalid `max_concurrent_calls`: must be at least 1, got 0 (a bulkhead of 0 calls \
         rejects everything)\n"
    );
}

#[test]
fn a_document_error_from_main_prints_file_line_key_and_reason() {
    let stderr = stderr_of("document");
    let expected_tail = ".toml:2:1: bulkhead.instances.quotes.max_concurent_calls: unknown key \
                         `max_concurent_calls` in bulkhead settings; did you mean \
                         `max_concurrent_calls`?\n";
    assert!(
        stderr.starts_with("Error: ")
            && stderr.contains("main-errors-")
            && stderr.ends_with(expected_tail),
        "{stderr}"
    );
}

#[test]
fn a_failed_validation_from_main_prints_its_report() {
    let stderr = stderr_of("validation");
    assert!(stderr.starts_with("Error: "), "{stderr}");
    assert!(!stderr.contains("Validation {"), "a Debug dump: {stderr}");
    assert!(
        stderr.contains("bulkhead `quotes` has no configuration")
            && stderr.contains("used by main_errors::quote (tests/src/bin/main_errors.rs:"),
        "{stderr}"
    );
}
