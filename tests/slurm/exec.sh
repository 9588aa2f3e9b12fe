#!/usr/bin/env bash
# lama exec under the launchers the test command has, each rank's binding held against what the
# plugin gives the same request on the same nodes (srun --lama-*, in the same allocation):
# srun with no plugin loaded, Open MPI 4.1 and 5, MPICH 4 and 5 (Hydra) and Intel MPI's mpiexec,
# and a launcher of torchrun's contract (LOCAL_RANK, LOCAL_WORLD_SIZE, one worker per GPU) written
# here, on nodes declared with four GPUs. Then `lama plan --format srun`, run by srun with Slurm's
# own binding (task/affinity), binds as the plan says; and `--format pals`, which cannot run here,
# is held against PALS' grammar. Each rank prints its CPUs from /proc/self/status, its memory
# policy from /proc/self/numa_maps and the variables lama sets.
# Usage: tests/slurm/exec.sh LAMA_BINARY PLUGIN_SO   (restarts the cluster; the caller stops it)
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"

mpi_probes
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cluster LAMA_SANDBOX_TASK_PLUGIN=task/affinity
echo "# Slurm $(srun --version | awk '{print $2}'): lama exec under srun without the plugin and under MPI launchers"

# One line per rank: its global rank (the innermost launcher's), node, CPUs, and what lama set;
# then, given a program, that program in its place (an MPI probe, to see MPI_Init keep the CPUs).
cat > "$work/rank.sh" <<'EOF'
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${RANK:-${FLUX_TASK_RANK:-${SLURM_PROCID:-?}}}}}
pol=$(awk 'NR == 1 {print $2}' /proc/self/numa_maps)
echo "rank $r $(hostname) cpus=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status) lama=${LAMA_CPUS:-} omp=${OMP_NUM_THREADS:-}/${OMP_PLACES:-}/${OMP_PROC_BIND:-} gpus=${CUDA_VISIBLE_DEVICES:-} mems=${LAMA_MEMS:-} policy=$pol"
echo "map $r ${TASK_MAP:-none}"
[ $# = 0 ] || exec "$@"
EOF
ranks() { grep -E '^rank [0-9]+ [^ ]+ cpus=' | sort -n -k2; }
maps() { grep '^map ' | awk '{print $3}' | sort -u; }

# compare NAME REFERENCE_OUTPUT EXEC_OUTPUT [WANT_MAP]: each rank's line alike; TASK_MAP as the
# plugin's (srun, torchrun) or none (MPI launchers, whose ranks must not see an outer one).
compare() {
  local name=$1 ref=$2 got=$3 want_map=${4:-} r g bad=""
  r=$(ranks <<<"$ref"); g=$(ranks <<<"$got")
  [ -n "$r" ] || bad+="the plugin's step printed no rank; "
  [ "$r" = "$g" ] || bad+="ranks differ; "
  case $want_map in
    none) [ "$(maps <<<"$got")" = none ] || bad+="TASK_MAP $(maps <<<"$got" | paste -sd' '), not none; " ;;
    "") [ "$(maps <<<"$got")" = "$(maps <<<"$ref")" ] || bad+="TASK_MAP $(maps <<<"$got" | paste -sd' '), the plugin's $(maps <<<"$ref" | paste -sd' '); " ;;
    *) [ "$(maps <<<"$got")" = "$want_map" ] || bad+="TASK_MAP $(maps <<<"$got" | paste -sd' '), not $want_map; " ;;
  esac
  if [ -z "$bad" ]; then ok "$name: every rank as the plugin places it ($(awk '{print $3, $5}' <<<"$g" | sed 's/lama=//' | paste -sd' '))"
  else not_ok "$name" "$bad" "the plugin's ranks:" "$r" "lama exec's:" "$g" "$got"; fi
}

# srun, the plugin loaded for the reference step and not for lama exec's (plugstack.conf is read
# anew by every step), in one allocation.
srun_case() {
  local name=$1 alloc=$2 opts=$3 exec_opts=$4 out
  wait_idle
  out=$(timeout -s KILL 120 salloc $alloc bash -c "
    srun $opts bash '$work/rank.sh' > '$work/ref' 2>&1
    '$top/contrib/sandbox.sh' plugstack '# no plugin'
    srun '$lama' exec $exec_opts -- bash '$work/rank.sh' > '$work/got' 2>&1
    '$top/contrib/sandbox.sh' plugstack 'required $plugin'" 2>&1)
  compare "srun without the plugin, $name" "$(cat "$work/ref")" "$(cat "$work/got")
$out"
}
srun_case "lama exec --map nbsch --bind 1c (-N3 -n6)" "-N3 -n6" "--lama-map=nbsch --lama-bind=1c" "--map nbsch --bind 1c"
srun_case "lama exec, the policy by default (-N3 -n3 -c2)" "-N3 -n3 -c2" "--lama-policy=auto" ""
srun_case "lama exec --map csbnh --bind 1c --mem local --threads 1 (-N1 -n2)" "-N1 -n2" \
  "--lama-map=csbnh --lama-bind=1c --lama-mem=local --lama-threads=1" "--map csbnh --bind 1c --mem local --threads 1"

# The node cache slurmd keeps serves lama exec as it serves the plugin.
out=$(timeout -s KILL 60 srun -N1 -n1 env LAMA_CACHE="$LAMA_SANDBOX/cache" "$lama" exec --verbose --map csbnh --bind 1c -- true 2>&1)
if grep -q "topology from the cache" <<<"$out"; then ok "lama exec reads the node cache slurmd wrote (LAMA_CACHE): $(grep -m1 'ranks' <<<"$out" | cut -c1-120)"
else not_ok "lama exec and the node cache" "$out"; fi

# Refusals: one line per rank at most, exit 2, naming the variable or the clash.
wait_idle
out=$(timeout -s KILL 60 srun -N1 -n1 env -u SLURM_LOCALID "$lama" exec -- true 2>&1); rc=$?
if [ $rc -ne 0 ] && [ "$(grep -c '^lama exec: ' <<<"$out")" = 1 ] && grep -q "none of LOCAL_RANK, .*SLURM_LOCALID is set" <<<"$out" &&
   grep -q "Exited with exit code 2" <<<"$out"; then
  ok "lama exec with no launcher's variables: refused in one line naming them, exit 2"
else not_ok "lama exec without a local rank (rc $rc)" "$out"; fi
wait_idle
out=$(timeout -s KILL 60 srun -N1 -n2 "$lama" exec --local-rank 0 --local-size 2 -- sleep 1 2>&1); rc=$?
# Both may find the other's claim (they start together): each refused says so in one line.
lines=$(grep -c '^lama exec: ' <<<"$out")
if [ $rc -ne 0 ] && [ "$lines" -ge 1 ] && [ "$lines" -le 2 ] &&
   [ "$(grep -c '^lama exec: local rank 0 is claimed by two ranks' <<<"$out")" = "$lines" ] && grep -q "Exited with exit code 2" <<<"$out"; then
  ok "two ranks of one srun step given the same --local-rank: refused ($lines of them, one line each), exit 2"
else not_ok "lama exec with a local rank claimed twice (rc $rc)" "$out"; fi

# Each MPI stack's launcher starts the ranks; srun --lama-* in the same allocation is the
# reference. Hydra's are told two ranks per node, as the allocation has.
declare -A start=([openmpi]="mpirun -n 6" [ompi5]="mpirun -n 6" [mpich]="mpiexec.mpich -n 6 -ppn 2"
  [mpich5]="mpiexec -n 6 -ppn 2" [impi]="mpiexec.hydra -n 6 -ppn 2")
for lib in "${mpi_libs[@]}"; do
  [ -x "$work/probe.$lib" ] || continue
  use_mpi "$lib"
  wait_idle
  timeout -s KILL 120 salloc -N3 -n6 env "${lib_env[@]}" bash -c "
    srun --lama-map=csbnh --lama-bind=1c --lama-mem=local --lama-threads=1 bash '$work/rank.sh' > '$work/ref' 2>&1
    ${start[$lib]} '$lama' exec --map csbnh --bind 1c --mem local --threads 1 -- bash '$work/rank.sh' '$work/probe.$lib' > '$work/got' 2>&1" >/dev/null 2>&1
  # MPI_Init must keep the CPUs lama exec bound (the probe's before and after).
  kept=$(awk '$1 == "rank" && $3 == "procid" && $12 != $14 {print "rank " $2 ": " $12 " -> " $14}' "$work/got")
  lib_line=$(grep -c "^library ${library[$lib]}" "$work/got")
  if [ -n "$kept" ] || [ "$lib_line" != 1 ]; then
    not_ok "$lib: lama exec under its launcher" "MPI_Init rebound: $kept" "library lines: $lib_line" "$(cat "$work/got")"
  else
    compare "$lib's launcher (${start[$lib]%% *}) running lama exec --map csbnh --bind 1c --mem local --threads 1, MPI_Init keeping the CPUs" \
      "$(cat "$work/ref")" "$(cat "$work/got")" none
  fi
done
use_mpi none

# --format srun: srun binds by its own options as the plan says (task/affinity binds them).
timeout -s KILL 120 salloc -N3 -n6 bash -c "
  '$lama' plan --from-slurm --map nbsch --bind 1c --mem local > '$work/plan' &&
  '$lama' plan --from-slurm --map nbsch --bind 1c --mem local --format srun --output '$work/srun.sh' &&
  '$top/contrib/sandbox.sh' plugstack '# no plugin' &&
  sh '$work/srun.sh' bash '$work/rank.sh' > '$work/got' 2>&1
  '$top/contrib/sandbox.sh' plugstack 'required $plugin'" >"$work/err" 2>&1
want=$(awk '/^node [0-9]+ / {h = $3; gsub(/[():]/, "", h)}
  /^  rank / { c = $NF; for (i = 1; i < NF; i++) if ($i == "cpus") c = $(i+1); print $2, h, c }' "$work/plan" | sort -n)
got=$(ranks < "$work/got" | awk '{sub("cpus=", "", $4); print $2, $3, $4}')
pols=$(ranks < "$work/got" | awk '{print $NF}' | sort -u)
if [ -n "$want" ] && [ "$got" = "$want" ] && [ "$pols" = "policy=bind:0" ]; then
  ok "lama plan --format srun: $(grep -c '^exec srun' "$work/srun.sh") srun line, every rank bound by srun as the plan says, memory bound to node 0 ($(sed -n 's/^exec srun //p' "$work/srun.sh" | cut -c1-110))"
else not_ok "lama plan --format srun" "want:" "$want" "got:" "$got" "policies: $pols" "$(cat "$work/srun.sh" "$work/got" "$work/err")"; fi

# Nodes declared with four GPUs (the plugin computes from the XML, and lama exec reads it through
# HWLOC_XMLFILE): a launcher of torchrun's contract starts one worker per GPU on each node.
xml=$top/tests/topologies/power8gpudistances.xml
cluster LAMA_SANDBOX_TOPOLOGY="$xml" LAMA_SANDBOX_GPUS=4
plugstack "required $plugin topology=$xml"
pus=$(hwloc-calc --if xml --input "$xml" -N pu all)
cat > "$work/torchrun.sh" <<'EOF'
# torchrun's contract, no more: NPROC workers per node, each with LOCAL_RANK, LOCAL_WORLD_SIZE,
# RANK, WORLD_SIZE, GROUP_RANK (the node) and a run id; started once per node by srun.
n=$1; shift
for ((i = 0; i < n; i++)); do
  LOCAL_RANK=$i LOCAL_WORLD_SIZE=$n GROUP_RANK=$SLURM_NODEID RANK=$((SLURM_NODEID * n + i)) \
    WORLD_SIZE=$((SLURM_NNODES * n)) TORCHELASTIC_RUN_ID=lama-test TORCHELASTIC_RESTART_COUNT=0 "$@" &
done
wait
EOF
# Four ranks share the whole node: the plugin's step holds every core, as the agent's does.
per=$((pus / 4))
out=$(timeout -s KILL 120 salloc -N2 --exclusive --gres=gpu:4 bash -c "
  srun -N2 --ntasks-per-node=4 -c $per --lama-policy=auto bash '$work/rank.sh' > '$work/ref' 2>&1
  '$top/contrib/sandbox.sh' plugstack '# no plugin'
  srun -N2 --ntasks-per-node=1 -c $pus --export=ALL,HWLOC_XMLFILE='$xml' bash '$work/torchrun.sh' 4 \
    '$lama' exec --cpus-per-rank $per -- bash '$work/rank.sh' > '$work/got' 2>&1" 2>&1)
compare "a launcher of torchrun's contract (4 workers per node, 4 GPUs each node) running lama exec, the policy" \
  "$(cat "$work/ref")" "$(cat "$work/got")
$out"

# --format pals cannot run here: its text against PALS' mpiexec grammar (--cpu-bind list:, each
# rank's CPUs a comma list of CPUs or ranges, ranks separated by ':'; --mem-bind list: alike),
# and its GPU chooser run as PALS would run it for each local rank.
"$lama" plan --topology "$xml" --nodes 2 --np 8 --map scbnh --bind 2c --gpus 1 --mem local \
  --nodelist n[1-2] --format pals --output "$work/pals.sh" 2>"$work/err"
line=$(grep '^exec mpiexec' "$work/pals.sh")
set='[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*'
bad=""
[[ $line =~ ^exec\ mpiexec\ -n\ 8\ --ppn\ 4\ --hosts\ n1,n2\ --cpu-bind\ list:$set(:$set){3}\ --mem-bind\ list:$set(:$set){3}\ \\$ ]] ||
  bad+="the mpiexec line does not follow the grammar: $line; "
chooser=$(sed -n "s/^  \/bin\/sh -c '\(.*\)' lama-gpus \"\$@\"$/\1/p" "$work/pals.sh")
for i in 0 1 2 3; do
  g=$(PALS_LOCAL_RANKID=$i sh -c "$chooser" lama-gpus sh -c 'echo ${CUDA_VISIBLE_DEVICES:-none}')
  w=$("$lama" plan --topology "$xml" --np 4 --map scbnh --bind 2c --gpus 1 | awk -v r=$i '$1 == "rank" && $2 == r {for (k = 1; k < NF; k++) if ($k == "gpus") print $(k+1)}' | sed 's/^cuda//')
  [ "$g" = "$w" ] || bad+="local rank $i: CUDA_VISIBLE_DEVICES=$g, the plan's GPU cuda$w; "
done
if [ -z "$bad" ]; then ok "lama plan --format pals: its mpiexec line follows PALS' grammar, and each local rank's GPU variable is the plan's (not run: no PALS here)"
else not_ok "lama plan --format pals" "$bad" "$(cat "$work/pals.sh" "$work/err")"; fi
done_testing
