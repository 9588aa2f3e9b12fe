#!/usr/bin/env bash
# Installs Debian packages when any is missing (root, or sudo available).
# Usage: contrib/deps.sh            what lama needs to build and test (python3: tests/examples.py,
#                                   which finds and compares the docs' examples; gcc: the failing
#                                   SPANK plugin of tests/slurm/failures.sh), and a Rust toolchain check
#        contrib/deps.sh --mpi      the MPI libraries the cluster tests and the demo run
#        contrib/deps.sh --schedmd  what SchedMD's expect and Python tests need (tests/schedmd/):
#                                   expect and pytest, ATF's requests, pexpect and sudo, a C compiler
#                                   with libnuma's and Slurm's headers, xz for the testsuites
#        contrib/deps.sh --schedmd-list   print those package names (contrib/guest.sh's image)
#        contrib/deps.sh PKG...     these packages (used by the other scripts)
set -euo pipefail
case "${1:-}" in
  "") pkgs=(libhwloc-dev pkg-config libudev-dev hwloc libslurm-dev binutils python3 gcc libc6-dev) ;;
  --mpi) pkgs=(openmpi-bin libopenmpi-dev mpich libmpich-dev) ;;
  --schedmd | --schedmd-list)
    pkgs=(xz-utils expect gcc libc6-dev libnuma-dev libslurm-dev python3-pytest python3-requests
      python3-pexpect sudo)
    [ "$1" = --schedmd ] || { echo "${pkgs[*]}"; exit 0; } ;;
  *) pkgs=("$@") ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  # A new cloud machine runs unattended upgrades at first boot, and the test command's builds
  # install beside each other: wait for the package locks (up to LAMA_APT_LOCK_WAIT seconds, 20
  # minutes by default) instead of failing after apt's few tries.
  wait=${LAMA_APT_LOCK_WAIT:-1200}
  # One lama install at a time: apt-get update takes the lists' lock without waiting for it.
  lock=/run/lock/lama-deps.lock
  [ -w /run/lock ] || lock=${TMPDIR:-/tmp}/lama-deps.lock
  exec 9>>"$lock"
  flock -w "$wait" 9 || { echo "lama: another lama install held $lock for $wait s (LAMA_APT_LOCK_WAIT)" >&2; exit 1; }
  echo "lama: installing ${missing[*]}" >&2
  if command -v fuser >/dev/null && fuser /var/lib/dpkg/lock-frontend >/dev/null 2>&1; then
    echo "lama: another apt-get or dpkg holds dpkg's lock (unattended upgrades at first boot?); waiting up to $wait s" >&2
  fi
  apt=($SUDO apt-get -o DPkg::Lock::Timeout="$wait")
  start=$SECONDS said=""
  # Another program's apt-get update (unattended upgrades) holds the lists' lock: try again.
  until err=$("${apt[@]}" update -qq 2>&1); do
    if ! grep -q 'Could not get lock' <<<"$err" || [ $((SECONDS - start)) -ge "$wait" ]; then
      echo "$err" >&2; exit 1
    fi
    [ -n "$said" ] || echo "lama: another apt-get holds the package lists' lock (unattended upgrades at first boot?); waiting up to $wait s" >&2
    said=1; sleep 5
  done
  [ -z "$err" ] || echo "$err" >&2
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ -z "${1:-}" ]; then
  command -v cargo >/dev/null || { echo "lama: cargo is required (install Rust with rustup)" >&2; exit 1; }
fi
