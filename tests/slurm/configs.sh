#!/usr/bin/env bash
# The configurations sites run, on the real sandbox cluster: task/affinity with task/cgroup and
# --cpu-bind, steps sharing nodes, heterogeneous jobs, --hint / --threads-per-core / -c, GPUs
# through GRES with ConstrainDevices, and a plugin built for another Slurm release.
# Usage: tests/slurm/configs.sh LAMA_BINARY PLUGIN_SO [OTHER_RELEASE_PLUGIN_SO]
#   (restarts the cluster; the caller stops it). Expected bindings come from `lama plan` or
#   hwloc's own hwloc-calc; expected GPUs and task maps are worked out by hand in the comments.
# Prints one "ok - ..." or "not ok - ..." line per case, with the evidence under a failure.
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"
other=${3:-}

# Each task writes one line: rank, node, affinity, cgroup cpuset, LAMA_CPUS, TASK_MAP, the CPUs
# SLURM_CPU_BIND says it has (its own mask, as a list), and the node TASK_MAP gives its rank.
cat > "$work/task.sh" <<EOF
aff=\$(awk '/^Cpus_allowed_list/ {print \$2}' /proc/self/status)
cg=\$(awk -F: '\$2 == "cpuset" {print \$3}' /proc/self/cgroup)
set=\$(cat "/sys/fs/cgroup/cpuset\$cg/cpuset.cpus" 2>/dev/null || echo none)
said=none
if [ "\${SLURM_CPU_BIND_TYPE:-}" = mask_cpu: ]; then
  IFS=, read -ra masks <<<"\$SLURM_CPU_BIND_LIST"
  m=\$((\${masks[\$SLURM_LOCALID]})) said=""
  for ((c = 0; m > 0; c++, m >>= 1)); do ((m & 1)) && said+="\$c,"; done
  said=\${said%,}
  said=\${said:-none}
fi
decoded=\$("$lama" taskmap --nodeid="\$SLURM_PROCID" 2>/dev/null || echo none)
echo "\$SLURM_PROCID \$SLURM_NODEID \$aff \$set \${LAMA_CPUS:-none} \${TASK_MAP:-none} \$said \$decoded \${1:-}"
EOF
# Whether every CPU of list $1 is in list $2.
inside() { local a b; a=$(expand "$1" | tr , '\n'); b=$(expand "$2" | tr , '\n'); [ -z "$(comm -23 <(sort <<<"$a") <(sort <<<"$b"))" ]; }

# Every task of `srun $1` is bound as `lama plan $2` says, inside its cgroup's cpuset, with
# SLURM_CPU_BIND describing that binding (when Slurm's task plugin set it).
bound_as_planned() {
  local name=$1 srun_args=$2 plan_args=$3 got want bad="" sets=0
  got=$(run $srun_args bash "$work/task.sh" 2>"$work/err" | sort -n)
  want=$(plan_lines $plan_args)
  while read -r rank _ aff set _ _ said _; do
    [ "$set" = none ] || { sets=$((sets + 1)); inside "$aff" "$set" || bad+="task $rank bound to $aff outside its cpuset $set; "; }
    [ "$said" = none ] || [ "$(expand "$said")" = "$(expand "$aff")" ] || bad+="task $rank: SLURM_CPU_BIND says $said, bound to $aff; "
  done <<<"$got"
  # Without a cgroup cpuset (task/affinity alone) there is no cpuset to hold the binding against.
  local where="inside the step's cpuset"
  [ "$sets" -gt 0 ] || where="(no cgroup cpuset in this configuration)"
  if [ -n "$got" ] && [ "$(awk '{print $1, $2, $3}' <<<"$got")" = "$want" ] && [ -z "$bad" ]; then
    ok "$name: bound as lama plan says, $where"
  else not_ok "$name" "srun $srun_args" "got (rank node affinity cpuset lama map cpu-bind):" "$got" \
    "want (lama plan $plan_args):" "$want" "$bad" "$(cat "$work/err")"; fi
}


# Backfill every second: the heterogeneous jobs below wait for it (every 30 s by default).
cluster LAMA_SANDBOX_CGROUP=1 LAMA_SANDBOX_CONF_EXTRA=SchedulerParameters=bf_interval=1
release=$(srun --version | awk '{print $2}')
echo "# Slurm $release: TaskPlugin=task/affinity,task/cgroup with ConstrainCores=yes (real cores)"
n=$(nproc)
bound_as_planned "affinity+cgroup, block csbnh 1c" "-N3 -n$((3 * n)) --lama-map=csbnh --lama-bind=1c" \
  "--this-machine --nodes 3 --map csbnh --bind 1c --np $((3 * n))"
# lama's binding replaces a --cpu-bind granularity (task_init runs after Slurm's task plugin);
# an explicit binding beside a lama option is refused in srun (tests/slurm/beside.sh).
for cb in sockets cores; do
  bound_as_planned "affinity+cgroup, --cpu-bind=$cb with --lama-map=ncsbh --lama-bind=1c: lama wins" \
    "-N3 -n$((3 * n)) -m cyclic --cpu-bind=$cb --lama-map=ncsbh --lama-bind=1c" \
    "--this-machine --nodes 3 --map ncsbh --bind 1c --np $((3 * n))"
done
refused "affinity+cgroup, --cpu-bind=map_cpu:$((n - 1)),0 with --lama-map=ncsbh" "--cpu-bind=map_cpu and --lama-map cannot be used together" \
  -N3 -n$((3 * n)) -m cyclic --cpu-bind=map_cpu:$((n - 1)),0 --lama-map=ncsbh --lama-bind=1c
# Without --lama options Slurm's own binding is untouched: the same affinities and SLURM_CPU_BIND
# with the plugin as without it.
for cb in "" "--cpu-bind=cores" "--cpu-bind=sockets" "--cpu-bind=map_cpu:$((n - 1)),0"; do
  with=$(run -N3 -n$((3 * n)) $cb bash "$work/task.sh" 2>/dev/null | awk '{print $1, $2, $3, $4, $7}' | sort -n)
  plugstack ""
  without=$(run -N3 -n$((3 * n)) $cb bash "$work/task.sh" 2>/dev/null | awk '{print $1, $2, $3, $4, $7}' | sort -n)
  plugstack "required $plugin"
  if [ -n "$with" ] && [ "$with" = "$without" ]; then ok "affinity+cgroup, no --lama option${cb:+, $cb}: Slurm's binding untouched"
  else not_ok "affinity+cgroup, no --lama option $cb: binding differs" "with:" "$with" "without:" "$without"; fi
done

echo "# Slurm $release: steps sharing a node"
# Two steps at once in one allocation of one node, each with one task on its own CPUs (--exact):
# each binds inside its own cpuset, the two differ, and each TASK_MAP is one task on one node.
out=$(timeout 120 salloc -N1 -n"$n" bash -c "
  srun -n1 --exact --lama-map=csbnh --lama-bind=1c bash -c 'bash $work/task.sh A; sleep 3' & sleep 1
  srun -n1 --exact --lama-map=csbnh --lama-bind=1c bash '$work/task.sh' B; wait" 2>/dev/null)
read -r _ _ affA setA _ mapA _ _ _ <<<"$(grep ' A$' <<<"$out")"
read -r _ _ affB setB _ mapB _ _ _ <<<"$(grep ' B$' <<<"$out")"
one='{"version":1,"map":[[0,1,1,1]]}'
if [ -n "${affA:-}" ] && [ -n "${affB:-}" ] && [ "$affA" = "$setA" ] && [ "$affB" = "$setB" ] && [ "$setA" != "$setB" ] \
  && [ "$mapA" = "$one" ] && [ "$mapB" = "$one" ]; then
  ok "two steps at once (--exact): bound to $affA and $affB, each inside its own cpuset, each TASK_MAP one task"
else not_ok "two steps at once" "$out"; fi
# --overlap: a second step over the same CPUs while the first runs; each places its own tasks
# as lama plan does for one node, and its TASK_MAP is its own (n tasks on one node).
out=$(timeout 120 salloc -N1 -n"$n" bash -c "
  srun -n$n --lama-map=csbnh --lama-bind=1c bash -c 'bash $work/task.sh C; sleep 2' & sleep 1
  srun --overlap -n$n --lama-map=csbnh --lama-bind=1c bash '$work/task.sh' D; wait" 2>/dev/null)
want=$(plan_lines --this-machine --map csbnh --bind 1c --np "$n" | awk '{print $1, $3}')
mapn="{\"version\":1,\"map\":[[0,1,$n,1]]}"
good=1
for s in C D; do
  [ "$(awk -v s=$s '$NF == s {print $1, $3}' <<<"$out" | sort -n)" = "$want" ] || good=0
  [ "$(awk -v s=$s '$NF == s {print $6}' <<<"$out" | sort -u)" = "$mapn" ] || good=0
done
if [ $good = 1 ]; then ok "--overlap: both steps bound as lama plan says for their own tasks, each with its own TASK_MAP"
else not_ok "--overlap steps" "$out" "want per step (rank cpus):" "$want" "TASK_MAP $mapn"; fi

echo "# Slurm $release: a heterogeneous job (srun ... : ...)"
# Component 0: 2 tasks on n1; component 1: 3 tasks on n2 (2) and n3 (1). SLURM_PROCID and
# SLURM_NODEID span the step: tasks 0-1 on node 0, 2-3 on node 1, 4 on node 2, so its TASK_MAP is
# [[0,2,2,1],[2,1,1,1]]. On each node the component's tasks are placed as lama plan places that
# many tasks on one node.
out=$(run -N1 -n2 --lama-map=csbnh --lama-bind=1c bash "$work/task.sh" : \
  -N2 -n3 --lama-map=csbnh --lama-bind=1c bash "$work/task.sh" 2>"$work/err" | sort -n)
p2=$(plan_lines --this-machine --map csbnh --bind 1c --np 2 | awk '{print $3}' | tr '\n' ' ')
p1=$(plan_lines --this-machine --map csbnh --bind 1c --np 1 | awk '{print $3}')
read -r a0 a1 <<<"$p2"
want="0 0 $a0
1 0 $a1
2 1 $a0
3 1 $a1
4 2 $p1"
hmap='{"version":1,"map":[[0,2,2,1],[2,1,1,1]]}'
if [ "$(awk '{print $1, $2, $3}' <<<"$out")" = "$want" ] && [ "$(awk '{print $6}' <<<"$out" | sort -u)" = "$hmap" ] \
  && [ "$(awk '$2 == $8' <<<"$out" | wc -l)" -eq 5 ]; then
  ok "heterogeneous step: each component placed on its own nodes, TASK_MAP covers the whole step"
else not_ok "heterogeneous step" "got (rank node affinity cpuset lama map cpu-bind decoded):" "$out" "want:" "$want" "TASK_MAP $hmap" "$(cat "$work/err")"; fi
# One component of a heterogeneous allocation: the step is that component alone (n2 2, n3 1).
out=$(timeout 120 salloc -N1 -n2 : -N2 -n3 srun --het-group=1 --lama-map=csbnh --lama-bind=1c \
  bash "$work/task.sh" 2>/dev/null | sort -n)
gmap='{"version":1,"map":[[0,1,2,1],[1,1,1,1]]}'
if [ "$(awk '{print $1, $2}' <<<"$out" | tr '\n' ' ')" = "0 0 1 0 2 1 " ] && [ "$(awk '{print $6}' <<<"$out" | sort -u)" = "$gmap" ]; then
  ok "srun --het-group=1: TASK_MAP is that component's step"
else not_ok "srun --het-group=1" "$out" "want TASK_MAP $gmap"; fi

echo "# Slurm $release: --hint=nomultithread, --threads-per-core, -c on nodes declared as a 2x8x2 Intel XML"
x1=$top/tests/topologies/32em64t-2n8c2t-pci-normalio.xml
cluster LAMA_SANDBOX_TOPOLOGY="$x1"
plugstack "required $plugin topology=$x1"
# 16 tasks of one core each take the whole node; without hyperthreads lama places on the first
# hardware thread of each core, the set hwloc-calc gives.
first=$(hwloc-calc -i "$x1" --physical-output --intersect pu core:all.pu:0)
for hint in --hint=nomultithread --threads-per-core=1; do
  got=$(run -N1 -n16 $hint --lama-map=csbnh --lama-bind=1c bash "$work/task.sh" 2>"$work/err" | awk '{print $1, $2, $5}' | sort -n)
  want=$(plan_lines --topology "$x1" --restrict "$first" --map csbnh --bind 1c --np 16)
  if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "$hint: one hardware thread per core ($first), as lama plan --restrict says"
  else not_ok "$hint" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
done
# A step's own --hint=multithread inside a --hint=nomultithread job: the job's
# SLURM_THREADS_PER_CORE=1 stays in the step's environment (srun drops its value without
# replacing it), and must not be read as the step's. The step's 4 cores (2 tasks x -c4, both
# threads) go two to each task, both hardware threads (hwloc-calc's PUs of those cores); a plain
# step of the same job keeps the job's one thread per core. Marker variable gone from the tasks.
cores_pus() { hwloc-calc -i "$x1" --physical-output --intersect pu "core:$1" | tr , '\n' | sort -n | paste -sd, -; }
steps="
  srun -n2 -c4 --hint=multithread --lama-map=csbnh --lama-bind=2c bash -c 'echo multi \$SLURM_PROCID \$LAMA_CPUS \${LAMA_STEP_THREADS:-gone}'
  srun -n2 -c4 --lama-map=csbnh --lama-bind=2c bash -c 'echo plain \$SLURM_PROCID \$LAMA_CPUS'"
for how in salloc sbatch; do
  if [ $how = salloc ]; then
    out=$(timeout 120 salloc -N1 -w n1 -n2 -c4 --hint=nomultithread bash -c "$steps" 2>"$work/err")
  else
    sbatch_wait -N1 -w n1 -n2 -c4 --hint=nomultithread -o "$work/hint.out" --wrap "$steps" >/dev/null 2>"$work/err"
    out=$(cat "$work/hint.out")
  fi
  got=""
  while read -r _ t cpus marker; do got+="$t $(expand "$cpus") $marker"$'\n'; done < <(grep '^multi ' <<<"$out" | sort -k2n)
  while read -r _ t cpus; do got+="plain $t $(expand "$cpus")"$'\n'; done < <(grep '^plain ' <<<"$out" | sort -k2n)
  want="0 $(cores_pus 0-1) gone"$'\n'"1 $(cores_pus 2-3) gone"$'\n'"plain 0 $(cores_pus 0-1.pu:0)"$'\n'"plain 1 $(cores_pus 2-3.pu:0)"$'\n'
  if [ "$got" = "$want" ]; then ok "$how --hint=nomultithread, srun --hint=multithread: both hardware threads of each core (the job's stale SLURM_THREADS_PER_CORE ignored); a plain step keeps one"
  else not_ok "srun --hint=multithread inside a $how --hint=nomultithread job" "got:" "$got" "want:" "$want" "$out" "$(cat "$work/err")"; fi
done
# -c decides the step's CPUs (4 tasks x 8 = the node), --lama-bind each task's width (2 cores).
got=$(run -N1 -n4 -c8 --lama-map=scbnh --lama-bind=2c bash "$work/task.sh" 2>"$work/err" | awk '{print $1, $2, $5}' | sort -n)
want=$(plan_lines --topology "$x1" --map scbnh --bind 2c --np 4)
if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "-c8 with --lama-bind=2c: 2 cores per task, as lama plan says"
else not_ok "-c8 --lama-bind=2c" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi

echo "# Slurm $release: settings from the environment (SLURM_LAMA_*): command line > environment > plugstack.conf"
plugstack "required $plugin topology=$x1 map=csbnh bind=1c"
want=$(plan_lines --topology "$x1" --map scbnh --bind 2c --np 4)
got=$(SLURM_LAMA_MAP=scbnh SLURM_LAMA_BIND=2c run -N1 -n4 -c8 bash "$work/task.sh" 2>"$work/err" | awk '{print $1, $2, $5}' | sort -n)
if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "SLURM_LAMA_MAP and SLURM_LAMA_BIND replace plugstack.conf's map= and bind="
else not_ok "environment over plugstack.conf" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
got=$(SLURM_LAMA_MAP=scbnh SLURM_LAMA_BIND=1c run -N1 -n4 -c8 --lama-bind=2c bash "$work/task.sh" 2>"$work/err" | awk '{print $1, $2, $5}' | sort -n)
if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "--lama-bind=2c on the command line wins over SLURM_LAMA_BIND=1c"
else not_ok "command line over environment" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
out=$(SLURM_LAMA_MAP=csbnq run -N2 -n4 bash -c 'echo TASK-RAN' 2>&1); rc=$?
if [ $rc -ne 0 ] && [ "$(grep -c "invalid SLURM_LAMA_MAP 'csbnq'" <<<"$out")" = 1 ] && ! grep -q TASK-RAN <<<"$out"; then
  ok "a bad SLURM_LAMA_MAP stops the step in srun, said once, naming the variable"
else not_ok "bad SLURM_LAMA_MAP (rc $rc)" "$out"; fi
# A variable that is not UTF-8 (any of the user's) does not disturb srun's reading of the others.
out=$(LAMA_TEST_BYTES=$'\xff\xfe' SLURM_LAMA_BIND=1c run -N1 -n1 bash -c 'echo "lama ${LAMA_CPUS:-none}"' 2>&1)
if grep -q '^lama [0-9]' <<<"$out"; then ok "an environment variable that is not UTF-8 beside SLURM_LAMA_BIND: the step runs, placed"
else not_ok "non-UTF-8 environment" "$out"; fi
out=$(SLURM_LAMA_OFF=1 run -N1 -n1 bash -c 'echo "${TASK_MAP:-none} ${LAMA_CPUS:-none}"' 2>&1)
over=$(SLURM_LAMA_OFF=1 run -N1 -n1 --lama-bind=1c bash -c 'echo "${LAMA_CPUS:-none}"' 2>&1)
if [ "$out" = "none none" ] && [[ $over =~ ^[0-9] ]]; then ok "SLURM_LAMA_OFF=1: no TASK_MAP and no placement, unless the command line asks"
else not_ok "SLURM_LAMA_OFF" "$out" "$over"; fi
# A nested srun inside a placed task: lama's own variables describe the outer task and are not
# passed on; SLURM_LAMA_* settings are, and the nested step follows them.
nested='echo "outer ${LAMA_CPUS:-none}"; srun --overlap -N1 -n1 bash -c "echo inner \${LAMA_CPUS:-none}"'
out=$(run -N1 -n1 -c2 --lama-bind=1c bash -c "$nested" 2>&1)
env_out=$(SLURM_LAMA_BIND=1c run -N1 -n1 -c2 bash -c "$nested" 2>&1)
if grep -q '^outer [0-9]' <<<"$out" && grep -q '^inner none$' <<<"$out" && grep -q '^inner [0-9]' <<<"$env_out"; then
  ok "nested srun: the outer task's LAMA_CPUS is not inherited; SLURM_LAMA_BIND is, and places the inner step"
else not_ok "nested srun" "$out" "$env_out"; fi

echo "# Slurm $release: GPUs through GRES (4 fake GPUs per node, ConstrainDevices=yes), nodes declared as the POWER8 XML"
x3=$top/tests/topologies/power8gpudistances.xml
cluster LAMA_SANDBOX_TOPOLOGY="$x3" LAMA_SANDBOX_GPUS=4 LAMA_SANDBOX_CONSTRAIN_DEVICES=1
plugstack "required $plugin topology=$x3"
# Each task reports its GPU variables and which fake devices it may open (the device cgroup
# answers EPERM for the others; an allowed fake device answers ENXIO, having no driver).
cat > "$work/gpu.sh" <<EOF
open=""
for f in $LAMA_SANDBOX/dev/nvidia*; do
  case \$( (exec 3<"\$f") 2>&1 ) in *"not permitted"*) ;; *) open+="\${f##*nvidia},";; esac
done
echo "\$SLURM_PROCID \${CUDA_VISIBLE_DEVICES:-none} \${SLURM_STEP_GPUS:-none} \${LAMA_GPUS:-none} \${open%,}"
EOF
step="-N1 -w n1 -n2 --ntasks-per-socket=1 -c2 --gres=gpu:2"
timeout 120 salloc -N1 -w n1 -n1 --gres=gpu:1 sleep 20 >/dev/null 2>&1 &
holder=$!
for _ in $(seq 1 50); do [ "$(squeue -h -t R | wc -l)" -ge 1 ] && break; sleep 0.2; done
# GPU 0 is held by another job, so Slurm gives the step GPUs 1 and 2, numbered as it exports them
# (without lama's choice). The POWER8 has cuda0-1 on package 0 and cuda2-3 on package 1: the task
# on socket 0 gets cuda1, the one on socket 1 cuda2, each written as Slurm wrote that GPU.
slurm=$(run $step --lama-off bash "$work/gpu.sh" 2>/dev/null | sort -n)
read -r _ cvd hw _ open <<<"$(head -n 1 <<<"$slurm")"
entry() { local -a c h; IFS=, read -ra c <<<"$cvd"; IFS=, read -ra h <<<"$hw"; for i in "${!h[@]}"; do [ "${h[i]}" = "$1" ] && echo "${c[i]}"; done; }
got=$(run $step --lama-map=scbnh --lama-bind=1c --lama-gpus=1 bash "$work/gpu.sh" 2>"$work/err" | sort -n)
want="0 $(entry 1) $hw cuda1 $open
1 $(entry 2) $hw cuda2 $open"
if [ "$hw" = "1,2" ] && [ "$got" = "$want" ]; then
  ok "GRES --gres=gpu:2 beside a job holding GPU 0: each task gets the nearest of the step's GPUs 1,2 (CUDA_VISIBLE_DEVICES as Slurm numbers them: $cvd)"
else not_ok "GRES nearest of the step's GPUs" "Slurm alone (rank cvd step_gpus lama openable):" "$slurm" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
if [ "$open" = "1,2" ]; then ok "GRES with ConstrainDevices: the step's tasks may open GPUs 1,2 only"
else not_ok "ConstrainDevices does not confine the step to GPUs 1,2 (openable: ${open:-?})" "$slurm"; fi
# --lama-gpu-visibility=all: each task sees both of the step's GPUs, its nearest first (as Slurm
# wrote each), LAMA_GPUS still its own; the device cgroup is Slurm's, unchanged.
visibility_case() {
  local how=$1 got want
  got=$(run $step --lama-map=scbnh --lama-bind=1c --lama-gpus=1 "${@:2}" bash "$work/gpu.sh" 2>"$work/err" | sort -n)
  want="0 $(entry 1),$(entry 2) $hw cuda1 $open
1 $(entry 2),$(entry 1) $hw cuda2 $open"
  if [ "$hw" = "1,2" ] && [ "$got" = "$want" ]; then
    ok "GRES $how: every task sees the step's GPUs 1,2, its nearest first; LAMA_GPUS its own"
  else not_ok "GRES $how" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
}
visibility_case "--lama-gpu-visibility=all" --lama-gpu-visibility=all
SLURM_LAMA_GPU_VISIBILITY=all visibility_case "SLURM_LAMA_GPU_VISIBILITY=all in the environment"
# Without --lama-gpus Slurm's GPU variables are untouched.
got=$(run $step --lama-map=scbnh --lama-bind=1c bash "$work/gpu.sh" 2>/dev/null | sort -n)
if [ -n "$got" ] && [ "$got" = "$slurm" ]; then ok "GRES without --lama-gpus: Slurm's GPU variables untouched"
else not_ok "GRES without --lama-gpus" "got:" "$got" "want:" "$slurm"; fi
wait "$holder" 2>/dev/null
refused "GRES: more GPUs per task than the step was given" "2 GPU(s) per task asked for, but the job was given 1" \
  -N1 -n1 --gres=gpu:1 --lama-gpus=2
# Per-task GPUs: Slurm's per-task variables do not name the step's GPUs reliably (on 26.05 a task
# may open GPU 2 while its SLURM_STEP_GPUS says 1), so lama refuses rather than guess. Which rule
# refuses depends on the release (22.05 exports no --gpus-per-task marker, and no GPU variables
# at all with --gpu-bind=none); each says why and that lama cannot choose.
refused "GRES: --gpus-per-task with --lama-gpus" "so lama cannot choose among them" \
  -N1 -n2 --gpus-per-task=1 --lama-gpus=1
refused "GRES: --gpus-per-task --gpu-bind=none with --lama-gpus" "so lama cannot choose among them" \
  -N1 -n2 --gpus-per-task=1 --gpu-bind=none --lama-gpus=1
refused "GRES: --gpu-bind=single:1 with --lama-gpus" "Slurm binds GPUs task by task" \
  -N1 -n2 --gres=gpu:2 --gpu-bind=single:1 --lama-gpus=1
refused "bad --lama-gpu-visibility" "invalid --lama-gpu-visibility 'some'; valid: own" \
  -N1 -n1 --lama-gpus=1 --lama-gpu-visibility=some

echo "# Slurm $release: GPUs through GRES without ConstrainDevices (every task may open every GPU)"
cluster LAMA_SANDBOX_TOPOLOGY="$x3" LAMA_SANDBOX_GPUS=4
plugstack "required $plugin topology=$x3"
step="-N1 -w n1 -n2 --ntasks-per-socket=1 -c2 --gres=gpu:4"
slurm=$(run $step --lama-off bash "$work/gpu.sh" 2>/dev/null | sort -n)
read -r _ cvd hw _ open <<<"$(head -n 1 <<<"$slurm")"
# The POWER8's GPUs cuda0-1 are on package 0, cuda2-3 on package 1: with two GPUs per task the
# task on socket 0 gets 0,1 and sees 0,1,2,3; the one on socket 1 gets 2,3 and sees 2,3,0,1.
got=$(run $step --lama-map=scbnh --lama-bind=1c --lama-gpus=2 --lama-gpu-visibility=all bash "$work/gpu.sh" 2>"$work/err" | sort -n)
want="0 $(entry 0),$(entry 1),$(entry 2),$(entry 3) $hw cuda0,cuda1 $open
1 $(entry 2),$(entry 3),$(entry 0),$(entry 1) $hw cuda2,cuda3 $open"
if [ "$hw" = "0,1,2,3" ] && [ "$got" = "$want" ]; then
  ok "GRES without ConstrainDevices, --lama-gpu-visibility=all: each task sees all 4 GPUs, its own 2 first"
else not_ok "GRES without ConstrainDevices, visibility all" "Slurm alone:" "$slurm" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
# A stale GPU binding from the job: salloc --gpu-bind=closest exports SLURM_GPU_BIND=closest,
# which srun reads as its option unless its own command line says otherwise. srun's own
# --gpu-bind=none is the step's, so srun does not refuse --lama-gpus on the job's value (it did).
# 26.05 then names the step's GPUs and each task gets one; 22.05's --gpu-bind=none names none,
# which the node says.
# What the step's --gpu-bind=none gives, by release: from 23.11 on each task a GPU; 22.05's step
# names no GPU, which the node says.
gpu_bind_none_ok() {
  if [ "$(printf '%s\n' "$(srun --version | awk '{print $2}')" 23.11 | sort -V | head -n 1)" = 23.11 ]; then
    [ "$(grep -c '^gpu [01] cuda[0-3]$' <<<"$1")" = 2 ]
  else
    grep -q 'lama: error: task [01] on n1: Slurm gave the step 2 GPU(s) on this node but did not say which' <<<"$1"
  fi
}
out=$(timeout 120 salloc -N1 -w n1 -n2 --gres=gpu:2 --gpu-bind=closest srun --gpu-bind=none --lama-gpus=1 --lama-map=scbnh --lama-bind=1c bash -c 'echo "gpu $SLURM_PROCID ${LAMA_GPUS:-none}"' 2>&1)
if ! grep -q 'srun: error: lama: --lama-gpus' <<<"$out" &&
  gpu_bind_none_ok "$out"; then
  ok "salloc --gpu-bind=closest, srun --gpu-bind=none --lama-gpus=1: the step's own binding wins over the job's SLURM_GPU_BIND"
else not_ok "salloc --gpu-bind=closest, srun --gpu-bind=none --lama-gpus=1" "$out"; fi
sbatch_wait -N1 -w n1 -n2 --gres=gpu:2 --gpu-bind=closest -o "$work/gpubind.out" \
  --wrap "srun --gpu-bind=none --lama-gpus=1 --lama-map=scbnh --lama-bind=1c bash -c 'echo \"gpu \$SLURM_PROCID \${LAMA_GPUS:-none}\"'" >/dev/null 2>&1
out=$(cat "$work/gpubind.out")
if ! grep -q 'srun: error: lama: --lama-gpus' <<<"$out" &&
  gpu_bind_none_ok "$out"; then
  ok "sbatch --gpu-bind=closest, srun --gpu-bind=none --lama-gpus=1: the step's own binding wins over the job's SLURM_GPU_BIND"
else not_ok "sbatch --gpu-bind=closest, srun --gpu-bind=none --lama-gpus=1" "$out"; fi

if [ -n "$other" ]; then
  echo "# Slurm $release: a plugin built for another release"
  plugstack "required $other"
  refused "plugin built for another Slurm release" "Incompatible Slurm plugin" -N1 -n1
  plugstack "required $plugin topology=$x3"
fi
done_testing
