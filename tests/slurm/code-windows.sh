#!/usr/bin/env bash
# Which 64 KiB windows of a plugin's code the processes of one command run, found with a uprobe
# on every function of the file: a figure that depends on the code and its layout alone, not on
# the page cache, the load address or the machine's load (the Rss of the mapping depends on all
# three: the kernel's fault-around maps whatever else of the window is cached, in windows aligned
# to the randomised load address).
# Usage: tests/slurm/code-windows.sh SO COMM COMMAND...
#   Runs COMMAND with the probes on and prints "WINDOWS FUNCTIONS BYTES": the number of distinct
#   64 KiB windows of SO's file (by file offset) that hold any byte of a function run by a process
#   named COMM, how many such functions there were, and their bytes in all. Needs root and tracefs (mounted when missing).
#   Exits 3, saying why, when uprobes cannot be used here.
set -uo pipefail
so=$(realpath "$1") comm=$2
shift 2
tracefs=/sys/kernel/tracing
if [ ! -e "$tracefs/uprobe_events" ]; then
  mount -t tracefs nodev "$tracefs" 2>/dev/null
fi
[ -w "$tracefs/uprobe_events" ] || { echo "code-windows: no writable $tracefs/uprobe_events (root and tracefs needed)" >&2; exit 3; }
group=lamawin$$
work=$(mktemp -d)
# Disabling and removing a probe each wait for an RCU grace period (about 50 ms here): 80 s for
# the plugin's 1151 functions. Expedited grace periods, for this script's run only, make it 25 s.
expedited=/sys/kernel/rcu_expedited
was_expedited=$(cat "$expedited" 2>/dev/null)
[ -z "$was_expedited" ] || echo 1 > "$expedited" 2>/dev/null
cleanup() {
  echo 0 > "$tracefs/events/$group/enable" 2>/dev/null
  # Only this run's probes go: a probe of another group stays.
  grep -F ":$group/" "$tracefs/uprobe_events" 2>/dev/null | awk '{print "-:" substr($1, 3)}' > "$work/remove"
  cat "$work/remove" >> "$tracefs/uprobe_events" 2>/dev/null
  [ -z "$was_expedited" ] || echo "$was_expedited" > "$expedited" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# Functions of the executable segment: file offset = address - segment address + segment offset.
read -r seg_off seg_addr seg_size < <(readelf -lW "$so" | awk '$1 == "LOAD" && / R E / {print $2, $3, $6; exit}')
nm -S --defined-only "$so" | awk 'NF == 4 && $3 ~ /^[tTW]$/ {print $1, $2}' | sort -u -k1,1 |
  while read -r addr size; do
    a=$((16#$addr))
    if [ "$a" -ge $((seg_addr)) ] && [ "$a" -lt $((seg_addr + seg_size)) ]; then
      echo "$((a - seg_addr + seg_off)) $((16#$size))"
    fi
  done > "$work/functions"
awk -v g="$group" -v so="$so" '{printf "p:%s/f%d %s:0x%x\n", g, NR, so, $1}' "$work/functions" > "$work/probes"
cat "$work/probes" >> "$tracefs/uprobe_events" || { echo "code-windows: the kernel refused the uprobes" >&2; exit 3; }
# Only COMM's hits are recorded, in a buffer large enough that none is lost (checked below).
echo "comm == \"$comm\"" > "$tracefs/events/$group/filter"
buffer=$(awk '{print $1}' "$tracefs/buffer_size_kb")
echo 16384 > "$tracefs/buffer_size_kb"
# The kernel cannot probe a few functions (their first instruction); those are not counted.
enabled=0
for e in "$tracefs/events/$group"/f*/enable; do echo 1 > "$e" 2>/dev/null && enabled=$((enabled + 1)); done
[ "$enabled" -gt 0 ] || { echo "code-windows: no uprobe could be enabled" >&2; exit 3; }
echo > "$tracefs/trace"
overruns() { awk '/^overrun:/ {s += $2} END {print s + 0}' "$tracefs"/per_cpu/cpu*/stats; }
before=$(overruns)
echo 1 > "$tracefs/tracing_on"
"$@" >/dev/null 2>&1
rc=$?
echo 0 > "$tracefs/events/$group/enable"
cat "$tracefs/trace" > "$work/trace"
lost=$(( $(overruns) - before ))
echo "$buffer" > "$tracefs/buffer_size_kb"
[ $rc -eq 0 ] || { echo "code-windows: the command failed ($rc): $*" >&2; exit 1; }
[ "$lost" -eq 0 ] || { echo "code-windows: the trace lost $lost events" >&2; exit 1; }
# Trace lines: "COMM-PID [CPU] FLAGS TIME: fN: (ADDRESS)"; comm may contain dashes.
sed -n 's/^ *\(.*\)-[0-9]* *\[[0-9]*\].* \(f[0-9]*\): .*/\1 \2/p' "$work/trace" |
  awk -v comm="$comm" -v list="$work/functions" '
    BEGIN { while ((getline line < list) > 0) { n++; split(line, f, " "); off[n] = f[1]; size[n] = f[2] } }
    $1 == comm { ran[substr($2, 2)] = 1 }
    END {
      for (i in ran) {
        funcs++
        bytes += size[i]
        last = off[i] + (size[i] > 0 ? size[i] - 1 : 0)
        for (w = int(off[i] / 65536); w <= int(last / 65536); w++) windows[w] = 1
      }
      for (w in windows) count++
      print count + 0, funcs + 0, bytes + 0
    }'
