#!/usr/bin/env bash
# The plugin builds against every Slurm header set it supports, and each build carries that
# release's version (Slurm refuses a SPANK plugin of another major.minor release). Headers whose
# SPANK interface differs from the bindings' must stop the build with a message.
# Usage: tests/headers.sh OUT_DIR INCLUDE_DIR...   (run from the repository)
#   Each build is copied to OUT_DIR/VERSION/liblama_spank.so for the cluster tests to load, with
#   the hwloc helper liblama_probe.so beside it (one build: it does not depend on Slurm).
# Prints one "ok - ..." or "not ok - ..." line per header set.
set -uo pipefail
out=$1; shift
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build --quiet -p lama-probe || { echo "not ok - the hwloc helper (lama-probe) builds"; exit 0; }

# The 4-byte little-endian plugin_version symbol of a shared object, as 0x hex.
plugin_version() {
  local addr bytes
  addr=$(nm -D --defined-only "$1" | awk '$3 == "plugin_version" {print $1}')
  [ -n "$addr" ] || return 1
  bytes=$(objdump -s -j .rodata --start-address=$((16#$addr)) --stop-address=$((16#$addr + 4)) "$1" |
    awk '/^ [0-9a-f]+ / {print $2; exit}')
  printf '0x%x\n' "$((16#${bytes:6:2}${bytes:4:2}${bytes:2:2}${bytes:0:2}))"
}

for inc in "$@"; do
  want=$(contrib/slurm-version.sh "$inc" --hex)
  release=$(contrib/slurm-version.sh "$inc")
  if ! SLURM_INCLUDE_DIR=$inc cargo build --quiet -p lama-spank 2>"$work/err"; then
    echo "not ok - plugin builds against Slurm $release headers ($inc)"; sed 's/^/#   /' "$work/err"; continue
  fi
  mkdir -p "$out/$release"
  cp target/debug/liblama_spank.so "$out/$release/liblama_spank.so"
  cp target/debug/liblama_probe.so "$out/$release/liblama_probe.so"
  got=$(plugin_version "$out/$release/liblama_spank.so")
  if [ "$got" = "$want" ]; then
    echo "ok - plugin builds against Slurm $release headers, plugin_version $got ($inc)"
  else
    echo "not ok - plugin built against Slurm $release headers carries plugin_version ${got:-none}, want $want"
  fi
  # Slurm calls every slurm_spank_* callback a plugin exports (some once per task): only those
  # lama implements may be there.
  # From 25.05 Slurm also reads slurm_spank_init_failure_mode, which lama declares (writable
  # data: `init-failure=` sets it) where the headers know it.
  hooks=$(nm -D --defined-only "$out/$release/liblama_spank.so" | awk '$3 ~ /^slurm_spank_/ {print $2, $3}' | sort -k2 | tr '\n' ' ')
  want_hooks="T slurm_spank_init "
  grep -q slurm_spank_init_failure_mode "$inc/slurm/spank.h" && want_hooks+="D slurm_spank_init_failure_mode "
  want_hooks+="T slurm_spank_init_post_opt T slurm_spank_local_user_init T slurm_spank_task_init T slurm_spank_user_init "
  if [ "$hooks" = "$want_hooks" ]; then
    echo "ok - plugin built against Slurm $release headers exports only the callbacks lama implements$(grep -q 'D slurm_spank_init_failure' <<<"$hooks" && echo ', and slurm_spank_init_failure_mode')"
  else
    echo "not ok - plugin built against Slurm $release headers exports callbacks '$hooks', want '$want_hooks'"
  fi
done

# A header whose items moved (two swapped) must not yield a plugin.
mkdir -p "$work/bad/slurm"
cp "$1"/slurm/*.h "$work/bad/slurm/"
sed -i 's/^\(\s*\)S_JOB_GID,/\1S_JOB_GID_MOVED,/' "$work/bad/slurm/spank.h"
if SLURM_INCLUDE_DIR=$work/bad cargo build --quiet -p lama-spank 2>"$work/err"; then
  echo "not ok - headers with a changed spank_item enum were accepted"
elif grep -q 'declares enum spank_item as' "$work/err"; then
  echo "ok - headers with a changed spank_item enum stop the build with a message"
else
  echo "not ok - headers with a changed spank_item enum failed without the message"; sed 's/^/#   /' "$work/err"
fi
# Leave the default build (the installed Slurm's headers) in target/debug.
cargo build --quiet -p lama-spank 2>/dev/null || true
echo "# done: headers.sh"
