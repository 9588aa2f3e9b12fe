#!/usr/bin/env bash
# Charliecloud (Debian's charliecloud-runtime) inside lama-placed tasks: `ch-run` started by
# each task inherits its CPUs and memory policy, and passes the host's environment; the image's
# own variables (`--set-env`) win over lama's, `--unset-env='*'` drops them, and
# `--set-env=NAME=$NAME` keeps each one. Every case against the same step outside a container,
# whose CPUs must be `lama plan`'s.
# Usage: tests/containers/charliecloud.sh LAMA_BINARY PLUGIN_SO
# (LAMA_SANDBOX, LAMA_SANDBOX_PORT and, for a built Slurm, LAMA_SLURM_PREFIX and PATH set.)
set -uo pipefail
source "$(dirname "$0")/../slurm/lib.sh"
source "$(dirname "$0")/lib.sh"

"$top/contrib/deps.sh" busybox-static charliecloud-runtime >/dev/null
version=$(USER=root ch-run --version 2>&1)
# The image: a busybox root, with an environment file of its own (`--set-env` reads it).
image=$work/image
mkdir -p "$image"/{bin,usr/bin,proc,sys,dev,tmp,etc,home,mnt,var/tmp,ch}
cp /bin/busybox "$image/bin/"
for c in sh cat grep cut; do ln -s /bin/busybox "$image/bin/$c"; ln -s /bin/busybox "$image/usr/bin/$c"; done
printf 'TASK_MAP=from-the-image\nLAMA_CPUS=from-the-image\nOMP_NUM_THREADS=99\n' >"$image/ch/environment"
cluster

step=(-N2 -n4 -c1 --lama-map=csbnh --lama-bind=1c --lama-mem=local --lama-threads=auto)
# in_ch CH_RUN_OPTIONS: each task's report from inside ch-run (options expanded by the task's
# shell, so that $NAME is the task's own).
in_ch() {
  run "${step[@]}" sh -c "USER=\${USER:-root} ch-run --no-passwd $1 '$image' -- sh -c '${report//\'/\'\\\'\'}'" 2>"$work/err" | sort
}
plan_outside 2

host=$(run "${step[@]}" sh -c "$report" 2>"$work/err" | sort)
if outside_as_planned "$host" 4 2; then
  ok "outside a container the step is lama plan's (CPUs, LAMA_CPUS), memory bound, TASK_MAP and OpenMP set"
else not_ok "the step outside a container (ranks off the plan:${off_plan:-none}; plan ${planned[*]})" "$host"; done_testing; exit 0; fi

got=$(in_ch "")
if [ "$got" = "$host" ]; then ok "Charliecloud $version, ch-run as it is: every task keeps its CPUs, memory policy, TASK_MAP, LAMA_* and OpenMP variables"
else not_ok "Charliecloud $version, ch-run as it is" "$(diff <(echo "$host") <(echo "$got"); cat "$work/err")"; fi

got=$(in_ch "--set-env")
if [ "$(grep -c 'TASK_MAP=from-the-image OMP=99/' <<<"$got")" = 4 ] && [ "$(grep -c 'LAMA_CPUS=from-the-image ' <<<"$got")" = 4 ] &&
  [ "$(cut -d' ' -f1-3 <<<"$got")" = "$(cut -d' ' -f1-3 <<<"$host")" ]; then
  ok "ch-run --set-env (the image's environment): the image's TASK_MAP, LAMA_CPUS and OMP_NUM_THREADS win, as the user guide says; CPUs and memory policy kept"
else not_ok "ch-run --set-env: the image's values (want them in every task, CPUs kept)" "$got$(cat "$work/err")"; fi

got=$(in_ch "--unset-env='*'")
if [ "$(grep -c ' LAMA_CPUS= LAMA_MEMS= TASK_MAP= OMP=//$' <<<"$got")" = 4 ] &&
  [ "$(cut -d' ' -f2-3 <<<"$got" | sort)" = "$(cut -d' ' -f2-3 <<<"$host" | sort)" ]; then
  ok "ch-run --unset-env='*': lama's variables are gone, as the user guide says; CPUs and memory policy kept"
else not_ok "ch-run --unset-env='*' (want no variable, CPUs kept)" "$got$(cat "$work/err")"; fi

keep=""
for v in SLURM_PROCID LAMA_CPUS LAMA_MEMS TASK_MAP OMP_NUM_THREADS OMP_PLACES OMP_PROC_BIND; do keep+=" --set-env=$v=\$$v"; done
got=$(in_ch "--unset-env='*'$keep")
if [ "$got" = "$host" ]; then ok "ch-run --unset-env='*' with --set-env=NAME=\$NAME for each name: every task has lama's values again"
else not_ok "ch-run --unset-env='*' --set-env=NAME=\$NAME" "$(diff <(echo "$host") <(echo "$got"); cat "$work/err")"; fi
done_testing
