#!/usr/bin/env bash
# What an ordinary user can hand slurmstepd, on the real sandbox cluster: host files for
# `srun -m arbitrary` that srun never saw (a relative SLURM_HOSTFILE under --chdir names another
# file on the node), option values that would forge or flood a log line, and a topology cache
# planted where slurmd keeps it. Each must cost slurmstepd little, run or refuse the step once,
# and never place a step from a file root did not write.
# Usage: tests/slurm/hostile.sh LAMA_BINARY PLUGIN_SO   (restarts the cluster; the caller stops it)
# Prints one "ok - ..." or "not ok - ..." line per case, with the evidence under a failure.
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"
cluster

# Each task prints its rank, TASK_MAP and the peak resident memory of its slurmstepd (VmHWM,
# kB: the parent of a task is its node's slurmstepd, whose user_init read the host file).
report='echo "$SLURM_PROCID ${TASK_MAP:-none} $(awk "/^VmHWM/ {print \$2}" /proc/$PPID/status)"'

# hostfile_step NAME TEXT: a 1-task step on n1 whose slurmstepd reads TEXT as its host file,
# while srun reads a plain "n1" (both are ./hf, from different folders). Leaves $work/out, $work/err.
hostfile_step() {
  local name=$1 text=$2
  mkdir -p "$work/srun-side" "$work/step-side"
  echo n1 > "$work/srun-side/hf"
  printf '%s\n' "$text" > "$work/step-side/hf"
  (cd "$work/srun-side" && SLURM_HOSTFILE=hf timeout 120 srun -m arbitrary -n1 -w n1 \
    --chdir="$work/step-side" bash -c "$report" >"$work/out" 2>"$work/err")
}

echo "# host files srun did not read"
hostfile_step "plain" "n1"
base=$(awk '{print $3}' "$work/out")
one='{"version":1,"map":[[0,1,1,1]]}'
if [ "$(awk '{print $1, $2}' "$work/out")" = "0 $one" ] && [ -n "$base" ]; then
  ok "a host file read by slurmstepd under --chdir: TASK_MAP $one, slurmstepd's peak ${base} kB"
else not_ok "plain host file under --chdir" "$(cat "$work/out" "$work/err")"; fi
# hostile NAME TEXT WANT_MAP WANT_MESSAGE: the step runs once with WANT_MAP, and slurmstepd's peak
# stays within 16 MB of the plain step's. The user asked lama for nothing (SLURM_HOSTFILE and
# -m arbitrary are Slurm's), so MESSAGE (if any) is said once in slurmd's log, not in the step's
# output (docs/messages.md, "The plugin at task launch").
hostile() {
  local name=$1 text=$2 want_map=$3 message=$4 peak said before shown
  before=$(slurmd_logged_text "$message")
  hostfile_step "$name" "$text"
  peak=$(awk '{print $3}' "$work/out")
  said=$(slurmd_logged_text "$message")
  said=$((said - before))
  shown=$(grep -c 'lama' "$work/err")
  if [ "$(wc -l < "$work/out")" -eq 1 ] && [ "$(awk '{print $2}' "$work/out")" = "$want_map" ] &&
     [ -n "$peak" ] && [ -n "$base" ] && [ $((peak - base)) -lt 16384 ] && [ "$shown" -eq 0 ] &&
     { [ -z "$message" ] || [ "$said" -eq 1 ]; }; then
    ok "$name: the step ran once (TASK_MAP $want_map), slurmstepd's peak ${peak} kB (plain: ${base} kB)${message:+, the reason said once in the slurmd log}"
  else not_ok "$name (peak ${peak:-?} kB against ${base:-?} kB; '$message' in slurmd's log ${said:-0} times, lama in the step's output $shown times)" \
    "$(head -c 2000 "$work/out")" "$(head -c 2000 "$work/err")"; fi
}
# 1.3 GB and 5 s in slurmstepd before names were made one at a time.
hostile "20-byte host file n1 a[0-16777214]" "n1 a[0-16777214]" "$one" ""
hostile "219-byte host file, 200-letter prefix" "n1 $(printf 'a%.0s' $(seq 200))[0-16777214]" "$one" ""
hostile "zero-padded range for no task" "x[00000000-16777214]*0 n1" "$one" ""
hostile "a 300-byte host name" "$(printf 'b%.0s' $(seq 300))[0-16777214]" none "longer than 255 bytes"
hostile "2 MB of comment before the host" "#$(head -c 2097152 /dev/zero | tr '\0' c)
n1" none "bytes before the step's 1 tasks were named"
# The last step's node may still be completing on a loaded machine: idle within 30 s, never down.
wait_idle
now=$(states)
if grep -q 'down\|drain\|not responding' <<<"$now" || [ "$(sinfo -h -o '%T' | sort -u)" != idle ]; then
  not_ok "the nodes after the hostile host files" "$now" "$(sinfo 2>&1)"
else ok "the nodes are still up and idle after the hostile host files"; fi

echo "# user text in messages"
forged=$'xx\n[2025-01-01T00:00:00] error: forged line'
out=$(SLURM_LAMA_MAP=$forged run -N1 -n1 true 2>&1)
if grep -q '^\[2025-01-01T00:00:00\]' <<<"$out" || grep -q '^\[2025-01-01T00:00:00\]' "$LAMA_SANDBOX"/log/*.log ||
   ! grep -qF 'xx\n[2025-01-01T00:00:00] error: forged line' <<<"$out"; then
  not_ok "a newline in SLURM_LAMA_MAP forged a line, or the value is not quoted escaped" "$out"
else ok "a newline in SLURM_LAMA_MAP is shown escaped (\\n) in srun's message, no log line forged"; fi
# A host name with a terminal escape, read by slurmstepd only: its reason quotes it escaped in
# slurmd's log, and nothing raw reaches the step's output or any log.
before=$(slurmd_logged_text 'e\u{1b}[31mred')
hostfile_step "escape" "$(printf 'e\033[31mred')"
after=$(slurmd_logged_text 'e\u{1b}[31mred')
if [ $((after - before)) -eq 1 ] &&
   ! grep -q $'\033' "$work/err" "$LAMA_SANDBOX"/log/*.log; then
  ok "a terminal escape in a host name is quoted escaped (\\u{1b}) in slurmd's log, nowhere raw"
else not_ok "a terminal escape in a host name" "$(cat -v "$work/err")" "$(grep -l $'\033' "$LAMA_SANDBOX"/log/*.log)"; fi
long=$(head -c 100000 /dev/zero | tr '\0' x)
out=$(SLURM_LAMA_MAP=$long run -N1 -n1 true 2>&1)
if [ "${#out}" -lt 4096 ] && grep -q "100000 bytes" <<<"$out" && grep -q "SLURM_LAMA_MAP\|lama-map" <<<"$out"; then
  ok "a 100 KB SLURM_LAMA_MAP is cut in srun's message (${#out} bytes, naming the variable and the value's length)"
else not_ok "a 100 KB option value in srun's message (${#out} bytes)" "$(head -c 3000 <<<"$out")"; fi

echo "# the topology cache: only what root wrote"
cached="$LAMA_SANDBOX/cache/topology-n1.json"
# served: 0 when a placing step's slurmstepd on n1 did not load the hwloc helper (the cache served it), 1 when it did.
served() { run -N1 -w n1 -n1 --lama-map=csbnh --lama-bind=1c bash -c 'grep -q liblama_probe /proc/$PPID/maps && echo 1 || echo 0' 2>/dev/null; }
if [ -f "$cached" ] && [ "$(stat -c '%U %a' "$cached")" = "root 644" ] && [ "$(served)" = 0 ]; then
  ok "each sandbox keeps its own cache ($cached, root's, 0644), and steps are served by it"
else not_ok "the sandbox's own cache" "$(ls -la "$LAMA_SANDBOX/cache" 2>&1)"; fi
# refused_cache NAME DIR REASON: with cache=DIR the step probes the machine (the helper is loaded)
# and slurmd's log says REASON.
refused_cache() {
  local got
  plugstack "required $plugin cache=$2"
  got=$(served)
  if [ "$got" = 1 ] && grep -q "$3; probing the machine instead" "$LAMA_SANDBOX/log/slurmd-n1.log"; then
    ok "$1"
  else not_ok "$1 (helper loaded: ${got:-?})" "$(grep lama "$LAMA_SANDBOX/log/slurmd-n1.log" | tail -n 3)"; fi
}
# A folder another user made first, holding a copy of a good cache.
planted=$(mktemp -d /tmp/lama-planted.XXXXXX)
cp "$cached" "$planted/topology-n1.json"
chmod 0755 "$planted"
chown -R 65534:65534 "$planted"
refused_cache "a cache in a folder a user made is refused (said in slurmd's log) and the step probes the machine" \
  "$planted" "folder is owned by uid 65534, not root; lama trusts only a cache root wrote"
# A symbolic link for the folder, to the sandbox's own good cache.
ln -s "$LAMA_SANDBOX/cache" "$planted.link"
refused_cache "a cache folder that is a symbolic link is refused, even to root's own cache" \
  "$planted.link" "folder is a symbolic link; lama follows none in its cache"
rm -rf "$planted" "$planted.link"
# The plugin's default folder, written by slurmd at start (as packaged: no cache= argument).
rm -f /run/lama/topology-n1.json
cluster LAMA_SANDBOX_CACHE=default
if [ -f /run/lama/topology-n1.json ] && [ "$(stat -c '%U %a' /run/lama)" = "root 755" ] && [ "$(served)" = 0 ]; then
  ok "the default folder /run/lama still works: written by slurmd, steps served by it"
else not_ok "the default cache folder" "$(ls -la /run/lama 2>&1)" "$(grep lama "$LAMA_SANDBOX/log/slurmd-n1.log" | tail -n 3)"; fi
cluster
done_testing
