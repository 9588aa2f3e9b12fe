#!/usr/bin/env bash
# Builds NVIDIA's enroot (the unprivileged container runtime pyxis drives) from its vendored
# source tarball into a prefix outside the repository, for tests/containers/. The tarball has
# none of enroot's git submodules: the helpers link Debian's libbsd and glibc instead of the
# bundled musl, and the self-extracting bundle (the one thing makeself is for) is not built.
# A finished build is reused: the prefix is keyed by the tarball's version and holds a marker
# written only after `make install` and a version check succeeded.
#
# Usage: contrib/enroot-build.sh [TARBALL]     prints the prefix on stdout
#   TARBALL  default: the newest ../shared/vendor/containers/enroot-X.Y.Z*.tar.* beside the repository
# Environment: LAMA_CONTAINERS_CACHE (where prefixes live, default /var/cache/lama/containers).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${LAMA_CONTAINERS_CACHE:-/var/cache/lama/containers}

die() { echo "enroot-build: $*" >&2; exit 1; }

what=enroot stem=enroot
# shellcheck source=contrib/cached-build.sh
source "$top/contrib/cached-build.sh"

tarball=$(newest_tarball "${1:-}" containers)
cached_prefix "$tarball"

# What enroot runs at run time too: squashfs-tools (images), jq, zstd, and user namespaces.
"$top/contrib/deps.sh" build-essential make libbsd-dev squashfs-tools jq zstd xz-utils

steps() {
  # No submodules to fetch; the makeself and kernel-header stamps stand for the parts not built
  # (glibc 2.36 has no strlcpy: libbsd's, linked statically).
  sed -i '/git submodule/d' Makefile
  mkdir -p deps/makeself deps/linux-headers deps/dist/makeself/bin
  touch deps/makeself/.stamp deps/linux-headers/.stamp
  printf '#!/bin/sh\necho "enroot-makeself: not built (lama tests)" >&2\nexit 1\n' >deps/dist/makeself/bin/enroot-makeself
  chmod 755 deps/dist/makeself/bin/enroot-makeself
  make FORCE_GLIBC=1 LDLIBS="-l:libbsd.a $(dpkg -L libbsd-dev | grep '/libbsd.so$' | head -n 1)" \
    prefix="$prefix" -j"$(nproc)" >"$log" 2>&1
  make FORCE_GLIBC=1 prefix="$prefix" install >>"$log" 2>&1
  # Where a site's enroot.conf puts each user's containers, here for the sandbox's nodes, which
  # share one machine: per node (each slurmd has its own host name) and per user, under
  # LAMA_ENROOT_ROOT (the job's variable; pyxis passes the job's environment to enroot).
  local root='${LAMA_ENROOT_ROOT:-/tmp/lama-enroot}/$(hostname)/user-${UID}'
  for p in RUNTIME:run DATA:data CACHE:cache CONFIG:config; do
    echo "ENROOT_${p%%:*}_PATH $root/${p#*:}"
  done >"$prefix/etc/enroot/enroot.conf.d/lama-sandbox.conf"
}
cached_build steps
want=${version%%-*}
got=$("$prefix/bin/enroot" version 2>/dev/null || true)
[ "$got" = "$want" ] || die "the build's enroot says version '${got:-nothing}', not $want (log: $log)"
cached_done
