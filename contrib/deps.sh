#!/usr/bin/env bash
# Installs the Debian packages lama needs to build and test, when any is missing.
# Usage: contrib/deps.sh [--mpi]   (root, or sudo available)
#   --mpi  the MPI libraries the cluster tests and the demo run (Open MPI and MPICH, with mpicc)
set -euo pipefail
pkgs=(libhwloc-dev pkg-config libudev-dev hwloc libslurm-dev binutils)
[ "${1:-}" = --mpi ] && pkgs=(openmpi-bin libopenmpi-dev mpich libmpich-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "lama: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "lama: cargo is required (install Rust with rustup)" >&2; exit 1; }
