#!/usr/bin/env bash
# Which of the plugin's functions run in a step, in the order they first run: the list behind
# spank/hot.ld. Puts a uprobe on every function of this tree's release build (tracefs; the few
# the kernel cannot probe are skipped), runs TASK_MAP-only steps, an sbatch and steps that
# place (--lama-map=csbnh, --lama-policy=auto, with --lama-mem=local) on a sandbox cluster, and
# prints each function once as a hot.ld pattern, with the processes that ran it, and "cold"
# where the build laid it outside spank/hot.ld's section (a pattern to add there). Needs root.
# Usage: contrib/bench/hot-functions.sh   (LAMA_SLURM_PREFIX=PREFIX for a built Slurm)
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -n "${LAMA_SLURM_PREFIX:-}" ]; then export SLURM_INCLUDE_DIR=$LAMA_SLURM_PREFIX/include; fi
cargo build --release --quiet -p lama-spank
work=$(mktemp -d)
so=$work/liblama_spank.so
cp target/release/liblama_spank.so "$so"
# The hwloc helper, which the plugin loads beside itself when the topology cache cannot serve.
cargo build --release --quiet -p lama-probe
cp target/release/liblama_probe.so "$work/"
tracefs=/sys/kernel/tracing
export LAMA_SANDBOX=$work/cluster LAMA_SANDBOX_PORT=${LAMA_SANDBOX_PORT:-18800}
export LAMA_SANDBOX_PLUGIN="required $so"
cleanup() {
  echo 0 > "$tracefs/tracing_on" 2>/dev/null || true
  echo 0 > "$tracefs/events/lamahot/enable" 2>/dev/null || true
  echo > "$tracefs/uprobe_events" 2>/dev/null || true
  contrib/sandbox.sh stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
contrib/sandbox.sh start >/dev/null
eval "$(contrib/sandbox.sh env)"

# One uprobe per function, at its file offset: address - segment address + segment offset.
read -r seg_off seg_addr seg_size < <(readelf -lW "$so" | awk '$1 == "LOAD" && / R E / {print $2, $3, $6; exit}')
nm --defined-only "$so" | awk '$2 ~ /^[tTW]$/ {print $1, $3}' | sort -u -k1,1 |
  while read -r addr name; do
    a=$((16#$addr))
    if [ "$a" -ge $((seg_addr)) ] && [ "$a" -lt $((seg_addr + seg_size)) ]; then
      i=$(( ${i:-0} + 1 ))
      printf 'p:lamahot/f%d %s:0x%x\n' "$i" "$so" $((a - seg_addr + seg_off)) >> "$tracefs/uprobe_events"
      echo "f$i $name" >> "$work/index"
    fi
  done

for e in "$tracefs"/events/lamahot/f*/enable; do echo 1 > "$e" 2>/dev/null || true; done
echo > "$tracefs/trace"
echo 1 > "$tracefs/tracing_on"
job=$(salloc --no-shell -N3 -n3 2>&1 | awk '/Granted/ {print $NF}')
for i in 1 2 3; do srun --jobid="$job" -N3 -n3 true; done
sbatch -N1 -o /dev/null --wrap true >/dev/null
srun --jobid="$job" -N3 -n3 --lama-map=csbnh --lama-bind=1c true
srun --jobid="$job" -N3 -n3 --lama-policy=auto true
srun --jobid="$job" -N3 -n3 --lama-policy=auto --lama-mem=local true
echo 0 > "$tracefs/tracing_on"
# The hot section's addresses: a function outside them is one hot.ld does not name yet.
read -r hot_start hot_size < <(readelf -SW "$so" | awk '$2 == ".text.lama_hot" {print $4, $6}')
nm --defined-only "$so" | awk '$2 ~ /^[tTW]$/ {print $3, $1}' > "$work/addresses"
# Trace lines: "COMM-PID [CPU] FLAGS TIME: fN: (ADDRESS)"; comm may contain dashes.
sed -n 's/^ *\(.*\)-[0-9]* *\[[0-9]*\].* \(f[0-9]*\): .*/\1 \2/p' "$tracefs/trace" |
  python3 -c '
import re, sys
names = dict(l.split(None, 1) for l in open(sys.argv[1]))
addr = dict((n, int(a, 16)) for n, a in (l.split() for l in open(sys.argv[2])))
start, size = int(sys.argv[3], 16), int(sys.argv[4], 16)
order, who = [], {}
for line in sys.stdin:
    comm, event = line.split()
    name = names[event].strip()
    if name not in who and name in addr:
        order.append(name)
        who[name] = set()
    who[name].add(comm)
for name in order:
    pattern = re.sub(r"17h[0-9a-f]{16}E$", "17h*", name)
    pattern = re.sub(r"Cs[0-9A-Za-z]+_", "Cs*_", pattern)
    pattern = re.sub(r"\.[0-9]+$", "*", pattern)
    cold = "" if start <= addr[name] < start + size else " cold"
    print(".text*." + pattern, " (" + ",".join(sorted(who[name])) + ")" + cold)
' "$work/index" "$work/addresses" "$hot_start" "$hot_size"
