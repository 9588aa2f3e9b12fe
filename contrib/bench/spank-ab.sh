#!/usr/bin/env bash
# Two builds of the plugin side by side, inside the processes that run them: uprobes on each
# build's own slurm_spank_user_init (in slurmstepd) and slurm_spank_task_init (in each task),
# entry and return, over STEPS placing steps `srun -N3 -n3` that alternate between the builds
# step by step on one sandbox cluster (TaskPlugin=task/affinity, a 3-task allocation, as cluster
# A of contrib/overhead.sh). Prints each callback's median and quartiles in microseconds per build.
# Only these two probes per callback are set, so what each build costs is not hidden under the
# probes' own cost. Needs root and perf.
# Usage: contrib/bench/spank-ab.sh OLD.so NEW.so [STEPS]   (default 100; both builds for the
#   same Slurm release; LAMA_SLURM_PREFIX=PREFIX for a Slurm built by contrib/slurm-build.sh;
#   LAMA_AB_ARGS="--cpu-bind=none" times TASK_MAP-only steps instead)
set -euo pipefail
cd "$(dirname "$0")/../.."
a=${1:?usage: spank-ab.sh OLD.so NEW.so [STEPS]} b=${2:?usage: spank-ab.sh OLD.so NEW.so [STEPS]}
steps=${3:-100}
prefix=${LAMA_SLURM_PREFIX:-}
if [ -n "$prefix" ]; then export PATH=$prefix/bin:$prefix/sbin:$PATH; fi
work=$(mktemp -d)
dir=/tmp/lama-ab
# Each build under a name of its own (uprobe groups are named after the file), beside the hwloc
# helper the plugin loads when the topology cache cannot serve.
cargo build --release --quiet -p lama-probe
cp target/release/liblama_probe.so "$work/"
cp "$a" "$work/old.so"
cp "$b" "$work/new.so"
cleanup() {
  perf probe -q -d 'probe_old:*' -d 'probe_new:*' 2>/dev/null || true
  LAMA_SANDBOX=$dir contrib/sandbox.sh stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
LAMA_SANDBOX=$dir LAMA_SANDBOX_PORT=${LAMA_SANDBOX_PORT:-26800} LAMA_SANDBOX_TASK_PLUGIN=task/affinity \
  LAMA_SANDBOX_PLUGIN="required $work/new.so" contrib/sandbox.sh start >/dev/null
export SLURM_CONF=$dir/slurm.conf
job=$(salloc --no-shell -N3 -n3 2>&1 | awk '/Granted job allocation/ {print $NF}')
[ -n "$job" ] || { echo "spank-ab: no allocation on the sandbox cluster" >&2; exit 1; }
for v in old new; do
  for f in user_init task_init; do
    perf probe -q -x "$work/$v.so" -a "probe_$v:${f}_$v=slurm_spank_$f" -a "probe_$v:${f}_${v}_ret=slurm_spank_$f%return"
  done
done
read -r -a args <<<"${LAMA_AB_ARGS:---lama-map=csbnh --lama-bind=1c}"
for v in old new; do   # warm up both
  echo "required $work/$v.so" > "$dir/plugstack.conf"
  srun --jobid="$job" -N3 -n3 "${args[@]}" true
done
perf record -q -a -e 'probe_old:*' -e 'probe_new:*' -o "$work/ab.data" -- bash -c "
  for i in \$(seq $steps); do
    for v in old new; do
      echo \"required $work/\$v.so\" > $dir/plugstack.conf
      srun --jobid=$job -N3 -n3 ${args[*]} true
    done
  done" >/dev/null 2>&1
echo "median [p25, p75] microseconds, $steps alternating steps of srun -N3 -n3 ${args[*]} true per build"
perf script -i "$work/ab.data" -F pid,time,event 2>/dev/null | awk '
  { pid = $1; t = $2 + 0; ev = $3; sub(/:$/, "", ev); sub(/.*:/, "", ev) }
  ev ~ /_ret__return$/ { k = ev; sub(/_ret__return$/, "", k); if ((pid, k) in open) { print k, (t - open[pid, k]) * 1e6; delete open[pid, k] }; next }
  { open[pid, ev] = t }' | sort -k1,1 -k2,2n | awk '
  { k = $1; n[k]++; v[k, n[k]] = $2 }
  END { for (k in n) printf "%-16s %4d calls  median %6.1f  [%.1f, %.1f]\n", k, n[k], v[k, int((n[k] + 1) / 2)], v[k, int(n[k] / 4) + 1], v[k, int(n[k] * 3 / 4)] }' | sort
