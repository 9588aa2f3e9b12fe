#!/usr/bin/env bash
# What `lama exec` costs a rank at start, side by side with the tools that bind without placing:
# each way of starting /bin/true is timed N times in a row, round after round (the ways taking
# turns), inside a one-task step of the sandbox so that slurmd's node cache exists; prints each
# way's median per start over the rounds, and the cost above /bin/true alone.
#   true                      /bin/true
#   numactl                   numactl --physcpubind=0 --membind=0 /bin/true
#   hwloc-bind                hwloc-bind --membind node:0 core:0 -- /bin/true
#   lama exec, map, cache     lama exec --map csbnh --bind 1c --mem local (slurmd's node cache)
#   lama exec, map, hwloc     the same, LAMA_CACHE pointing nowhere (hwloc reads the machine)
#   lama exec, policy, cache  lama exec (the policy: the node's devices read too)
#   lama exec, policy, hwloc  the same without the cache
# Usage: contrib/bench/exec-start.sh [ROUNDS [N]]   (default 5 rounds of 100)
# Needs the sandbox running with the plugin (contrib/sandbox.sh start, SLURM_CONF pointing at
# it: slurmd writes the node cache) and lama built (target/release/lama, or LAMA=PATH).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-5} n=${2:-100}
lama=${LAMA:-$top/target/release/lama}
"$top/contrib/deps.sh" numactl hwloc >/dev/null
cache=${LAMA_SANDBOX:-/tmp/lama-sandbox}/cache
[ -d "$cache" ] || { echo "exec-start: no node cache in $cache (start the sandbox with the plugin)" >&2; exit 1; }
# Runs inside the step: the ways in turn, each N starts, one "way mean_us" line per way and round.
cat > /tmp/lama-exec-start.sh <<EOF
set -e
ways=(true numactl hwloc-bind "lama-map-cache" "lama-map-hwloc" "lama-policy-cache" "lama-policy-hwloc")
one() {
  case \$1 in
    true) /bin/true ;;
    numactl) numactl --physcpubind=0 --membind=0 /bin/true ;;
    hwloc-bind) hwloc-bind --membind node:0 core:0 -- /bin/true ;;
    lama-map-cache) LAMA_CACHE=$cache '$lama' exec --map csbnh --bind 1c --mem local -- /bin/true ;;
    lama-map-hwloc) LAMA_CACHE=/nonexistent '$lama' exec --map csbnh --bind 1c --mem local -- /bin/true ;;
    lama-policy-cache) LAMA_CACHE=$cache '$lama' exec -- /bin/true ;;
    lama-policy-hwloc) LAMA_CACHE=/nonexistent '$lama' exec -- /bin/true ;;
  esac
}
for r in \$(seq $rounds); do
  for w in "\${ways[@]}"; do
    one "\$w"
    t0=\$(date +%s%N)
    for i in \$(seq $n); do one "\$w"; done
    t1=\$(date +%s%N)
    echo "\$w \$(( (t1 - t0) / $n / 1000 ))"
  done
done
EOF
out=$(srun -N1 -n1 --exclusive bash /tmp/lama-exec-start.sh)
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }
base=$(awk '$1 == "true" {print $2}' <<<"$out" | median)
printf '%-20s %12s %14s\n' way "µs per start" "above true"
for w in true numactl hwloc-bind lama-map-cache lama-map-hwloc lama-policy-cache lama-policy-hwloc; do
  m=$(awk -v w="$w" '$1 == w {print $2}' <<<"$out" | median)
  printf '%-20s %12s %14s\n' "$w" "$m" "$((m - base))"
done
echo "($rounds rounds of $n starts each, medians of the rounds' means; $(nproc) CPUs, $(uname -r))"
