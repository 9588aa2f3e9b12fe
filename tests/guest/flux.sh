#!/usr/bin/env bash
# Flux in the guest (contrib/guest.sh), as root: the host-built flux-core (shared read-only at
# its path) runs a one-broker test instance on the guest's own hardware, with its memory tiers,
# and the lama shell plugin binds each task's memory by tier (issue 49). Each task's heap policy
# and nodes as the kernel shows them (/proc/self/numa_maps), and LAMA_MEMS; expected nodes from
# the guest's qemu command line, as tests/guest/suite.sh has them under Slurm; the heap's pages
# on those nodes (tests/guest/pages.sh).
# Usage: flux.sh FLUX_PREFIX LAMA FLUX_PLUGIN_SO
# Prints one "ok - ..." or "not ok - ..." line per case, and "# done: flux.sh" at its end.
set -uo pipefail
flux=$1/bin/flux lama=$2 plugin=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/../tap.sh"

echo "plugin.load { file = \"$plugin\", conf = { cache = \"$work/cache\" } }" > "$work/rc.lua"
source "$(dirname "$0")/pages.sh"
tier_probe "$work/tier.sh" FLUX_TASK_RANK
cat > "$work/cases.sh" <<EOS
for spec in "local -n2 -c2" "hbm -n2 -c2" "prefer-hbm -n2 -c2" "interleave -n1 -c4"; do
  set -- \$spec
  mode=\$1; shift
  echo "case \$mode \$*"
  timeout 120 "$flux" run -N1 --exclusive "\$@" -o lama.policy=auto -o lama.mem=\$mode -o userrc="$work/rc.lua" bash "$work/tier.sh" 2>&1
done
EOS
out=$(timeout 600 "$flux" start --test-size=1 bash "$work/cases.sh" 2>&1)
status=$?
[ $status = 0 ] || not_ok "[guest, Flux] the test instance (flux start) exited with status $status" "$(tail -n 20 <<<"$out")"
if ! grep -q '^case ' <<<"$out"; then
  not_ok "[guest, Flux] a test instance starts in the guest" "$out"
  exit 0
fi
# Flux counts cores (2 per package): -n2 -c2 gives a task a package, -n1 -c4 both.
for want in "local|0 0 bind:0;1 1 bind:1" "hbm|0 2 bind:2;1 3 bind:3" \
  "prefer-hbm|0 2 prefer (many):2;1 3 prefer (many):3" "interleave|0 0-1 interleave:0-1"; do
  mode=${want%%|*} want=${want#*|}
  mine=$(awk -v m="$mode" '$1 == "case" {on = ($2 == m)} on && ($1 == "tier" || $1 == "heap")' <<<"$out")
  got=$(awk '$1 == "tier" {$1 = ""; print substr($0, 2)}' <<<"$mine" | sort -n | paste -sd';' -)
  pages=$(pages_where "$mine")
  if [ "$got" = "$want" ] && [ -n "$pages" ] && ! grep -qv ' ok$' <<<"$pages"; then
    ok "[guest, Flux] lama.mem=$mode: $got (task, LAMA_MEMS, numa_maps); the heap's pages on those nodes"
    heap_lines "$mine"
  else not_ok "[guest, Flux] lama.mem=$mode" "wanted: $want" "got: $got" "pages (task, nodes, verdict): $pages" "$out"; fi
done
done_testing
