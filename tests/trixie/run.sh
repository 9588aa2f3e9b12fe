#!/usr/bin/env bash
# A site on Debian 13 ("trixie"): Slurm 24.11 from the distribution, hwloc 2.12, systemd 257,
# kernel 6.12. Boots the trixie guest (contrib/guest.sh with LAMA_GUEST_DIST=trixie) while it
# builds lama there as the admin guide says (contrib/trixie-build.sh) and compares its plans on
# every shipped XML with this machine's (hwloc 2.9); then installs the package with dpkg -i, runs the
# guest suite on Debian's 24.11 under Debian's own units (tests/guest/suite.sh), and the site
# checks (tests/trixie/site.sh: the admin guide's walk-through as written). SchedMD's
# test7.11 (a second SPANK plugin beside lama) runs there too, without lama, with its defaults and
# under policy=auto (tests/schedmd/differential.sh; the guest image has what SchedMD's tests need).
# Usage: tests/trixie/run.sh LAMA OLD_DEB
#   LAMA this machine's lama; OLD_DEB the package built here for Debian 12's 22.05.
# Environment: LAMA_GUEST_CRUN=CRUN_PREFIX (contrib/crun-build.sh's): `srun --container` steps
#   under that crun and Charliecloud inside tasks, on Debian's 24.11 (tests/guest/suite.sh).
#   LAMA_GUEST_ENROOT=ENROOT_PREFIX (contrib/enroot-build.sh's): pyxis, built in the Debian 13
#   root against Debian's Slurm headers, and that enroot on Debian's 24.11 (tests/guest/pyxis.sh).
# Prints one "ok - ..." or "not ok - ..." line per check, and the time each part took.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
lama=$(realpath "$1")
old=$(realpath "$2")
started=$(date +%s)
shared=${LAMA_SHARED:-$top/../shared}
export LAMA_GUEST_EXTRA=schedmd
# Debian 13's kernel patches its code at run time often enough that QEMU 7.2's multi-threaded TCG
# runs a stale translation of it now and then (an int3 Oops, then a panic, at boot or mid-suite:
# ClangBuiltLinux boot-utils #111, fixed in QEMU 8.1): its vCPUs share one host thread.
export LAMA_GUEST_TCG_THREAD=single
work=$(mktemp -d /tmp/lama-trixie.XXXXXX)
run=$work/guest
# What the build makes, shared with the guest through its parent (the build makes it afresh).
mkdir -p "$work/share"
out=$work/share/build
source "$top/tests/tap.sh"
source "$top/tests/harness.sh"
tap_prefix="[Debian 13] "
boot=""
trap '[ -z "$boot" ] || { kill "$boot"; wait "$boot"; } 2>/dev/null; LAMA_GUEST_DIST=trixie "$top/contrib/guest.sh" stop "$run" >/dev/null 2>&1; rm -rf "$work"' EXIT

# --- the Debian 13 guest boots (one TCG thread) while lama builds in the Debian 13 root ----------
crun=${LAMA_GUEST_CRUN:-}
enroot=${LAMA_GUEST_ENROOT:-}
booted=$(date +%s)
LAMA_GUEST_DIST=trixie "$top/contrib/guest.sh" start "$run" "top=$top" "share=$work/share" "old=$(dirname "$old")" \
  "s=$(realpath "$shared/vendor/slurm-testsuite")" ${crun:+"c=$crun"} ${enroot:+"e=$enroot"} >/dev/null 2>"$work/start.err" &
boot=$!

# --- built on Debian 13 ------------------------------------------------------------------------
if ! deb=$("$top/contrib/trixie-build.sh" "$out" 2>"$work/build.err" | tail -n 1) || [ ! -f "$deb" ]; then
  not_ok "lama built in a Debian 13 root" "$(cat "$work/build.err")"
  exit 0
fi
built=$(head -n 1 "$out/build.log")
depends=$(dpkg-deb -f "$deb" Depends)
if [[ $depends == *"libhwloc15 (>= 2.12"* && $depends == *"slurm-client (>= 24.11) | slurm-smd-client (>= 24.11), slurm-client (<< 24.12~) | slurm-smd-client (<< 24.12~)"* ]]; then
  ok "the workspace and the package built in a Debian 13 root ($built) by the admin guide's step 1 as written, lintian without errors: $(basename "$deb") depends on $depends"
else not_ok "the Debian 13 package's dependencies" "$depends"; fi
echo "# built on Debian 13 in $(( $(date +%s) - started )) s"

# --- the same plans under hwloc 2.9 and 2.12 --------------------------------------------------
"$top/tests/trixie/plans.sh" "$lama" "$work/plans-here"
if "$top/contrib/trixie-build.sh" run "$out" bash tests/trixie/plans.sh "$out/lama" "$out/plans" >/dev/null 2>"$work/plans.err"; then
  n=$(find "$work/plans-here" -type f | wc -l)
  if [ "$n" -gt 0 ] && diff -r "$work/plans-here" "$out/plans" >"$work/plans.diff"; then
    ok "every shipped XML planned alike by lama on hwloc $(pkg-config --modversion hwloc) (here) and 2.12 (Debian 13): $n plans (maps, the policy, GPUs, NICs, memory modes), output and exit status the same"
  else not_ok "plans under hwloc 2.12 differ ($n compared)" "$(head -n 40 "$work/plans.diff")"; fi
else not_ok "plans in the Debian 13 root" "$(cat "$work/plans.err")"; fi

# --- pyxis for Debian's Slurm ------------------------------------------------------------------
# Built in the Debian 13 root against libslurm-dev's headers, as a site there would (seconds: not
# cached), from the vendored tarball copied beside the build.
pyxis=""
if [ -n "$enroot" ]; then
  tarball=$(ls "$shared"/vendor/containers/pyxis-[0-9]*.tar.* 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$tarball" ] && cp "$tarball" "$out/" &&
    prefix=$("$top/contrib/trixie-build.sh" run "$out" env LAMA_CONTAINERS_CACHE="$out/containers" \
      bash contrib/pyxis-build.sh /usr/include "$out/$(basename "$tarball")" 2>"$work/pyxis.err" | tail -n 1) &&
    [ -f "$prefix/spank_pyxis.so" ]; then
    pyxis=$prefix/spank_pyxis.so
  else not_ok "pyxis ($(basename "${tarball:-none}")) builds against Debian 13's Slurm headers" "$(cat "$work/pyxis.err" 2>/dev/null)"; fi
else skip "pyxis on Debian's Slurm 24.11: no enroot given (LAMA_GUEST_ENROOT, which contrib/test.sh sets)"
fi

# --- the Debian 13 guest -----------------------------------------------------------------------
t=$(date +%s)
wait "$boot"
up=$?
boot=""
if [ "$up" != 0 ]; then
  not_ok "the Debian 13 guest boots" "$(cat "$work/start.err")" "$(tail -n 30 "$run"/console-*.log 2>/dev/null)"
  exit 0
fi
grep -v '^guest: up ' "$work/start.err" | sed 's/^/# /'
echo "# Debian 13 guest up in $(( $(date +%s) - booted )) s ($(cat "$run/accel")), beside the build: waited $(( $(date +%s) - t )) s for it"
guest() { LAMA_GUEST_DIST=trixie "$top/contrib/guest.sh" ssh "$run" "$@"; }
guest "cat /etc/debian_version; uname -r; systemctl --version | head -n 1; hwloc-info --version" | paste -sd' ' - | sed 's/^/# the guest: Debian /'
# Debian's plugstack.conf, kept for site.sh; the package installed for the suite.
if guest "cp /etc/slurm/plugstack.conf /root/plugstack.conf.debian && dpkg -i '$deb'" >"$work/install.log" 2>&1; then
  t=$(date +%s)
  plugin=$(guest dpkg -L lama-slurm | grep '/slurm-wlm/lama\.so$')
  # SchedMD's test7.11 three ways on Debian's 24.11.5, on the suite's Slurm before its cases.
  first=$(printf '%q ' env SLURM_CONF=/etc/slurm/slurm.conf LAMA_SCHEDMD_WHERE="Debian 13 guest" \
    bash "$top/tests/schedmd/differential.sh" "$(realpath "$shared/vendor/slurm-testsuite")" "$plugin" \
    /etc/slurm/plugstack.conf 'test7.11!')
  # A guest that dies half-way ends a suite without its end line; ssh's status is the suite's.
  guest "$(printf '%q ' env LAMA_GUEST_UNITS=debian LAMA_GUEST_FIRST="$first" LAMA_GUEST_CRUN="$crun" \
    LAMA_GUEST_PYXIS="$pyxis" LAMA_GUEST_ENROOT="$enroot" LAMA_GUEST_CHARLIECLOUD=1 bash "$top/tests/guest/suite.sh" \
    /usr /usr/bin/lama "$plugin" "$top")" 2>&1 | tee "$work/suite.out"
  verdict suite.sh "${PIPESTATUS[0]}" "$work/suite.out" | sed "s/^not ok - /&$tap_prefix/"
  echo "# the guest suite on Debian 13, SchedMD's test7.11 included: $(( $(date +%s) - t )) s"
  guest bash "$top/tests/trixie/site.sh" "$top" "$deb" "$old" 2>&1 | tee "$work/site.out"
  verdict site.sh "${PIPESTATUS[0]}" "$work/site.out" | sed "s/^not ok - /&$tap_prefix/"
else not_ok "dpkg -i of the Debian 13 package in the guest" "$(cat "$work/install.log")"; fi
echo "# Debian 13 in all: $(( $(date +%s) - started )) s"
done_testing
