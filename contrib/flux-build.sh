#!/usr/bin/env bash
# Builds flux-core from its source tarball into a prefix outside the repository, for tests that
# run a real Flux instance. A finished build is reused: the prefix is keyed by the tarball's
# version and holds a marker written only after `make install` succeeded.
#
# Usage: contrib/flux-build.sh [TARBALL]     prints the prefix on stdout
#   TARBALL  default: the newest ../shared/vendor/flux-core/flux-core-X.Y.Z.tar.* beside the
#            repository (not the taskmap subset)
# Environment: LAMA_FLUX_CACHE (where prefixes live, default /var/cache/lama/flux).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${LAMA_FLUX_CACHE:-/var/cache/lama/flux}

die() { echo "flux-build: $*" >&2; exit 1; }

what=flux-core stem=flux-core
# shellcheck source=contrib/cached-build.sh
source "$top/contrib/cached-build.sh"

tarball=$(newest_tarball "${1:-}" flux-core)
cached_prefix "$tarball"

# Debian 12's packages for the build (lua-posix serves Lua up to 5.3, hence 5.3).
"$top/contrib/deps.sh" autoconf automake libtool make pkg-config build-essential libzmq3-dev \
  uuid-dev libjansson-dev liblz4-dev libarchive-dev libhwloc-dev libsqlite3-dev lua5.3 \
  liblua5.3-dev lua-posix python3-dev python3-cffi python3-ply python3-setuptools python3-yaml \
  jq munge xz-utils

steps() {
  # No .git in a tarball: the version comes from FLUX_VERSION. Debian's own Python has ply.
  FLUX_VERSION=$version ./autogen.sh >"$log" 2>&1
  ./configure --prefix="$prefix" --disable-docs PYTHON=/usr/bin/python3 LUA=/usr/bin/lua5.3 \
    CFLAGS="-O2" >>"$log" 2>&1
  make -j"$(nproc)" >>"$log" 2>&1
  make install >>"$log" 2>&1
}
cached_build steps
[ -x "$prefix/bin/flux" ] || die "the build has no bin/flux (log: $log)"
[ -f "$prefix/include/flux/shell.h" ] || die "the build has no include/flux/shell.h (log: $log)"
cached_done
