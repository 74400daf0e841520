#!/usr/bin/env bash
# Runs the unit tests of the crate's unsafe code under Miri (the spin lock, the coarse clock,
# the registry in scope, the plan handle, the call chain, the owned call), the way tokio checks its own: a few
# minutes, most of them building the standard library for Miri once.
set -euo pipefail
cd "$(dirname "$0")/.."
# Installed or updated through rustup; a machine that cannot reach rustup's server runs the
# nightly it has, and says so loudly if that has no Miri.
rustup toolchain install nightly --component miri --profile minimal --no-self-update >/dev/null \
  || echo "miri.sh: could not install or update nightly's Miri; using what is installed" >&2
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  echo "miri.sh: SKIPPED: no nightly toolchain with Miri on this machine" >&2
  exit 0
fi
cargo +nightly miri setup >/dev/null
# The tests of the unsafe sites' modules (their names are prefixes of the test paths).
cargo +nightly miri test -p resilience-runtime --lib --no-default-features --features tower -- \
  sync:: clock:: registry::scope:: plan_cache:: call::chain:: call::owned::
