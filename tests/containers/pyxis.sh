#!/usr/bin/env bash
# Tasks in pyxis + enroot containers (`srun --container-image`) on the sandbox, with lama and
# pyxis in both plugstack.conf orders, as root and as an unprivileged user (nobody), and lama's
# topology cache where a site keeps it (/run/lama). Each task reports its CPUs, its memory
# policy, TASK_MAP, LAMA_* and the OpenMP variables from inside the container; they must be
# what the same step gives outside a container, whose CPUs must be `lama plan`'s. Two images
# made here without a registry (squashfs of a busybox root): one plain, one whose environment
# defines TASK_MAP and the OpenMP variables itself.
# Usage: tests/containers/pyxis.sh LAMA_BINARY PLUGIN_SO PYXIS_SO ENROOT_PREFIX
# (LAMA_SANDBOX, LAMA_SANDBOX_PORT and, for a built Slurm, LAMA_SLURM_PREFIX and PATH set.)
set -uo pipefail
pyxis=$(realpath -m "$3")
enroot=$(realpath -m "$4")
source "$(dirname "$0")/../slurm/lib.sh"
source "$(dirname "$0")/lib.sh"
# A build that failed (contrib/pyxis-build.sh, contrib/enroot-build.sh) is a failure, not a skip.
if [ ! -f "$pyxis" ] || [ ! -x "$enroot/bin/enroot" ]; then
  not_ok "pyxis and enroot are built (want $pyxis and $enroot/bin/enroot)"
  done_testing
  exit 0
fi

"$top/contrib/deps.sh" busybox-static squashfs-tools jq zstd >/dev/null
pyxis_images n1 n2 n3
step=(-N2 -n4 -c1 --lama-map=csbnh --lama-bind=1c --lama-mem=local --lama-threads=auto)
plan_outside 2

for order in pyxis-first lama-first; do
  # No cache= argument: the topology cache in /run/lama, where a site has it.
  if [ "$order" = pyxis-first ]; then printf 'required %s\nrequired %s\n' "$pyxis" "$plugin"
  else printf 'required %s\nrequired %s\n' "$plugin" "$pyxis"; fi >"$work/plugstack.conf"
  "$top/contrib/sandbox.sh" stop >/dev/null 2>&1
  LAMA_SANDBOX_PLUGSTACK=$work/plugstack.conf \
    LAMA_SANDBOX_SLURMD_ENV="PATH=${LAMA_SLURM_PREFIX:+$LAMA_SLURM_PREFIX/bin:$LAMA_SLURM_PREFIX/sbin:}$enroot/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    "$top/contrib/sandbox.sh" start >/dev/null || { not_ok "$order: the sandbox starts with pyxis and lama"; continue; }
  for who in root nobody; do
    name="$order, as $who"
    host=$(lines "$who" "${step[@]}")
    if outside_as_planned "$host" 4 2; then
      ok "$name: outside a container the step is lama plan's (CPUs, LAMA_CPUS), memory bound, TASK_MAP and OpenMP set"
    else not_ok "$name: the step outside a container (ranks off the plan:${off_plan:-none}; plan ${planned[*]})" "$host"; continue; fi
    pyxis_cases "$order" "$who" "$name" "$host"
  done
done
"$top/contrib/sandbox.sh" stop >/dev/null 2>&1
done_testing
