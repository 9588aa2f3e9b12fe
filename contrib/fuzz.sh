#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser and of placement (fuzz/fuzz_targets, libFuzzer with
# AddressSanitizer and LeakSanitizer, nightly toolchain).
#
# Usage: contrib/fuzz.sh [--grow] SECONDS [TARGET...]
#   Runs each target (default: all) for SECONDS, starting from its committed corpus in
#   fuzz/corpus/TARGET, and prints one line per target: executions, coverage (edges and
#   features), corpus size, and crashes/leaks/timeouts (inputs saved in fuzz/artifacts/TARGET).
#   Without --grow, new inputs go to a scratch folder and the committed corpus is left alone (the
#   test command's smoke run); with --grow they are added to the corpus, which is then minimised
#   (cargo fuzz cmin) so that it stays small enough to commit.
#   Exit status 1 when any target crashed, leaked, hung or ran out of memory.
# Environment: LAMA_FUZZ_JOBS (parallel runs per target, default 1); LAMA_FUZZ_SANITIZER
#   (address, the default, which includes leak checks; or leak alone, several times faster, for
#   long campaigns).
set -euo pipefail
cd "$(dirname "$0")/.."
grow=0
if [ "${1:-}" = --grow ]; then grow=1; shift; fi
seconds=${1:?usage: contrib/fuzz.sh [--grow] SECONDS [TARGET...]}
shift
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
sanitizer=${LAMA_FUZZ_SANITIZER:-address}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
# One build for every target (-O: optimised, with debug assertions and overflow checks on).
(cd fuzz && cargo +nightly fuzz build -O -s "$sanitizer" >/dev/null 2>&1) || (cd fuzz && cargo +nightly fuzz build -O -s "$sanitizer")
failed=0
jobs=()
# libFuzzer's -jobs sends each run's output to fuzz-N.log: only asked for when wanted.
if [ "${LAMA_FUZZ_JOBS:-1}" -gt 1 ]; then jobs=(-jobs="$LAMA_FUZZ_JOBS" -workers="$LAMA_FUZZ_JOBS"); fi
printf '%-16s %12s %8s %8s %7s  %s\n' target executions edges features corpus result
for t in "${targets[@]}"; do
  corpus=fuzz/corpus/$t
  mkdir -p "$corpus" "fuzz/artifacts/$t"
  scratch=$(mktemp -d)
  # The targets' own files (arbitrary_step's host file) go here, not into /tmp for good.
  tmp=$(mktemp -d)
  if [ $grow = 1 ]; then dirs=("$PWD/$corpus"); else dirs=("$scratch" "$PWD/$corpus"); fi
  log=$scratch.log
  before=$(ls "fuzz/artifacts/$t" | wc -l)
  # What slurmstepd and the job shell read must cost little for any input: 256 MB in all
  # (AddressSanitizer's own shadow included), no single allocation over 256 MB, and 5 s per input
  # (a hang), so that a short input costing gigabytes is a finding, not only a crash.
  # AddressSanitizer keeps freed memory in a quarantine of 256 MB by default, which alone would
  # reach the limit: a smaller one keeps the limit about the code's own allocations.
  set +e
  (cd fuzz && TMPDIR=$tmp ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16} cargo +nightly fuzz run -O -s "$sanitizer" "$t" "${dirs[@]}" -- \
      -max_total_time="$seconds" -timeout=5 -rss_limit_mb=256 -malloc_limit_mb=256 -print_final_stats=1 \
      ${jobs[@]+"${jobs[@]}"}) >"$log" 2>&1
  status=$?
  set -e
  after=$(ls "fuzz/artifacts/$t" | wc -l)
  [ ${#jobs[@]} = 0 ] || cat fuzz/fuzz-*.log >> "$log" 2>/dev/null && rm -f fuzz/fuzz-*.log
  execs=$(awk '/stat::number_of_executed_units/ { s += $2 } END { print s + 0 }' "$log")
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  edges=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
  feats=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  size=$(ls "$corpus" | wc -l)
  if [ $status -ne 0 ] || [ "$after" -gt "$before" ] || [ "$execs" -eq 0 ]; then
    # A target that ran no input (an empty build, a run that never started) proves nothing.
    result="FAILED (status $status, $execs executions; inputs in fuzz/artifacts/$t; log $log)"
    grep -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|panicked at' "$log" | head -n 3 | sed 's/^/    /' >&2 || true
    failed=1
  else
    result=ok
    rm -f "$log"
  fi
  printf '%-16s %12s %8s %8s %7s  %s\n' "$t" "$execs" "${edges:-?}" "${feats:-?}" "$size" "$result"
  rm -rf "$scratch" "$tmp"
  if [ $grow = 1 ] && [ $status -eq 0 ]; then
    (cd fuzz && cargo +nightly fuzz cmin -O -s "$sanitizer" "$t" >/dev/null 2>&1) || echo "  cmin $t failed" >&2
  fi
done
exit $failed
