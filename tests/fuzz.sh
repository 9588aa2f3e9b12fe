#!/usr/bin/env bash
# Every fuzz target for a few seconds from its committed corpus (contrib/fuzz.sh), as one check
# each: a target that crashed, leaked, hung or ran no input at all is `not ok`, and so is one
# that printed no result line.
# Usage: tests/fuzz.sh SECONDS
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
source "$top/tests/tap.sh"
cd "$top"
out=$(contrib/fuzz.sh "$1" 2>&1)
status=$?
for f in fuzz/fuzz_targets/*.rs; do
  t=$(basename "$f" .rs)
  line=$(awk -v t="$t" '$1 == t' <<<"$out")
  if [[ $line =~ ^$t\ +([0-9]+)\ .*\ ok$ ]] && [ "${BASH_REMATCH[1]}" -gt 0 ]; then
    ok "fuzz $t: ${BASH_REMATCH[1]} executions, no crash, leak or hang"
  else not_ok "fuzz $t" "${line:-no result line}" "$(grep -v "^$t " <<<"$out" | tail -n 5)"; fi
done
[ $status = 0 ] || not_ok "contrib/fuzz.sh exited with status $status" "$(tail -n 10 <<<"$out")"
done_testing
