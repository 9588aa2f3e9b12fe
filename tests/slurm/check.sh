#!/usr/bin/env bash
# `lama check` on running jobs of the real sandbox cluster, from outside them as a user on a login
# node would (`lama check --jobid J`): a step lama placed (clean, exit 0), tasks Slurm put on
# one CPU (`shared-cpu`), OpenMP threads bound to one place (`stacked-threads`), an `mpirun` job
# inside an allocation, a job of another user (refused), a job that ends while it is checked
# (exit 3); the JSON report's fields. Expected findings follow from what each job was made to do.
# Usage: tests/slurm/check.sh LAMA_BINARY PLUGIN_SO
#   (LAMA_SANDBOX and LAMA_SANDBOX_PORT name the cluster this script restarts and leaves running)
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"
# Slurm's own binding (task/affinity), for the steps lama does not place.
cluster LAMA_SANDBOX_TASK_PLUGIN=task/affinity
plugstack "required $plugin"
gcc -fopenmp -O1 -o "$work/spin" "$top/tests/check/spin.c" || not_ok "tests/check/spin.c builds"
chmod 755 "$work" "$work/spin"
# Submits a job running STEP (an srun line) for up to a minute; waits until its step 0 runs;
# prints the job id.
started() {
  local job
  job=$(sbatch --parsable -o "$work/job-%j.out" "$@") || return 1
  for _ in $(seq 120); do
    squeue -h -s -j "$job" -o %i 2>/dev/null | grep -q "^$job\.0$" && break
    sleep 0.5
  done
  # Its tasks start after the step exists.
  sleep 2
  echo "$job"
}
# lama check on JOB; sets $out and $rc.
check() {
  out=$(timeout 120 "$lama" check --jobid "$@" 2>&1)
  rc=$?
}
# check_job SECONDS SBATCH_ARGS...: submits the job, checks it sampling SECONDS, cancels it.
check_job() {
  local sample=$1 job
  shift
  job=$(started "$@")
  check "$job" --sample "$sample"
  scancel "$job"
}

# A step lama placed, one core per task: nothing to say.
job=$(started -N2 -n4 --wrap "srun --lama-map=csbnh --lama-bind=1c $work/spin 60")
check "$job" --sample 1
tasks=$(grep -cE '^  n[0-9]+ +[0-3] ' <<<"$out")
if [ $rc -eq 0 ] && [ "$tasks" = 4 ] && grep -q '^no findings' <<<"$out"; then
  ok "a step lama placed (-N2 -n4 --lama-map=csbnh --lama-bind=1c): 4 tasks on 2 nodes, no finding, exit 0"
  clean=$out
else not_ok "lama check of a clean lama step (exit $rc, $tasks tasks)" "$out"; fi
# The JSON report: every task with its host, rank, pid, CPUs and threads; no finding.
json=$(timeout 120 "$lama" check --jobid "$job" --sample 0.2 --format json 2>/dev/null)
if python3 -c '
import json, sys
r = json.loads(sys.argv[1])
t = r["tasks"]
assert sorted(x["rank"] for x in t) == [0, 1, 2, 3], t
for x in t:
    assert {"host", "rank", "pid", "cpus", "threads", "mems", "gpus", "nics"} <= set(x), x
    assert all({"tid", "cpus", "last_cpus"} <= set(th) for th in x["threads"]), x
assert r["findings"] == [], r["findings"]
' "$json"; then ok "lama check --format json: tasks with host, rank, pid, cpus, threads (tid, cpus, last_cpus), mems, gpus, nics; findings empty"
else not_ok "lama check --format json" "$json"; fi
scancel "$job"

# Inside the allocation (a batch script), with no --jobid: the job's step is found from
# SLURM_JOB_ID.
job=$(sbatch --parsable -N1 -n2 -o "$work/inside.out" --wrap "srun --lama-map=csbnh --lama-bind=1c $work/spin 30 & sleep 4; $lama check --sample 0.5; echo check-exit=\$?; kill %1; wait")
for _ in $(seq 120); do [ -n "$(squeue -h -j "$job" 2>/dev/null)" ] || break; sleep 0.5; done
if grep -q '^check-exit=0$' "$work/inside.out" && [ "$(grep -cE '^  n[0-9]+ +[01] ' "$work/inside.out")" = 2 ]; then
  ok "lama check inside the allocation (a batch script, no --jobid): both tasks of its step, no finding"
else not_ok "lama check inside the allocation" "$(cat "$work/inside.out")"; fi

# Two tasks on CPU 0 while CPU 1 of the job idles.
check_job 1 -N1 -n2 --wrap "srun --cpu-bind=map_cpu:0,0 $work/spin 60"
if [ $rc -eq 1 ] && grep -qE '^  shared-cpu: ranks 0-1 on n[0-9]+ share CPUs 0 ' <<<"$out" && grep -q '^  idle-cpus: ' <<<"$out"; then
  ok "srun --cpu-bind=map_cpu:0,0: shared-cpu (ranks 0-1 on CPU 0) and idle-cpus, exit 1"
  shared=$out
else not_ok "lama check of --cpu-bind=map_cpu:0,0 (exit $rc)" "$out"; fi
# The same job placed by lama.
check_job 1 -N1 -n2 --wrap "srun --lama-map=csbnh --lama-bind=1c $work/spin 60"
if [ $rc -eq 0 ]; then ok "the same job placed by lama: exit 0"; placed=$out
else not_ok "the same job placed by lama (exit $rc)" "$out"; fi

# A task lama placed on CPU 0 that widens its own binding to both CPUs: not-as-planned.
check_job 0.5 -N1 -n2 --wrap "srun --lama-map=csbnh --lama-bind=1c bash -c '[ \$SLURM_PROCID = 0 ] && taskset -p -c 0,1 \$\$ >/dev/null; exec $work/spin 60'"
if [ $rc -eq 1 ] && grep -qE '^  not-as-planned: rank 0 on n[0-9]+: not bound as lama placed the task \(rank 0 was placed on CPUs 0, its threads may run on 0-1\)' <<<"$out"; then
  ok "a task that rebinds itself after lama placed it (taskset): not-as-planned, exit 1"
else not_ok "lama check of a task rebound after launch (exit $rc)" "$out"; fi

# OpenMP threads all bound to the primary thread's place, one core of the task's two.
check_job 1 -N1 -n1 -c2 --wrap "OMP_NUM_THREADS=2 OMP_PROC_BIND=master OMP_PLACES=cores srun --lama-map=csbnh --lama-bind=2c $work/spin 60"
if [ $rc -eq 1 ] && grep -qE '^  stacked-threads: rank 0 on n[0-9]+' <<<"$out"; then
  ok "OMP_PROC_BIND=master with OMP_PLACES=cores in a task of 2 cores: stacked-threads, exit 1"
else not_ok "lama check of OpenMP master binding (exit $rc)" "$out"; fi

# mpirun inside an allocation: its ranks, found by MPI's rank variable, not its daemons.
job=$(started -N2 -n4 --wrap "mpirun.openmpi --allow-run-as-root -np 4 --map-by core --bind-to core $work/spin 60")
check "$job" --sample 0.5
ranks=$(grep -oE '^  n[0-9]+ +[0-9]+ ' <<<"$out" | awk '{print $2}' | sort -n | paste -sd, -)
if [ $rc -le 1 ] && [ "$ranks" = 0,1,2,3 ]; then ok "mpirun -np 4 inside an allocation of 2 nodes: its 4 ranks found (exit $rc)"
else not_ok "lama check of an mpirun job (exit $rc, ranks '$ranks')" "$out" "$(cat "$work/job-$job.out")"; fi

# Another user's job: refused, saying whose it is.
out=$(timeout 60 runuser -u nobody -- "$lama" check --jobid "$job" 2>&1)
rc=$?
if [ $rc -eq 3 ] && grep -q "job $job belongs to root(0): only that user or root may check it" <<<"$out"; then
  ok "a job of another user: refused, exit 3 ($out)"
else not_ok "lama check of another user's job (exit $rc)" "$out"; fi
scancel "$job"

# A job that ends while it is checked.
job=$(started -N1 -n1 --wrap "srun $work/spin 3")
check "$job" --sample 6
if [ $rc -eq 3 ] && grep -qE "job $job ended while it was being checked|job $job is not running" <<<"$out"; then
  ok "a job that ends while it is checked: exit 3 ($out)"
else not_ok "lama check of an ending job (exit $rc)" "$out"; fi

for r in clean shared placed; do
  [ -n "${!r:-}" ] && { echo "# lama check, $r:"; sed 's/^/#   /' <<<"${!r}"; }
done
done_testing
