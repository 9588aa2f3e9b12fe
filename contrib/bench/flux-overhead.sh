#!/usr/bin/env bash
# What the Flux shell plugin costs a job: `flux run -N3 -n3 true` and `-N3 -n6` in one Flux
# instance of three brokers (flux start --test-size=3), round after round, each round running
# every kind once in turn:
#   none     no plugin
#   loaded   the plugin loaded, no lama option (TASK_MAP only)
#   lama     the plugin placing and binding (-o lama.bind=1c)
#   flux     no plugin, Flux's own per-task binding (-o cpu-affinity=per-task)
# Prints the median wall time of each and the median of the per-round ratios with its 95%
# interval (contrib/bench/stats.awk). Goals: loaded/none <= 1.01, lama/flux <= 1.
# Usage: contrib/bench/flux-overhead.sh [ROUNDS]   (default 100; the plugin's release build;
#   LAMA_FLUX_KINDS="lama flux" runs only those kinds, so that more rounds fit in the same time;
#   LAMA_FLUX_PLUGIN=FILE measures that build instead, e.g. an older lama's for a before/after table)
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$PWD
rounds=${1:-100}
stats=$top/contrib/bench/stats.awk
prefix=$(contrib/flux-build.sh)
cargo build --release --quiet -p lama-flux
rc=$(mktemp --suffix=.lua)
out=$(mktemp)
trap 'rm -f "$rc" "$out"' EXIT
echo "plugin.load { file = \"${LAMA_FLUX_PLUGIN:-$top/target/release/liblama_flux.so}\" }" > "$rc"
export LAMA_BENCH_RC=$rc LAMA_BENCH_ROUNDS=$rounds LAMA_BENCH_KINDS=${LAMA_FLUX_KINDS:-none loaded lama flux}
"$prefix/bin/flux" start --test-size=3 bash -c '
  ms() { local s e; s=$(date +%s%N); flux run "$@" true >/dev/null 2>&1; e=$(date +%s%N); echo $(( (e - s) / 1000 )); }
  for n in 3 6; do
    for i in 1 2 3; do ms -N3 -n$n >/dev/null; ms -N3 -n$n -o userrc=$LAMA_BENCH_RC >/dev/null; done
    for r in $(seq "$LAMA_BENCH_ROUNDS"); do
      for k in $LAMA_BENCH_KINDS; do
        case $k in
          none) echo "$n none $(ms -N3 -n$n)" ;;
          loaded) echo "$n loaded $(ms -N3 -n$n -o userrc=$LAMA_BENCH_RC)" ;;
          lama) echo "$n lama $(ms -N3 -n$n -o userrc=$LAMA_BENCH_RC -o lama.bind=1c)" ;;
          flux) echo "$n flux $(ms -N3 -n$n -o cpu-affinity=per-task)" ;;
        esac
      done
    done
  done' > "$out"
for n in 3 6; do
  awk -v n="$n" -f "$stats" -f /dev/stdin "$out" <<'AWK'
    $1 == n { k = $2; c[k]++; v[k, c[k]] = $3 / 1000 }
    END {
      printf "flux run -N3 -n%d true (ms per job, median of %d rounds; ratio: median of per-round ratios [95%% interval])\n", n, c["flux"] ? c["flux"] : c["none"]
      split("none loaded lama flux", ks, " ")
      for (j = 1; j <= 4; j++) { k = ks[j]; if (!c[k]) continue; for (i = 1; i <= c[k]; i++) a[i] = v[k, i]; sort(a, c[k]); med[k] = median(a, c[k]) }
      if (c["none"]) printf "  %-7s %-44s %8.2f\n", "none", "no plugin", med["none"]
      if (c["loaded"] && c["none"]) printf "  %-7s %-44s %8.2f   vs none  %s\n", "loaded", "plugin, no lama option (TASK_MAP)", med["loaded"], ratio("loaded", "none")
      if (c["lama"] && c["flux"]) printf "  %-7s %-44s %8.2f   vs flux  %s\n", "lama", "plugin placing, -o lama.bind=1c", med["lama"], ratio("lama", "flux")
      if (c["flux"] && c["none"]) printf "  %-7s %-44s %8.2f   vs none  %s\n", "flux", "no plugin, -o cpu-affinity=per-task", med["flux"], ratio("flux", "none")
    }
AWK
done
