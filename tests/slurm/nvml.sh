#!/usr/bin/env bash
# GPUs as Slurm finds them with AutoDetect=nvml, on the real sandbox cluster: slurmd's gpu/nvml
# plugin over the tests' stand-in NVML (tests/nvml/), which describes the four H200 of PRRTE's
# Turin dump by their UUIDs, bus ids and CPUs (read here from the dump with hwloc's own tools),
# whole or with MIG instances. slurmd and lama's topology cache read the dump (HWLOC_XMLFILE).
# Slurm writes CUDA_VISIBLE_DEVICES and SLURM_STEP_GPUS as on a real node: indexes, UUIDs with
# gres.conf's env_uuid, MIG instances by their own UUIDs or (drivers before 470.42.01) by their
# GPU's. Each task must be beside the GPU Slurm gave it (its CPUs within that GPU's, by the
# stand-in's description), or lama must say why not.
# Usage: tests/slurm/nvml.sh LAMA_BINARY PLUGIN_SO (restarts the cluster; the caller stops it)
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"
if [ ! -f "${LAMA_SLURM_PREFIX:-/nonexistent}/lib/slurm/gpu_nvml.so" ]; then
  skip_all "AutoDetect=nvml: this Slurm has no gpu/nvml plugin (only the releases contrib/slurm-build.sh builds have it)"
fi
x=$top/tests/topologies/prrte-turin-4gpu-nvml-h200.xml
chmod 755 "$work"

# The stand-in's description: each GPU of the dump as NVML would report it.
gpus=$work/gpus
for i in 0 1 2 3; do
  uuid=$(hwloc-info -i "$x" "os=nvml$i" | awk '/info NVIDIAUUID/ {print $4}')
  bus=$(hwloc-info -i "$x" --ancestor pcidev "os=nvml$i" | awk '/attr PCI bus id/ {print $6}')
  cpus=$(hwloc-calc -i "$x" "os=nvml$i" --intersect pu --physical-output)
  echo "gpu $i $uuid $bus $cpus NVIDIA H200"
done > "$gpus"
chmod 644 "$gpus"
[ "$(awk 'NF >= 5 && $3 ~ /^GPU-/' "$gpus" | wc -l)" = 4 ] || { not_ok "the dump's GPUs" "$(cat "$gpus")"; exit 0; }
mig=$work/gpus-mig
{ cat "$gpus"
  echo "mig 3 1 0 MIG-6b4d0f6e-0a55-5d0b-9a3e-1d2c3b4a5f61 3 71680"
  echo "mig 3 2 0 MIG-0c8e2a71-4f3b-5e6d-8a9b-7c6d5e4f3a21 3 71680"; } > "$mig"
{ cat "$mig"; echo "driver 460.91.03"; } > "$work/gpus-old"
chmod 644 "$mig" "$work/gpus-old"

# Each task prints what Slurm and lama gave it.
line='echo "g $SLURM_PROCID ${LAMA_CPUS:-none} ${LAMA_GPUS:-none} ${CUDA_VISIBLE_DEVICES:-none} ${SLURM_STEP_GPUS:-none}"'

# The description's line of the GPU a CUDA_VISIBLE_DEVICES entry or SLURM_STEP_GPUS index names.
line_of_uuid() { awk -v u="$1" '($1 == "gpu" && $3 == u) || ($1 == "mig" && $5 == u) {print; exit}' "$2"; }
cpus_of_gpu() { awk -v m="$1" '$1 == "gpu" && $2 == m {print $5}' "$2"; }

# beside NAME DESCRIPTION SRUN_ARGS...: every task's CPUs are among those of the GPU it got, and
# that GPU is one Slurm gave the step. The task's GPU is its CUDA_VISIBLE_DEVICES as lama left
# it: a UUID, a MIG instance, or an index. Under ConstrainDevices (renumbered=1) Slurm numbers
# the step's GPUs from 0, in the order SLURM_STEP_GPUS names them by Slurm's own indexes (here
# the GPUs' minor numbers); without it, it writes its own indexes.
beside() {
  local name=$1 desc=$2 out bad="" t c g cvd step minor want got=""
  shift 2
  out=$(run -N1 -w n1 "$@" bash -c "$line" 2>&1)
  while read -r _ t c g cvd step; do
    case $cvd in
      GPU-*) minor=$(line_of_uuid "$cvd" "$desc" | awk '{print $2}') ;;
      MIG-GPU-*) minor=$(line_of_uuid "$(cut -d/ -f1 <<<"${cvd#MIG-}")" "$desc" | awk '{print $2}') ;;
      MIG-*) minor=$(line_of_uuid "$cvd" "$desc" | awk '{print $2}') ;;
      *[!0-9]* | "") minor="" ;;
      *) if [ "$renumbered" = 1 ]; then minor=$(tr , '\n' <<<"$step" | sed -n "$((cvd + 1))p"); else minor=$cvd; fi ;;
    esac
    want=$(cpus_of_gpu "${minor:-none}" "$desc")
    [ -n "$want" ] || { bad+="task $t: no GPU of the description for $cvd / $step; "; continue; }
    [[ ,$step, == *,$minor,* ]] || [[ $cvd != [0-9]* ]] || bad+="task $t has GPU $minor, not one of the step's ($step); "
    [ "$g" != none ] || bad+="task $t got no GPU from lama; "
    got+=" $minor"
    for cpu in $(expand "$c" | tr , ' '); do
      [[ ,$want, == *,$cpu,* ]] || { bad+="task $t on CPU $cpu, not among GPU $minor's ($cvd); "; break; }
    done
  done < <(grep '^g ' <<<"$out")
  if [ "$(grep -c '^g ' <<<"$out")" -ge 1 ] && [ -z "$bad" ]; then
    ok "$name: every task beside the GPU Slurm gave it (GPU$(tr ' ' '\n' <<<"$got" | sort -u | paste -sd' '); $(awk '$1 == "g" {print $5}' <<<"$out" | sort -u | paste -sd' '))"
  else not_ok "$name" "$bad" "$out"; fi
}

# hold N: a job holds N GPUs of n1 (Slurm's first free ones) until stopped.
hold() {
  hog=$(sbatch --parsable -N1 -w n1 -n1 --gres=gpu:"$1" -o /dev/null --wrap 'sleep 120' 2>/dev/null)
  for _ in $(seq 40); do [ "$(squeue -h -t R -j "$hog" 2>/dev/null | wc -l)" = 1 ] && break; sleep 0.25; done
}
release() { scancel "$hog" 2>/dev/null; wait_idle || true; }

# Slurm 26.05 refuses GPUs whose CPUs cross its sockets; its GRES guide has a node like this one
# (NPS4: four NUMA nodes per package) declare each NUMA node a socket.
nvml=(LAMA_SANDBOX_NODES=1 LAMA_SANDBOX_SLURMD_ENV=HWLOC_XMLFILE=$x
  LAMA_SANDBOX_NODE="Sockets=8 CoresPerSocket=16 ThreadsPerCore=2 Parameters=numa_node_as_socket")
# slurmd writes lama's cache from the dump at its start; the steps then place on the dump itself
# (topology=, which binds nothing: this machine has not the dump's CPUs), and read the driver's
# MIG instances as slurmd's probe does.
nvml_cluster() {
  cluster "${nvml[@]}" "$@"
  plugstack "required $plugin topology=$x"
}
renumbered=1
nvml_cluster LAMA_SANDBOX_NVML="$gpus" LAMA_SANDBOX_CONSTRAIN_DEVICES=1
release_=$(srun --version | awk '{print $2}')
echo "# Slurm $release_: AutoDetect=nvml, four whole H200, ConstrainDevices (indexes renumbered from 0 in CUDA_VISIBLE_DEVICES)"
found=$(scontrol show node n1 | grep -o 'Gres=[^ ]*')
if [[ $found == Gres=gpu:4* ]] && grep -q 'gpu/nvml' "$LAMA_SANDBOX"/log/slurmd-n1.log; then
  ok "slurmd found the four GPUs through gpu/nvml ($found)"
else not_ok "slurmd's GPUs through gpu/nvml" "$found" "$(grep -i 'nvml\|gres' "$LAMA_SANDBOX"/log/slurmd-n1.log | tail -n 20)"; fi
beside "-n4 --gres=gpu:4 under the policy" "$gpus" -n4 --gres=gpu:4 --lama-policy=auto
hold 2
beside "--gres=gpu:1 while another job holds two GPUs, under the policy" "$gpus" -n2 --gres=gpu:1 --lama-policy=auto
beside "--gres=gpu:1 while another job holds two GPUs, --lama-gpus=1" "$gpus" \
  -n2 --gres=gpu:1 --lama-map=scbnh --lama-bind=1c --lama-gpus=1
release

renumbered=0
nvml_cluster LAMA_SANDBOX_NVML="$gpus" LAMA_SANDBOX_NVML_FLAGS=env_uuid
echo "# Slurm $release_: AutoDetect=nvml with Flags=env_uuid (UUIDs in CUDA_VISIBLE_DEVICES)"
out=$(run -N1 -w n1 -n1 --gres=gpu:1 bash -c "$line" 2>&1)
if [[ $(awk '$1 == "g" {print $5}' <<<"$out") == GPU-* ]]; then ok "env_uuid: Slurm writes the GPU's UUID"
else not_ok "env_uuid: Slurm's CUDA_VISIBLE_DEVICES" "$out"; fi
hold 1
beside "env_uuid: --gres=gpu:2 beside another job, under the policy" "$gpus" -n2 --gres=gpu:2 --lama-policy=auto
beside "env_uuid: --gres=gpu:1 beside another job, --lama-gpus=1" "$gpus" \
  -n2 --gres=gpu:1 --lama-map=scbnh --lama-bind=1c --lama-gpus=1
release

nvml_cluster LAMA_SANDBOX_NVML="$mig"
echo "# Slurm $release_: AutoDetect=nvml, GPU 3 split into two MIG instances (MIG UUIDs)"
found=$(scontrol show node n1 | grep -o 'Gres=[^ ]*')
if [[ $found == Gres=gpu:5* ]]; then ok "slurmd found three GPUs and two MIG instances ($found)"
else not_ok "slurmd's GPUs and MIG instances" "$found" "$(grep -i 'nvml\|mig\|gres' "$LAMA_SANDBOX"/log/slurmd-n1.log | tail -n 20)"; fi
# slurmd's probe read the driver's MIG instances into lama's cache, for the GPU at GPU 3's bus id.
bus3=$(awk '$1 == "gpu" && $2 == 3 {print tolower($4)}' "$mig")
cached=$(cat "$LAMA_SANDBOX"/cache/topology-n1-*.json 2>/dev/null | tr '{' '\n' | grep '"mig":true' | grep -o '"pci":"[^"]*"')
if [ "$cached" = "\"pci\":\"$bus3\"" ]; then ok "slurmd's topology cache marks the GPU at $bus3, and only it, as split into MIG instances"
else not_ok "the MIG mark in slurmd's cache" "want $bus3, got: $cached" "$(ls "$LAMA_SANDBOX"/cache)"; fi
# A MIG instance named by its own UUID, which hwloc does not list: lama cannot tell its GPU, says
# so once and leaves GPUs to Slurm under the policy, and refuses --lama-gpus.
hold 3
out=$(run -N1 -w n1 -n2 --gres=gpu:1 --lama-policy=auto bash -c "$line" 2>&1)
if [[ $(awk '$1 == "g" {print $5}' <<<"$out" | sort -u) == MIG-* ]] && [ "$(grep -c '^g ' <<<"$out")" = 2 ] &&
  [ "$(grep -c 'MIG instance' <<<"$out")" = 1 ] && [ "$(grep -c 'GPUs to Slurm' <<<"$out")" = 1 ]; then
  ok "a MIG instance under the policy: placed, the GPUs left to Slurm, why said once"
else not_ok "a MIG instance under the policy" "$out"; fi
refused "a MIG instance with --lama-gpus=1" "is an NVIDIA MIG instance" \
  -N1 -w n1 -n2 --gres=gpu:1 --lama-map=scbnh --lama-bind=1c --lama-gpus=1
release
# A whole GPU beside the MIG instances: Slurm names it by its UUID (without env_uuid), which
# lama matches.
hold 1
beside "a whole GPU on a MIG node, --lama-gpus=1" "$mig" \
  -n2 --gres=gpu:1 --lama-map=scbnh --lama-bind=1c --lama-gpus=1
release

nvml_cluster LAMA_SANDBOX_NVML="$work/gpus-old"
echo "# Slurm $release_: MIG instances under a driver before 470.42.01 (named MIG-GPU-UUID/GI/CI)"
hold 3
beside "a MIG instance named by its GPU, --lama-gpus=1" "$work/gpus-old" \
  -n2 --gres=gpu:1 --lama-map=scbnh --lama-bind=1c --lama-gpus=1
beside "a MIG instance named by its GPU, under the policy" "$work/gpus-old" -n2 --gres=gpu:1 --lama-policy=auto
release
done_testing
