#!/usr/bin/env bash
# The automatic policy on the real sandbox cluster: --lama-policy=auto and the site default
# policy=auto, on nodes declared as the POWER8 XML with 4 fake GPUs through GRES, for 1, 2, 4
# and 8 tasks per node, GPU and CPU-only steps, whole (--exclusive) and shared nodes; then
# --lama-mem=local on the machine's own topology, seen from inside the task.
# Usage: tests/slurm/policy.sh LAMA_BINARY PLUGIN_SO (restarts the cluster; the caller stops it).
# Expected placements are worked out by hand from the XML below, not from lama.
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"

x3=$top/tests/topologies/power8gpudistances.xml
cluster LAMA_SANDBOX_TOPOLOGY="$x3" LAMA_SANDBOX_GPUS=4 LAMA_SANDBOX_CONSTRAIN_DEVICES=1
plugstack "required $plugin topology=$x3"
release=$(srun --version | awk '{print $2}')
echo "# Slurm $release: the automatic policy on nodes declared as the POWER8 XML, 4 fake GPUs"
cat > "$work/task.sh" <<'EOF'
echo "$SLURM_PROCID ${LAMA_CPUS:-none} ${LAMA_GPUS:-none} ${OMP_NUM_THREADS:-none} ${TASK_MAP:+map}"
EOF
# The XML: package 0 is NUMA node 0 with cores whose first hardware threads are 0,8,16,24 and GPUs
# cuda0-1; package 1 is NUMA node 1 with 80,88,96,104 and cuda2-3. Each task gets whole cores
# of one domain, one hardware thread each, the domains shared in proportion (equal here), and the
# GPUs of its own domain.
first=(0 8 16 24 80 88 96 104)
want_for() { # tasks gpus(yes|no)
  local k=$1 g=$2 t per lines="" gp
  for ((t = 0; t < k; t++)); do
    per=$((8 / k))
    cpus=$(IFS=,; echo "${first[*]:t*per:per}")
    if [ "$g" = no ]; then gp=none
    elif [ "$k" = 1 ]; then gp=cuda0,cuda1,cuda2,cuda3
    elif [ "$k" = 2 ]; then gp=cuda$((2 * t)),cuda$((2 * t + 1))
    elif [ "$k" = 4 ]; then gp=cuda$t
    else gp=cuda$((t / 2)); fi   # fewer GPUs than tasks: neighbours share one, in blocks
    lines+="$t $cpus $gp $per map"$'\n'
  done
  printf '%s' "$lines"
}
for k in 1 2 4 8; do
  for g in yes no; do
    gres=""; [ "$g" = yes ] && gres="--gres=gpu:4"
    got=$(timeout 120 salloc -N1 -w n1 --exclusive $gres srun -n$k --lama-policy=auto bash "$work/task.sh" 2>"$work/err" | sort -n)
    want=$(want_for "$k" "$g")
    if [ "$got" = "$want" ]; then ok "policy auto, whole node, $k task(s), GPUs $g: domains shared evenly, whole cores, GPUs of each task's own package"
    else not_ok "policy auto, whole node, $k task(s), GPUs $g" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
  done
done
# --cpus-per-task=2 makes two workers per task: 8 tasks x 2 outnumber the 8 cores, so each task
# gets both hardware threads of one core (c and c+1 in the XML) and two OpenMP threads.
got=$(timeout 120 salloc -N1 -w n1 --exclusive srun -n8 -c2 --lama-policy=auto bash "$work/task.sh" 2>"$work/err" | sort -n)
want=$(for t in 0 1 2 3 4 5 6 7; do echo "$t ${first[t]}-$((first[t] + 1)) none 2 map"; done)
if [ "$got" = "$want" ]; then ok "policy auto with --cpus-per-task=2: 8 tasks on 8 cores take both hardware threads of one core each"
else not_ok "policy auto with --cpus-per-task=2" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
# Issue 74: -c sets the workers. -c3 on cores of two hardware threads: Slurm 22.05 and 24.11
# give the step two cores a task (8 CPUs), 25.11 and later three cores (6 CPUs, one domain's
# part too small for a task's 3): either way each task has at least 3 CPUs and runs 3 OpenMP
# threads, the number asked for, not one per CPU it was given.
got=$(timeout 120 salloc -N1 -w n1 --exclusive srun -n2 -c3 --lama-policy=auto bash "$work/task.sh" 2>"$work/err" | sort -n)
threads=$(awk '{print $4}' <<<"$got" | sort -u)
fewest=$(awk '{print $2}' <<<"$got" | python3 -c '
import sys
def count(s):
    return sum(int(b) - int(a) + 1 for a, _, b in (r.partition("-") if "-" in r else (r, "-", r) for r in s.split(",")))
print(min(count(l.strip()) for l in sys.stdin if l.strip()))' 2>>"$work/err")
if [ "$(wc -l <<<"$got")" = 2 ] && [ "$threads" = 3 ] && [ "${fewest:-0}" -ge 3 ]; then ok "policy auto with -c3: each task runs 3 OpenMP threads, srun's -c ($(awk '{print $2}' <<<"$got" | paste -sd' '))"
else not_ok "policy auto with -c3: OMP_NUM_THREADS is -c" "got:" "$got" "$(cat "$work/err")"; fi
# Issue 48, case 2: one task of 16 workers is fewer tasks than the 2 domains. It runs over both
# and needs two hardware threads of each of the 8 cores (c and c+1) for its 16 OpenMP threads
# (it had one per core, 8 CPUs, before).
got=$(timeout 120 salloc -N1 -w n1 --exclusive -n1 -c16 srun --lama-policy=auto bash "$work/task.sh" 2>"$work/err")
want="0 $(for c in "${first[@]}"; do printf '%s-%s,' "$c" $((c + 1)); done | sed 's/,$//') none 16 map"
if [ "$got" = "$want" ]; then ok "policy auto, salloc -n1 -c16: the one task over both domains gets its 16 workers' CPUs (two hardware threads per core)"
else not_ok "policy auto with one task of -c16" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
# The job's plan counts salloc's -c as the plugin does (it planned one hardware thread per task
# before). Its node report reads the declared XML through hwloc's HWLOC_XMLFILE.
got=$(timeout 120 salloc -N1 -w n1 --exclusive -n8 -c2 bash -c "HWLOC_XMLFILE='$x3' '$lama' plan --from-slurm --policy auto --step-gpus none --format json" 2>"$work/err" |
  python3 -c 'import json, sys; [print(r["rank"], ",".join(map(str, r["cpus"]))) for r in json.load(sys.stdin)["ranks"]]' 2>>"$work/err")
want=$(for t in 0 1 2 3 4 5 6 7; do echo "$t ${first[t]},$((first[t] + 1))"; done)
if [ "$got" = "$want" ]; then ok "salloc -n8 -c2: lama plan --from-slurm --policy auto plans what the plugin binds (both hardware threads of one core each)"
else not_ok "lama plan --from-slurm --policy auto with -c2" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
# Two whole nodes, 8 tasks: Slurm's block layout puts 4 on each, and each node places its own
# as the 4-task case above (ranks 4-7 on the second node).
got=$(timeout 120 salloc -N2 -w n[1-2] --exclusive --gres=gpu:4 srun -n8 --lama-policy=auto bash "$work/task.sh" 2>"$work/err" | sort -n)
want=$(want_for 4 yes; want_for 4 yes | awk '{$1 += 4; print}')
if [ "$got" = "$want" ]; then ok "policy auto on two whole nodes, 8 tasks: each node places its 4 as on one node"
else not_ok "policy auto on two nodes" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
# Shared node: a step of 2 tasks and 2 GPUs gets one core (two hardware threads) and GPUs Slurm
# chose; each task gets one thread of it and one of those GPUs, never another.
slurm=$(run -N1 -w n1 -n2 --gres=gpu:2 --lama-off bash -c 'echo ${SLURM_STEP_GPUS:-none}' 2>/dev/null | sort -u)
got=$(run -N1 -w n1 -n2 --gres=gpu:2 --lama-policy=auto bash "$work/task.sh" 2>"$work/err" | sort -n)
# Slurm chooses the core: its two hardware threads are c and c+1 in the XML's numbering.
read -r a ca ga _ <<<"$(sed -n 1p <<<"$got")"; read -r b cb gb _ <<<"$(sed -n 2p <<<"$got")"
if [ "$a $b" = "0 1" ] && [ "$cb" = "$((ca + 1))" ] && [ "$ga $gb" = "cuda0 cuda1" ] && [ "$slurm" = "0,1" ]; then ok "policy auto on a shared node: one hardware thread and one of the step's GPUs (0,1) per task"
else not_ok "policy auto on a shared node" "step GPUs: $slurm" "$got" "$(cat "$work/err")"; fi
# The option given to salloc reaches the job's steps (as sbatch's does): the CPU-only 2-task case.
got=$(timeout 120 salloc -N1 -w n1 --exclusive --lama-policy=auto srun -n2 bash "$work/task.sh" 2>"$work/err" | sort -n)
want=$(want_for 2 no)
if [ "$got" = "$want" ]; then ok "salloc --lama-policy=auto: the job's step is placed by the policy"
else not_ok "salloc --lama-policy=auto" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
# Shared node, CPU-only: the step's one core, one hardware thread per task, no GPU.
got=$(run -N1 -w n1 -n2 --lama-policy=auto bash "$work/task.sh" 2>"$work/err" | sort -n)
read -r a ca ga _ <<<"$(sed -n 1p <<<"$got")"; read -r b cb gb _ <<<"$(sed -n 2p <<<"$got")"
if [ "$a $b" = "0 1" ] && [ "$cb" = "$((ca + 1))" ] && [ "$ga $gb" = "none none" ]; then ok "policy auto on a shared node, CPU-only: one hardware thread of the step's core per task"
else not_ok "policy auto on a shared node, CPU-only" "$got" "$(cat "$work/err")"; fi
# --lama-verbose says what the policy chose, once per node.
out=$(timeout 120 salloc -N1 -w n1 --exclusive --gres=gpu:4 srun -n4 --lama-policy=auto --lama-verbose true 2>&1)
if [ "$(grep -c '^lama: policy auto on n1 (node 0): 4 task(s) over 2 of 2 NUMA domain(s) by the step.s 4 GPU(s) (2+2), 2 CPU(s) each' <<<"$out")" = 1 ]; then
  ok "--lama-verbose says once what the policy chose"
else not_ok "--lama-verbose with the policy" "$out"; fi
refused "policy with a map" "--lama-policy=auto places the tasks itself and cannot be combined with --lama-map" -N1 -n2 --lama-policy=auto --lama-map=csbnh
refused "policy with --lama-gpus" "--lama-gpus cannot be used here" -N1 -n2 --lama-policy=auto --lama-gpus=1
refused "bad --lama-policy" "invalid --lama-policy 'best'; valid: auto" -N1 -n1 --lama-policy=best
SLURM_LAMA_POLICY=best refused "bad SLURM_LAMA_POLICY" "SLURM_LAMA_POLICY" -N1 -n1
# A job of one core (two hardware threads) running three tasks: srun's --overcommit is the
# user's permission to stack them, as --lama-oversubscribe is; said once.
out=$(timeout 120 salloc -N1 -w n1 -n1 srun -n3 --overcommit --lama-policy=auto bash -c 'echo TASK-RAN ${LAMA_CPUS:-none}' 2>&1)
if [ "$(grep -c '^TASK-RAN [0-9]' <<<"$out")" = 3 ] && [ "$(grep -c "lama: warning: 3 tasks share the step's 2 hardware thread(s) on node 0 n1: srun's --overcommit lets the automatic policy stack them" <<<"$out")" = 1 ] &&
   [ "$(grep '^TASK-RAN' <<<"$out" | sort | uniq -c | awk '{print $1}' | sort | tr '\n' ' ')" = "1 2 " ]; then
  ok "policy auto with --overcommit: three tasks stacked on the core's two hardware threads (2 and 1), said once"
else not_ok "policy auto: more tasks than hardware threads with --overcommit" "$out"; fi
got=$(timeout 120 salloc -N1 -w n1 -n1 srun -n3 --overcommit --lama-policy=auto --lama-oversubscribe bash -c 'echo $SLURM_PROCID ${LAMA_CPUS:-none}' 2>"$work/err" | sort -n)
read -r _ c0 <<<"$(sed -n 1p <<<"$got")"; read -r _ c1 <<<"$(sed -n 2p <<<"$got")"; read -r _ c2 <<<"$(sed -n 3p <<<"$got")"
if [ "$c0" = "$c1" ] && [ "$c2" = "$((c0 + 1))" ]; then ok "policy auto with --lama-oversubscribe: three tasks stacked on the core's two hardware threads ($c0, $c1, $c2)"
else not_ok "policy auto with --lama-oversubscribe" "$got" "$(cat "$work/err")"; fi

# Issue 48, case 1: GPUs Slurm binds task by task by id (--gpu-bind=map_gpu:2,0 gives task 0 GPU 2,
# on package 1, and task 1 GPU 0, on package 0; ConstrainDevices lets each open only its own).
# The policy gives one task per package (-c8: half the node each), task 0 on package 0 first:
# each task keeps exactly Slurm's GPU variables, without LAMA_GPUS, a note says why once, and
# the tasks swap slots so that each runs in its GPU's package (the packages' CPUs from
# hwloc-calc). Slurm's own values come from the same step with --lama-off.
gpu_report='echo "gpu $SLURM_PROCID ${CUDA_VISIBLE_DEVICES:-none} ${LAMA_GPUS:-none} ${LAMA_CPUS:-none}"'
slurm=$(run -N1 -w n1 -n2 -c8 --exclusive --gres=gpu:4 --gpu-bind=map_gpu:2,0 --lama-off bash -c "$gpu_report" 2>&1 | awk '$1 == "gpu" {print $2, $3}' | sort -n)
out=$(run -N1 -w n1 -n2 -c8 --exclusive --gres=gpu:4 --gpu-bind=map_gpu:2,0 --lama-policy=auto bash -c "$gpu_report" 2>&1)
got=$(awk '$1 == "gpu" {print $2, $3}' <<<"$out" | sort -n)
package=()
for k in 0 1; do package[k]=,$(hwloc-calc --input "$x3" --po -I pu "package:$k"),; done
where=""
while read -r _ t _ _ cpus; do
  want=$((1 - t))
  for c in $(expand "$cpus" | tr , " "); do [[ ${package[want]} == *,$c,* ]] || where+="task $t on CPU $c, outside package $want of its GPU; "; done
done < <(grep '^gpu ' <<<"$out")
if [ -n "$slurm" ] && [ "$got" = "$slurm" ] && [ "$(grep -c '^gpu .* none [0-9]' <<<"$out")" = 2 ] && [ -z "$where" ] &&
  [ "$(grep -c 'lama: note: the automatic policy leaves the GPUs to Slurm, which binds them task by task here, and places each task in a domain next to the GPUs Slurm bound it' <<<"$out")" = 1 ]; then
  ok "policy auto beside --gpu-bind=map_gpu:2,0: each task keeps Slurm's GPU ($(tr '\n' ' ' <<<"$slurm")), no LAMA_GPUS, runs in its GPU's package, said once"
else not_ok "policy auto beside --gpu-bind=map_gpu:2,0" "$where" "Slurm alone:" "$slurm" "$out"; fi

echo "# Slurm $release: the site default policy=auto"
plugstack "required $plugin topology=$x3 policy=auto"
cat > "$work/site.sh" <<'EOF'
echo "$SLURM_PROCID ${LAMA_CPUS:-none} ${TASK_MAP:+map}"
EOF
got=$(timeout 120 salloc -N1 -w n1 --exclusive srun -n2 bash "$work/site.sh" 2>"$work/err" | sort -n)
if [ "$got" = "0 0,8,16,24 map
1 80,88,96,104 map" ]; then ok "site policy=auto places a step that asks nothing"
else not_ok "site policy=auto" "$got" "$(cat "$work/err")"; fi
got=$(timeout 120 salloc -N1 -w n1 --exclusive srun -n2 --lama-map=cNsbnh --lama-bind=1c bash "$work/site.sh" 2>"$work/err" | sort -n)
if [ "$got" = "0 0-1 map
1 8-9 map" ]; then ok "site policy=auto: a user's map replaces it"
else not_ok "site policy=auto with a user's map" "$got" "$(cat "$work/err")"; fi
for how in "--lama-policy=none" "--export=ALL,SLURM_LAMA_POLICY=none"; do
  got=$(run -N1 -w n1 -n2 $how bash "$work/site.sh" 2>"$work/err" | sort -n)
  if [ "$got" = "0 none map
1 none map" ]; then ok "site policy=auto: $how leaves the step to Slurm, TASK_MAP kept"
  else not_ok "site policy=auto with $how" "$got" "$(cat "$work/err")"; fi
done
for how in "--lama-off" "--export=ALL,SLURM_LAMA_OFF=1"; do
  got=$(run -N1 -w n1 -n2 $how bash "$work/site.sh" 2>"$work/err" | sort -n)
  if [ "$(sed 's/ *$//' <<<"$got")" = "0 none
1 none" ]; then ok "site policy=auto: $how wins (no placement, no TASK_MAP)"
  else not_ok "site policy=auto with $how" "$got" "$(cat "$work/err")"; fi
done

echo "# Slurm $release: --lama-mem=local on the machine's own topology"
cluster
plugstack "required $plugin"
# The policy of the task's memory, as the kernel reports it for its mappings (numa_maps: "bind:N"
# under a binding, "default" otherwise); Mems_allowed_list is the cpuset's, not the binding.
cat > "$work/mem.sh" <<'EOF'
echo "$SLURM_PROCID ${LAMA_MEMS:-none} $(awk 'NR == 1 {print $2}' /proc/self/numa_maps)"
EOF
nodes=$(cat /sys/devices/system/node/online 2>/dev/null || echo 0)
got=$(run -N1 -n2 --lama-policy=auto --lama-mem=local bash "$work/mem.sh" 2>"$work/err" | sort -n)
if [ "$got" = "0 $nodes bind:$nodes
1 $nodes bind:$nodes" ]; then ok "--lama-mem=local: each task's memory bound to the NUMA node of its CPUs ($nodes), seen in /proc/self/numa_maps"
else not_ok "--lama-mem=local" "$got" "$(cat "$work/err")"; fi
got=$(run -N1 -n2 --lama-policy=auto bash "$work/mem.sh" 2>"$work/err" | sort -n)
if [ "$got" = "0 none default
1 none default" ]; then ok "without --lama-mem the tasks' memory policy is the default"
else not_ok "without --lama-mem" "$got" "$(cat "$work/err")"; fi
got=$(run -N1 -n1 --lama-map=csbnh --lama-bind=1c --lama-mem=local bash "$work/mem.sh" 2>"$work/err")
if [ "$got" = "0 $nodes bind:$nodes" ]; then ok "--lama-mem=local with an expert map"
else not_ok "--lama-mem=local with an expert map" "$got" "$(cat "$work/err")"; fi
refused "--lama-mem=local with Slurm's --mem-bind=map_mem" "--mem-bind=map_mem and --lama-policy=auto cannot be used together" -N1 -n1 --lama-policy=auto --lama-mem=local --mem-bind=map_mem:0
refused "bad --lama-mem" "invalid --lama-mem 'far'; valid: local" -N1 -n1 --lama-mem=far
# Memory by tier (issue 49): interleave over the task's default memory; hbm and prefer-hbm on a
# machine without a faster tier (this one: its NUMA nodes are DRAM) stop the node's tasks,
# said once, naming the node.
got=$(run -N1 -n1 --lama-policy=auto --lama-mem=interleave bash "$work/mem.sh" 2>"$work/err")
if [ "$got" = "0 $nodes interleave:$nodes" ]; then ok "--lama-mem=interleave: the task's memory interleaved over the NUMA nodes of its CPUs ($nodes), seen in /proc/self/numa_maps"
else not_ok "--lama-mem=interleave" "$got" "$(cat "$work/err")"; fi
out=$(run -N1 -w n1 -n1 --lama-policy=auto --lama-mem=interleave --lama-verbose true 2>&1)
if grep -q "lama: task 0 on n1 (node 0): bound to cpus .* mems=$nodes (interleave)" <<<"$out"; then ok "--lama-verbose shows the task's memory nodes and policy (mems=$nodes (interleave))"
else not_ok "--lama-verbose with --lama-mem=interleave" "$out"; fi
for mode in hbm prefer-hbm; do
  out=$(run -N1 -w n1 -n2 --lama-policy=auto --lama-mem=$mode bash -c 'echo TASK-RAN' 2>&1)
  if [ "$(grep -c "lama: error: memory mode $mode: no memory faster than the default memory .* (node 0 n1: no task of this step was started there)" <<<"$out")" = 1 ] && ! grep -q TASK-RAN <<<"$out"; then
    ok "--lama-mem=$mode without a faster tier: the node's tasks stop, said once, naming the node"
  else not_ok "--lama-mem=$mode without a faster tier" "$out"; fi
done
done_testing
