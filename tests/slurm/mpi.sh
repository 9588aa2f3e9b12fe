#!/usr/bin/env bash
# Real MPI jobs placed by lama on the sandbox cluster, launched directly by srun:
# tests/mpi/probe.c built with Debian's Open MPI 4.1 (srun --mpi=pmix) and MPICH 4.0
# (--mpi=pmi2), and with the PyPI wheels' Open MPI 5 (--mpi=pmix), MPICH 5 (--mpi=pmi2) and Intel
# MPI (--mpi=pmi2, I_MPI_PMI=pmi2), MPI ranks alone, under the automatic policy, with OpenMP
# threads inside them (Debian's), and one mpi4py job on each wheel. Expected bindings come from
# `lama plan`; node-local groups from TASK_MAP; thread places are checked against what the
# OpenMP runtime reports.
# Usage: tests/slurm/mpi.sh LAMA_BINARY PLUGIN_SO   (restarts the cluster; the caller stops it)
# Prints one "ok - ..." or "not ok - ..." line per case, with the evidence under a failure.
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"

mpi_probes
declare -A launch=([openmpi]=pmix [mpich]=pmi2 [ompi5]=pmix [mpich5]=pmi2 [impi]=pmi2)

# Runs an MPI step of stack LIB (the first argument). Two known upstream defects of Debian's
# Open MPI 4.1 (openmpi), never lama's, are retried, at most twice, and the case's line says how
# many times: under Slurm 26.05's PMIx a rank now and then crashes at start-up ("Process received
# signal"), with or without lama (about 1 step in 60 here, --lama-off included); and on a loaded
# machine its TCP transport may give up on a peer's connect ("failed to TCP connect", EINPROGRESS:
# open-mpi/ompi#11508, a timeout outside Open MPI's control), which CI met once while a Slurm
# build ran beside the suites. One of the wheel's Open MPI 5 (ompi5) is retried too: a rank
# that is still waiting in MPI_Init's closing PMIx fence when a peer, released first, sends on
# MPI_COMM_WORLD, crashes in mca_pml_ob1_recv_frag_callback_match, because ob1 adds
# MPI_COMM_WORLD only after that fence (open-mpi/ompi#13559 describes the race); CI met it once on
# Slurm 22.05 with the machine saturated (the probe printed nothing). No other stack
# or failure is retried.
retried=""
# Leaves the step's output in $work/out and its stderr in $work/err.
mpi_step() {
  local lib=$1 attempt tries=1 why
  shift
  retried=""
  [ "$lib" != openmpi ] && [ "$lib" != ompi5 ] || tries=3
  for ((attempt = 1; attempt <= tries; attempt++)); do
    run "$@" >"$work/out" 2>"$work/err"
    why=""
    if [ "$lib" = ompi5 ]; then
      ! grep -q 'Process received signal' "$work/err" || ! grep -q 'mca_pml_ob1_recv_frag_callback_match' "$work/err" ||
        why="Open MPI 5 crashed in MPI_Init on a message that came before MPI_COMM_WORLD was ready (open-mpi/ompi#13559)"
    elif grep -q 'Process received signal' "$work/err" && [[ $(srun --version) == "slurm 26.05"* ]]; then
      why="Open MPI 4.1 crashed at start-up under 26.05's PMIx, as it also does without lama"
    elif grep -q 'failed to TCP connect to a peer' "$work/out" "$work/err"; then
      why="Open MPI 4.1's TCP transport gave up on a peer's connect"
    fi
    [ -n "$why" ] && [ "$attempt" -lt "$tries" ] || break
    retried+="${retried:+; }$why"
  done
  [ -z "$retried" ] || retried=" (retried $((attempt - 1)) time(s): $retried)"
}

# "rank node cpus" for the given per-node rank lists ("0,1 2,3 4"), each node placed by
# `lama plan` for that many tasks on this machine (ranks in order).
expected() {
  local plan_args=$1 node=0 list r i cpus
  shift
  for list in "$@"; do
    IFS=, read -ra rs <<<"$list"
    mapfile -t cpus < <(plan_lines --this-machine --np "${#rs[@]}" $plan_args | awk '{print $3}')
    for i in "${!rs[@]}"; do echo "${rs[i]} $node ${cpus[i]:-missing}"; done
    node=$((node + 1))
  done | sort -n
}

# MPI ranks alone: the stack's own library ran them, rank = SLURM_PROCID, affinity after
# MPI_Init = before it = lama plan, and the node-local communicator holds exactly the tasks
# TASK_MAP puts on the rank's node. The program is the stack's probe unless $program says.
program=""
ranks_case() {
  local lib=$1 name=$2 srun_args=$3 plan_args=$4 out got want bad=""
  shift 4
  mpi_step "$lib" -N3 --mpi="${launch[$lib]}" $srun_args ${program:-"$work/probe.$lib"}
  out=$(tr -d '\0' < "$work/out")
  grep -q "^library ${library[$lib]}" <<<"$out" || bad+="not run by ${library[$lib]}: $(grep '^library' <<<"$out"); "
  got=$(awk '$1 == "rank" {print $2, $6, $14}' <<<"$out" | sort -n)
  want=$(expected "$plan_args" "$@")
  while read -r _ rank _ procid _ nodeid _ _ _ size _ before _ after _ local _ members _ map; do
    [ "$rank" = "$procid" ] || bad+="rank $rank has SLURM_PROCID $procid; "
    [ "$before" = "$after" ] || bad+="rank $rank rebound by MPI_Init: $before -> $after; "
    taskids=$("$lama" taskmap --taskids="$nodeid" "$map" 2>&1)
    [ "$(expand "$taskids")" = "$members" ] || bad+="rank $rank: node-local members $members, TASK_MAP says $taskids; "
    [ "${local#*/}" = "$(tr , '\n' <<<"$members" | wc -l)" ] || bad+="rank $rank: local size $local; "
  done < <(grep '^rank ' <<<"$out")
  if [ -n "$got" ] && [ "$got" = "$want" ] && [ -z "$bad" ]; then
    ok "$lib (srun --mpi=${launch[$lib]}) $name: ranks bound as lama plan says, not rebound by MPI, node-local groups as TASK_MAP$retried"
    [[ $name != "policy auto -n6" && $name != mpi4py* ]] || { echo "# $lib $name, as the ranks saw it:"; grep '^rank ' <<<"$out" | sort -n -k2 | awk '{print "#   rank", $2, "on", $8, "cpus", $14, "local", $16, "members", $18, "TASK_MAP", $20}'; }
  else not_ok "$lib $name" "got (rank node cpus):" "$got" "want:" "$want" "$bad" "$out" "$(cat "$work/err")"; fi
}

# Hybrid, one rank per node (the map's n first, so the whole-job plan has Slurm's layout): each
# rank's binding (read by its shell just before exec) is lama plan's; the runtime
# sees exactly the places lama plan lists, one thread per place (thread i on place i), each
# thread runs on a CPU of its place, and no two threads of a rank share a place.
hybrid_case() {
  local lib=$1 name=$2 srun_args=$3 plan_args=$4 out bad="" r cpus places seen count i place t pl pcpus cpu
  mpi_step "$lib" -N3 --mpi="${launch[$lib]}" $srun_args bash -c \
    'echo "pre $SLURM_PROCID $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status)"; exec "$0" omp' \
    "$work/probe.$lib"
  out=$(cat "$work/out")
  "$lama" plan --this-machine --nodes 3 $plan_args | awk '/^  rank / {
      for (i = 1; i <= NF; i++) { if ($i == "cpus") c = $(i+1); if ($i == "places") p = $(i+1) }
      print $2, c, p }' > "$work/plan"
  [ -s "$work/plan" ] || bad+="lama plan gave no places; "
  while read -r r cpus places; do
    [ "$(awk -v r="$r" '$1 == "pre" && $2 == r {print $3}' <<<"$out")" = "$cpus" ] || bad+="rank $r not bound to $cpus; "
    # The runtime's place list is lama's (OMP_PLACES was exported and read), and its threads ran
    # on them in order.
    [ "$(awk -v r="$r" '$1 == "places" && $2 == r {print $4}' <<<"$out")" = "$places" ] ||
      bad+="rank $r: the runtime's places are $(awk -v r="$r" '$1 == "places" && $2 == r {print $4}' <<<"$out"), lama planned $places; "
    # Places as the runtime reports them, in thread order, against lama plan's.
    seen=$(awk -v r="$r" '$1 == "thread" && $2 == r {print $3, $7, $9, $11}' <<<"$out" | sort -n)
    count=$(tr -cd '{' <<<"$places" | wc -c)
    [ "$(wc -l <<<"$seen")" = "$count" ] && [ -n "$seen" ] || bad+="rank $r ran $(wc -l <<<"$seen") threads, want $count; "
    i=0
    for place in $(tr -d '{' <<<"$places" | tr '}' ' ' | sed 's/ ,/ /g'); do
      read -r t pl pcpus cpu <<<"$(sed -n "$((i + 1))p" <<<"$seen")"
      [ "${t:-x}" = "$i" ] && [ "${pl:-x}" = "$i" ] || bad+="rank $r thread $i on place ${pl:-none}; "
      [ "$(expand "${pcpus:-none}")" = "$place" ] || bad+="rank $r place $i is ${pcpus:-none}, lama planned {$place}; "
      [[ ",$place," == *",${cpu:-x},"* ]] || bad+="rank $r thread $i ran on cpu ${cpu:-?} outside its place {$place}; "
      i=$((i + 1))
    done
    [ "$(awk '{print $3}' <<<"$seen" | sort | uniq -d)" = "" ] || bad+="rank $r: two threads on one place; "
  done < "$work/plan"
  if [ -z "$bad" ]; then ok "$lib (srun --mpi=${launch[$lib]}) hybrid $name: ranks bound as planned, one OpenMP thread per planned place, inside the binding$retried"
  else not_ok "$lib hybrid $name" "$bad" "lama plan (rank cpus places):" "$(cat "$work/plan")" "$out" "$(cat "$work/err")"; fi
}

cluster
echo "# Slurm $(srun --version | awk '{print $2}'): MPI ranks and OpenMP threads (Open MPI over PMIx, MPICH over PMI2)"
n=$(nproc)
for lib in "${mpi_libs[@]}"; do
  [ -x "$work/probe.$lib" ] || continue
  use_mpi "$lib" srun
  # 5 ranks on 3 nodes: block puts 2,2,1; cyclic 0,3 1,4 2; plane=2 0,1 2,3 4.
  ranks_case "$lib" "block -n5" "-n5 -m block --lama-map=csbnh --lama-bind=1c" "--map csbnh --bind 1c" 0,1 2,3 4
  ranks_case "$lib" "cyclic -n5" "-n5 -m cyclic --lama-map=csbnh --lama-bind=1c" "--map csbnh --bind 1c" 0,3 1,4 2
  ranks_case "$lib" "policy auto -n6" "-n6 --lama-policy=auto" "--policy auto" 0,1 2,3 4,5
  if [ -n "${venv[$lib]:-}" ]; then
    # The Python path: mpi4py from the same wheel's virtual environment.
    program="$wheels/${venv[$lib]}/bin/python $top/tests/mpi/probe.py" \
      ranks_case "$lib" "mpi4py block -n6" "-n6 --lama-map=csbnh --lama-bind=1c" "--map csbnh --bind 1c" 0,1 2,3 4,5
    continue
  fi
  ranks_case "$lib" "plane=2 -n5" "-n5 -m plane=2 --lama-map=csbnh --lama-bind=1c" "--map csbnh --bind 1c" 0,1 2,3 4
  hybrid_case "$lib" "-n3 -c$n, --lama-threads=auto" \
    "-n3 -c$n --lama-map=ncsbh --lama-bind=${n}c --lama-threads=auto" "--np 3 --map ncsbh --bind ${n}c --threads auto"
  # One thread on a binding of $n cores: one place, where the runtime's default would list $n.
  hybrid_case "$lib" "-n3 -c$n, --lama-bind=${n}c --lama-threads=1 --lama-omp-bind=close" \
    "-n3 -c$n --lama-map=ncsbh --lama-bind=${n}c --lama-threads=1 --lama-omp-bind=close" "--np 3 --map ncsbh --bind ${n}c --threads 1 --omp-bind close"
  out=$(run -N1 -n2 --mpi="${launch[$lib]}" --lama-map=csbnh --lama-bind=1c --lama-mppr=1:n "$work/probe.$lib" 2>&1); rc=$?
  if [ $rc -ne 0 ] && grep -q "oversubscribed after placing 1 of 2" <<<"$out" && ! grep -q '^rank ' <<<"$out"; then
    ok "$lib: a failed placement starts no MPI rank (srun exits $rc, reason shown)"
  else not_ok "$lib: failed placement (rc $rc)" "$out"; fi
done
use_mpi none
# The job's own OMP_* variables win unless --lama-omp-override.
out=$(OMP_NUM_THREADS=1 run -N1 -n1 -c"$n" --lama-bind="${n}c" --lama-threads=auto bash -c 'echo "omp ${OMP_NUM_THREADS:-unset} ${OMP_PLACES:-unset}"' 2>&1)
over=$(OMP_NUM_THREADS=1 run -N1 -n1 -c"$n" --lama-bind="${n}c" --lama-threads=auto --lama-omp-override bash -c 'echo "omp ${OMP_NUM_THREADS:-unset} ${OMP_PLACES:-unset}"' 2>&1)
if grep -q '^omp 1 unset$' <<<"$out" && grep -q 'OMP_NUM_THREADS, so lama' <<<"$out" && grep -q "^omp $n {" <<<"$over"; then
  ok "the job's OMP_NUM_THREADS wins (with a note) unless --lama-omp-override"
else not_ok "OMP_* precedence" "$out" "$over"; fi
refused_threads=$(run -N1 -n1 --lama-bind=1c --lama-threads=$((n + 1)) true 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "$((n + 1)) OpenMP threads per task asked for" <<<"$refused_threads"; then
  ok "more threads than the binding's hardware threads: no task starts, reason shown"
else not_ok "too many threads (rc $rc)" "$refused_threads"; fi
out=$(run -N1 -n1 --lama-threads=lots true 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -qF "invalid --lama-threads 'lots'" <<<"$out"; then ok "bad --lama-threads refused by srun"
else not_ok "bad --lama-threads (rc $rc)" "$out"; fi
done_testing
