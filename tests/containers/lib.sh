# Shared by the container suites, sourced after tests/slurm/lib.sh: what each task reports (the
# same line inside and outside a container) and the check of the step outside a container
# against `lama plan`, which every in-container case is then compared with.

# One line per task: its rank, CPUs, heap's memory policy, LAMA_*, TASK_MAP and OpenMP variables
# (busybox's sh, grep and cut suffice).
report='echo "rank=$SLURM_PROCID cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2) mem=$(grep -m1 -o "[a-z]*:[0-9]* heap" /proc/self/numa_maps | cut -d" " -f1) LAMA_CPUS=$LAMA_CPUS LAMA_MEMS=$LAMA_MEMS TASK_MAP=$TASK_MAP OMP=$OMP_NUM_THREADS/$OMP_PLACES/$OMP_PROC_BIND"'

# plan_outside PER: `planned`, the CPUs `lama plan` gives a node's PER tasks of
# `--lama-map=csbnh --lama-bind=1c` (every sandbox node is this machine).
plan_outside() {
  mapfile -t planned < <(plan_lines --this-machine --map csbnh --bind 1c --np "$1" | awk '{print $3}')
}

# outside_as_planned LINES N PER: whether the step's N report lines outside a container are lama
# plan's (rank r on its node's task r % PER: CPUs and LAMA_CPUS), memory bound, TASK_MAP and
# OpenMP set; `off_plan` names the ranks that are not.
outside_as_planned() {
  local lines=$1 n=$2 per=$3 rank cpus lcpus r
  off_plan=""
  while read -r rank cpus _ lcpus _; do
    r=${rank#rank=}
    [ "${cpus#cpus=}" = "${planned[$((r % per))]}" ] && [ "${lcpus#LAMA_CPUS=}" = "${planned[$((r % per))]}" ] ||
      off_plan+=" $rank"
  done <<<"$lines"
  [ "$(wc -l <<<"$lines")" = "$n" ] && [ -z "$off_plan" ] && grep -q 'mem=bind:0 ' <<<"$lines" &&
    grep -q 'TASK_MAP={' <<<"$lines" && grep -q 'OMP=[1-9][0-9]*/' <<<"$lines"
}

# --- pyxis + enroot (tests/containers/pyxis.sh on the sandboxes, tests/guest/pyxis.sh on
# Debian 13's Slurm) ---------------------------------------------------------------------------

# pyxis_images: $work/plain.sqsh, a busybox root, and $work/vars.sqsh, the same whose
# environment defines TASK_MAP, LAMA_CPUS and OpenMP variables itself (enroot reads the image's
# /etc/environment); and enroot's per-node, per-user directories under LAMA_ENROOT_ROOT (its
# enroot.conf.d, contrib/enroot-build.sh) for the node names given. Needs busybox-static and
# squashfs-tools.
pyxis_images() {
  local root=$work/root
  chmod 755 "$work"
  mkdir -p "$root"/{bin,etc,proc,sys,dev,tmp,run,root}
  cp /bin/busybox "$root/bin/"
  for c in sh cat grep cut; do ln -s busybox "$root/bin/$c"; done
  echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
  echo 'root:x:0:' >"$root/etc/group"
  mksquashfs "$root" "$work/plain.sqsh" -noappend -quiet -all-root >/dev/null
  printf 'TASK_MAP=from-the-image\nOMP_NUM_THREADS=99\nOMP_PLACES=cores\nLAMA_CPUS=from-the-image\n' >"$root/etc/environment"
  mksquashfs "$root" "$work/vars.sqsh" -noappend -quiet -all-root >/dev/null
  chmod 644 "$work"/*.sqsh
  export LAMA_ENROOT_ROOT=$work/enroot
  mkdir -p "$LAMA_ENROOT_ROOT"
  chmod 1777 "$LAMA_ENROOT_ROOT"
  for n in "$@"; do mkdir -p "$LAMA_ENROOT_ROOT/$n" && chmod 1777 "$LAMA_ENROOT_ROOT/$n"; done
}

# as USER SRUN_ARGS...: srun (the caller's `run`) as root or as nobody, from /, which nobody
# may enter.
as() {
  local who=$1; shift
  if [ "$who" = root ]; then (cd / && run "$@")
  else (cd / && timeout 120 runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" LAMA_ENROOT_ROOT="$LAMA_ENROOT_ROOT" PATH="$PATH" srun "$@"); fi
}
# lines USER SRUN_ARGS...: the tasks' report lines, sorted (stderr in $work/err).
lines() { local who=$1; shift; as "$who" "$@" sh -c "$report" 2>"$work/err" | sort; }

# pyxis_cases ORDER WHO NAME HOST: the cases in containers of one plugstack.conf order
# (pyxis-first or lama-first) and user, the step being the caller's `step` and HOST its report
# lines outside a container (checked against lama plan by the caller); NAME starts each case's.
# A plain image, then one defining lama's variables: with pyxis first lama's values win and
# nothing is said; with lama first the image's win, srun says so once, and the note's
# --container-env= brings lama's back.
pyxis_cases() {
  local order=$1 who=$2 name=$3 host=$4 got notes keep
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
    return
  fi
  # pyxis runs last: the image's values replace lama's, and srun says so once.
  if [ "$notes" = 1 ] && grep -q 'TASK_MAP=from-the-image' <<<"$got" && [ "$(grep -c 'cpus=' <<<"$got")" = "$(grep -c 'cpus=' <<<"$host")" ]; then
    ok "$name: an image with its own TASK_MAP: srun says once that the image's values win and how to keep lama's"
  else not_ok "$name: an image with its own TASK_MAP (want srun's note once, $notes seen)" "$got$(cat "$work/err")"; fi
  keep=$(grep -o -- '--container-env=[A-Z_,]*' "$work/err" | head -n 1)
  got=$(lines "$who" "${step[@]}" ${keep:+"$keep"} --container-image="$work/vars.sqsh")
  if [ -n "$keep" ] && [ "$got" = "$host" ]; then
    ok "$name: with the note's $keep every task has lama's values again"
  else not_ok "$name: with the note's ${keep:-(no --container-env in the note)}" "$(diff <(echo "$host") <(echo "$got"); cat "$work/err")"; fi
}
