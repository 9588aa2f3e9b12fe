#!/usr/bin/env bash
# Builds crun (an OCI runtime) from its vendored source tarball into a prefix outside the
# repository, for tests/containers/oci.sh: crun from 1.25 resets the CPU affinity a container's
# first process inherits, which Slurm's `--container` steps run into (and `lama oci-run` undoes).
# A finished build is reused: the prefix is keyed by the tarball's version and holds a marker
# written only after `make install` and a version check succeeded.
#
# Usage: contrib/crun-build.sh [TARBALL]     prints the prefix on stdout
#   TARBALL  default: the newest ../shared/vendor/containers/crun-X.Y.Z*.tar.* beside the repository
# Environment: LAMA_CONTAINERS_CACHE (where prefixes live, default /var/cache/lama/containers).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${LAMA_CONTAINERS_CACHE:-/var/cache/lama/containers}

die() { echo "crun-build: $*" >&2; exit 1; }

what=crun stem=crun
# shellcheck source=contrib/cached-build.sh
source "$top/contrib/cached-build.sh"

tarball=$(newest_tarball "${1:-}" containers)
cached_prefix "$tarball"

"$top/contrib/deps.sh" autoconf automake libtool make pkg-config build-essential gperf \
  libyajl-dev libcap-dev libseccomp-dev libsystemd-dev xz-utils

steps() {
  # The tarball holds libocispec and its specs already: autoreconf, not autogen.sh (which runs
  # git submodule). Without systemd: the runtime runs under Slurm's cgroups, not as a unit.
  autoreconf -fi >"$log" 2>&1
  ./configure --disable-systemd --prefix="$prefix" >>"$log" 2>&1
  make -j"$(nproc)" >>"$log" 2>&1
  make install >>"$log" 2>&1
}
cached_build steps
want=${version%%-*}
got=$("$prefix/bin/crun" --version 2>/dev/null | awk '/^crun version/ {print $3}')
[ "$got" = "$want" ] || die "the build's crun says version '${got:-nothing}', not $want (log: $log)"
cached_done
