#!/usr/bin/env bash
# MPI launchers inside an allocation, fed by `lama plan --from-slurm`: Open MPI 4.1 (Debian) and
# 5 (PyPI) with the rankfile each reads (the command is the one the file's comment gives), MPICH
# 4.0 (Debian) and 5 (PyPI) with Hydra's `-hosts ... -bind-to user:...`, and Intel MPI (PyPI) with
# `-hosts ... -ppn ... -cpu-bind list:...`. Each rank's affinity after MPI_Init must equal the plan
# lama printed in the same allocation (its own text output, not the launcher format), and no rank
# may see the daemons' TASK_MAP. The daemon step of every launcher is left alone under salloc's
# --lama-* options, SLURM_LAMA_* variables and a site policy=auto. Open MPI 5's rankfile is also
# checked on a node declared from an XML whose logical and OS CPU numbers differ.
# Usage: tests/slurm/launchers.sh LAMA_BINARY PLUGIN_SO   (restarts the cluster; the caller stops it)
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"

mpi_probes
# Both Open MPI releases refuse root without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Each stack's launcher and the lama plan format it reads.
declare -A launcher=([openmpi]=mpirun [ompi5]=mpirun [mpich]=mpiexec.mpich [mpich5]=mpiexec [impi]=mpiexec.hydra)
declare -A format=([openmpi]=rankfile [ompi5]=rankfile [mpich]=hydra [mpich5]=hydra [impi]=impi)
# The program each launcher's daemon step runs, as lama names it.
declare -A daemon=([openmpi]="Open MPI's orted" [ompi5]="Open MPI's prted" [mpich]="MPICH's hydra_pmi_proxy"
  [mpich5]="MPICH's hydra_pmi_proxy" [impi]="Intel MPI's hydra_bstrap_proxy")

cluster
echo "# Slurm $(srun --version | awk '{print $2}'): mpirun and mpiexec inside salloc, placed by lama plan --from-slurm"

# "rank host cpus" from lama plan's text output.
plan_hosts() {
  awk '/^node [0-9]+ / {h = $3; gsub(/[():]/, "", h)}
    /^  rank / { c = $NF; for (i = 1; i < NF; i++) if ($i == "cpus") c = $(i+1); print $2, h, c }' | sort -n
}

# The shell script that runs LIB's launcher from lama's plan in its format ($plan_args, $extra).
# Open MPI: the command the rankfile's comment gives, FILE and PROGRAM filled in.
launch_script() {
  local lib=$1 probe=$work/probe.$1
  case ${format[$lib]} in
    rankfile) echo "'$lama' plan --from-slurm $plan_args --format rankfile --output '$work/rf' &&
      cmd=\$(sed -n 's/^# mpirun /mpirun /p' '$work/rf') && [ -n \"\$cmd\" ] &&
      cmd=\${cmd/FILE/$work/rf} && \${cmd/PROGRAM/$extra $probe}" ;;
    *) echo "args=\$('$lama' plan --from-slurm $plan_args --format ${format[$lib]}) &&
      ${launcher[$lib]} \$args $extra '$probe'" ;;
  esac
}

# One allocation: the plan as text, then the launcher run from the same plan in its own format.
# $1 stack, $2 case name, $3 salloc arguments, $4 lama plan arguments, $5 extra launcher arguments.
launch_case() {
  local lib=$1 name=$2 alloc=$3 plan_args=$4 extra=${5:-} got want bad=""
  use_mpi "$lib"
  timeout -s KILL 120 salloc $alloc env "${lib_env[@]}" bash -c \
    "'$lama' plan --from-slurm $plan_args > '$work/plan' && $(launch_script "$lib")" >"$work/out" 2>"$work/err"
  want=$(plan_hosts < "$work/plan")
  got=$(awk '$1 == "rank" {print $2, $8, $14}' "$work/out" | sort -n)
  grep -q "^library ${library[$lib]}" "$work/out" || bad+="not run by ${library[$lib]}; "
  while read -r _ rank _ _ _ _ _ _ _ _ _ before _ after _ _ _ _ _ map; do
    [ "$before" = "$after" ] || bad+="rank $rank rebound by MPI_Init: $before -> $after; "
    [ "$map" = none ] || bad+="rank $rank sees TASK_MAP $map; "
  done < <(grep '^rank ' "$work/out")
  if [ -n "$want" ] && [ "$got" = "$want" ] && [ -z "$bad" ]; then
    ok "$lib ${launcher[$lib]} $name: every rank bound as lama plan --from-slurm says, no daemon TASK_MAP"
    [ "$name" != "cyclic -N3 -n6" ] || {
      echo "# $lib ${launcher[$lib]} $name, as the ranks saw it (rank host cpus):"
      sed 's/^/#   /' <<<"$got"
    }
  else not_ok "$lib $name" "got (rank host cpus):" "$got" "want:" "$want" "$bad" "$(cat "$work/plan" "$work/out" "$work/err")"; fi
}

for lib in "${mpi_libs[@]}"; do
  [ -x "$work/probe.$lib" ] || continue
  launch_case "$lib" "block -N3 -n6" "-N3 -n6" "--map csbnh --bind 1c"
  launch_case "$lib" "cyclic -N3 -n6" "-N3 -n6" "--map nbsch --bind 1c"
  launch_case "$lib" "two cores per rank -N3 -n3 -c2" "-N3 -n3 -c2" "--map ncsbh --bind 2c"
done
# The automatic policy with srun's -c: the plan counts SLURM_CPUS_PER_TASK as the plugin does,
# and srun with --lama-policy=auto in the same allocation binds its tasks to the same CPUs.
for lib in ompi5 mpich5 impi; do
  launch_case "$lib" "--policy auto -N3 -n3 -c2" "-N3 -n3 -c2" "--policy auto"
done
cat > "$work/where.sh" <<'EOF'
echo "rank $SLURM_PROCID $SLURMD_NODENAME $(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)"
EOF
timeout -s KILL 120 salloc -N3 -n3 -c2 bash -c "'$lama' plan --from-slurm --policy auto > '$work/plan' &&
  srun --lama-policy=auto bash '$work/where.sh'" >"$work/out" 2>"$work/err"
want=$(plan_hosts < "$work/plan")
got=$(awk '$1 == "rank" {print $2, $3, $4}' "$work/out" | sort -n)
if [ -n "$want" ] && [ "$got" = "$want" ]; then ok "salloc -c2: lama plan --from-slurm --policy auto plans what srun --lama-policy=auto binds"
else not_ok "--from-slurm --policy auto against srun" "plan:" "$want" "srun:" "$got" "$(cat "$work/plan" "$work/err")"; fi

# Open MPI's own binding options do not undo the rankfile (each rank keeps both of its CPUs).
launch_case openmpi "two cores per rank, with mpirun --bind-to hwthread" "-N3 -n3 -c2" "--map ncsbh --bind 2c" "--bind-to hwthread"
launch_case ompi5 "two cores per rank, with mpirun --bind-to hwthread" "-N3 -n3 -c2" "--map ncsbh --bind 2c" "--bind-to hwthread"

# A node whose logical and OS numbers differ: the nodes declared (to lama's probe and to Open
# MPI's own hwloc alike) as the 2x8x2 Intel XML, whose core c holds OS CPUs c and c+16. Slurm's
# cores 0 and 1 are then OS CPUs 0,16 and 1,17, logical PUs 0-1 and 2-3; the kernel keeps of
# each binding the CPUs this machine has. A rankfile in OS numbers would put rank 1 on logical
# PUs 1 and 17 (OS 16 and 24): nothing here, and Open MPI would refuse or leave it unbound.
xml=$top/tests/topologies/32em64t-2n8c2t-pci-normalio.xml
use_mpi ompi5
timeout -s KILL 120 salloc -N3 -n6 env "${lib_env[@]}" HWLOC_XMLFILE="$xml" HWLOC_THISSYSTEM=1 bash -c \
  "'$lama' plan --from-slurm --map csbnh --bind 1c > '$work/plan' &&
   '$lama' plan --from-slurm --map csbnh --bind 1c --format rankfile --output '$work/rf' &&
   mpirun --map-by rankfile:file='$work/rf' --use-hwthread-cpus '$work/probe.ompi5'" >"$work/out" 2>"$work/err"
online=",$(seq -s, 0 $(($(nproc) - 1))),"
want=$(plan_hosts < "$work/plan" | while read -r r h cpus; do
  kept=$(tr , '\n' <<<"$(expand "$cpus")" | while read -r c; do [[ $online == *",$c,"* ]] && echo "$c"; done | paste -sd,)
  echo "$r $h ${kept:-none}"
done)
got=$(awk '$1 == "rank" {print $2, $8, $14}' "$work/out" | sort -n | while read -r r h c; do echo "$r $h $(expand "$c")"; done)
if grep -q '^  rank 1 .*cpus 1,17$' "$work/plan" && grep -q '^rank 1=n1 slot=2-3$' "$work/rf" && [ -n "$got" ] && [ "$got" = "$want" ]; then
  ok "ompi5 mpirun on nodes whose logical and OS CPU numbers differ: the rankfile's logical slots bind each rank as lama planned"
else not_ok "ompi5 rankfile on a node whose numbers differ" "got:" "$got" "want (the plan's CPUs that exist here):" "$want" "$(cat "$work/plan" "$work/rf" "$work/out" "$work/err")"; fi

# The job's TASK_MAP: the rankfile's comment carries the ranks' map, which mpirun -x passes on.
use_mpi ompi5
timeout -s KILL 120 salloc -N3 -n6 env "${lib_env[@]}" bash -c "'$lama' plan --from-slurm --map nbsch --bind 1c --format rankfile --output '$work/rf' &&
  mpirun --map-by rankfile:file='$work/rf' --use-hwthread-cpus \
    -x TASK_MAP=\"\$(sed -n 's/^# TASK_MAP=//p' '$work/rf')\" '$work/probe.ompi5'" >"$work/out" 2>&1
bad=""
while read -r _ rank _ _ _ _ _ host _ _ _ _ _ _ _ _ _ members _ map; do
  node=${host#n}
  taskids=$("$lama" taskmap --taskids="$((node - 1))" "$map" 2>&1)
  [ "$(expand "$taskids")" = "$members" ] || bad+="rank $rank on $host: node-local ranks $members, its TASK_MAP says $taskids; "
done < <(grep '^rank ' "$work/out")
if [ "$(grep -c '^rank ' "$work/out")" = 6 ] && [ -z "$bad" ]; then
  ok "ompi5: the rankfile's TASK_MAP, passed with mpirun -x, names each rank's node-local ranks"
else not_ok "rankfile TASK_MAP" "$bad" "$(cat "$work/out")"; fi

# The daemons' step is left alone whatever asked lama to place: options given to salloc (they
# reach the launcher's srun), SLURM_LAMA_* variables, or the site's policy=auto. Every rank then
# runs where the launcher put it, unbound here (each launcher's own binding is off), with no
# lama variable; node 0 says so once. (Open MPI passes its daemons' stderr on only when asked to
# be verbose about launching them.)
declare -A plain=([openmpi]="mpirun --mca plm_base_verbose 5 --bind-to none" [ompi5]="mpirun --prtemca plm_base_verbose 5 --bind-to none"
  [mpich]=mpiexec.mpich [mpich5]=mpiexec [impi]="env I_MPI_PIN=0 mpiexec.hydra")
all_cpus=0-$(($(nproc) - 1))
# Each launcher starts one step, its daemons' (slurmd's log names every step it launches).
daemon_case() {
  local lib=$1 how=$2 out job steps
  shift 2
  use_mpi "$lib"
  # Into a file, not a pipe: a launcher left running after its ranks ended (Open MPI 5's prterun
  # was seen waiting on its daemons for good, its salloc killed by the timeout) then holds no pipe
  # open, and the job it held is cancelled so that the next case gets the nodes. A case takes a
  # few seconds: 45 s is ample, and a hung prterun costs no more than that.
  timeout -s KILL 45 env "$@" salloc -N3 -n6 $salloc_args env "${lib_env[@]}" ${plain[$lib]} -n 6 \
    bash -c 'echo "rank-env ${TASK_MAP:-none} ${LAMA_CPUS:-none} ${OMP_NUM_THREADS:-none} $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status)"' >"$work/daemon.out" 2>&1
  out=$(cat "$work/daemon.out")
  job=$(sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p' <<<"$out")
  if [ -n "$job" ] && squeue -h -t R -j "$job" 2>/dev/null | grep -q .; then
    echo "# $lib with $how: the launcher had not ended after 45 s; job $job cancelled"
    scancel "$job"
    pkill -KILL -x prterun 2>/dev/null || true
  fi
  steps=$(grep -c "launch task StepId=${job:-none}\." "$LAMA_SANDBOX/log/slurmd-n1.log")
  if [ "$(grep -c "runs ${daemon[$lib]}" <<<"$out")" = 1 ] && [ "$(grep -c "^rank-env none none none $all_cpus$" <<<"$out")" = 6 ] && [ "$steps" = 1 ]; then
    ok "$lib ${launcher[$lib]} with $how: its one step, the daemons', is neither placed nor given lama's variables, said once"
  else not_ok "$lib daemon step with $how ($steps steps on n1)" "$out"; fi
}
for lib in "${mpi_libs[@]}"; do
  salloc_args="--lama-map=csbnh --lama-bind=1c" daemon_case "$lib" "salloc --lama-map --lama-bind"
  salloc_args="" daemon_case "$lib" "SLURM_LAMA_MAP and SLURM_LAMA_BIND" SLURM_LAMA_MAP=csbnh SLURM_LAMA_BIND=1c
done
plugstack "required $plugin policy=auto"
for lib in "${mpi_libs[@]}"; do
  salloc_args="" daemon_case "$lib" "the site's policy=auto"
done
plugstack "required $plugin"
use_mpi none

# Under ConstrainCores, Open MPI 5's daemon counts only the job's CPUs: with CPU 0 of every node
# held by another job, this job's CPU 1 is slot 0 (slot 1 names nothing and is refused).
cluster LAMA_SANDBOX_CGROUP=1
hog=$(sbatch --parsable -o /dev/null -N3 -n3 --wrap 'sleep 120')
for _ in $(seq 50); do [ "$(squeue -h -j "$hog" -o %T)" = RUNNING ] && break; sleep 0.2; done
use_mpi ompi5
timeout -s KILL 120 salloc -N3 -n3 env "${lib_env[@]}" bash -c \
  "'$lama' plan --from-slurm --map csbnh --bind 1c > '$work/plan' &&
   '$lama' plan --from-slurm --map csbnh --bind 1c --format rankfile --output '$work/rf' &&
   mpirun --map-by rankfile:file='$work/rf' --use-hwthread-cpus '$work/probe.ompi5'" >"$work/out" 2>"$work/err"
scancel "$hog"
want=$(plan_hosts < "$work/plan")
got=$(awk '$1 == "rank" {print $2, $8, $14}' "$work/out" | sort -n)
if [ "$(awk '{print $3}' <<<"$want" | sort -u)" = 1 ] && grep -q '^rank 0=n1 slot=0$' "$work/rf" && [ "$got" = "$want" ]; then
  ok "ompi5 mpirun under ConstrainCores, the job on CPU 1 of each node: slot 0 is that CPU, every rank bound as planned"
else not_ok "ompi5 rankfile under ConstrainCores" "got:" "$got" "want:" "$want" "$(cat "$work/rf" "$work/out" "$work/err")"; fi
use_mpi none

# Outside an allocation, --from-slurm says where it runs.
out=$(env -u SLURM_JOB_ID "$lama" plan --from-slurm 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "inside salloc or sbatch" <<<"$out"; then ok "lama plan --from-slurm outside a job: refused, says why"
else not_ok "--from-slurm outside a job (rc $rc)" "$out"; fi
done_testing
