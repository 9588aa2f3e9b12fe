#!/usr/bin/env bash
# lama's task maps against flux-core's libtaskmap (C), side by side on identical maps: NODES x PPN
# tasks placed block and cyclic, and block with 1 to 2 PPN - 1 tasks per node (uneven); building a map from the node of every task, encoding it as
# RFC 34, decoding it, the node of every task, the tasks of every node. Prints the median time of
# each (ms) and lama's ratio (lama / flux: below 1 is faster), and fails when the two disagree on
# any result.
#
# libtaskmap is built from ../shared/vendor/flux-core/flux-core-*-taskmap-subset.tar.xz into a
# folder outside the repository, keyed by its version (LAMA_FLUX_CACHE, default
# /var/cache/lama/flux); no flux-core code enters the tree. Our driver is
# contrib/bench/flux_taskmap.c; lama's is lama/examples/taskmap_peer.rs.
#
# Usage: contrib/taskmap-vs-flux.sh [NODES PPN RUNS]   (default 4096 256 15: 1M tasks)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
nodes=${1:-4096} ppn=${2:-256} runs=${3:-15}
cache=${LAMA_FLUX_CACHE:-/var/cache/lama/flux}
die() { echo "taskmap-vs-flux: $*" >&2; exit 1; }

tarball=$(ls "$top"/../shared/vendor/flux-core/flux-core-*-taskmap-subset.tar.xz 2>/dev/null | sort -V | tail -n 1)
[ -n "$tarball" ] || die "no flux-core taskmap subset in $top/../shared/vendor/flux-core/"
version=$(basename "$tarball")
version=${version#flux-core-}
version=${version%-taskmap-subset.tar.xz}
"$top/contrib/deps.sh" build-essential libjansson-dev pkg-config xz-utils

build=$cache/taskmap-$version
lib=$build/libtaskmap-peer.a
if [ ! -f "$build/.complete" ]; then
  rm -rf "$build"
  mkdir -p "$build/shim/flux" "$build/shim/src/common/libflux" "$build/obj"
  tar -xf "$tarball" -C "$build"
  src=$build/flux-core-$version
  # What flux's configure and libflux would provide to these files: a config.h (GNU extensions
  # come from -D_GNU_SOURCE, as some files include it after system headers), and the one libflux
  # type they use (flux_error_t, a message buffer).
  : > "$build/shim/config.h"
  printf '#ifndef LAMA_SHIM_TYPES_H\n#define LAMA_SHIM_TYPES_H\ntypedef struct { char text[160]; } flux_error_t;\n#endif\n' \
    > "$build/shim/src/common/libflux/types.h"
  printf '#ifndef LAMA_SHIM_CORE_H\n#define LAMA_SHIM_CORE_H\n#include <errno.h>\n#include <stdbool.h>\n#include <stdlib.h>\n#include "src/common/libflux/types.h"\n#endif\n' \
    > "$build/shim/flux/core.h"
  c=common
  for f in "$src"/src/$c/libtaskmap/taskmap.c "$src"/src/$c/libidset/{idset,idset_decode,idset_encode,idset_format,veb}.c \
           "$src"/src/$c/libutil/{errprintf,lru_cache}.c "$src"/src/$c/libczmqcontainers/{zlistx,zlist,zhashx,zhash,czmq_internal}.c; do
    gcc -O2 -D_GNU_SOURCE -c -I"$build/shim" -I"$src" -I"$src/src/include" -I"$src/src/common/libccan" \
      -I"$src/src/common/libidset" "$f" -o "$build/obj/$(basename "$f" .c).o" || die "cannot compile $f"
  done
  ar rcs "$lib" "$build"/obj/*.o
  touch "$build/.complete"
fi
src=$build/flux-core-$version
gcc -O2 -I"$build/shim" -I"$src" -I"$src/src/include" -I"$src/src/common/libtaskmap" \
  "$top/contrib/bench/flux_taskmap.c" "$lib" -ljansson -o "$build/flux_taskmap"
cargo build --release --quiet --manifest-path "$top/Cargo.toml" -p lama --example taskmap_peer

flux_out=$("$build/flux_taskmap" "$nodes" "$ppn" "$runs")
lama_out=$("$top/target/release/examples/taskmap_peer" "$nodes" "$ppn" "$runs")
printf '%s x %s tasks (%s nodes x %s per node), median of %s runs, ms\n' "$nodes" "$ppn" "$nodes" "$ppn" "$runs"
printf '%-8s %-8s %12s %12s %8s\n' shape op flux lama ratio
join -j1 <(awk '{ print $1 "/" $2, $3, $4 }' <<<"$flux_out" | sort) \
         <(awk '{ print $1 "/" $2, $3, $4 }' <<<"$lama_out" | sort) |
  awk '{ split($1, k, "/")
         if ($3 != $5) { bad = 1; printf "  %s %s: flux computed %.80s..., lama %.80s...\n", k[1], k[2], $3, $5 > "/dev/stderr" }
         r = ($2 > 0) ? $4 / $2 : 0
         printf "%-8s %-8s %12.4f %12.4f %8.3f\n", k[1], k[2], $2, $4, r }
       END { exit bad }' || die "lama and flux-core disagree (above)"
