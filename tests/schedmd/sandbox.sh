#!/usr/bin/env bash
# SchedMD's expect tests with lama loaded (tests/schedmd/differential.sh) on a sandbox cluster of
# its own: three nodes with the usual site settings (proctrack/cgroup, task/affinity,task/cgroup,
# ConstrainCores) and memory declared, so that jobs may ask for some, with SchedMD's testsuites
# in ../shared/vendor/slurm-testsuite.
# Usage: tests/schedmd/sandbox.sh PREFIX PLUGIN TESTS_FILE|TEST...|--all
#   PREFIX  the Slurm to run (/usr for Debian's packages, or a prefix of contrib/slurm-build.sh)
#   PLUGIN  lama's plugin built for it
# Environment: LAMA_SHARED (the shared folder), LAMA_SANDBOX and LAMA_SANDBOX_PORT (this
#   cluster's state directory and ports; defaults /tmp/lama-sandbox-schedmd and 21800),
#   and differential.sh's.
# Prints differential.sh's lines, and the time this took.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
source "$top/tests/tap.sh"
source "$top/tests/harness.sh"
prefix=$1 plugin=$(realpath "$2")
shift 2
shared=${LAMA_SHARED:-$top/../shared}
started=$(date +%s)
export LAMA_SANDBOX=${LAMA_SANDBOX:-/tmp/lama-sandbox-schedmd} LAMA_SANDBOX_PORT=${LAMA_SANDBOX_PORT:-21800}
[ "$prefix" = /usr ] || export LAMA_SLURM_PREFIX=$prefix PATH=$prefix/bin:$prefix/sbin:$PATH
release=$("$top/contrib/slurm-version.sh" "$prefix/include")

log=$(mktemp)
out=$(mktemp)
trap '"$top/contrib/sandbox.sh" stop >/dev/null 2>&1; rm -f "$log" "$out"' EXIT
"$top/contrib/sandbox.sh" stop >/dev/null 2>&1
# Slurm reads lama's line from a file of its own, which includes plugstack.conf: SchedMD's tests
# edit plugstack.conf, and two of them (test7.21, test7.24) write it anew with their own plugin
# alone, which would leave lama out of their runs.
export LAMA_SANDBOX_PLUGSTACK=$LAMA_SANDBOX/plugstack.lama.conf
if ! LAMA_SANDBOX_CGROUP=1 LAMA_SANDBOX_MEMORY=1000 "$top/contrib/sandbox.sh" start >"$log" 2>&1; then
  echo "not ok - [Slurm $release] a sandbox cluster for SchedMD's tests starts"
  sed 's/^/#   /' "$log"
  exit 0
fi
export SLURM_CONF=$LAMA_SANDBOX/slurm.conf
# The control: a plugin that cannot load fails every step under lama, and differential.sh must
# say so, with the lines of the failed run (test1.1: a few seconds).
ctl=$(mktemp -d)
broken=$ctl/broken.so
: >"$broken"
control=$(LAMA_SCHEDMD_OUT=$ctl/out LAMA_SCHEDMD_WHERE=sandbox "$top/tests/schedmd/differential.sh" \
  "$shared/vendor/slurm-testsuite" "$broken" "$LAMA_SANDBOX_PLUGSTACK" test1.1 2>&1)
status=$?
# (It counts only as a whole run: its status 0 and its last line.)
if [ "$status" = 0 ] && grep -qx '# done: differential.sh' <<<"$control" &&
  grep -q "^not ok - .* test1.1 passes without lama and fails with lama's default arguments" <<<"$control" &&
  grep -qF "$broken" <<<"$(grep '^#     ' <<<"$control")"; then
  ok "[Slurm $release] differential.sh catches a lama plugin that fails every step (test1.1), and shows the failed run's lines"
else
  not_ok "[Slurm $release] differential.sh catches a lama plugin that fails every step (test1.1), with the failed run's lines (it exited with status $status)" "$control"
fi
rm -rf "$ctl"
# differential.sh's verdict counts only when it ran to its end.
LAMA_SCHEDMD_ARGS="cache=$LAMA_SANDBOX/cache" LAMA_SCHEDMD_WHERE=sandbox \
  "$top/tests/schedmd/differential.sh" "$shared/vendor/slurm-testsuite" "$plugin" "$LAMA_SANDBOX_PLUGSTACK" "$@" 2>&1 | tee "$out"
verdict differential.sh "${PIPESTATUS[0]}" "$out" | sed "s/^not ok - /&[Slurm $release] /"
echo "# SchedMD's tests on Slurm $release (sandbox): $(($(date +%s) - started)) s"
done_testing
