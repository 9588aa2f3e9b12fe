#!/usr/bin/env bash
# What the plugin costs at task launch: the same srun step with and without the plugin,
# alternating, on one sandbox cluster, inside one allocation. Prints the median and mean wall
# time of each kind and their ratio, and the plugin's own per-node time from --lama-verbose.
#
# Usage: contrib/overhead.sh [ROUNDS]   (default 30; builds the release plugin; starts and stops
#   its own cluster in /tmp/lama-overhead; LAMA_SLURM_PREFIX=PREFIX measures a Slurm built by
#   contrib/slurm-build.sh instead of Debian's)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-30}
contrib/deps.sh
# A Slurm built from source (contrib/slurm-build.sh): its commands, and the plugin built for it.
if [ -n "${LAMA_SLURM_PREFIX:-}" ]; then
  export SLURM_INCLUDE_DIR=$LAMA_SLURM_PREFIX/include PATH=$LAMA_SLURM_PREFIX/bin:$LAMA_SLURM_PREFIX/sbin:$PATH
fi
cargo build --release --quiet -p lama-spank -p lama-probe
plugin=$PWD/target/release/liblama_spank.so
export LAMA_SANDBOX=/tmp/lama-overhead LAMA_SANDBOX_PORT=${LAMA_SANDBOX_PORT:-46800}
export SLURM_CONF=$LAMA_SANDBOX/slurm.conf
contrib/sandbox.sh stop >/dev/null 2>&1 || true
trap 'contrib/sandbox.sh stop >/dev/null 2>&1 || true' EXIT
LAMA_SANDBOX_PLUGIN="required $plugin" contrib/sandbox.sh start >/dev/null
n=$((3 * $(nproc)))
out=$(mktemp)
salloc -N3 -n"$n" bash -c '
  plug=$LAMA_SANDBOX/plugstack.conf
  ms() { echo $(( ($(date +%s%N) - $1) / 1000 )); }
  srun -n'"$n"' true   # warm up both paths
  for i in $(seq 1 '"$rounds"'); do
    echo "required '"$plugin"'" > "$plug"
    t=$(date +%s%N); srun -n'"$n"' --lama-map=csbnh --lama-bind=1c true; echo "placed $(ms $t)"
    t=$(date +%s%N); srun -n'"$n"' true; echo "taskmap $(ms $t)"
    : > "$plug"
    t=$(date +%s%N); srun -n'"$n"' true; echo "none $(ms $t)"
  done
  echo "required '"$plugin"'" > "$plug"
  srun -n'"$n"' --lama-map=csbnh --lama-bind=1c --lama-verbose true 2>&1 | grep -o "node placed in [0-9.]* ms"
' > "$out" 2>&1
awk -v rounds="$rounds" -v n="$n" '
  /^(placed|taskmap|none) / { v[$1, ++c[$1]] = $2 / 1000; s[$1] += $2 / 1000 }
  /node placed in/ { per = per " " $4 }
  function median(k,   i, j, t, m, a) {
    m = c[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]
    for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    printf "%d rounds, srun -N3 -n%d true inside one allocation (ms per step)\n", rounds, n
    printf "  %-44s median %7.2f  mean %7.2f\n", "without the plugin", median("none"), s["none"] / c["none"]
    printf "  %-44s median %7.2f  mean %7.2f  ratio %.3f\n", "plugin, no option (TASK_MAP only)", median("taskmap"), s["taskmap"] / c["taskmap"], median("taskmap") / median("none")
    printf "  %-44s median %7.2f  mean %7.2f  ratio %.3f\n", "plugin, --lama-map=csbnh --lama-bind=1c", median("placed"), s["placed"] / c["placed"], median("placed") / median("none")
    printf "  plugin time per node (user_init, ms):%s\n", per
  }' "$out"
rm -f "$out"
