#!/usr/bin/env bash
# Runs every test: formatting, clippy with warnings as errors, unit/property/integration tests.
# Usage: contrib/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
contrib/deps.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace 2>&1 | tee "$log"
# One closing line with the totals of every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
