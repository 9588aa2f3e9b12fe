#!/usr/bin/env bash
# Runs every test: formatting, clippy with warnings as errors, unit/property/integration tests,
# then the tests against a real Slurm cluster started by contrib/sandbox.sh.
# Usage: contrib/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
contrib/deps.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
log=$(mktemp)
# Its own state directory and ports, so a sandbox started by hand keeps running.
export LAMA_SANDBOX=${LAMA_SANDBOX:-/tmp/lama-sandbox-test} LAMA_SANDBOX_PORT=${LAMA_SANDBOX_PORT:-26800}
trap 'contrib/sandbox.sh stop >/dev/null 2>&1 || true; rm -f "$log"' EXIT
cargo test --workspace 2>&1 | tee "$log"

echo "== tests against the real Slurm sandbox cluster"
cargo build --quiet -p lama-spank -p lama-cli
contrib/sandbox.sh stop >/dev/null 2>&1 || true
LAMA_SANDBOX_PLUGIN="required $PWD/target/debug/liblama_spank.so" contrib/sandbox.sh start
export SLURM_CONF=$LAMA_SANDBOX/slurm.conf
tests/slurm/layouts.sh target/debug/lama | tee -a "$log"
tests/slurm/plugin.sh target/debug/lama target/debug/liblama_spank.so | tee -a "$log"
tests/slurm/hostfile.sh target/debug/lama target/debug/liblama_spank.so | tee -a "$log"

# One closing line with the totals of every test binary and cluster test.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     /^ok - / { p++ } /^not ok - / { f++ }
     END { printf "%d passed, %d failed\n", p, f; exit (f > 0) }' "$log"
