//! Compile-fail (ui) tests of the attribute macros: every rejected shape gives one clear error
//! at the offending token, and the canonical shapes compile.
//!
//! Regenerate the expected output with
//! `TRYBUILD=overwrite cargo test -p resilience-ui-tests --test ui`, then read every `.stderr`.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/fail/*.rs");
    cases.pass("ui/pass/*.rs");
}
