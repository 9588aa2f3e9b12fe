#!/usr/bin/env bash
# Slurm's own placement options beside lama's, on the real sandbox cluster with Slurm's binding
# (task/affinity) on this machine's own topology: each row of the reference's table that does not
# need SMT, two NUMA nodes or device cgroups (those run in the guest, tests/guest/suite.sh).
# Usage: tests/slurm/beside.sh LAMA_BINARY PLUGIN_SO (restarts the cluster; the caller stops it).
# What each case expects is the rule of docs/reference.md, written out here by hand.
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"

cluster LAMA_SANDBOX_TASK_PLUGIN=task/affinity
release=$(srun --version | awk '{print $2}')
echo "# Slurm $release: Slurm's own placement options beside lama's (task/affinity, this machine)"
cpus=$(nproc)
last=$((cpus - 1))
where='echo "at $SLURM_PROCID ${LAMA_CPUS:-unplaced} $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status) ${TASK_MAP:+map}"'

# --lama-help in srun, salloc and sbatch: the short guide `lama explain --srun` prints (the
# same catalogue), exit 0, and no job asked for (as their own --help).
guide=$("$lama" explain --srun)
before=$(squeue -h -t all -o %i | sort -n | tail -n 1)
printf '#!/bin/sh\ntrue\n' >"$work/job.sh"
for cmd in srun salloc sbatch; do
  # sbatch reads its script before the plugin's options: give it one.
  script=(); [ "$cmd" = sbatch ] && script=("$work/job.sh")
  out=$(timeout 60 "$cmd" --lama-help "${script[@]}" 2>"$work/help.err"); rc=$?
  after=$(squeue -h -t all -o %i | sort -n | tail -n 1)
  if [ $rc -eq 0 ] && [ -n "$guide" ] && [ "$out" = "$guide" ] && [ ! -s "$work/help.err" ] && [ "$after" = "$before" ] &&
    grep -q -- '--lama-help' <<<"$("$cmd" --help 2>&1)"; then
    ok "$cmd --lama-help: the short guide (as lama explain --srun), exit 0, no job; $cmd --help lists it"
  else not_ok "$cmd --lama-help (rc $rc)" "$out" "$(cat "$work/help.err")" "jobs before: $before, after: $after"; fi
done

# An explicit Slurm binding beside a placement the user asked of lama: refused in srun, once,
# naming both options, before any task starts (srun's own option, and the variable sbatch and
# salloc export for it).
for slurm_opt in --cpu-bind=none --cpu-bind=rank --cpu-bind=map_cpu:0 --cpu-bind=mask_cpu:0x1 --cpu-bind=rank_ldom \
  --cpu-bind=map_ldom:0 --cpu-bind=mask_ldom:0x1 --mem-bind=map_mem:0 --mem-bind=mask_mem:0x1; do
  name=${slurm_opt%%:*}
  for lama_opt in --lama-map=csbnh --lama-policy=auto --lama-mem=local; do
    out=$(run -N1 -n1 "$slurm_opt" "$lama_opt" bash -c 'echo TASK-RAN' 2>&1); rc=$?
    if [ $rc -ne 0 ] && [ "$(grep -c -- "lama: $name and ${lama_opt%=csbnh} cannot be used together" <<<"$out")" = 1 ] &&
      grep -q 'Failure in local plugin stack' <<<"$out" && ! grep -q TASK-RAN <<<"$out"; then
      ok "$slurm_opt beside $lama_opt: refused once in srun before launch, naming both"
    # Slurm 26.05 drops --cpu-bind=rank itself (obsolete), so the step is lama's, without a word.
    elif [ "$slurm_opt" = --cpu-bind=rank ] && grep -q 'Ignoring --cpu-bind=rank' <<<"$out" &&
      [ $rc -eq 0 ] && grep -q TASK-RAN <<<"$out" && ! grep -q 'lama:' <<<"$out"; then
      ok "$slurm_opt beside $lama_opt: Slurm $release ignores it as obsolete, so lama places the step"
    else not_ok "$slurm_opt beside $lama_opt (rc $rc)" "$out"; fi
  done
done
out=$(SLURM_CPU_BIND=none run -N1 -n1 --lama-map=csbnh bash -c 'echo TASK-RAN' 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q -- 'lama: --cpu-bind=none and --lama-map cannot' <<<"$out" && ! grep -q TASK-RAN <<<"$out"; then
  ok "SLURM_CPU_BIND=none from the job beside --lama-map: refused in srun"
else not_ok "SLURM_CPU_BIND=none beside --lama-map (rc $rc)" "$out"; fi
out=$(timeout 120 salloc -N1 -n1 --mem-bind=map_mem:0 srun --lama-map=csbnh bash -c 'echo TASK-RAN' 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q -- 'lama: --mem-bind=map_mem and --lama-map cannot' <<<"$out" && ! grep -q TASK-RAN <<<"$out"; then
  ok "salloc --mem-bind=map_mem:0, srun --lama-map: refused in srun"
else not_ok "salloc --mem-bind=map_mem beside srun --lama-map (rc $rc)" "$out"; fi

# Granularities are Slurm's default binding: lama's placement replaces them, without a word.
for g in threads cores sockets ldoms; do
  out=$(run -N1 -n"$cpus" --cpu-bind=$g --lama-map=csbnh --lama-bind=1c bash -c "$where" 2>&1)
  got=$(awk '$1 == "at" {print $2, $3, $4}' <<<"$out" | sort -n)
  want=$(for ((t = 0; t < cpus; t++)); do echo "$t $t $t"; done)
  if [ "$got" = "$want" ] && ! grep -q 'lama:' <<<"$out"; then ok "--cpu-bind=$g beside --lama-map=csbnh --lama-bind=1c: lama's binding, one core per task, no message"
  else not_ok "--cpu-bind=$g beside a lama map" "got:" "$got" "want:" "$want" "$out"; fi
done

# --cpu-bind=verbose: Slurm's line for each task, then lama's in the same form and the mask the
# task has.
out=$(run -N1 -n2 --cpu-bind=verbose --lama-map=csbnh --lama-bind=1c --lama-order=s bash -c 'echo "mask $SLURM_PROCID $(taskset -p $$ | sed "s/.*: //")"' 2>&1)
bad=""
for t in 0 1; do
  real=$(awk -v t=$t '$1 == "mask" && $2 == t {print toupper($3)}' <<<"$out")
  # Whichever node Slurm chose (n1 may still be releasing the last step's CPUs).
  s_line=$(grep -n "^cpu-bind[-a-z]*=[A-Z]* *- n[0-9]*, task  $t " <<<"$out" | grep -v '=LAMA' | head -n 1 | cut -d: -f1)
  l_line=$(grep -n "^cpu-bind=LAMA - n[0-9]*, task  $t  $t \[[0-9]*\]: mask 0x$real set$" <<<"$out" | head -n 1 | cut -d: -f1)
  [ -n "$s_line" ] && [ -n "$l_line" ] && [ "$l_line" -gt "$s_line" ] || bad+="task $t: Slurm's line, then lama's with mask 0x$real, wanted; "
done
if [ -z "$bad" ]; then ok "--cpu-bind=verbose beside a lama map: lama's line in Slurm's form after Slurm's, with the task's real mask"
else not_ok "--cpu-bind=verbose beside a lama map" "$bad" "$out"; fi

# --mem-bind=local (and prefer) beside a lama map: memory follows lama's CPUs (one NUMA node
# here; the guest has two and shows it moving).
out=$(run -N1 -n1 --mem-bind=local --lama-map=csbnh bash -c 'echo "mems ${LAMA_MEMS:-none}"; grep -m1 -o "[a-z]*:[0-9]* heap" /proc/self/numa_maps' 2>&1)
if grep -q '^mems 0$' <<<"$out" && grep -q '^bind:0 heap' <<<"$out"; then ok "--mem-bind=local beside a lama map: the task's memory bound to its CPUs' NUMA node (LAMA_MEMS, numa_maps)"
else not_ok "--mem-bind=local beside a lama map" "$out"; fi
out=$(run -N1 -n1 --mem-bind=prefer,local --lama-map=csbnh bash -c 'grep -m1 -o "[a-z]*:[0-9]* heap" /proc/self/numa_maps' 2>&1)
if grep -q '^prefer:0 heap' <<<"$out"; then ok "--mem-bind=prefer,local beside a lama map: the task prefers its CPUs' NUMA node"
else not_ok "--mem-bind=prefer,local beside a lama map" "$out"; fi
refused "--mem-bind=prefer,local beside --lama-mem=local" "--mem-bind=prefer and --lama-mem=local ask for different memory policies" \
  -N1 -n1 --mem-bind=prefer,local --lama-map=csbnh --lama-mem=local
out=$(run -N1 -n1 --mem-bind=rank --lama-map=csbnh bash -c 'echo "mems ${LAMA_MEMS:-none}"; grep -m1 -o "[a-z]*:[0-9]* heap" /proc/self/numa_maps' 2>&1)
if grep -q '^mems 0$' <<<"$out" && grep -q '^bind:0 heap' <<<"$out"; then ok "--mem-bind=rank beside a lama map: followed as local, the task's memory on its CPUs' NUMA node"
else not_ok "--mem-bind=rank beside a lama map" "$out"; fi
# --mem-bind=none and verbose bind no memory: the task is placed, its memory left alone, and lama
# says nothing.
for m in none verbose; do
  out=$(run -N1 -n1 --mem-bind=$m --lama-map=csbnh --lama-bind=1c bash -c "$where; echo \"mems \${LAMA_MEMS:-none}\"; grep -c 'bind:' /proc/self/numa_maps" 2>&1)
  if grep -q '^at 0 0 0' <<<"$out" && grep -q '^mems none$' <<<"$out" && grep -qx 0 <<<"$out" && ! grep -q 'lama:' <<<"$out"; then
    ok "--mem-bind=$m beside a lama map: the task placed on CPU 0, no memory binding, no message"
  else not_ok "--mem-bind=$m beside a lama map" "$out"; fi
done

# Under the site's default placement the user's explicit Slurm binding wins: the step runs as
# Slurm binds it, with TASK_MAP, and srun says so once.
plugstack "required $plugin policy=auto"
out=$(run -N2 -n4 --cpu-bind=none bash -c "$where" 2>&1)
bad=$(awk -v all="0-$last" '$1 == "at" && ($3 != "unplaced" || $4 != all || $5 != "map")' <<<"$out")
if [ "$(grep -c '^at ' <<<"$out")" = 4 ] && [ -z "$bad" ] && [ "$(grep -c 'lama: --cpu-bind=none: this step is left to Slurm' <<<"$out")" = 1 ]; then
  ok "site policy=auto, srun --cpu-bind=none: 4 tasks on 2 nodes unbound (0-$last) with TASK_MAP, said once"
else not_ok "site policy=auto with --cpu-bind=none" "$out"; fi
out=$(run -N1 -n1 -c"$cpus" --cpu-bind=map_cpu:$last bash -c "$where" 2>&1)
if grep -q "^at 0 unplaced $last map$" <<<"$out" && [ "$(grep -c "lama: --cpu-bind=map_cpu:$last: this step is left to Slurm" <<<"$out")" = 1 ]; then
  ok "site policy=auto, srun --cpu-bind=map_cpu:$last: Slurm's map binds the task, said once"
else not_ok "site policy=auto with --cpu-bind=map_cpu" "$out"; fi
# Whatever else the user asked Slurm's binding for stands too, with lama asked for nothing: a
# granularity, the socket and core parts of -m, a --hint that binds, and SLURM_CPU_BIND exported
# for srun. The step is bound as with --lama-off (Slurm alone), lama places nothing (no
# LAMA_CPUS), TASK_MAP is there, and srun says so once. With any --lama-* option beside it, lama
# places (the granularity rows above).
for asked in --cpu-bind=threads --cpu-bind=cores --cpu-bind=sockets --cpu-bind=ldoms --cpu-bind=rank_ldom \
  "-m block:cyclic" "-m block:block:fcyclic" --hint=compute_bound --hint=memory_bound SLURM_CPU_BIND=cores; do
  if [[ $asked == SLURM_* ]]; then args=() envs=("$asked") named=$asked
  else read -ra args <<<"$asked"; envs=() named=$asked; fi
  slurm=$(env "${envs[@]}" timeout 120 srun -N2 -n4 "${args[@]}" --lama-off bash -c "$where" 2>&1 | awk '$1 == "at" {print $2, $4}' | sort -n)
  out=$(env "${envs[@]}" timeout 120 srun -N2 -n4 "${args[@]}" bash -c "$where" 2>&1)
  got=$(awk '$1 == "at" {print $2, $4}' <<<"$out" | sort -n)
  bad=$(awk '$1 == "at" && ($3 != "unplaced" || $5 != "map")' <<<"$out")
  if [ "$(grep -c '^at ' <<<"$out")" = 4 ] && [ -z "$bad" ] && [ "$got" = "$slurm" ] &&
    [ "$(grep -cF "lama: $named: this step is left to Slurm" <<<"$out")" = 1 ]; then
    ok "site policy=auto, $named: bound as Slurm alone binds it, with TASK_MAP, said once"
  else not_ok "site policy=auto with $named" "got (rank cpus):" "$got" "Slurm alone:" "$slurm" "$out"; fi
done
out=$(run -N2 -n4 --cpu-bind=cores --lama-verbose bash -c "$where" 2>&1)
if [ "$(awk '$1 == "at" && $3 != "unplaced"' <<<"$out" | wc -l)" = 4 ] && ! grep -q 'left to Slurm' <<<"$out"; then
  ok "site policy=auto, --cpu-bind=cores with --lama-verbose: the user asked lama too, and the policy places the step"
else not_ok "site policy=auto, --cpu-bind=cores with --lama-verbose" "$out"; fi
out=$(run -N1 -n"$cpus" bash -c "$where" 2>&1)
got=$(awk '$1 == "at" {print $2, $3}' <<<"$out" | sort -n)
want=$(for ((t = 0; t < cpus; t++)); do echo "$t $t"; done)
if [ "$got" = "$want" ]; then ok "site policy=auto, no Slurm binding option: the policy places the step"
else not_ok "site policy=auto without a Slurm binding option" "got:" "$got" "want:" "$want" "$out"; fi
# Slurm's own tests (test1.31, 1.49, 1.54) run more tasks than CPUs with --overcommit: the
# user's permission to stack, which the site's policy honours (issue 59), said once per node, in
# slurmd's log: the user asked lama for nothing, so the step's output is Slurm's alone (test1.59
# reads it line by line).
n=$((2 * cpus + 1))
note="lama: warning: $n tasks share the step's [0-9]* hardware thread\\(s\\) on node 0 .*: srun's --overcommit lets the automatic policy stack them"
before=$(slurmd_logged "$note")
out=$(run -N1 -n"$n" -O bash -c "$where" 2>&1)
spread=$(awk '$1 == "at" {print $3}' <<<"$out" | sort -n | uniq -c | awk 'NR == 1 || $1 < lo {lo = $1} $1 > hi {hi = $1} END {print hi - lo}')
outside=$(awk -v last="$last" '$1 == "at" && ($3 !~ /^[0-9]+$/ || $3 > last || $4 != $3)' <<<"$out")
if [ "$(grep -c '^at ' <<<"$out")" = "$n" ] && [ -z "$outside" ] && [ "$spread" -le 1 ] &&
   [ "$(($(slurmd_logged "$note") - before))" = 1 ] && ! grep -q 'lama' <<<"$out"; then
  ok "site policy=auto, srun -n$n -O: every task runs, each bound to one of the step's CPUs, as evenly as can be, said once in slurmd's log and nothing in the step's output"
else not_ok "site policy=auto with --overcommit" "spread: $spread" "$out"; fi
plugstack "required $plugin"

# srun's -c implies --exact: the step holds only -n x -c CPUs, too few for a wider binding; the
# message says so before any task starts (and, with --lama-oversubscribe, that tasks share).
refused "-c1 with a two-core binding inside a job" "srun's -c 1 implies --exact" \
  -N1 -n1 -c1 --lama-map=csbnh --lama-bind=2c
out=$(timeout 120 salloc -N1 -w n1 -n"$cpus" srun -n"$cpus" -c1 --lama-map=csbnh --lama-bind=2c --lama-oversubscribe bash -c "$where" 2>&1)
if [ "$(grep -c "lama: warning: tasks of this step share CPUs on node 0 n1: this step holds $cpus CPU(s) here for $cpus task(s): srun's -c 1 implies --exact" <<<"$out")" = 1 ] &&
  [ "$(grep -c '^at ' <<<"$out")" = "$cpus" ]; then
  ok "-c1 with a two-core binding and --lama-oversubscribe: the tasks run, sharing, said once with the reason"
else not_ok "-c1 with a two-core binding and --lama-oversubscribe" "$out"; fi

# --thread-spec on nodes declared as the POWER8 XML (2 sockets x 4 cores x 2 threads), with
# AllowSpecResourcesUsage=yes: Slurm leaves the reserved threads in the whole-node job's cores,
# and only its own automatic binding keeps tasks off them. Slurm's rule, by hand: the second
# thread of the last core of the last socket first, then of the last core of the socket before.
# The CPUs come from hwloc (hwloc-calc), not lama. The step made by srun, by salloc and by sbatch
# each carry the job's value to the nodes.
x3=$top/tests/topologies/power8gpudistances.xml
cluster LAMA_SANDBOX_TOPOLOGY="$x3" LAMA_SANDBOX_CONF_EXTRA=AllowSpecResourcesUsage=yes \
  LAMA_SANDBOX_GPUS=4 LAMA_SANDBOX_GPU_CORES="0-3 0-3 4-7 4-7"
plugstack "required $plugin topology=$x3"
pu() { hwloc-calc --input "$x3" --po -I pu "$1"; }
spec2=",$(pu core:7.pu:1),$(pu core:3.pu:1),"
spec1=",$(pu core:7.pu:1),"
report='echo "at $SLURM_PROCID $LAMA_CPUS"'
whole=$(run -N1 -w n1 -n2 --exclusive -c8 --lama-map=scbnh --lama-bind=1s bash -c "$report" 2>&1 | awk '$1 == "at" {print $2, $3}' | sort -n)
core_of() { hwloc-calc --input "$x3" --pi -I core "pu:$1"; }
# The same step without the option, less the reserved CPUs (which are in its bindings, else the
# case shows nothing), on the cores the step holds: Slurm 26.05 also counts the reserved threads
# out of the job's CPUs, and may leave a whole core out of the step (22.05 leaves them in).
without() { # spec-list got
  local t c x line out="" held
  held=,$(cut -d' ' -f2 <<<"$2" | tr , '\n' | grep . | while read -r x; do core_of "$x"; done | sort -u | paste -sd, -),
  while read -r t c; do
    line=""
    for x in $(expand "$c" | tr , ' '); do
      [[ $1 != *,$x,* && $held == *,$(core_of "$x"),* ]] && line+="$x,"
    done
    out+="$t ${line%,}"$'\n'
  done <<<"$whole"
  printf '%s' "$out"
}
thread_spec_case() { # name spec-list command...
  local name=$1 spec=$2 got want
  shift 2
  got=$("$@" 2>&1 | awk '$1 == "at" {print $2, $3}' | sort -n | while read -r t c; do echo "$t $(expand "$c")"; done)
  want=$(without "$spec" "$got")
  if [ "$(grep -c . <<<"$whole")" = 2 ] && [ "$want" != "$(while read -r t c; do echo "$t $(expand "$c")"; done <<<"$whole")" ] && [ "$got" = "$want" ]; then
    ok "$name: the tasks stay off the reserved CPUs (${spec:1:-1}), on every other CPU of their socket"
  else not_ok "$name" "got:" "$got" "want:" "$want" "without --thread-spec:" "$whole"; fi
}
thread_spec_case "srun --thread-spec=2 (the job made by srun)" "$spec2" \
  run -N1 -w n1 -n2 --thread-spec=2 --lama-map=scbnh --lama-bind=1s bash -c "$report"
thread_spec_case "salloc --thread-spec=2, srun inside" "$spec2" \
  timeout 120 salloc -N1 -w n1 --thread-spec=2 srun -n2 --lama-map=scbnh --lama-bind=1s bash -c "$report"
SBATCH_THREAD_SPEC=1 sbatch_wait -N1 -w n1 -o "$work/sbatch.out" \
  --wrap "srun -n2 --lama-map=scbnh --lama-bind=1s bash -c '$report'" >/dev/null 2>&1
thread_spec_case "SBATCH_THREAD_SPEC=1 sbatch, srun inside" "$spec1" cat "$work/sbatch.out"
# -S1 (--core-spec): Slurm keeps the last core of the last socket out of the job's cores itself
# (AllowSpecResourcesUsage=yes), so the step's cores from its credential leave it out.
thread_spec_case "srun -S1 (a core kept by Slurm)" ",$(pu core:7 | tr , '\n' | paste -sd, -)," \
  run -N1 -w n1 -n2 -S1 --lama-map=scbnh --lama-bind=1s bash -c "$report"

# --- more of Slurm's options on the declared POWER8 ------------------------------------------
# The XML, by hand: socket 0 has cores 0-3 (first threads 0, 8, 16, 24), socket 1 cores 4-7
# (80, 88, 96, 104); each core's second thread is the first plus one. GPUs cuda0-1 sit on
# socket 0, cuda2-3 on socket 1, and gres.conf says so (Cores=0-3, 4-7).
# Each task's CPUs as "rank cpus", sorted, from a step's output.
at() { awk '$1 == "at" {print $2, $3}' <<<"$1" | sort -n | paste -sd' '; }
# --exclusive on srun means --exact too (Slurm's arg_set_exclusive): the step holds only what its
# one task asks for, as with --exact, where the step of an exclusive salloc holds the whole node;
# 26.05's --exclusive=allocation makes the job exclusive without --exact. The policy gives the
# step's one task all of the step's CPUs, so the CPUs a task gets show which the step held.
cpus_of() { awk '$1 == "at" {print $3}' <<<"$1" | tr , '\n' | grep -c .; }
exact=$(cpus_of "$(run -N1 -w n1 -n1 --exact --lama-policy=auto bash -c "$report" 2>&1)")
node=$(cpus_of "$(timeout 120 salloc -N1 -w n1 --exclusive srun -n1 --lama-policy=auto bash -c "$report" 2>&1)")
for how in "srun --exclusive" "salloc --exclusive, srun --exclusive"; do
  if [ "$how" = "srun --exclusive" ]; then out=$(run -N1 -w n1 -n1 --exclusive --lama-policy=auto bash -c "$report" 2>&1)
  else out=$(timeout 120 salloc -N1 -w n1 --exclusive srun -n1 --exclusive --lama-policy=auto bash -c "$report" 2>&1); fi
  if [ "$(cpus_of "$out")" = "$exact" ] && [ "$exact" -lt "$node" ]; then
    ok "$how -n1 --lama-policy=auto: the step holds what --exact gives ($exact CPU(s), the exclusive node $node): lama places within them"
  else not_ok "$how -n1: $(cpus_of "$out") CPUs, --exact gives $exact, the whole node $node" "$out"; fi
done
if [ "$(printf '%s\n' 26.05 "$release" | sort -V | head -n 1)" = 26.05 ]; then
  out=$(run -N1 -w n1 -n1 --exclusive=allocation --lama-policy=auto bash -c "$report" 2>&1)
  if [ "$(cpus_of "$out")" = "$node" ]; then
    ok "srun --exclusive=allocation -n1 --lama-policy=auto: the step holds the whole node ($node CPUs), and lama places over it"
  else not_ok "srun --exclusive=allocation -n1: $(cpus_of "$out") CPUs, the whole node $node" "$out"; fi
fi
# --ntasks-per-core=1 beside a map that packs hardware threads first (hcsbn): Slurm's count holds
# inside the node too (MPPR 1:c): four tasks on four cores, one thread each, where the map alone
# puts two tasks on each core.
out=$(run -N1 -w n1 -n4 --ntasks-per-core=1 --lama-map=hcsbn --lama-bind=1h bash -c "$report" 2>&1)
cores=$(awk '$1 == "at" {print $3}' <<<"$out" | while read -r c; do core_of "$c"; done | sort -u | wc -l)
if [ "$(grep -c '^at ' <<<"$out")" = 4 ] && [ "$cores" = 4 ] && ! grep -q 'lama:' <<<"$out"; then
  ok "--ntasks-per-core=1 beside --lama-map=hcsbn: one task per core ($(at "$out"))"
else not_ok "--ntasks-per-core=1 beside --lama-map=hcsbn ($cores cores)" "$out"; fi
out=$(run -N1 -w n1 -n4 --ntasks-per-core=2 --lama-map=hcsbn --lama-bind=1h bash -c "$report" 2>&1)
cores=$(awk '$1 == "at" {print $3}' <<<"$out" | while read -r c; do core_of "$c"; done | sort -u | wc -l)
if [ "$(grep -c '^at ' <<<"$out")" = 4 ] && [ "$cores" = 2 ]; then ok "--ntasks-per-core=2 beside --lama-map=hcsbn: two tasks per core ($(at "$out"))"
else not_ok "--ntasks-per-core=2 beside --lama-map=hcsbn ($cores cores)" "$out"; fi
# --ntasks-per-socket=1 -n2 without -c: Slurm itself gives the step one core of one socket, so
# the limit cannot hold there: the tasks run, placed without it, said once.
out=$(run -N1 -w n1 -n2 --ntasks-per-socket=1 --lama-map=hcsbn --lama-bind=1h bash -c "$report" 2>&1)
if [ "$(at "$out")" = "0 0 1 1" ] && [ "$(grep -c "lama: warning: Slurm's --ntasks-per-core/--ntasks-per-socket (MPPR 1:s) cannot hold" <<<"$out")" = 1 ]; then
  ok "--ntasks-per-socket=1 on a step Slurm gave one core: placed without the limit, said once"
else not_ok "--ntasks-per-socket=1 on one core" "$out"; fi
out=$(run -N1 -w n1 -n2 --ntasks-per-socket=1 -c2 --lama-map=hcsbn --lama-bind=1h bash -c "$report" 2>&1)
if [ "$(at "$out")" = "0 0 1 80" ]; then ok "--ntasks-per-socket=1 -c2 beside --lama-map=hcsbn: one task per socket (0 on 0, 1 on 80)"
else not_ok "--ntasks-per-socket=1 -c2 beside --lama-map=hcsbn" "$out"; fi
# -B 2:2:1 (and --hint=nomultithread, tested in configs.sh): one thread per core, the first.
out=$(run -N1 -w n1 -n4 -B 2:2:1 --lama-map=csbnh --lama-bind=1c bash -c "$report" 2>&1)
if [ "$(at "$out")" = "0 0 1 8 2 80 3 88" ]; then ok "-B 2:2:1 beside --lama-map=csbnh --lama-bind=1c: the first thread of two cores per socket (0 8 80 88)"
else not_ok "-B 2:2:1 beside a lama map" "$out"; fi
# --hint=compute_bound and memory_bound: Slurm counts one thread per core and binds whole cores;
# lama binds whole cores too.
for h in compute_bound memory_bound; do
  out=$(run -N1 -w n1 -n2 --hint=$h --lama-map=scbnh --lama-bind=1c bash -c "$report" 2>&1)
  if [ "$(at "$out")" = "0 0-1 1 80-81" ]; then ok "--hint=$h beside --lama-map=scbnh --lama-bind=1c: whole cores, one per socket (0-1, 80-81)"
  else not_ok "--hint=$h beside a lama map" "$out"; fi
done
# -m's socket and core parts order Slurm's own binding; lama's map replaces them: every one
# binds as csbnh does, cores of socket 0 in order.
for m in block:block block:cyclic block:fcyclic cyclic:cyclic:block block:block:cyclic; do
  out=$(run -N1 -w n1 -n4 -c2 -m $m --lama-map=csbnh --lama-bind=1c bash -c "$report" 2>&1)
  if [ "$(at "$out")" = "0 0-1 1 8-9 2 16-17 3 24-25" ] && ! grep -q 'lama:' <<<"$out"; then ok "-m $m beside --lama-map=csbnh: lama's order (0-1 8-9 16-17 24-25), no message"
  else not_ok "-m $m beside a lama map" "$out"; fi
done
# --multi-prog: a program per task, each placed as usual.
echo 'echo "at $1 $LAMA_CPUS"' > "$work/at.sh"
printf '0 bash %s %%t\n1-3 sh %s %%t\n' "$work/at.sh" "$work/at.sh" > "$work/multi.conf"
out=$(run -N1 -w n1 -n4 -c2 --multi-prog --lama-map=csbnh --lama-bind=1c "$work/multi.conf" 2>&1)
if [ "$(at "$out")" = "0 0-1 1 8-9 2 16-17 3 24-25" ]; then ok "--multi-prog beside --lama-map=csbnh: every task placed as without it"
else not_ok "--multi-prog beside a lama map" "$out" "$(cat "$work/multi.conf")"; fi
# A job array: every element's step placed on its own job's CPUs.
sbatch_wait -N1 -w n1 -n2 -c2 --array=0-1 -o "$work/array-%a.out" \
  --wrap "srun --lama-map=csbnh --lama-bind=1c bash -c '$report'" >/dev/null 2>&1
bad=""
for a in 0 1; do
  got=$(at "$(cat "$work/array-$a.out" 2>&1)")
  [[ $got =~ ^0\ [0-9]+-[0-9]+\ 1\ [0-9]+-[0-9]+$ ]] || bad+="element $a: '$got'; "
done
if [ -z "$bad" ]; then ok "job array --array=0-1: each element's srun placed, one core per task ($(at "$(cat "$work/array-0.out")") and $(at "$(cat "$work/array-1.out")"))"
else not_ok "job array" "$bad" "$(cat "$work"/array-*.out)"; fi
# --gres-flags=enforce-binding: with socket 0's cores held by another job, Slurm gives the step
# a core of socket 1 and only a GPU of socket 1 (Cores=4-7); lama's nearest GPU is that one.
hog=$(sbatch --parsable -N1 -w n1 -n1 -c8 -o /dev/null --wrap 'sleep 300')
for _ in $(seq 100); do [ "$(squeue -h -j "$hog" -o %T)" = RUNNING ] && break; sleep 0.2; done
gpu='echo "at $SLURM_PROCID $LAMA_CPUS $LAMA_GPUS"'
out=$(run -N1 -w n1 -n1 -c2 --gres=gpu:1 --gres-flags=enforce-binding --lama-gpus=1 --lama-map=csbnh --lama-bind=1c bash -c "$gpu" 2>&1)
if [[ $(awk '$1 == "at" {print $3, $4}' <<<"$out") =~ ^(8[0-9]|9[0-9]|10[0-9])(-[0-9]+)?\ cuda[23]$ ]]; then
  ok "--gres-flags=enforce-binding beside --lama-gpus=1: a core of socket 1 and its own socket's GPU ($(awk '$1 == "at" {print $3, $4}' <<<"$out"))"
else not_ok "--gres-flags=enforce-binding beside --lama-gpus=1" "$out" "$(squeue)"; fi
scancel "$hog"
# The step's GPUs however Slurm counts them (per node, per job, with CPUs per GPU): --lama-gpus
# chooses among them, one each, never one the step was not given.
for_gpus() { # name srun-args...
  local name=$1 out bad="" t g step
  shift
  out=$(run -N1 -w n1 -n2 "$@" --lama-map=scbnh --lama-bind=1c --lama-gpus=1 bash -c 'echo "g $SLURM_PROCID ${LAMA_GPUS:-none} ${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS:-none}}"' 2>&1)
  while read -r _ t g step; do
    [[ ,$step, == *,${g#cuda},* ]] || bad+="task $t got $g, the step has GPUs $step; "
  done < <(grep '^g ' <<<"$out")
  if [ "$(grep -c '^g ' <<<"$out")" = 2 ] && [ -z "$bad" ] && [ "$(awk '$1 == "g" {print $3}' <<<"$out" | sort -u | wc -l)" = 2 ]; then
    ok "$name with --lama-gpus=1: each task one of the step's GPUs, none shared ($(awk '$1 == "g" {print $3}' <<<"$out" | paste -sd' '))"
  else not_ok "$name with --lama-gpus=1" "$bad" "$out"; fi
}
for_gpus "--gpus-per-node=2" --gpus-per-node=2
for_gpus "--gpus=2" --gpus=2
for_gpus "--gpus=2 --cpus-per-gpu=2" --gpus=2 --cpus-per-gpu=2
# --gpu-bind=verbose,none binds nothing (Slurm only prints): as --gpu-bind=none, lama chooses
# among the step's GPUs where Slurm names them (26.05), and on 22.05, which then exports no
# CUDA_VISIBLE_DEVICES, says it cannot tell which they are.
if [ "$(printf '%s\n' 23.11 "$release" | sort -V | head -n 1)" = 23.11 ]; then
  for_gpus "--gres=gpu:2 --gpu-bind=verbose,none" --gres=gpu:2 --gpu-bind=verbose,none
else
  refused "--gpu-bind=verbose,none beside --lama-gpus on $release (no CUDA_VISIBLE_DEVICES)" \
    "did not say which" -N1 -w n1 -n2 --gres=gpu:2 --gpu-bind=verbose,none --lama-gpus=1
fi
# --gpus-per-socket (with --sockets-per-node): the step's GPUs, one per socket here; each task,
# on a socket of its own (-c8), gets its own socket's GPU (cuda0-1 on CPUs 0-79, cuda2-3 above).
out=$(run -N1 -w n1 -n2 -c8 --gpus-per-socket=1 --sockets-per-node=2 --lama-map=scbnh --lama-bind=1c --lama-gpus=1 \
  bash -c 'echo "g $SLURM_PROCID ${LAMA_CPUS%%-*} ${LAMA_GPUS:-none} ${SLURM_STEP_GPUS:-none}"' 2>&1)
bad=""
while read -r _ t c g step; do
  want=$([ "$c" -lt 80 ] && echo "cuda0 cuda1" || echo "cuda2 cuda3")
  [[ " $want " == *" $g "* && ,$step, == *,${g#cuda},* ]] || bad+="task $t on CPU $c got $g (step GPUs $step); "
done < <(grep '^g ' <<<"$out")
if [ "$(grep -c '^g ' <<<"$out")" = 2 ] && [ -z "$bad" ] && [ "$(awk '$1 == "g" {print $4}' <<<"$out" | sort -u | wc -l)" = 2 ]; then
  ok "--gpus-per-socket=1 --sockets-per-node=2 with --lama-gpus=1: each task its own socket's GPU of the step ($(awk '$1 == "g" {print $4}' <<<"$out" | sort | paste -sd' '))"
else not_ok "--gpus-per-socket=1 with --lama-gpus=1" "$bad" "$out"; fi
# Slurm's GPU binding task by task in its other spellings: refused beside --lama-gpus, in srun.
# (--tres-bind came with Slurm 23.11: 22.05's srun does not know it.)
if srun --help 2>&1 | grep -- --tres-bind >/dev/null; then
  refused "--tres-bind=gres/gpu:closest beside --lama-gpus" "Slurm binds GPUs task by task" \
    -N1 -w n1 -n2 --gres=gpu:2 --tres-bind=gres/gpu:closest --lama-gpus=1
else skip "--tres-bind beside --lama-gpus: Slurm $release has no --tres-bind (it came with 23.11)"; fi
refused "--gpu-bind=mask_gpu:0x1,0x2 beside --lama-gpus" "Slurm binds GPUs task by task" \
  -N1 -w n1 -n2 --gres=gpu:2 --gpu-bind=mask_gpu:0x1,0x2 --lama-gpus=1
done_testing
