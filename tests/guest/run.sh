#!/usr/bin/env bash
# Boots the site-kernel guest (contrib/guest.sh: systemd, cgroup v2, 2 sockets x 2 cores x 2
# threads, two NUMA nodes and three CPU-less ones with HMAT) and runs tests/guest/suite.sh in it on every Slurm given: Debian's
# 22.05 from the guest's own packages, and each other prefix (built by contrib/slurm-build.sh on
# this Debian 12, shared read-only at the same path). The repository is shared read-only too, so
# the guest runs the host-built lama, plugin and helper unchanged.
# Usage: tests/guest/run.sh LAMA PLUGINS_DIR [PREFIX...]
#   PLUGINS_DIR holds VERSION/liblama_spank.so for each release (tests/headers.sh's layout).
#   With LAMA_GUEST_FLUX=FLUX_PREFIX (contrib/flux-build.sh's) and LAMA_GUEST_FLUX_PLUGIN=SO,
#   Flux runs there too (tests/guest/flux.sh), its prefix shared read-only at the same path.
#   With LAMA_GUEST_CRUN=CRUN_PREFIX (contrib/crun-build.sh's), suite.sh runs `srun --container`
#   steps under that crun, shared read-only at the same path.
# Prints the suite's lines, and the time the guest took.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
source "$top/tests/tap.sh"
source "$top/tests/harness.sh"
lama=$(realpath "$1")
plugins=$(realpath "$2")
shift 2
prefixes=("$@")
started=$(date +%s)
run=$(mktemp -d /tmp/lama-guest.XXXXXX)
shares=("top=$top")
for p in "${prefixes[@]}"; do shares+=("p=$p"); done
flux=${LAMA_GUEST_FLUX:-}
[ -z "$flux" ] || shares+=("f=$flux")
crun=${LAMA_GUEST_CRUN:-}
[ -z "$crun" ] || shares+=("c=$crun")
trap '"$top/contrib/guest.sh" stop "$run" >/dev/null 2>&1; rm -rf "$run"' EXIT
if ! "$top/contrib/guest.sh" start "$run" "${shares[@]}" 2>"$run/start.err"; then
  echo "not ok - the guest boots"
  sed 's/^/#   /' "$run/start.err"
  tail -n 30 "$run"/console-*.log 2>/dev/null | sed 's/^/#   /'
  exit 0
fi
booted=$(( $(date +%s) - started ))
echo "# guest up in $booted s ($(cat "$run/accel"))"
# A restart on the way (a kernel oops, qemu gone) is said, not only when the boot failed.
grep -v '^guest: up ' "$run/start.err" | sed 's/^/# /'
for p in /usr "${prefixes[@]}"; do
  # The guest's Debian 22.05 is this Debian's (the same package), so its headers name it.
  version=$("$top/contrib/slurm-version.sh" "$p/include" 2>/dev/null || true)
  plugin=$plugins/$version/liblama_spank.so
  if [ ! -f "$plugin" ]; then
    echo "not ok - [guest] a plugin built for Slurm $version ($plugin)"
    continue
  fi
  t=$(date +%s)
  # A guest that dies half-way (its OOM killer, a TCG stall) ends the suite without its end line.
  "$top/contrib/guest.sh" ssh "$run" env LAMA_GUEST_CRUN="$crun" bash "$top/tests/guest/suite.sh" "$p" "$lama" "$plugin" "$top" 2>&1 | tee "$run/suite.out"
  verdict suite.sh "${PIPESTATUS[0]}" "$run/suite.out" | sed "s/^not ok - /&[guest, Slurm $version] /"
  echo "# Slurm $version in the guest: $(( $(date +%s) - t )) s"
done
if [ -n "$flux" ]; then
  t=$(date +%s)
  "$top/contrib/guest.sh" ssh "$run" bash "$top/tests/guest/flux.sh" "$flux" "$lama" "$(realpath "$LAMA_GUEST_FLUX_PLUGIN")" 2>&1 | tee "$run/flux.out"
  verdict flux.sh "${PIPESTATUS[0]}" "$run/flux.out" | sed "s/^not ok - /&[guest, Flux] /"
  echo "# Flux in the guest: $(( $(date +%s) - t )) s"
fi
"$top/contrib/guest.sh" stop "$run" >/dev/null 2>&1
echo "# the guest took $(( $(date +%s) - started )) s in all (boot $booted s)"
done_testing
