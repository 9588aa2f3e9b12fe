#!/usr/bin/env bash
# Builds lama on Debian 13 ("trixie") as a site there would: in a trixie root (made once with
# mmdebstrap and cached outside the tree, keyed by its package list) with trixie's hwloc 2.12 and
# Slurm 24.11 headers (libslurm-dev), this machine's Rust toolchain and crates mounted in. Runs
# the admin guide's build step as written there (docs/admin-guide.md, `script: site-build`), so
# the Debian package it prints is the one a trixie site installs.
# Usage: contrib/trixie-build.sh OUT      the package and the build's `lama` go into OUT (made
#                                         fresh); prints the package's path
#        contrib/trixie-build.sh root     make the root when missing; prints its folder
#        contrib/trixie-build.sh run OUT CMD...   run CMD in the root, from the repository (read
#                                         only), OUT mounted; prints its output
# Environment: LAMA_TRIXIE_CACHE (default /var/cache/lama/trixie-build).
# Root, with cargo installed by rustup in $HOME (its toolchain and crates are shared read-only,
# apart from cargo's own lock files; the build runs offline).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${LAMA_TRIXIE_CACHE:-/var/cache/lama/trixie-build}
packages=(build-essential pkg-config libhwloc-dev libudev-dev libslurm-dev hwloc binutils python3
  dpkg-dev lintian ca-certificates)
recipe=1
key=$(printf '%s\n' "${packages[@]}" "recipe $recipe" | sha256sum | cut -c1-12)
root=$cache/root-$key
die() { echo "trixie-build: $*" >&2; exit 1; }

make_root() {
  [ -f "$root/.lama-complete" ] && return
  "$top/contrib/deps.sh" mmdebstrap
  rm -rf "$root"
  mkdir -p "$cache"
  echo "trixie-build: making a Debian 13 build root in $root (about a minute)" >&2
  mmdebstrap --variant=apt --include="$(IFS=,; echo "${packages[*]}")" trixie "$root" \
    http://deb.debian.org/debian "deb http://deb.debian.org/debian-security trixie-security main" \
    >"$cache/root.log" 2>&1 || { tail -n 20 "$cache/root.log" >&2; die "mmdebstrap failed (log: $cache/root.log)"; }
  touch "$root/.lama-complete"
}

# Runs CMD... in the root, from the repository (read-only), with OUT mounted at the same path
# and cargo's environment; its output goes to OUT/LOG.
in_root() {
  local out=$1 log=$2 cargo_home=${CARGO_HOME:-$HOME/.cargo} rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
  shift 2
  [ -x "$cargo_home/bin/cargo" ] || die "no cargo in $cargo_home/bin (install Rust with rustup)"
  make_root
  mkdir -p "$cache/target-$key"
  # A private mount namespace: the mounts go when the command ends.
  unshare --mount --fork bash -euo pipefail -s "$root" "$top" "$out" "$cache/target-$key" \
    "$cargo_home" "$rustup_home" "$@" >"$out/$log" 2>&1 <<'EOF' || { tail -n 30 "$out/$log" >&2; die "$* failed in the trixie root (log: $out/$log)"; }
root=$1 top=$2 out=$3 target=$4 cargo_home=$5 rustup_home=$6
shift 6
for d in proc sys dev; do mkdir -p "$root/$d"; mount --rbind "/$d" "$root/$d"; done
for d in "$top" "$cargo_home" "$rustup_home" "$out" "$target"; do
  mkdir -p "$root$d"
  mount --bind "$d" "$root$d"
done
mount -o remount,bind,ro "$root$top"
chroot "$root" env -i PATH="$cargo_home/bin:/usr/sbin:/usr/bin:/sbin:/bin" HOME=/root \
  DEBFULLNAME="${DEBFULLNAME:-}" DEBEMAIL="${DEBEMAIL:-}" \
  CARGO_HOME="$cargo_home" RUSTUP_HOME="$rustup_home" CARGO_TARGET_DIR="$target" \
  CARGO_NET_OFFLINE=true LAMA_PACKAGE_DIR="$out" bash -euo pipefail -c 'cd "$0" && "$@"' "$top" "$@"
EOF
}

build() {
  local out=$1
  rm -rf "$out"
  mkdir -p "$out"
  out=$(realpath "$out")
  # Every crate the workspace needs, fetched here, so that the build inside runs offline.
  (cd "$top" && cargo fetch --locked --quiet)
  # The admin guide's build step, as written there (its block marked `script: site-build`).
  python3 "$top/tests/examples.py" script site-build > "$out/site-build.sh"
  # The root has no git: the packages' maintainer (contrib/package.sh) comes from here.
  DEBFULLNAME=${DEBFULLNAME:-$(git -C "$top" config user.name || git -C "$top" log -1 --format=%an || true)}
  DEBEMAIL=${DEBEMAIL:-$(git -C "$top" config user.email || git -C "$top" log -1 --format=%ae || true)}
  export DEBFULLNAME DEBEMAIL
  in_root "$out" build.log bash -euo pipefail -c 'echo "hwloc $(pkg-config --modversion hwloc), Slurm $(contrib/slurm-version.sh /usr/include)"
    bash -euo pipefail "$LAMA_PACKAGE_DIR/site-build.sh"
    cp "$CARGO_TARGET_DIR/release/lama" "$LAMA_PACKAGE_DIR/lama"'
  ls "$out"/lama-slurm_*.deb
}

case ${1:-} in
  root) make_root; echo "$root" ;;
  run) [ $# -ge 3 ] || die "usage: contrib/trixie-build.sh run OUT CMD..."; out=$(realpath "$2"); shift 2; in_root "$out" run.log "$@"; cat "$out/run.log" ;;
  "") die "usage: contrib/trixie-build.sh OUT|root|run OUT CMD..." ;;
  *) build "$1" ;;
esac
