#!/usr/bin/env bash
# Whether `lama check` slows the job it checks: a job of fixed work (tests/check/spin.c, N million
# iterations in each of its tasks' threads) timed RUNS times alone and RUNS times with `lama
# check` sampling it back to back for as long as it runs, alternating; prints each run and the
# medians side by side. The probes only read /proc: the difference is what sharing the node's
# CPUs with them costs (a probe wakes every 20 ms while it samples).
# Usage: contrib/bench/check-beside.sh [RUNS [N]]   (RUNS default 5, N default 20000: about 5 s here)
# Needs the sandbox running (contrib/sandbox.sh start; SLURM_CONF pointing at it) and lama built
# (target/debug/lama, or LAMA=PATH).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-5} n=${2:-20000}
lama=${LAMA:-$top/target/debug/lama}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -fopenmp -O1 -o "$work/spin" "$top/tests/check/spin.c"
one() {
  local job t
  job=$(sbatch --parsable -N1 -n2 -o "$work/out-%j" --wrap "OMP_NUM_THREADS=1 srun --lama-map=csbnh --lama-bind=1c $work/spin $n work")
  if [ "$1" = beside ]; then
    for _ in $(seq 200); do squeue -h -s -j "$job" -o %i | grep -q "\.0$" && break; sleep 0.1; done
    while squeue -h -j "$job" -o %i | grep -q .; do "$lama" check --jobid "$job" --sample 1 >/dev/null 2>&1 || true; done
  fi
  while squeue -h -j "$job" -o %i | grep -q .; do sleep 0.2; done
  t=$(sort -n "$work/out-$job" | tail -n 1)
  echo "$t"
}
alone=() beside=()
for i in $(seq "$runs"); do
  alone+=("$(one alone)")
  beside+=("$(one beside)")
  echo "run $i: alone ${alone[-1]} s, with lama check beside ${beside[-1]} s"
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "median of $runs: alone $(median "${alone[@]}") s, with lama check beside $(median "${beside[@]}") s"
