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
    grep -q 'TASK_MAP={' <<<"$lines" && grep -q 'OMP=1/' <<<"$lines"
}
