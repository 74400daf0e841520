#!/usr/bin/env bash
# Runs the unit tests of the crate's unsafe code under Miri (the spin lock, the coarse clock,
# the registry in scope, the plan handle, the call chain), the way tokio checks its own: a few
# minutes, most of them building the standard library for Miri once.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup toolchain install nightly --component miri --profile minimal >/dev/null
cargo +nightly miri setup >/dev/null
# The tests of the unsafe sites' modules (their names are prefixes of the test paths).
cargo +nightly miri test -p resilience-runtime --lib --no-default-features -- \
  sync:: clock:: registry::scope:: plan_cache:: call::chain::
