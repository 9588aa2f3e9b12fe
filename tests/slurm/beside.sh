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

# An explicit Slurm binding beside a placement the user asked of lama: refused in srun, once,
# naming both options, before any task starts (srun's own option, and the variable sbatch and
# salloc export for it).
for slurm_opt in --cpu-bind=none --cpu-bind=map_cpu:0 --cpu-bind=mask_cpu:0x1 --cpu-bind=rank_ldom \
  --cpu-bind=map_ldom:0 --cpu-bind=mask_ldom:0x1 --mem-bind=map_mem:0 --mem-bind=mask_mem:0x1; do
  name=${slurm_opt%%:*}
  for lama_opt in --lama-map=csbnh --lama-policy=auto --lama-mem=local; do
    out=$(run -N1 -n1 "$slurm_opt" "$lama_opt" bash -c 'echo TASK-RAN' 2>&1); rc=$?
    if [ $rc -ne 0 ] && [ "$(grep -c -- "lama: $name and ${lama_opt%=csbnh} cannot be used together" <<<"$out")" = 1 ] &&
      grep -q 'Failure in local plugin stack' <<<"$out" && ! grep -q TASK-RAN <<<"$out"; then
      ok "$slurm_opt beside $lama_opt: refused once in srun before launch, naming both"
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
  s_line=$(grep -n "^cpu-bind[-a-z]*=[A-Z]* *- n1, task  $t " <<<"$out" | grep -v '=LAMA' | head -n 1 | cut -d: -f1)
  l_line=$(grep -n "^cpu-bind=LAMA - n1, task  $t  $t \[[0-9]*\]: mask 0x$real set$" <<<"$out" | head -n 1 | cut -d: -f1)
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

# Under the site's default placement the user's explicit Slurm binding wins: the step runs as
# Slurm binds it, with TASK_MAP, and srun says so once.
plugstack "required $plugin policy=auto"
out=$(run -N2 -n4 --cpu-bind=none bash -c "$where" 2>&1)
bad=$(awk -v all="0-$last" '$1 == "at" && ($3 != "unplaced" || $4 != all || $5 != "map")' <<<"$out")
if [ "$(grep -c '^at ' <<<"$out")" = 4 ] && [ -z "$bad" ] && [ "$(grep -c 'lama: --cpu-bind=none: this step is left to Slurm' <<<"$out")" = 1 ]; then
  ok "site policy=auto, srun --cpu-bind=none: 4 tasks on 2 nodes unbound (0-$last) with TASK_MAP, said once"
else not_ok "site policy=auto with --cpu-bind=none" "$out"; fi
out=$(run -N1 -n1 -c"$cpus" --cpu-bind=map_cpu:$last bash -c "$where" 2>&1)
if grep -q "^at 0 unplaced $last map$" <<<"$out" && [ "$(grep -c 'lama: --cpu-bind=map_cpu: this step is left to Slurm' <<<"$out")" = 1 ]; then
  ok "site policy=auto, srun --cpu-bind=map_cpu:$last: Slurm's map binds the task, said once"
else not_ok "site policy=auto with --cpu-bind=map_cpu" "$out"; fi
out=$(run -N1 -n"$cpus" bash -c "$where" 2>&1)
got=$(awk '$1 == "at" {print $2, $3}' <<<"$out" | sort -n)
want=$(for ((t = 0; t < cpus; t++)); do echo "$t $t"; done)
if [ "$got" = "$want" ]; then ok "site policy=auto, no Slurm binding option: the policy places the step"
else not_ok "site policy=auto without a Slurm binding option" "got:" "$got" "want:" "$want" "$out"; fi
plugstack "required $plugin"

# srun's -c implies --exact: the step holds only -n x -c CPUs, too few for a wider binding; the
# message says so before any task starts (and, with --lama-oversubscribe, that tasks share).
refused "-c1 with a two-core binding inside a job" "srun's -c 1 implies --exact" \
  -N1 -n1 -c1 --lama-map=csbnh --lama-bind=2c
out=$(timeout 120 salloc -N1 -n"$cpus" srun -n"$cpus" -c1 --lama-map=csbnh --lama-bind=2c --lama-oversubscribe bash -c "$where" 2>&1)
if [ "$(grep -c "lama: warning: tasks of this step share CPUs on node 0 n1: this step holds $cpus CPU(s) here for $cpus task(s): srun's -c 1 implies --exact" <<<"$out")" = 1 ] &&
  [ "$(grep -c '^at ' <<<"$out")" = "$cpus" ]; then
  ok "-c1 with a two-core binding and --lama-oversubscribe: the tasks run, sharing, said once with the reason"
else not_ok "-c1 with a two-core binding and --lama-oversubscribe" "$out"; fi
