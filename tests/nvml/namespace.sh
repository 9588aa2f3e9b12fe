#!/bin/sh
# Runs a command (slurmd) in a mount namespace of its own that has what NVIDIA's driver makes and
# Slurm's gpu/nvml plugin and lama look for: /dev/nvidiaN, /dev/nvidia-caps/nvidia-capN,
# /proc/driver/nvidia-caps/mig-minors, and /proc/driver/nvidia (each GPU's minor number, and its
# MIG instances). Nothing outside the namespace sees them.
# Usage (contrib/sandbox.sh, with LAMA_SANDBOX_NVML):
#   unshare --mount tests/nvml/namespace.sh STATE NODE COMMAND...
#   STATE  the sandbox's nvml/ folder: gpus (the stand-in's description) and mig-minors
set -eu
state=$1 node=$2
shift 2
[ "$(findmnt -n -o PROPAGATION /)" = private ] || { echo "nvml namespace: run under unshare --mount" >&2; exit 1; }
mount -t tmpfs lama-nvml /proc/driver
mkdir /proc/driver/nvidia-caps
cp "$state/mig-minors" /proc/driver/nvidia-caps/mig-minors
awk '$1 == "gpu" {print $2, tolower($4)}' "$state/gpus" | while read -r minor bus; do
  mkdir -p "/proc/driver/nvidia/gpus/$bus" "/proc/driver/nvidia/capabilities/gpu$minor/mig"
  printf 'Model: \t\t NVIDIA Stand-in\nBus Location: \t %s\nDevice Minor: \t %s\nGPU Excluded:\t No\n' \
    "$bus" "$minor" > "/proc/driver/nvidia/gpus/$bus/information"
done
awk '$1 == "mig" {print $2, $3, $4}' "$state/gpus" | while read -r minor gi ci; do
  mkdir -p "/proc/driver/nvidia/capabilities/gpu$minor/mig/gi$gi/ci$ci"
done
# /dev itself: an overlay over the machine's, with the device files added; the mounts under
# /dev (pts, shm, mqueue) are bound back in.
scratch=$state/$node
mkdir -p "$scratch"
mount -t tmpfs lama-nvml "$scratch"
mkdir "$scratch/up" "$scratch/work" "$scratch/old"
mount --rbind /dev "$scratch/old"
mount -t overlay lama-nvml -o "lowerdir=/dev,upperdir=$scratch/up,workdir=$scratch/work" /dev
for m in pts shm mqueue hugepages; do
  if mountpoint -q "$scratch/old/$m"; then mount --rbind "$scratch/old/$m" "/dev/$m"; fi
done
mkdir -p /dev/nvidia-caps
# Major 195 is NVIDIA's; the caps' major is dynamic on a real node (508 is common).
awk '$1 == "gpu" {print $2}' "$state/gpus" | while read -r minor; do
  mknod -m 0666 "/dev/nvidia$minor" c 195 "$minor"
done
awk '{print $2}' "$state/mig-minors" | while read -r minor; do
  mknod -m 0444 "/dev/nvidia-caps/nvidia-cap$minor" c 508 "$minor"
done
exec "$@"
