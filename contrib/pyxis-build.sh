#!/usr/bin/env bash
# Builds NVIDIA's pyxis (the SPANK plugin behind `srun --container-image`) from its vendored
# source tarball against one Slurm's headers, into a prefix outside the repository, for
# tests/containers/. A finished build is reused: the prefix is keyed by pyxis's version and the
# Slurm release it was built for, and holds a marker written only after the build succeeded.
#
# Usage: contrib/pyxis-build.sh SLURM_INCLUDE [TARBALL]     prints the prefix on stdout
#   SLURM_INCLUDE  the directory holding slurm/spank.h (a Slurm prefix's include/)
#   TARBALL        default: the newest ../shared/vendor/containers/pyxis-X.Y.Z*.tar.*
# Environment: LAMA_CONTAINERS_CACHE (where prefixes live, default /var/cache/lama/containers).
# The plugin is PREFIX/spank_pyxis.so.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${LAMA_CONTAINERS_CACHE:-/var/cache/lama/containers}

die() { echo "pyxis-build: $*" >&2; exit 1; }

include=${1:-}
[ -f "$include/slurm/spank.h" ] || die "usage: pyxis-build.sh SLURM_INCLUDE [TARBALL] (no slurm/spank.h in '${include}')"
slurm=$("$top/contrib/slurm-version.sh" "$include")
what=pyxis stem=pyxis recipe=slurm-$slurm
# shellcheck source=contrib/cached-build.sh
source "$top/contrib/cached-build.sh"

tarball=$(newest_tarball "${2:-}" containers)
cached_prefix "$tarball"

"$top/contrib/deps.sh" build-essential make xz-utils

steps() {
  # pyxis's Makefile adds its own flags to CPPFLAGS from the environment.
  CPPFLAGS="-I$include" make -j"$(nproc)" >"$log" 2>&1
  mkdir -p "$prefix"
  install -m 644 spank_pyxis.so "$prefix/"
}
cached_build steps
cached_done
