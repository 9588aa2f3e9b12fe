#!/usr/bin/env bash
# Builds a Slurm release from its source tarball into a prefix outside the repository, with what
# the sandbox cluster needs: several slurmd on one machine (--enable-multiple-slurmd), munge,
# hwloc, PMIx (mpi/pmix) and cgroup v1. A finished build is reused: the prefix is keyed by the
# tarball's version and holds a marker written only after `make install` succeeded.
#
# Usage: contrib/slurm-build.sh [TARBALL]     prints the prefix on stdout
#   TARBALL  default: the newest ../shared/vendor/slurm/slurm-*.tar.xz beside the repository
# Environment: LAMA_SLURM_CACHE (where prefixes live, default /var/cache/lama/slurm).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${LAMA_SLURM_CACHE:-/var/cache/lama/slurm}

die() { echo "slurm-build: $*" >&2; exit 1; }

tarball=${1:-}
if [ -z "$tarball" ]; then
  tarball=$(ls "$top"/../shared/vendor/slurm/slurm-*.tar.* 2>/dev/null | sort -V | tail -n 1)
  [ -n "$tarball" ] || die "no tarball given and none in $top/../shared/vendor/slurm/"
fi
[ -r "$tarball" ] || die "cannot read $tarball"
name=$(basename "$tarball")
version=${name#slurm-}
version=${version%.tar.*}
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] || die "cannot tell the version from $name (want slurm-X.Y.Z.tar.*)"
prefix=$cache/slurm-$version
marker=$prefix/.lama-build-complete

if [ -f "$marker" ]; then
  echo "$prefix"
  exit 0
fi

"$top/contrib/deps.sh" build-essential libmunge-dev munge libhwloc-dev hwloc libpmix-dev pkg-config python3 xz-utils

pmix=$(dirname "$(dirname "$(dpkg -L libpmix-dev | grep '/include/pmix.h$' | head -n 1)")")
[ -d "$pmix" ] || die "cannot find PMIx's headers from libpmix-dev"

build=$cache/build-$version
rm -rf "$build" "$prefix"
mkdir -p "$build"
log=$build/build.log
started=$(date +%s)
echo "slurm-build: building Slurm $version into $prefix (log: $log)" >&2
tar -xf "$tarball" -C "$build" --strip-components=1
(
  cd "$build"
  # No debug info: the build is for tests, and -g doubles the compile time on two cores.
  ./configure --prefix="$prefix" --sysconfdir="$prefix/etc" --enable-multiple-slurmd \
    --with-munge --with-hwloc --with-pmix="$pmix" --disable-debug CFLAGS="-O2" >"$log" 2>&1
  make -j"$(nproc)" >>"$log" 2>&1
  make install >>"$log" 2>&1
) || { tail -n 30 "$log" >&2; die "building Slurm $version failed (log: $log)"; }
for p in mpi_pmix.so mpi_pmi2.so cgroup_v1.so task_affinity.so task_cgroup.so gres_gpu.so; do
  [ -f "$prefix/lib/slurm/$p" ] || die "the build has no $p (log: $log)"
done
echo "$(( $(date +%s) - started ))" > "$prefix/.lama-build-seconds"
touch "$marker"
rm -rf "$build"
echo "slurm-build: Slurm $version built in $(cat "$prefix/.lama-build-seconds") s" >&2
echo "$prefix"
