#!/usr/bin/env bash
# Runs the benchmarks against the peers (one criterion run, a few minutes) and prints one table:
# the median per case and the ratio ours / peer. Extra arguments go to criterion, e.g. a filter:
#   scripts/bench.sh breaker_closed
# Only this package's features are resolved, so tokio's `test-util` (a dev-dependency feature
# of the other workspace members) stays off.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p resilience-benches --features peers --bench peers -- "$@"
echo
cargo bench-table
