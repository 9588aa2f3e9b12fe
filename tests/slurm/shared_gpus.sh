#!/usr/bin/env bash
# Shared GPUs beside lama, on the real sandbox cluster: gres/shard and gres/mps (AutoDetect=off,
# 2 shards or 100 MPS shares per GPU) on nodes declared as the POWER8 XML with 4 fake GPUs, two
# per socket (cuda0-1 beside CPUs 0-79, cuda2-3 beside 80-159). Slurm's own witnesses: the GPU
# it names in SLURM_STEP_GPUS, and the MPS share it writes in CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
# for the same step without lama.
# Usage: tests/slurm/shared_gpus.sh LAMA_BINARY PLUGIN_SO (restarts the cluster; the caller stops it)
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"
x3=$top/tests/topologies/power8gpudistances.xml
gpus=(LAMA_SANDBOX_TOPOLOGY="$x3" LAMA_SANDBOX_GPUS=4 LAMA_SANDBOX_GPU_CORES="0-3 0-3 4-7 4-7")
line='echo "g $SLURM_PROCID ${LAMA_CPUS:-none} ${LAMA_GPUS:-none} ${SLURM_STEP_GPUS:-none} ${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-none}"'

# beside NAME SRUN_ARGS...: every task is on the socket of the GPU Slurm gave the step (by its
# first CPU) and has that GPU in LAMA_GPUS.
beside() {
  local name=$1 out bad="" t c g step
  shift
  out=$(run -N1 -w n1 "$@" bash -c "$line" 2>&1)
  while read -r _ t c g step _; do
    local first=${c%%[-,]*}
    [ "$g" = "cuda$step" ] || bad+="task $t has $g, Slurm gave GPU $step; "
    if [ "$step" -lt 2 ]; then [ "$first" -lt 80 ] || bad+="task $t on CPU $first, far from GPU $step; "
    else [ "$first" -ge 80 ] || bad+="task $t on CPU $first, far from GPU $step; "; fi
  done < <(grep '^g ' <<<"$out")
  if [ "$(grep -c '^g ' <<<"$out")" -ge 2 ] && [ -z "$bad" ]; then
    ok "$name: every task beside the GPU Slurm gave, sharing it ($(awk '$1 == "g" {print $4}' <<<"$out" | sort -u | paste -sd' '))"
  else not_ok "$name" "$bad" "$out"; fi
}

cluster "${gpus[@]}" LAMA_SANDBOX_SHARDS=2
plugstack "required $plugin topology=$x3"
release=$(srun --version | awk '{print $2}')
echo "# Slurm $release: gres/shard, 2 shards per GPU"
beside "--gres=shard:2 with --lama-gpus=1" -n2 --gres=shard:2 --lama-map=scbnh --lama-bind=1c --lama-gpus=1
beside "--gres=shard:2 under the policy" -n4 --gres=shard:2 --lama-policy=auto
# Another job holds GPUs 0 and 1: Slurm gives the step GPU 2's shards, on socket 1, and lama's
# tasks follow it there.
hog=$(sbatch --parsable -N1 -w n1 -n1 --gres=gpu:2 -o /dev/null --wrap 'sleep 60' 2>/dev/null)
for _ in $(seq 40); do [ "$(squeue -h -t R -j "$hog" 2>/dev/null | wc -l)" = 1 ] && break; sleep 0.25; done
beside "--gres=shard:2 while another job holds GPUs 0-1, under the policy" -n2 --gres=shard:2 --lama-policy=auto
scancel "$hog" 2>/dev/null
wait_idle || true
# Slurm binds shards task by task: the policy leaves GPUs to Slurm, says so once, still places.
out=$(run -N1 -w n1 -n2 --gres=shard:1 --gpu-bind=per_task:1 --lama-policy=auto bash -c "$line" 2>&1)
if [ "$(grep -c '^g ' <<<"$out")" = 2 ] && [ "$(grep -c 'leaves the GPUs to Slurm' <<<"$out")" = 1 ]; then
  ok "--gres=shard:1 --gpu-bind=per_task:1 under the policy: placed, the GPUs left to Slurm, said once"
else not_ok "--gres=shard:1 --gpu-bind=per_task:1 under the policy" "$out"; fi
refused "--gres=shard:1 --gpu-bind=per_task:1 beside --lama-gpus" "Slurm binds GPUs task by task" \
  -N1 -w n1 -n2 --gres=shard:1 --gpu-bind=per_task:1 --lama-gpus=1

cluster "${gpus[@]}" LAMA_SANDBOX_MPS=100
plugstack "required $plugin topology=$x3"
echo "# Slurm $release: gres/mps, 100 shares per GPU"
beside "--gres=mps:50 with --lama-gpus=1" -n2 --gres=mps:50 --lama-map=scbnh --lama-bind=1c --lama-gpus=1
beside "--gres=mps:50 under the policy" -n2 --gres=mps:50 --lama-policy=auto
# The MPS share is Slurm's: the same in every task with lama as without.
with=$(run -N1 -w n1 -n2 --gres=mps:50 --lama-policy=auto bash -c "$line" 2>&1 | awk '$1 == "g" {print $6}' | sort -u)
without=$(run -N1 -w n1 -n2 --gres=mps:50 bash -c "$line" 2>&1 | awk '$1 == "g" {print $6}' | sort -u)
if [ -n "$without" ] && [ "$without" != none ] && [ "$with" = "$without" ]; then
  ok "--gres=mps:50: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE as Slurm writes it ($without)"
else not_ok "--gres=mps:50: the MPS share" "with lama: $with" "without: $without"; fi
done_testing
