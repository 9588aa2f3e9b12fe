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
chmod 755 "$work"
# The images: a busybox root, and the same with variables of its own (enroot reads the
# image's /etc/environment).
root=$work/root
mkdir -p "$root"/{bin,etc,proc,sys,dev,tmp,run,root}
cp /bin/busybox "$root/bin/"
for c in sh cat grep cut; do ln -s busybox "$root/bin/$c"; done
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"
mksquashfs "$root" "$work/plain.sqsh" -noappend -quiet -all-root >/dev/null
printf 'TASK_MAP=from-the-image\nOMP_NUM_THREADS=99\nOMP_PLACES=cores\nLAMA_CPUS=from-the-image\n' >"$root/etc/environment"
mksquashfs "$root" "$work/vars.sqsh" -noappend -quiet -all-root >/dev/null
chmod 644 "$work"/*.sqsh
# enroot's per-node, per-user directories (its enroot.conf.d, contrib/enroot-build.sh).
export LAMA_ENROOT_ROOT=$work/enroot
mkdir -p "$LAMA_ENROOT_ROOT"/n{1,2,3} && chmod 1777 "$LAMA_ENROOT_ROOT" "$LAMA_ENROOT_ROOT"/n*

step=(-N2 -n4 -c1 --lama-map=csbnh --lama-bind=1c --lama-mem=local --lama-threads=auto)
# as USER SRUN_ARGS...: srun as root or as nobody (from /, which nobody may enter).
as() {
  local who=$1; shift
  if [ "$who" = root ]; then (cd / && run "$@")
  else (cd / && timeout 120 runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" LAMA_ENROOT_ROOT="$LAMA_ENROOT_ROOT" PATH="$PATH" srun "$@"); fi
}
# lines USER SRUN_ARGS...: the tasks' report lines, sorted (stderr in $work/err).
lines() { local who=$1; shift; as "$who" "$@" sh -c "$report" 2>"$work/err" | sort; }

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
    got=$(lines "$who" "${step[@]}" --lama-verbose --container-image="$work/plain.sqsh")
    if [ "$got" = "$host" ] && grep -q "topology from the cache" "$work/err"; then
      ok "$name: in a container every task has the same CPUs, memory policy, TASK_MAP, LAMA_* and OpenMP variables; lama read its cache in /run/lama"
    else not_ok "$name: in a container (want the lines outside one, and the cache used)" "$(diff <(echo "$host") <(echo "$got"); cat "$work/err")"; fi
    got=$(lines "$who" "${step[@]}" --container-image="$work/vars.sqsh")
    notes=$(grep -c "pyxis is loaded after lama" "$work/err")
    if [ "$order" = pyxis-first ]; then
      if [ "$got" = "$host" ] && [ "$notes" = 0 ]; then
        ok "$name: an image that defines TASK_MAP, LAMA_CPUS and OpenMP variables: lama's values win, no note"
      else not_ok "$name: an image with its own TASK_MAP and OpenMP variables" "$(diff <(echo "$host") <(echo "$got"); cat "$work/err")"; fi
    else
      # pyxis runs last: the image's values replace lama's, and srun says so once.
      if [ "$notes" = 1 ] && grep -q 'TASK_MAP=from-the-image' <<<"$got" && [ "$(grep -c 'cpus=' <<<"$got")" = 4 ]; then
        ok "$name: an image with its own TASK_MAP: srun says once that the image's values win and how to keep lama's"
      else not_ok "$name: an image with its own TASK_MAP (want srun's note once, $notes seen)" "$got$(cat "$work/err")"; fi
      keep=$(grep -o -- '--container-env=[A-Z_,]*' "$work/err" | head -n 1)
      got=$(lines "$who" "${step[@]}" ${keep:+"$keep"} --container-image="$work/vars.sqsh")
      if [ -n "$keep" ] && [ "$got" = "$host" ]; then
        ok "$name: with the note's $keep every task has lama's values again"
      else not_ok "$name: with the note's ${keep:-(no --container-env in the note)}" "$(diff <(echo "$host") <(echo "$got"); cat "$work/err")"; fi
    fi
  done
done
"$top/contrib/sandbox.sh" stop >/dev/null 2>&1
done_testing
