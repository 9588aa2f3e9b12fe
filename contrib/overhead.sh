#!/usr/bin/env bash
# What binding costs at task launch, side by side on one sandbox cluster inside one allocation:
# the same `srun true` step in four kinds, alternating within each round (the order rotates
# from round to round):
#   none      no plugin, no binding (--cpu-bind=none)
#   noop      a SPANK plugin that does nothing (contrib/bench/noop_spank.c): what Slurm's SPANK
#             machinery costs any plugin, the floor under lama's own cost
#   taskmap   the lama plugin without options: TASK_MAP only (--cpu-bind=none)
#   lama      lama places and binds: --lama-map=csbnh --lama-bind=1c (--cpu-bind=none)
#   slurm     Slurm's own binding of the same shape: TaskPlugin=task/affinity, --cpu-bind=cores,
#             no plugin
# The cluster runs TaskPlugin=task/affinity for every kind, so that only the binding differs.
# For each step shape it prints each kind's median wall time, and the median of the per-round
# ratios against "none" (taskmap also against noop, lama against slurm) with a 95% confidence
# interval (distribution
# free: order statistics of the ratios), then the plugin's own time per node from --lama-verbose.
#
# Usage: contrib/overhead.sh [ROUNDS]   (default 60; builds the release plugin; starts and stops
#   its own cluster in /tmp/lama-overhead; LAMA_SLURM_PREFIX=PREFIX measures a Slurm built by
#   contrib/slurm-build.sh instead of Debian's; LAMA_OVERHEAD_PLUGIN=PATH measures that plugin
#   build instead of this tree's, e.g. an older lama for a before/after table)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-60}
contrib/deps.sh
# A Slurm built from source (contrib/slurm-build.sh): its commands, and the plugin built for it.
if [ -n "${LAMA_SLURM_PREFIX:-}" ]; then
  export SLURM_INCLUDE_DIR=$LAMA_SLURM_PREFIX/include PATH=$LAMA_SLURM_PREFIX/bin:$LAMA_SLURM_PREFIX/sbin:$PATH
fi
cargo build --release --quiet -p lama-spank -p lama-probe
plugin=${LAMA_OVERHEAD_PLUGIN:-$PWD/target/release/liblama_spank.so}
noop=$PWD/target/release/noop_spank.so
gcc -O2 -shared -fPIC -I"${SLURM_INCLUDE_DIR:-/usr/include}" contrib/bench/noop_spank.c -o "$noop"
export LAMA_SANDBOX=/tmp/lama-overhead LAMA_SANDBOX_PORT=${LAMA_SANDBOX_PORT:-46800}
export SLURM_CONF=$LAMA_SANDBOX/slurm.conf
contrib/sandbox.sh stop >/dev/null 2>&1 || true
trap 'contrib/sandbox.sh stop >/dev/null 2>&1 || true' EXIT
LAMA_SANDBOX_TASK_PLUGIN=task/affinity LAMA_SANDBOX_PLUGIN="required $plugin" contrib/sandbox.sh start >/dev/null
cpus=$(nproc)
echo "machine: $(nproc) CPUs, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo); Slurm $(srun --version | awk '{print $2}'); $rounds rounds per shape"
for n in 3 $((3 * cpus)); do
  out=$(mktemp)
  salloc -N3 -n"$n" bash -c '
    plug=$LAMA_SANDBOX/plugstack.conf
    step() {  # KIND: runs one step of that kind, prints "KIND microseconds"
      case $1 in
        none)    : > "$plug"; set -- none --cpu-bind=none ;;
        noop)    echo "required '"$noop"'" > "$plug"; set -- noop --cpu-bind=none ;;
        taskmap) echo "required '"$plugin"'" > "$plug"; set -- taskmap --cpu-bind=none ;;
        lama)    echo "required '"$plugin"'" > "$plug"; set -- lama --cpu-bind=none --lama-map=csbnh --lama-bind=1c ;;
        slurm)   : > "$plug"; set -- slurm --cpu-bind=cores ;;
      esac
      local kind=$1; shift
      local t=$(date +%s%N)
      srun -n'"$n"' "$@" true || echo "FAILED $kind"
      echo "$kind $(( ($(date +%s%N) - t) / 1000 ))"
    }
    kinds=(none noop taskmap lama slurm)
    for k in "${kinds[@]}"; do step "$k" >/dev/null; done   # warm up every path
    for i in $(seq 1 '"$rounds"'); do
      for j in 0 1 2 3 4; do step "${kinds[(i + j) % 5]}"; done
    done
    echo "required '"$plugin"'" > "$plug"
    srun -n'"$n"' --cpu-bind=none --lama-map=csbnh --lama-bind=1c --lama-verbose true 2>&1 | grep -o "node placed in .*"
  ' > "$out" 2>&1
  if grep -q FAILED "$out"; then grep FAILED "$out" >&2; exit 1; fi
  awk -v n="$n" '
    /^(none|noop|taskmap|lama|slurm) [0-9]+$/ { k = $1; c[k]++; v[k, c[k]] = $2 / 1000 }
    /node placed in/ { per[++np] = $0 }
    function sort(a, m,   i, j, t) { for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
    function median(a, m) { return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
    # Median of the per-round ratios x/y and its 95% interval: order statistics k and m+1-k.
    function ratio(x, y,   i, m, r, k) {
      m = c[x]; for (i = 1; i <= m; i++) r[i] = v[x, i] / v[y, i]
      sort(r, m); k = int((m - 1.96 * sqrt(m)) / 2); if (k < 1) k = 1
      return sprintf("%.3f [%.3f, %.3f]", median(r, m), r[k], r[m + 1 - k])
    }
    END {
      printf "srun -N3 -n%d true (ms per step; ratio: median of per-round ratios [95%% interval])\n", n
      split("none noop taskmap lama slurm", ks, " ")
      for (x = 1; x <= 5; x++) { k = ks[x]; m = c[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]; sort(a, m); med[k] = median(a, m) }
      printf "  %-52s %8.2f\n", "none: no plugin, no binding", med["none"]
      printf "  %-52s %8.2f   vs none %s\n", "noop: a SPANK plugin that does nothing", med["noop"], ratio("noop", "none")
      printf "  %-52s %8.2f   vs none %s\n", "taskmap: plugin without options (TASK_MAP only)", med["taskmap"], ratio("taskmap", "none")
      printf "  %-52s %8s   %s\n", "taskmap against noop", "", ratio("taskmap", "noop")
      printf "  %-52s %8.2f   vs none %s\n", "lama: --lama-map=csbnh --lama-bind=1c", med["lama"], ratio("lama", "none")
      printf "  %-52s %8.2f   vs none %s\n", "slurm: task/affinity --cpu-bind=cores", med["slurm"], ratio("slurm", "none")
      printf "  %-52s %8s   %s\n", "lama against slurm", "", ratio("lama", "slurm")
      for (i = 1; i <= np; i++) printf "  plugin per node: %s\n", per[i]
    }' "$out"
  rm -f "$out"
done
