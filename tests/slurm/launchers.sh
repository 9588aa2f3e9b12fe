#!/usr/bin/env bash
# MPI launchers inside an allocation: `salloc` + Open MPI's `mpirun --rankfile` and MPICH's
# `mpiexec -hosts ... -bind-to user:...`, both fed by `lama plan --from-slurm`. Each rank's
# affinity after MPI_Init must equal the plan lama printed in the same allocation (its own text
# output, not the launcher format), and no rank may see the daemons' TASK_MAP.
# Usage: tests/slurm/launchers.sh LAMA_BINARY PLUGIN_SO   (restarts the cluster; the caller stops it)
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"

mpi_probes

cluster
echo "# Slurm $(srun --version | awk '{print $2}'): mpirun and mpiexec inside salloc, placed by lama plan --from-slurm"

# "rank host cpus" from lama plan's text output.
plan_hosts() { awk '/^node [0-9]+ / {h = $3; gsub(/[():]/, "", h)} /^  rank / {print $2, h, $NF}' | sort -n; }

# One allocation: the plan as text, then the launcher run from the same plan in its own format.
# $1 launcher (openmpi|mpich), $2 case name, $3 salloc arguments, $4 lama plan arguments,
# $5 extra launcher arguments.
launch_case() {
  local lib=$1 name=$2 alloc=$3 plan_args=$4 extra=${5:-} script got want bad=""
  if [ "$lib" = openmpi ]; then
    script="'$lama' plan --from-slurm $plan_args --format rankfile --output '$work/rf' &&
      mpirun --allow-run-as-root --rankfile '$work/rf' --mca rmaps_rank_file_physical 1 --use-hwthread-cpus $extra '$work/probe.openmpi'"
  else
    script="args=\$('$lama' plan --from-slurm $plan_args --format hydra) &&
      mpiexec.mpich \$args $extra '$work/probe.mpich'"
  fi
  timeout -s KILL 120 salloc $alloc bash -c "'$lama' plan --from-slurm $plan_args > '$work/plan' && $script" >"$work/out" 2>"$work/err"
  want=$(plan_hosts < "$work/plan")
  got=$(awk '$1 == "rank" {print $2, $8, $14}' "$work/out" | sort -n)
  while read -r _ rank _ _ _ _ _ _ _ _ _ before _ after _ _ _ _ _ map; do
    [ "$before" = "$after" ] || bad+="rank $rank rebound by MPI_Init: $before -> $after; "
    [ "$map" = none ] || bad+="rank $rank sees TASK_MAP $map; "
  done < <(grep '^rank ' "$work/out")
  if [ -n "$want" ] && [ "$got" = "$want" ] && [ -z "$bad" ]; then
    ok "$lib $name: every rank bound as lama plan --from-slurm says, no daemon TASK_MAP"
  else not_ok "$lib $name" "got (rank host cpus):" "$got" "want:" "$want" "$bad" "$(cat "$work/out" "$work/err")"; fi
}

for lib in openmpi mpich; do
  [ -x "$work/probe.$lib" ] || continue
  launch_case "$lib" "block -N3 -n6" "-N3 -n6" "--map csbnh --bind 1c"
  launch_case "$lib" "cyclic -N3 -n6" "-N3 -n6" "--map nbsch --bind 1c"
  launch_case "$lib" "two cores per rank -N3 -n3 -c2" "-N3 -n3 -c2" "--map ncsbh --bind 2c"
done
# Open MPI's own binding options do not undo the rankfile (each rank keeps both of its CPUs).
launch_case openmpi "two cores per rank, with mpirun --bind-to hwthread" "-N3 -n3 -c2" "--map ncsbh --bind 2c" "--bind-to hwthread"

# The job's TASK_MAP: the rankfile's comment carries the ranks' map, which mpirun -x passes on.
timeout -s KILL 120 salloc -N3 -n6 bash -c "'$lama' plan --from-slurm --map nbsch --bind 1c --format rankfile --output '$work/rf' &&
  mpirun --allow-run-as-root --rankfile '$work/rf' --mca rmaps_rank_file_physical 1 --use-hwthread-cpus \
    -x TASK_MAP=\"\$(sed -n 's/^# TASK_MAP=//p' '$work/rf')\" '$work/probe.openmpi'" >"$work/out" 2>&1
bad=""
while read -r _ rank _ _ _ _ _ host _ _ _ _ _ _ _ _ _ members _ map; do
  node=${host#n}
  taskids=$("$lama" taskmap --taskids="$((node - 1))" "$map" 2>&1)
  [ "$(expand "$taskids")" = "$members" ] || bad+="rank $rank on $host: node-local ranks $members, its TASK_MAP says $taskids; "
done < <(grep '^rank ' "$work/out")
if [ "$(grep -c '^rank ' "$work/out")" = 6 ] && [ -z "$bad" ]; then
  ok "openmpi: the rankfile's TASK_MAP, passed with mpirun -x, names each rank's node-local ranks"
else not_ok "rankfile TASK_MAP" "$bad" "$(cat "$work/out")"; fi

# Options given to salloc reach mpirun's srun: lama says once that it leaves the daemons alone.
# (Open MPI discards its daemons' stderr unless asked to be verbose about launching them.)
out=$(timeout -s KILL 120 salloc -N3 -n6 --lama-map=csbnh --lama-bind=1c \
  mpirun --allow-run-as-root --mca plm_base_verbose 5 -n 6 bash -c 'echo "rank-env ${TASK_MAP:-none} ${LAMA_CPUS:-none}"' 2>&1)
if [ "$(grep -c 'runs Open MPI.s orted' <<<"$out")" = 1 ] && [ "$(grep -c '^rank-env none none$' <<<"$out")" = 6 ]; then
  ok "salloc --lama-map + mpirun: the daemons are neither placed nor given TASK_MAP, said once"
else not_ok "daemon step note" "$out"; fi
out=$(timeout -s KILL 120 salloc -N3 -n6 --lama-map=csbnh --lama-bind=1c \
  mpiexec.mpich -n 6 bash -c 'echo "rank-env ${TASK_MAP:-none} ${LAMA_CPUS:-none}"' 2>&1)
if [ "$(grep -c 'runs MPICH.s hydra_pmi_proxy' <<<"$out")" = 1 ] && [ "$(grep -c '^rank-env none none$' <<<"$out")" = 6 ]; then
  ok "salloc --lama-map + mpiexec (MPICH): the proxies are neither placed nor given TASK_MAP, said once"
else not_ok "hydra proxy note" "$out"; fi

# Outside an allocation, --from-slurm says where it runs.
out=$(env -u SLURM_JOB_ID "$lama" plan --from-slurm 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "inside salloc or sbatch" <<<"$out"; then ok "lama plan --from-slurm outside a job: refused, says why"
else not_ok "--from-slurm outside a job (rc $rc)" "$out"; fi
