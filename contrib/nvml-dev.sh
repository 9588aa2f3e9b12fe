#!/usr/bin/env bash
# NVIDIA's NVML header (nvml.h), from PyPI's nvidia-nvml-dev-cu12 wheel, fetched once into a
# folder outside the repository keyed by the wheel's version. Slurm's configure needs it to build
# its gpu/nvml plugin (contrib/slurm-build.sh), and the tests compile their stand-in NVML
# (tests/nvml/nvml_standin.c) against it, so that every signature is NVIDIA's own.
#
# Usage: contrib/nvml-dev.sh     prints the folder that holds nvml.h
# Environment: LAMA_NVML_CACHE (default /var/cache/lama/nvml).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
wheel=nvidia-nvml-dev-cu12 version=12.9.79
dir=${LAMA_NVML_CACHE:-/var/cache/lama/nvml}/$wheel-$version
if [ -f "$dir/include/nvml.h" ]; then
  echo "$dir/include"
  exit 0
fi
die() { echo "nvml-dev: $*" >&2; exit 1; }
"$top/contrib/deps.sh" python3-pip >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --disable-pip-version-check --no-input --no-deps --only-binary=:all: \
  -d "$tmp" "$wheel==$version" >"$tmp/log" 2>&1 || { tail -n 5 "$tmp/log" >&2; die "pip could not download $wheel $version"; }
python3 -m zipfile -e "$tmp"/*.whl "$tmp/x" || die "cannot unpack the $wheel wheel"
[ -f "$tmp/x/nvidia/nvml_dev/include/nvml.h" ] || die "the $wheel wheel has no nvidia/nvml_dev/include/nvml.h"
mkdir -p "$dir.new/include"
cp "$tmp/x/nvidia/nvml_dev/include/nvml.h" "$dir.new/include/"
rm -rf "$dir"
mv "$dir.new" "$dir"
echo "$dir/include"
