#!/usr/bin/env bash
# Every SchedMD expect test of the areas lama could touch (test1.* srun, test7.* SPANK, task
# prolog and environment, test15.* salloc, test17.* sbatch), run with lama loaded three times
# each (without lama, with its defaults, under a site's policy=auto: tests/schedmd/differential.sh).
# The test command runs a chosen part of them (tests/schedmd/sandbox.txt) on the sandbox; this
# runs them all, which takes hours: several wait out time limits of minutes (test1.7, ...).
# Usage: contrib/schedmd-tests.sh [sandbox|guest|trixie] [TEST...]   (default: sandbox, every test)
#   sandbox  a sandbox cluster of every Slurm release the test command tests: Debian's 22.05 and
#            the release in ../shared/vendor/slurm (built by contrib/slurm-build.sh, cached)
#   guest    the site-kernel guest (contrib/guest.sh: SMT, two NUMA nodes, cgroup v2, systemd) on
#            the same releases, set up as tests/guest/suite.sh sets it up
#   trixie   the Debian 13 guest on Debian's 24.11, lama installed from the package built there
#            (contrib/trixie-build.sh), Slurm run by Debian's own units
# The guests run under TCG where KVM cannot boot them: about a minute a test run there.
# Environment: LAMA_SHARED (the shared folder, default ../shared beside the repository),
#   LAMA_SCHEDMD_OUT (where each release's table and logs are kept; default
#   /tmp/lama-schedmd-WHERE-DATE), LAMA_SCHEDMD_TIMEOUT (seconds a test may take, default 600),
#   LAMA_TEST_TARBALLS (as for contrib/test.sh: Slurm tarballs to build; "none" for Debian's alone).
# Prints differential.sh's lines for each release; the tables stay in LAMA_SCHEDMD_OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
where=sandbox
case ${1:-} in sandbox | guest | trixie) where=$1; shift ;; esac
tests=("$@")
[ $# -gt 0 ] || tests=(--all)
shared=${LAMA_SHARED:-$top/../shared}
suites=$shared/vendor/slurm-testsuite
[ -d "$suites" ] || {
  echo "lama: no $suites (SchedMD's testsuites): put the project's shared/ folder beside this clone as ../shared, or set LAMA_SHARED=DIR" >&2
  exit 2
}
suites=$(realpath "$suites")
out=${LAMA_SCHEDMD_OUT:-/tmp/lama-schedmd-$where-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
contrib/deps.sh
contrib/deps.sh --schedmd
# What the guests need besides their usual packages (an image of its own, which every call of
# contrib/guest.sh names through this variable).
export LAMA_GUEST_EXTRA=schedmd
guest_env=(LAMA_SCHEDMD_TIMEOUT="${LAMA_SCHEDMD_TIMEOUT:-600}")

# The plugins of every release, where a guest sees them too (the repository is shared).
releases=(/usr)
if [ "$where" != trixie ]; then
  tarballs=${LAMA_TEST_TARBALLS:-$(ls "$shared"/vendor/slurm/slurm-*.tar.* 2>/dev/null | sort -V | tail -n 1 || true)}
  if [ -n "$tarballs" ] && [ "$tarballs" != none ]; then
    for t in $tarballs; do releases+=("$(contrib/slurm-build.sh "$t")"); done
  fi
  plugins=$top/target/schedmd/plugins
  includes=()
  for r in "${releases[@]}"; do includes+=("$r/include"); done
  tests/headers.sh "$plugins" "${includes[@]}" | grep -v '^ok' || true
fi

# In a guest: Slurm set up as the guest suite sets it up, then the three runs; the table is
# copied out.
in_guest() {
  local run=$1 prefix=$2 plugin=$3 version=$4 dist=$5
  shift 5
  LAMA_GUEST_DIST=$dist contrib/guest.sh ssh "$run" env "$@" LAMA_GUEST_SETUP_ONLY=1 \
    bash "$top/tests/guest/suite.sh" "$prefix" /bin/true "$plugin" "$top" ||
    { echo "not ok - Slurm $version set up in the $dist guest"; return; }
  # ssh joins its arguments into one command line: each is quoted for the guest's shell.
  LAMA_GUEST_DIST=$dist contrib/guest.sh ssh "$run" "$(printf '%q ' env "${guest_env[@]}" SLURM_CONF=/etc/slurm/slurm.conf \
    PATH="$prefix/bin:$prefix/sbin:/usr/bin:/usr/sbin:/bin:/sbin" LAMA_SCHEDMD_OUT="/root/schedmd-$version" \
    LAMA_SCHEDMD_WHERE="$dist guest" bash "$top/tests/schedmd/differential.sh" "$suites" "$plugin" \
    /etc/slurm/plugstack.conf "${tests[@]}")"
  mkdir -p "$out/$version"
  LAMA_GUEST_DIST=$dist contrib/guest.sh ssh "$run" cat "/root/schedmd-$version/table.tsv" >"$out/$version/table.tsv"
}

case $where in
  sandbox)
    for r in "${releases[@]}"; do
      version=$(contrib/slurm-version.sh "$r/include")
      mkdir -p "$out/$version"
      LAMA_SHARED=$shared LAMA_SCHEDMD_OUT=$out/$version \
        tests/schedmd/sandbox.sh "$r" "$plugins/$version/liblama_spank.so" "${tests[@]}"
    done ;;
  guest)
    run=$(mktemp -d /tmp/lama-schedmd-guest.XXXXXX)
    trap 'contrib/guest.sh stop "$run" >/dev/null 2>&1 || true; rm -rf "$run"' EXIT
    shares=("top=$top" "s=$suites")
    for r in "${releases[@]:1}"; do shares+=("p=$r"); done
    contrib/guest.sh start "$run" "${shares[@]}"
    for r in "${releases[@]}"; do
      version=$(contrib/slurm-version.sh "$r/include")
      in_guest "$run" "$r" "$plugins/$version/liblama_spank.so" "$version" bookworm
    done ;;
  trixie)
    work=$(mktemp -d /tmp/lama-schedmd-trixie.XXXXXX)
    run=$work/guest
    trap 'LAMA_GUEST_DIST=trixie contrib/guest.sh stop "$run" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
    deb=$(contrib/trixie-build.sh "$work/build" | tail -n 1)
    LAMA_GUEST_DIST=trixie contrib/guest.sh start "$run" "top=$top" "s=$suites" "b=$work/build"
    LAMA_GUEST_DIST=trixie contrib/guest.sh ssh "$run" dpkg -i "$deb" >/dev/null
    plugin=$(LAMA_GUEST_DIST=trixie contrib/guest.sh ssh "$run" dpkg -L lama-slurm | grep '/slurm-wlm/lama\.so$')
    # Debian's srun asks for a configuration even for --version, and Slurm is not set up yet.
    version=$(LAMA_GUEST_DIST=trixie contrib/guest.sh ssh "$run" dpkg-query -W -f='\${Version}' slurm-client | sed 's/[-+~].*//')
    in_guest "$run" /usr "$plugin" "$version" trixie LAMA_GUEST_UNITS=debian ;;
esac
echo "# tables and logs: $out"
