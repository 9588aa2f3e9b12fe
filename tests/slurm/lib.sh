# Shared by the cluster tests, sourced with their arguments (LAMA_BINARY PLUGIN_SO): sets $lama,
# $plugin, $top (the repository) and $work (a scratch directory removed on exit), points Slurm's
# commands at the sandbox named by LAMA_SANDBOX, and defines TAP-like result lines, cluster
# restarts and `lama plan` as lines.
lama=$(realpath "$1")
plugin=$(realpath "$2")
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export SLURM_CONF=$LAMA_SANDBOX/slurm.conf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ok() { echo "ok - $1"; }
not_ok() { echo "not ok - $1"; shift; printf '%s\n' "$@" | sed 's/^/#   /'; }
# Rewrites the plugin's plugstack.conf line (slurmstepd and srun read it for every step).
# The sandbox's own topology cache ($LAMA_SANDBOX/cache) is added unless the line names a cache=.
plugstack() { "$top/contrib/sandbox.sh" plugstack "$*"; }
# Restarts the sandbox with the plugin; arguments are extra sandbox settings (VAR=value).
cluster() {
  "$top/contrib/sandbox.sh" stop >/dev/null 2>&1
  env "$@" LAMA_SANDBOX_PLUGIN="required $plugin" "$top/contrib/sandbox.sh" start >/dev/null
}
run() { timeout 120 srun "$@"; }
# `lama plan` text as "rank node cpus" lines.
plan_lines() { "$lama" plan "$@" | awk '/^node [0-9]+ / {n = $2} /^  rank / {print $2, n, $NF}' | sort -n; }
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
# Builds tests/mpi/probe.c with Debian's Open MPI and MPICH as $work/probe.openmpi and
# $work/probe.mpich (a failed build is a failed case).
mpi_probes() {
  local lib
  for lib in openmpi mpich; do
    if ! "mpicc.$lib" -fopenmp -O1 -o "$work/probe.$lib" "$top/tests/mpi/probe.c" 2>"$work/cc.err"; then
      not_ok "probe builds with mpicc.$lib" "$(cat "$work/cc.err")"
    fi
  done
}
