#!/usr/bin/env bash
# Faults injected into the lama plugin on the real sandbox cluster: the topology cache missing,
# damaged, another host's, a FIFO, or rewritten while steps start; topology=FILE corrupt or a
# FIFO; SLURM_* and lama variables set by the user; sched_setaffinity refused,
# sched_getaffinity shrunk and CPUs offline (a preloaded shim, tests/faults/refuse_affinity.c); Slurm's items
# unreadable or malformed (tests/faults/fail_item.c); a panic in the plugin, caught by its own
# unwinder (tests/faults/fail_clock.c); SLURM_HOSTFILE swapped for a FIFO, a
# directory or a huge file after srun has read it. For each: the step runs as documented (docs/admin-guide.md
# "Faults and what happens") or fails before any task starts with the reason in srun's output;
# slurmd survives and the next step on the same nodes works.
# Usage: tests/slurm/faults.sh LAMA_BINARY PLUGIN_SO
#   (LAMA_SANDBOX and LAMA_SANDBOX_PORT name the cluster this script restarts and leaves running)
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"
report='echo "$SLURM_PROCID $SLURM_NODEID $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status)"'
n=$((3 * $(nproc)))
step_args="-N3 -n$n -m block --lama-map=csbnh --lama-bind=1c"
want=$(plan_lines --this-machine --nodes 3 --map csbnh --bind 1c --np "$n")

# Builds the preloadable shim tests/faults/NAME.c (extra compiler flags after NAME) into the
# work folder; prints its path.
build_shim() {
  local so=$work/$1.so
  gcc -shared -fPIC -O2 "${@:2}" -o "$so" "$top/tests/faults/$1.c" -ldl
  echo "$so"
}
# The placed step binds as `lama plan` says.
binds_as_planned() {
  local name=$1 got
  got=$(run $step_args bash -c "$report" 2>"$work/err" | sort -n)
  if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "$name: bindings equal lama plan"
  else not_ok "$name" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
}
# slurmd still runs on every node, and a normal step afterwards works.
survived() {
  local name=$1 dead="" node pid
  for node in n1 n2 n3; do
    pid=$(cat "$LAMA_SANDBOX/slurmd-$node.pid" 2>/dev/null)
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] && ! awk '{ exit ($3 == "Z") ? 0 : 1 }' "/proc/$pid/stat" ||
      dead+=" $node"
  done
  local out; out=$(run -N3 -n3 bash -c 'echo "$TASK_MAP"' 2>&1)
  if [ -z "$dead" ] && [ "$(grep -c '"map":\[\[0,3,1,1\]\]' <<<"$out")" = 3 ]; then
    ok "$name: slurmd alive on n1-n3, the next step runs with TASK_MAP"
  else not_ok "$name: slurmd dead on:${dead:- none}, or the next step failed" "$out"; fi
}
logged() {
  local name=$1 text=$2
  if grep -qF -- "$text" "$LAMA_SANDBOX/log/slurmd-n1.log"; then ok "$name: reported in slurmd's log"
  else not_ok "$name: '$text' not in slurmd's log" "$(tail -n 5 "$LAMA_SANDBOX/log/slurmd-n1.log")"; fi
}

echo "# the topology cache"
cluster
cache="$LAMA_SANDBOX/cache/topology-n1.json"
cp "$cache" "$work/good.json"
rm -f "$cache"
binds_as_planned "cache missing on n1 (the step probes the machine)"
: > "$cache"
binds_as_planned "empty cache on n1"
logged "empty cache" "topology cache $cache is not usable"
cp "$LAMA_SANDBOX/cache/topology-n2.json" "$cache"
binds_as_planned "n2's cache copied to n1"
logged "another host's cache" "the topology cache was written by host 'n2', not by n1"
# A cache of another machine than the one Slurm declares (one core of two hardware threads, where
# n1 has two cores; hwloc's synthetic machine, written by lama's node report): a miss, the step
# probes the machine instead of failing or placing from it.
HWLOC_SYNTHETIC="pack:1 core:1 pu:2" "$lama" node-report | sed -n 's/^line0 //p' |
  sed 's/"name":"this machine"/"name":"n1"/' > "$cache"
binds_as_planned "a cache of a 1-core machine on n1, Slurm giving the step core 1"
logged "a cache of another machine" "the topology cache does not describe the cores Slurm gave the step"
rm -f "$cache"; mkfifo "$cache"
binds_as_planned "cache replaced by a FIFO (nothing writes to it)"
logged "FIFO cache" "topology cache $cache: not a regular file"
rm -f "$cache"
# Rewritten without care while steps start: truncated, half-written, then whole again.
( end=$((SECONDS + 60))
  while [ $SECONDS -lt $end ] && [ ! -f "$work/stop" ]; do
    : > "$cache"; head -c 300 "$work/good.json" > "$cache"; cat "$work/good.json" > "$cache"
  done ) &
writer=$!
bad=0
for i in $(seq 10); do
  got=$(run $step_args bash -c "$report" 2>"$work/err" | sort -n)
  [ "$got" = "$want" ] || { bad=$((bad + 1)); cat "$work/err" >> "$work/errs"; }
done
touch "$work/stop"; wait $writer
if [ $bad = 0 ]; then ok "cache rewritten in place while 10 steps start: every step binds as planned"
else not_ok "cache rewritten while steps start: $bad of 10 steps differ" "$(cat "$work/errs")"; fi
cp "$work/good.json" "$cache"
survived "after the cache faults"

echo "# topology=FILE"
printf '<?xml version="1.0"?>\n<topology><object type="Machine"' > "$work/corrupt.xml"
plugstack "required $plugin topology=$work/corrupt.xml"
refused "corrupt topology=FILE" "cannot load topology $work/corrupt.xml" -N1 -n1 --lama-bind=1c
mkfifo "$work/fifo.xml"
plugstack "required $plugin topology=$work/fifo.xml"
refused "topology=FILE is a FIFO" "$work/fifo.xml: not a regular file" -N1 -n1 --lama-bind=1c
plugstack "required $plugin"
survived "after the topology=FILE faults"

echo "# the hwloc helper missing beside the plugin"
helper=$(dirname "$plugin")/liblama_probe.so
mv "$helper" "$work/helper.so"
binds_as_planned "no helper, caches present (hwloc not needed)"
rm -f "$cache"
refused "no helper and no cache on n1" "cannot use lama's hwloc helper $helper" -N1 -w n1 -n1 --lama-bind=1c
mv "$work/helper.so" "$helper"
binds_as_planned "helper back, still no cache on n1"
cp "$work/good.json" "$cache"
survived "after the missing helper"

echo "# variables the user sets: never trusted over Slurm's items"
# (Variables srun itself reads, such as SLURM_HOSTFILE and SLURM_CPU_BIND, are srun's to check.)
got=$(SLURM_STEP_TASKS_PER_NODE='1(x99)' SLURM_STEP_NODELIST='bogus[' SLURM_DIST_PLANESIZE=x \
  SLURM_PROCID=77 SLURM_NODEID=9 SLURM_LOCALID=5 LAMA_CPUS=0-1023 TASK_MAP='[[0,1,1,1]]' \
  SLURM_JOB_CPUS_PER_NODE=garbage SLURM_TASKS_PER_NODE=9 \
  run $step_args bash -c "$report; echo \"map \$TASK_MAP\"" 2>"$work/err")
maps=$(grep -c "^map {\"version\":1,\"map\":\[\[0,3,$(nproc),1\]\]}" <<<"$got")
if [ "$(grep -v '^map' <<<"$got" | sort -n)" = "$want" ] && [ "$maps" = "$n" ]; then
  ok "bogus SLURM_*, LAMA_CPUS and TASK_MAP in the user's environment: bindings and TASK_MAP as planned"
else not_ok "user-set variables changed the step" "$got" "$(cat "$work/err")"; fi
# (srun's own notes, such as a job queued while the last one ends, go to stderr, apart.)
got=$(run -N1 -n1 --lama-bind=1c --lama-map=csbnh --export=NONE /bin/bash -c "$report" 2>"$work/err")
if [ "$got" = "0 0 0" ]; then ok "--export=NONE: the step is still placed from Slurm's items"
else not_ok "--export=NONE step" "$got" "$(cat "$work/err")"; fi
survived "after the user-set variables"

echo "# sched_setaffinity refused, sched_getaffinity shrunk, CPUs offline (preloaded shim)"
shim=$(build_shim refuse_affinity)
flag=$work/refuse
show=$work/show
online=$work/online
cluster LAMA_SANDBOX_SLURMD_ENV="LD_PRELOAD=$shim LAMA_FAULT_REFUSE_AFFINITY=$flag LAMA_FAULT_SHOW_CPUS=$show LAMA_FAULT_ONLINE=$online"
touch "$flag"
refused "sched_setaffinity refused" "cannot bind task 0 on n1 to cpus 0: Operation not permitted" -N1 -w n1 -n1 --lama-map=csbnh --lama-bind=1c
out=$(run -N1 -n1 bash -c 'echo "ran $TASK_MAP"' 2>&1)
if grep -q '^ran {' <<<"$out"; then ok "sched_setaffinity refused: a step without placement runs (lama binds nothing there)"
else not_ok "step without placement under refused affinity" "$out"; fi
rm -f "$flag"
last=$(( $(nproc) - 1 ))
# slurmstepd's own affinity shrunk to the last CPU, as when slurmd pins itself to its specialized
# cores (CoreSpecCount without cgroup confinement) and its slurmstepds inherit that: the CPUs lama
# may use are Slurm's cores for the step within the cgroup's cpuset, never that affinity (issue
# 48, case 5), so every step binds as planned, core 0 included.
echo "$last" > "$show"
binds_as_planned "slurmstepd's inherited affinity only CPU $last"
rm -f "$show"
# Part of the node offline: only the last CPU online. lama places inside what both Slurm and the
# kernel allow, never outside: a step given every core binds to the last CPU (the first core is
# the normal choice); a step given only core 0, or a node with no CPU online, fails before its
# task starts, saying which CPUs are missing.
# The kernel takes an offline CPU out of every process's affinity too: the shim's affinity says so.
echo "$last" > "$online"
echo "$last" > "$show"
got=$(run -N1 -w n1 -n1 -c "$(nproc)" --lama-map=csbnh --lama-bind=1c bash -c 'awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status' 2>"$work/err")
if [ "$last" -gt 0 ] && [ "$got" = "$last" ]; then ok "only CPU $last online, step given every core: the task is bound to CPU $last"
else not_ok "only CPU $last online (needs 2 CPUs or more)" "got: $got" "$(cat "$work/err")"; fi
refused "only CPU $last online, step given core 0" "none of the CPUs Slurm gave this step (0) may be used here: this slurmstepd may use only CPUs '$last'" -N1 -w n1 -n1 --lama-map=csbnh --lama-bind=1c
: > "$online"
refused "no CPU online" "this slurmstepd may use only CPUs ''" -N1 -w n1 -n1 --lama-map=csbnh --lama-bind=1c
rm -f "$online" "$show"
binds_as_planned "affinity allowed again"
survived "after sched_setaffinity refusals"

echo "# Slurm's items unreadable or malformed (preloaded shim on spank_get_item)"
itemshim=$(build_shim fail_item -I"${LAMA_SLURM_PREFIX:-/usr}/include")
fail=$work/fail_item
cluster LAMA_SANDBOX_SLURMD_ENV="LD_PRELOAD=$itemshim LAMA_FAULT_FAIL_ITEM=$fail"
echo 6 > "$fail"   # S_JOB_LOCAL_TASK_COUNT
refused "S_JOB_LOCAL_TASK_COUNT unreadable, placement asked for" "cannot read the step's layout from Slurm" -N1 -n1 --lama-map=csbnh --lama-bind=1c
note="TASK_MAP not exported: cannot read the step's layout from Slurm"
before=$(slurmd_logged "$note")
out=$(TASK_MAP=user-set run -N1 -n1 bash -c 'echo "ran ${TASK_MAP:-unset}"' 2>&1)
if grep -q '^ran unset$' <<<"$out" && ! grep -q lama <<<"$out" && [ "$(slurmd_logged "$note")" -gt "$before" ]; then
  ok "S_JOB_LOCAL_TASK_COUNT unreadable, no lama option: the step runs, TASK_MAP unset, the warning in slurmd's log, not in the step's output"
else not_ok "S_JOB_LOCAL_TASK_COUNT unreadable, no lama option" "$out"; fi
echo 27 > "$fail"   # S_STEP_ALLOC_CORES
refused "S_STEP_ALLOC_CORES unreadable" "Slurm did not say which cores the step has" -N1 -n1 --lama-map=csbnh --lama-bind=1c
# The site's default placement never fails a step Slurm alone would run: Slurm's binding stays.
plugstack "required $plugin policy=auto"
note="lama: warning: the site's automatic policy cannot place this step on node 0 n[0-9]* \\(Slurm did not say which cores the step has"
before=$(slurmd_logged "$note")
out=$(run -N1 -n1 bash -c 'echo "ran ${LAMA_CPUS:-unplaced}"' 2>&1)
if grep -q '^ran unplaced$' <<<"$out" && ! grep -q lama <<<"$out" && [ "$(($(slurmd_logged "$note") - before))" = 1 ]; then
  ok "S_STEP_ALLOC_CORES unreadable under a site policy=auto: the task runs on Slurm's binding, said once in slurmd's log, not in the step's output"
else not_ok "S_STEP_ALLOC_CORES unreadable under a site policy=auto" "$out"; fi
refused "S_STEP_ALLOC_CORES unreadable, the policy asked for by the user" "Slurm did not say which cores the step has" -N1 -n1 --lama-policy=auto
plugstack "required $plugin"
echo "27 x-" > "$fail"
refused "S_STEP_ALLOC_CORES malformed ('x-')" "Slurm's core list 'x-' cannot be read" -N1 -n1 --lama-map=csbnh --lama-bind=1c
echo "27 0-4095" > "$fail"
refused "S_STEP_ALLOC_CORES naming cores the node lacks" "but this node's topology has" -N1 -n1 --lama-map=csbnh --lama-bind=1c
echo 7 > "$fail"   # S_JOB_TOTAL_TASK_COUNT: only TASK_MAP needs it
got=$(run $step_args bash -c "$report; echo \"map \${TASK_MAP:-unset}\"" 2>"$work/err")
if [ "$(grep -v '^map' <<<"$got" | sort -n)" = "$want" ] && [ "$(grep -c '^map unset$' <<<"$got")" = "$n" ] \
   && grep -q "TASK_MAP not exported: cannot read the step's task count from Slurm" "$work/err"; then
  ok "S_JOB_TOTAL_TASK_COUNT unreadable: tasks bound as planned, TASK_MAP unset, warning shown"
else not_ok "S_JOB_TOTAL_TASK_COUNT unreadable" "$got" "$(cat "$work/err")"; fi
rm -f "$fail"
binds_as_planned "items readable again"
survived "after the item faults"

echo "# a panic inside the plugin (the clock fails under Rust's Instant::now; preloaded shim)"
clockshim=$(build_shim fail_clock)
clockflag=$work/fail_clock
cluster LAMA_SANDBOX_SLURMD_ENV="LD_PRELOAD=$clockshim LAMA_FAULT_FAIL_CLOCK=$clockflag"
touch "$clockflag"
refused "panic while placing" "internal error while placing (a bug in lama; slurmd's log has the details) (node 0 n1:" -N1 -w n1 -n1 --lama-map=csbnh --lama-bind=1c
refused "panic in a step without lama options" "internal error while placing" -N3 -n3
if grep -q "lama: bug: panicked at" "$LAMA_SANDBOX"/log/slurmd-n1.log 2>/dev/null; then
  ok "panic: slurmd's log says what panicked and where"
else not_ok "panic not logged in $LAMA_SANDBOX/slurmd-n1.log" "$(tail -n 5 "$LAMA_SANDBOX"/log/slurmd-n1.log 2>&1)"; fi
rm -f "$clockflag"
binds_as_planned "clock working again"
survived "after panics in the plugin"
cluster

echo "# SLURM_HOSTFILE replaced after srun read it"
hosts=$(realpath -m "$work/hosts")
swapshim=$(build_shim swap_on_close)
# srun reads the host file, then $1 takes its place before srun launches the step
# (tests/faults/swap_on_close.c, preloaded into srun), so every slurmstepd finds the
# replacement. The host file n2, n1, n3 puts task 0 on node 1, task 1 on node 0 and task 2 on
# node 2: in RFC 34, one block of one node and one task for each, in task order.
swapped() {
  local name=$1 replacement=$2 expect=$3 out unset
  rm -rf "$hosts"; printf 'n2\nn1\nn3\n' > "$hosts"
  out=$(SLURM_HOSTFILE=$hosts LD_PRELOAD=$swapshim LAMA_FAULT_SWAP_PATH=$hosts LAMA_FAULT_SWAP_WITH=$replacement \
    run -n3 -m arbitrary --lama-map=csbnh --lama-bind=1c bash -c "$report; echo \"map \${TASK_MAP:-unset}\"" 2>&1)
  unset=$(grep -c '^map unset' <<<"$out")
  if grep -qF -- "$expect" <<<"$out" && [ "$unset" = 3 ] &&
     [ "$(grep -cE '^[0-9]+ [0-9]+ [0-9]' <<<"$out")" = 3 ]; then
    ok "SLURM_HOSTFILE $name: tasks run bound, TASK_MAP left unset on all 3 nodes, warning shown"
  else not_ok "SLURM_HOSTFILE $name" "$out"; fi
}
mkfifo "$work/fifo"
swapped "becomes a FIFO" "$work/fifo" "not a regular file"
mkdir "$work/dir"
swapped "becomes a directory" "$work/dir" "not a regular file"
truncate -s 300M "$work/huge"
swapped "becomes a 300 MB file" "$work/huge" "bytes is more than the"
survived "after the host file faults"
done_testing
