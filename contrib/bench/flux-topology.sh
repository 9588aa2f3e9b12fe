#!/usr/bin/env bash
# The Flux plugin's own time per node for a placing job (`flux run -N3 -n3 -o lama.bind=1c
# -o lama.verbose`), as each node's first task reports it ("node placed in X ms: ..."), on
# three machines: this one (the shell's own XML of its node), and two real machines of
# tests/topologies/ given to the plugin as `topology=FILE` (the 2x8x2 Intel, 32em64t-2n8c2t,
# and the largest XML, 192em64t-12gr2n8c2t, 335 kB). Each job is a new shell, as in
# production. Two builds alternate job by job: BEFORE (a plugin file, e.g. an older lama's
# release build) and this tree's release build, each with a cache folder of its own that
# starts empty (so the first job of each machine reads the XML with hwloc, as the first job on
# a node does). A build older than the Flux cache takes no `cache=`. Flux's brokers hand the
# shell an XML cut down to their own binding, so the real machines go through `topology=FILE`
# (known by its state, not read, once cached); this machine's XML comes from the shell.
# Usage: contrib/bench/flux-topology.sh BEFORE_PLUGIN [JOBS]   (default 40 per build and machine)
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$PWD
before=$(realpath "$1")
jobs=${2:-40}
prefix=$(contrib/flux-build.sh)
cargo build --release --quiet -p lama-flux
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rc() {  # NAME PLUGIN [TOPOLOGY]: a userrc; this tree's build keeps its cache in $work
  local conf=""
  [[ $1 == after-* ]] && conf="cache = \"$work/cache-$1\""
  [ -n "${3:-}" ] && conf="${conf:+$conf, }topology = \"$3\""
  echo "plugin.load { file = \"$2\", conf = { $conf } }" > "$work/$1.lua"
}
machines=(this 32em64t-2n8c2t-pci-normalio 192em64t-12gr2n8c2t)
for m in "${machines[@]}"; do
  xml=""; [ "$m" != this ] && xml=$top/tests/topologies/$m.xml
  rc "before-$m" "$before" "$xml"
  rc "after-$m" "$top/target/release/liblama_flux.so" "$xml"
done
export LAMA_BENCH_WORK=$work LAMA_BENCH_JOBS=$jobs LAMA_BENCH_MACHINES="${machines[*]}"
"$prefix/bin/flux" start --test-size=3 bash -c '
  for m in $LAMA_BENCH_MACHINES; do
    for i in $(seq "$LAMA_BENCH_JOBS"); do
      for b in before after; do
        flux run -N3 -n3 -o userrc=$LAMA_BENCH_WORK/$b-$m.lua -o lama.bind=1c -o lama.verbose true 2>&1 |
          sed -n "s/.*(node placed in \([0-9.]*\) ms: \(.*\))$/$m $b $i \1 \2/p"
      done
    done
  done' > "$work/out"
echo "Flux plugin, placing job -N3 -n3 lama.bind=1c: its time per node (ms, median of $jobs jobs x 3 nodes [p10, p90]; the first job, which reads the XML with hwloc, apart)"
python3 - "$work/out" "${machines[@]}" <<'PY'
import statistics, sys
rows = [l.split(None, 4) for l in open(sys.argv[1])]
def q(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
for m in sys.argv[2:]:
    for b in ('before', 'after'):
        first = [float(r[3]) for r in rows if r[0] == m and r[1] == b and r[2] == '1']
        rest = [float(r[3]) for r in rows if r[0] == m and r[1] == b and r[2] != '1']
        if not rest:
            print(f"  {m:30s} {b:6s} no report"); continue
        med = statistics.median(rest)
        near = min((r for r in rows if r[0] == m and r[1] == b and r[2] != '1'), key=lambda r: abs(float(r[3]) - med))
        print(f"  {m:30s} {b:6s} {med:7.3f} [{q(rest, .1):.3f}, {q(rest, .9):.3f}]  first job {statistics.median(first):.3f}; a median node: {near[4].strip()}")
PY
