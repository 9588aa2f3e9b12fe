#!/usr/bin/env bash
# Builds a Slurm release from its source tarball into a prefix outside the repository, with what
# the sandbox cluster needs: several slurmd on one machine (--enable-multiple-slurmd), munge,
# hwloc, PMIx (mpi/pmix) and cgroup v1, and what the guest (contrib/guest.sh) needs: cgroup v2
# (with D-Bus, for slurmd's systemd scope) and its eBPF device filter; and the gpu/nvml plugin
# (AutoDetect=nvml), configured against NVIDIA's nvml.h (contrib/nvml-dev.sh) and the tests'
# stand-in libnvidia-ml, which slurmd loads at run time only where gres.conf asks for NVML
# (tests/slurm/nvml.sh); and serializer/json (libjson-c), which oci.conf needs for
# `srun --container` (tests/containers/). A finished build is
# reused: the prefix is keyed by the tarball's version and the recipe below, and holds a marker
# written only after `make install` succeeded.
#
# Usage: contrib/slurm-build.sh [TARBALL]     prints the prefix on stdout
#   TARBALL  default: the newest ../shared/vendor/slurm/slurm-*.tar.xz beside the repository
# Environment: LAMA_SLURM_CACHE (where prefixes live, default /var/cache/lama/slurm).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${LAMA_SLURM_CACHE:-/var/cache/lama/slurm}

die() { echo "slurm-build: $*" >&2; exit 1; }

what=Slurm stem=slurm
# Changes whenever the configure line or the build's dependencies do (cg2: cgroup v2 added;
# nvml: the gpu/nvml plugin; json: serializer/json, for oci.conf).
recipe=cg2-nvml-json
# shellcheck source=contrib/cached-build.sh
source "$top/contrib/cached-build.sh"

tarball=$(newest_tarball "${1:-}" slurm)
cached_prefix "$tarball"

"$top/contrib/deps.sh" build-essential libmunge-dev munge libhwloc-dev hwloc libpmix-dev pkg-config python3 xz-utils \
  libdbus-1-dev linux-libc-dev libjson-c-dev

pmix=$(dirname "$(dirname "$(dpkg -L libpmix-dev | grep '/include/pmix.h$' | head -n 1)")")
[ -d "$pmix" ] || die "cannot find PMIx's headers from libpmix-dev"

nvml_include=$("$top/contrib/nvml-dev.sh")

steps() {
  # configure looks for DIR/include/nvml.h and DIR/lib64/stubs/libnvidia-ml.so, as in CUDA.
  mkdir -p nvml/lib64/stubs
  ln -s "$nvml_include" nvml/include
  gcc -shared -fPIC -O2 -I"$nvml_include" "$top/tests/nvml/nvml_standin.c" \
    -o nvml/lib64/stubs/libnvidia-ml.so >"$log" 2>&1
  # No debug info: the build is for tests, and -g doubles the compile time on two cores.
  ./configure --prefix="$prefix" --sysconfdir="$prefix/etc" --enable-multiple-slurmd \
    --with-munge --with-hwloc --with-pmix="$pmix" --with-nvml="$PWD/nvml" --disable-debug CFLAGS="-O2" >>"$log" 2>&1
  grep -q '^#define HAVE_MIG_SUPPORT 1' config.h || { echo "configure found no NVML with MIG" >>"$log"; return 1; }
  make -j"$(nproc)" >>"$log" 2>&1
  make install >>"$log" 2>&1
}
cached_build steps
for p in mpi_pmix.so mpi_pmi2.so cgroup_v1.so cgroup_v2.so task_affinity.so task_cgroup.so gres_gpu.so gpu_nvml.so serializer_json.so; do
  [ -f "$prefix/lib/slurm/$p" ] || die "the build has no $p (log: $log)"
done
cached_done
