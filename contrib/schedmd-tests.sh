#!/usr/bin/env bash
# Every SchedMD expect test of the areas lama could touch (test1.* srun, test7.* SPANK, task
# prolog and environment, test15.* salloc, test17.* sbatch), run with lama loaded three times
# each (without lama, with its defaults, under a site's policy=auto) on a sandbox cluster of
# every Slurm release the test command tests: Debian's 22.05 and the release in
# ../shared/vendor/slurm (built by contrib/slurm-build.sh, cached). The test command runs a chosen
# part of them (tests/schedmd/sandbox.txt); this runs them all, which takes hours: several wait
# out time limits of minutes (test1.7, test15.5, ...).
# Usage: contrib/schedmd-tests.sh [TEST...]   (default: every test of those four groups)
# Environment: LAMA_SHARED (the shared folder, default ../shared beside the repository),
#   LAMA_SCHEDMD_OUT (where each release's table and logs are kept; default
#   /tmp/lama-schedmd-RUN), LAMA_SCHEDMD_TIMEOUT (seconds a test may take, default 600),
#   LAMA_TEST_TARBALLS (as for contrib/test.sh: Slurm tarballs to build; "none" for Debian's alone).
# Prints differential.sh's lines for each release; the tables stay in LAMA_SCHEDMD_OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
shared=${LAMA_SHARED:-$top/../shared}
[ -d "$shared/vendor/slurm-testsuite" ] || {
  echo "lama: no $shared/vendor/slurm-testsuite (SchedMD's testsuites): put the project's shared/ folder beside this clone as ../shared, or set LAMA_SHARED=DIR" >&2
  exit 2
}
out=${LAMA_SCHEDMD_OUT:-/tmp/lama-schedmd-$(date +%Y%m%d-%H%M%S)}
contrib/deps.sh
contrib/deps.sh expect gcc libc6-dev libnuma-dev
tarballs=${LAMA_TEST_TARBALLS:-$(ls "$shared"/vendor/slurm/slurm-*.tar.* 2>/dev/null | sort -V | tail -n 1 || true)}
releases=(/usr)
if [ -n "$tarballs" ] && [ "$tarballs" != none ]; then
  for t in $tarballs; do releases+=("$(contrib/slurm-build.sh "$t")"); done
fi
plugins=$(mktemp -d)
trap 'rm -rf "$plugins"' EXIT
includes=()
for r in "${releases[@]}"; do includes+=("$r/include"); done
tests/headers.sh "$plugins" "${includes[@]}" | grep -v '^ok' || true

for r in "${releases[@]}"; do
  version=$(contrib/slurm-version.sh "$r/include")
  list=("$@")
  [ $# -gt 0 ] || list=(--all)
  mkdir -p "$out/$version"
  LAMA_SHARED=$shared LAMA_SCHEDMD_OUT=$out/$version \
    tests/schedmd/sandbox.sh "$r" "$plugins/$version/liblama_spank.so" "${list[@]}"
done
echo "# tables and logs: $out"
