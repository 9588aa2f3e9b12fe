#!/usr/bin/env bash
# What the plugin costs as the job grows: for each cluster size, one sandbox of that many nodes
# and one allocation of all of them, then `srun -N N -n 2N true` steps alternating within each
# round between three kinds:
#   none     no plugin
#   taskmap  lama without options (TASK_MAP only)
#   place    lama places and binds: --lama-map=csbnh --lama-bind=1c
# It prints each kind's median wall time per step and the median of the per-round ratios with a
# 95% interval; then, from five --lama-verbose steps, the plugin's own time per node (the median
# node of each step, then the median of the five, with the slowest node seen), and how much a
# node's slurmstepd has grown by the time its first task runs (VmHWM, median over the nodes)
# with and without the plugin.
#
# Usage: contrib/bench/scale.sh [ROUNDS]   (default 20; builds the release plugin; sizes from
#   LAMA_BENCH_SIZES, default "8 64 256"; LAMA_SLURM_PREFIX=PREFIX for a Slurm built by
#   contrib/slurm-build.sh; starts and stops its own cluster in /tmp/lama-bench-scale)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-20}
stats=$PWD/contrib/bench/stats.awk
if [ -n "${LAMA_SLURM_PREFIX:-}" ]; then
  export SLURM_INCLUDE_DIR=$LAMA_SLURM_PREFIX/include PATH=$LAMA_SLURM_PREFIX/bin:$LAMA_SLURM_PREFIX/sbin:$PATH
fi
cargo build --release --quiet -p lama-spank -p lama-probe
plugin=$PWD/target/release/liblama_spank.so
export LAMA_SANDBOX=/tmp/lama-bench-scale LAMA_SANDBOX_PORT=${LAMA_SANDBOX_PORT:-21800}
export SLURM_CONF=$LAMA_SANDBOX/slurm.conf
trap 'contrib/sandbox.sh stop >/dev/null 2>&1 || true' EXIT
for n in ${LAMA_BENCH_SIZES:-8 64 256}; do
  contrib/sandbox.sh stop >/dev/null 2>&1 || true
  LAMA_SANDBOX_NODES=$n LAMA_SANDBOX_PLUGIN="required $plugin" contrib/sandbox.sh start >/dev/null
  [ -n "${said:-}" ] || echo "machine: $(nproc) CPUs; Slurm $(sinfo --version | awk '{print $2}'); $rounds rounds per size"
  said=1
  job=$(salloc --no-shell -N "$n" --exclusive 2>&1 | awk '/Granted job allocation/ {print $NF}') || true
  [ -n "$job" ] || { echo "bench: no allocation of $n nodes" >&2; sinfo >&2 || true; exit 1; }
  step() {  # KIND [extra srun arguments]: one step; prints "KIND microseconds"
    local kind=$1 line="required $plugin" args=()
    shift
    case $kind in
      none) line="" ;;
      place) args=(--lama-map=csbnh --lama-bind=1c) ;;
    esac
    echo "$line" > "$LAMA_SANDBOX/plugstack.conf"
    local t=$(date +%s%N)
    srun --jobid="$job" -N "$n" -n $((2 * n)) "${args[@]}" "$@" || echo "FAILED $kind"
    echo "$kind $(( ($(date +%s%N) - t) / 1000 ))"
  }
  # The first task of each node reports its slurmstepd's peak size (the task's parent).
  hwm='[ "$SLURM_LOCALID" = 0 ] && echo "HWM $(awk "/^VmHWM/ {print \$2}" /proc/$PPID/status)"; true'
  out=$(mktemp)
  {
    kinds=(none taskmap place)
    for k in "${kinds[@]}"; do step "$k" true >/dev/null; done   # warm up every path
    for i in $(seq 1 "$rounds"); do
      for j in 0 1 2; do step "${kinds[(i + j) % 3]}" true; done
    done
    for i in 1 2 3 4 5; do
      step place --lama-verbose true 2>&1 | sed -n 's/.*node placed in \([0-9.]*\) ms.*/V '"$i"' \1/p'
    done
    for k in "${kinds[@]}"; do step "$k" bash -c "$hwm" | sed -n "s/^HWM /M $k /p"; done
  } > "$out" 2>&1
  scancel "$job"
  if grep -q FAILED "$out"; then grep FAILED "$out" >&2; exit 1; fi
  awk -v n="$n" -f "$stats" -f /dev/stdin "$out" <<'AWK'
    /^(none|taskmap|place) [0-9]+$/ { k = $1; c[k]++; v[k, c[k]] = $2 / 1000 }
    /^V / { s = $2; vn[s]++; vt[s, vn[s]] = $3 }
    /^M / { k = $2; mn[k]++; mv[k, mn[k]] = $3 }
    function hwm(k,   i, a) { for (i = 1; i <= mn[k]; i++) a[i] = mv[k, i]; sort(a, mn[k]); return median(a, mn[k]) }
    END {
      printf "%d nodes, srun -N%d -n%d true in one allocation (ms per step, median; ratio: median of per-round ratios [95%% interval])\n", n, n, 2 * n
      split("none taskmap place", ks, " ")
      for (x = 1; x <= 3; x++) { k = ks[x]; m = c[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]; sort(a, m); med[k] = median(a, m) }
      printf "  none     %9.1f\n", med["none"]
      printf "  taskmap  %9.1f   vs none %s\n", med["taskmap"], ratio("taskmap", "none")
      printf "  place    %9.1f   vs none %s\n", med["place"], ratio("place", "none")
      worst = 0
      for (s = 1; s <= 5; s++) { m = vn[s]; for (i = 1; i <= m; i++) { a[i] = vt[s, i]; if (a[i] > worst) worst = a[i] }; sort(a, m); sm[s] = median(a, m); nodes = m }
      sort(sm, 5)
      printf "  plugin per node (--lama-verbose, place): median node %.3f ms (median of 5 steps of %d nodes; steps ranged %.3f to %.3f; slowest node seen %.3f)\n", sm[3], nodes, sm[1], sm[5], worst
      printf "  slurmstepd peak when its first task runs (VmHWM, median over %d nodes): none %d kB, taskmap %d kB (+%d), place %d kB (+%d)\n", mn["none"], hwm("none"), hwm("taskmap"), hwm("taskmap") - hwm("none"), hwm("place"), hwm("place") - hwm("none")
    }
AWK
  rm -f "$out"
done
