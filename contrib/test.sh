#!/usr/bin/env bash
# Runs every test: formatting, clippy with warnings as errors, unit/property/integration tests,
# the plugin built against every supported Slurm's headers, then the cluster tests on real Slurm
# daemons of each tested release: Debian's 22.05 and the release in ../shared/vendor/slurm
# (built once by contrib/slurm-build.sh and cached outside the tree), including MPI jobs of
# Debian's Open MPI and MPICH and of PyPI's Open MPI 5, MPICH 5 and Intel MPI (installed once by
# contrib/mpi-wheels.sh, cached outside the tree), the docs' srun examples, fault injection, what a
# failure does to the node, `lama check` on running jobs, a short load, and the scale suite on a
# sandbox of 64 nodes; SchedMD's own expect tests on placement, environment, SPANK and task
# launch, each run without lama, with its defaults and under a site's policy=auto
# (tests/schedmd/, beside the guest); tasks in pyxis + enroot containers, in Slurm's own OCI
# containers under runc and crun, and in Charliecloud (tests/containers/; enroot, pyxis and crun
# built once and cached); then the Flux shell plugin on
# real Flux instances (flux-core built once by contrib/flux-build.sh, cached outside the tree); a
# few seconds of fuzzing per target, the packages and the pictures. A qemu guest (contrib/guest.sh:
# systemd, cgroup v2, two NUMA nodes and three CPU-less memory tiers, hardware threads; its image built once and cached) runs
# both Slurm releases under cgroup/v2 (tests/guest/); a Debian 13 root builds lama and its package
# as the admin guide says, and a Debian 13 guest runs them on Debian's Slurm 24.11, with pyxis
# built there, crun and Charliecloud (tests/trixie/, beside the sandboxes).
# Usage: contrib/test.sh
# Environment: LAMA_SHARED (the shared folder, default ../shared beside the repository),
#   LAMA_TEST_TARBALLS (Slurm source tarballs to build and test besides Debian's 22.05; default
#   the newest one in $LAMA_SHARED/vendor/slurm; "none" for Debian's alone),
#   LAMA_TEST_FULL=1 (the full-size suites: the scale suite on 64, 128 and 256 nodes),
#   LAMA_SCALE_NODES (the scale suite's cluster sizes instead, e.g. "128").
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
started=$(date +%s)
# suite, verdict and tally: how every suite accounts for itself.
source tests/harness.sh
shared=${LAMA_SHARED:-$top/../shared}
# The vendored Slurm and flux-core sources and the Slurm header sets are read from there.
if [ ! -d "$shared/vendor" ]; then
  echo "lama: the shared folder is missing: no $shared/vendor (the Slurm and flux-core sources and" >&2
  echo "lama: Slurm's header sets the tests build against). Put the project's shared/ folder beside" >&2
  echo "lama: this clone as ../shared, or set LAMA_SHARED=DIR to where it is." >&2
  exit 2
fi
tarballs=${LAMA_TEST_TARBALLS:-$(ls "$shared"/vendor/slurm/slurm-*.tar.* 2>/dev/null | sort -V | tail -n 1 || true)}
[ -n "$tarballs" ] || { echo "lama: no Slurm tarball in $shared/vendor/slurm (set LAMA_TEST_TARBALLS=none to test Debian's Slurm alone)" >&2; exit 2; }
contrib/deps.sh
contrib/deps.sh --mpi
# Open MPI 5, MPICH 5 and Intel MPI with mpi4py from PyPI, installed once outside the tree.
LAMA_MPI_WHEELS=$(contrib/mpi-wheels.sh)
export LAMA_MPI_WHEELS
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
log=$(mktemp)
# Its own state directory and ports, so a sandbox started by hand keeps running.
export LAMA_SANDBOX=${LAMA_SANDBOX:-/tmp/lama-sandbox-test}
# The first port base whose ports (room for the 256 nodes of the full scale suite) nothing here
# listens on, unless one is given.
if [ -z "${LAMA_SANDBOX_PORT:-}" ]; then
  for base in 26800 27800 28800 29800 30800 19800; do
    LAMA_SANDBOX_PORT=$base LAMA_SANDBOX_NODES=256 contrib/sandbox.sh free-port && break
  done
  echo "== sandbox clusters on ports from $base [at $(( $(date +%s) - started )) s]"
fi
export LAMA_SANDBOX_PORT=${LAMA_SANDBOX_PORT:-$base}
# Clean-up only: the trap must not change the exit status, so under set -e nothing in it may fail
# (the SchedMD run it would kill has usually ended by then).
trap 'contrib/sandbox.sh stop >/dev/null 2>&1 || true; rm -f "$log"
  [ -z "${crun_pid:-}" ] || kill "$crun_pid" >/dev/null 2>&1 || true
  [ -z "${release_pid:-}" ] || kill "$release_pid" >/dev/null 2>&1 || true
  [ -z "${beside_pid:-}" ] || kill "$beside_pid" >/dev/null 2>&1 || true
  [ -z "${trixie_pid:-}" ] || kill "$trixie_pid" >/dev/null 2>&1 || true
  for n in ${schedmd_pids[@]+"${!schedmd_pids[@]}"}; do
    [ -z "${schedmd_pids[$n]}" ] || kill "${schedmd_pids[$n]}" >/dev/null 2>&1 || true
    LAMA_SANDBOX=${schedmd_dirs[$n]} contrib/sandbox.sh stop >/dev/null 2>&1 || true
  done' EXIT
# The tests that need root (cargo lists them as ignored) run when this is root, and are counted
# as skipped otherwise.
include_ignored=()
[ "$(id -u)" != 0 ] || include_ignored=(--include-ignored)
cargo test --workspace -- ${include_ignored[@]+"${include_ignored[@]}"} 2>&1 | tee "$log"
# The accounting below, proven first against sabotaged runs (a few seconds).
suite tests/harness-sabotage.sh | tee -a "$log"

# crun 1.27.1 for the OCI suite (tests/containers/), built once (cached) beside the Slurm, header
# and flux-core builds below; waited for before the first sandbox.
crun_log=$(mktemp)
nice contrib/crun-build.sh >"$crun_log" 2>&1 &
crun_pid=$!

# Slurm prefixes to test besides Debian's packages (built before the header checks, which also
# build against their headers).
prefixes=()
if [ "$tarballs" != none ]; then
  for t in $tarballs; do prefixes+=("$(contrib/slurm-build.sh "$t")"); done
fi

echo "== the plugin built against every Slurm header set [at $(( $(date +%s) - started )) s]"
plugins=$top/target/plugins
includes=(/usr/include)
for d in "$shared"/vendor/slurm-headers/*/; do [ -f "$d/slurm/spank.h" ] && includes+=("${d%/}"); done
for p in "${prefixes[@]}"; do includes+=("$p/include"); done
suite tests/headers.sh "$plugins" "${includes[@]}" | tee -a "$log"
cargo build --quiet -p lama-cli

# Releases run with fewer suites (contrib/release-suites.sh: Slurm's options beside lama's,
# TASK_MAP, the policy, the configurations): Slurm 25.11 unless LAMA_TEST_RELEASES names other
# tarballs ("none" for none). Built now, at low priority, beside the sandbox suites below, which
# mostly wait on Slurm.
reduced=${LAMA_TEST_RELEASES:-$(ls "$shared"/vendor/slurm/slurm-25.11.*.tar.* 2>/dev/null | sort -V | tail -n 1 || true)}
[ "$reduced" != none ] || reduced=""
reduced_log=$(mktemp)
(for t in $reduced; do nice contrib/slurm-build.sh "$t" || echo "not ok - Slurm from $t builds"; done) >"$reduced_log" 2>&1 &
reduced_pid=$!

# flux-core (built once, cached) and the Flux plugin: Flux inside an allocation is a cluster test.
flux_prefix=$(contrib/flux-build.sh)
cargo build --quiet -p lama-flux


# enroot (built once, cached) for the pyxis suite of every release (tests/containers/).
enroot_prefix=$(contrib/enroot-build.sh)

# Each release's cluster tests load the plugin built against that release's headers; the
# plugin of another tested release must be refused.
version_of() { contrib/slurm-version.sh "$1"; }
releases=("/usr")
for p in "${prefixes[@]}"; do releases+=("$p"); done
crun_built=1
wait "$crun_pid" || crun_built=0
crun_pid=""
crun_prefix=$(tail -n 1 "$crun_log")
[ "$crun_built" = 1 ] || { echo "not ok - crun builds (contrib/crun-build.sh)"; sed 's/^/#   /' "$crun_log"; } | tee -a "$log"
rm -f "$crun_log"

# The Debian 13 site runs beside the sandboxes: its guest's vCPUs share one host thread
# (tests/trixie/run.sh) and the sandbox suites mostly wait on Slurm, so the other CPU serves them.
# Debian 13 must refuse the package built for Debian 12's 22.05, built here first, outside
# target/package (tests/package.sh builds its own later, from the same release build).
old_dir=$top/target/package-debian12
old_err=$(mktemp)
rm -rf "$old_dir"
mkdir -p "$old_dir"
old_deb=$(LAMA_PACKAGE_DIR=$old_dir contrib/package.sh deb 2>"$old_err" | tail -n 1) || true
if [ ! -f "$old_deb" ]; then
  { echo "not ok - the Debian package for Debian 12's Slurm builds (Debian 13 must refuse it)"; tail -n 30 "$old_err" | sed 's/^/#   /'; } | tee -a "$log"
  old_deb=$old_dir/missing.deb
fi
rm -f "$old_err"
echo "== a site on Debian 13, beside the sandboxes: lama built there (hwloc 2.12, Slurm 24.11), its package in a Debian 13 guest on Debian's Slurm 24.11 (tests/trixie/; its lines come at the end) [at $(( $(date +%s) - started )) s]"
trixie_log=$(mktemp)
LAMA_GUEST_CRUN=$crun_prefix LAMA_GUEST_ENROOT=$enroot_prefix \
  suite tests/trixie/run.sh target/debug/lama "$old_deb" >"$trixie_log" 2>&1 &
trixie_pid=$!
trixie_started=$(date +%s)
# The release build too, for the one check of its code layout (tests/slurm/plugin.sh, which
# reports it missing when this build fails): the first release's now (the package above built
# it), the others' one after another at low priority beside the first sandbox's suites, each
# waited for before its own sandbox (cargo's LTO link takes about a minute a release).
release_log=$(mktemp)
release_plugin "${releases[0]}/include" "$plugins/$(version_of "${releases[0]}/include")/release/liblama_spank.so" | tee -a "$log"
(
  renice -n 10 -p "$BASHPID" >/dev/null
  for r in "${releases[@]:1}"; do release_plugin "$r/include" "$plugins/$(version_of "$r/include")/release/liblama_spank.so"; done
) >"$release_log" 2>&1 &
release_pid=$!
for r in "${releases[@]}"; do
  include=$r/include
  version=$(version_of "$include")
  other=""
  for o in "${releases[@]}"; do
    [ "$o" = "$r" ] || other=$plugins/$(version_of "$o/include")/liblama_spank.so
  done
  plugin=$plugins/$version/liblama_spank.so
  release_plugin=$plugins/$version/release/liblama_spank.so
  if [ "$r" != "${releases[0]}" ] && [ -n "$release_pid" ]; then
    wait "$release_pid" || true
    release_pid=""
    tee -a "$log" <"$release_log"
    rm -f "$release_log"
  fi
  echo "== tests against real Slurm $version daemons (sandbox cluster) [at $(( $(date +%s) - started )) s]"
  (
    if [ "$r" != /usr ]; then
      export LAMA_SLURM_PREFIX=$r PATH=$r/bin:$r/sbin:$PATH
    fi
    contrib/sandbox.sh stop >/dev/null 2>&1 || true
    LAMA_SANDBOX_PLUGIN="required $plugin" contrib/sandbox.sh start
    export SLURM_CONF=$LAMA_SANDBOX/slurm.conf
    suite tests/slurm/layouts.sh target/debug/lama
    suite tests/slurm/topology.sh target/debug/lama "$plugin"
    suite tests/slurm/declared.sh target/debug/lama "$plugin"
    suite tests/slurm/shared_gpus.sh target/debug/lama "$plugin"
    suite tests/slurm/nvml.sh target/debug/lama "$plugin"
    suite tests/slurm/plugin.sh target/debug/lama "$plugin" "$release_plugin"
    suite tests/slurm/hostfile.sh target/debug/lama "$plugin"
    suite tests/slurm/hostile.sh target/debug/lama "$plugin"
    suite tests/slurm/configs.sh target/debug/lama "$plugin" $other
    suite tests/slurm/mpi.sh target/debug/lama "$plugin"
    suite tests/slurm/launchers.sh target/debug/lama "$plugin"
    suite tests/slurm/exec.sh target/debug/lama "$plugin"
    suite tests/slurm/flux.sh target/debug/lama "$plugin" target/debug/liblama_flux.so "$flux_prefix"
    suite tests/slurm/policy.sh target/debug/lama "$plugin"
    suite tests/slurm/beside.sh target/debug/lama "$plugin"
    suite tests/slurm/docs.sh target/debug/lama "$plugin"
    suite tests/slurm/faults.sh target/debug/lama "$plugin"
    suite tests/slurm/failures.sh target/debug/lama "$plugin"
    suite tests/slurm/check.sh target/debug/lama "$plugin"
    suite tests/slurm/load.sh target/debug/lama "$plugin"
    suite tests/slurm/scale.sh target/debug/lama "$plugin"
    suite tests/containers/pyxis.sh target/debug/lama "$plugin" "$(contrib/pyxis-build.sh "$include")/spank_pyxis.so" "$enroot_prefix"
    suite tests/containers/oci.sh target/debug/lama "$plugin" "$crun_prefix/bin/crun"
    suite tests/containers/charliecloud.sh target/debug/lama "$plugin"
    contrib/sandbox.sh stop >/dev/null
  ) 2>&1 | sed -E "s/^(not ok|ok|skip) - /&[Slurm $version] /" | tee -a "$log"
done
rm -f "$release_log"
release_pid=""

# The releases with fewer suites, each on the sandbox in turn, with the plugin built from its
# public headers (tests/headers.sh).
wait "$reduced_pid" || true
grep '^not ok' "$reduced_log" | tee -a "$log" || true
rm -f "$reduced_log"
for t in $reduced; do
  v=$(basename "$t"); v=${v#slurm-}; v=${v%.tar.*}
  echo "== Slurm $v's daemons: options beside lama's, TASK_MAP, the policy, the configurations (contrib/release-suites.sh) [at $(( $(date +%s) - started )) s]"
  suite contrib/release-suites.sh "$t" "$plugins/$v/liblama_spank.so" "$plugins/$(version_of /usr/include)/liblama_spank.so" | tee -a "$log"
done

# collect NAME PID SINCE OUT: waits for what runs beside the chain (PID, started at SINCE, its
# lines in OUT), says how long it took and how long the chain waited for it, then adds its lines
# to the log. An exit without a verdict (a set-up step that failed) still counts as a failure.
collect() {
  local name=$1 pid=$2 since=$3 out=$4 waited rc=0
  waited=$(date +%s)
  wait "$pid" || rc=$?
  echo "== $name: $(( $(date +%s) - since )) s, $(( $(date +%s) - waited )) s of it waited for at the end [at $(( $(date +%s) - started )) s]"
  [ "$rc" = 0 ] || echo "not ok - $name ended with exit $rc (their output above)" >>"$out"
  tee -a "$log" <"$out"
  rm -f "$out"
}

# SchedMD's own tests with lama loaded, each release on a sandbox of its own (own state
# directory, ports and job ids: cgroup v1 names a job's cgroup by its id alone), all at once,
# while the guest and what follows run: they spend most of their time waiting for Slurm (sleeps,
# scheduling), the guest its time on both CPUs. They run at a higher priority (nice -5) so that
# their daemons answer in time on the loaded machine; their lines are printed at the end.
echo "== SchedMD's own tests with lama loaded, three times each (tests/schedmd/), every release at once: started beside the guest [at $(( $(date +%s) - started )) s]"
contrib/deps.sh --schedmd
schedmd_pids=() schedmd_logs=() schedmd_dirs=() schedmd_ports=()
for r in "${releases[@]}"; do
  port=""
  for p in 21800 22800 20800 18800 17800 16800; do
    [[ " ${schedmd_ports[*]} " == *" $p "* ]] && continue
    LAMA_SANDBOX_PORT=$p LAMA_SANDBOX_NODES=3 contrib/sandbox.sh free-port && { port=$p; break; }
  done
  port=${port:-$p}
  n=${#schedmd_pids[@]}
  schedmd_ports+=("$port")
  schedmd_dirs+=("$LAMA_SANDBOX-schedmd-$n")
  schedmd_logs+=("$(mktemp)")
  (
    renice -n -5 -p "$BASHPID" >/dev/null
    export LAMA_SANDBOX=$LAMA_SANDBOX-schedmd-$n LAMA_SANDBOX_PORT=$port LAMA_SHARED=$shared
    export LAMA_SANDBOX_CONF_EXTRA=FirstJobId=$((1 + 100000 * n))
    suite tests/schedmd/sandbox.sh "$r" "$plugins/$(version_of "$r/include")/liblama_spank.so" tests/schedmd/sandbox.txt
  ) >"${schedmd_logs[$n]}" 2>&1 &
  schedmd_pids+=($!)
done
schedmd_started=$(date +%s)

# Beside the guest too, at low priority (the guest first): CPU work that waits on nothing, then
# the packages (Debian's Slurm on the main sandbox's ports, which nothing else uses by then).
echo "== beside the guest, at low priority: Open MPI 5's own mapper beside lama's simple level (tests/ompi/); fuzzing, every target for a few seconds from its committed corpus (AddressSanitizer); the Flux shell plugin against a real flux-core (built once by contrib/flux-build.sh); then the packages: the Debian package installed on Debian's Slurm, then removed; the RPM [at $(( $(date +%s) - started )) s]"
beside_log=$(mktemp)
(
  renice -n 10 -p "$BASHPID" >/dev/null
  LAMA_SHARED=$shared suite tests/ompi/differential.sh target/debug/lama
  suite tests/fuzz.sh 5
  for s in plugin hardware shapes; do
    suite tests/flux/$s.sh target/debug/lama target/debug/liblama_flux.so "$flux_prefix" 2>&1 | sed -E 's/^(not ok|ok|skip) - /&[Flux] /'
  done
  suite tests/package.sh
) >"$beside_log" 2>&1 &
beside_pid=$!
beside_started=$(date +%s)

echo "== the site-kernel guest: systemd, cgroup v2, two NUMA nodes and memory tiers, hardware threads (contrib/guest.sh) [at $(( $(date +%s) - started )) s]"
LAMA_GUEST_FLUX=$flux_prefix LAMA_GUEST_FLUX_PLUGIN=target/debug/liblama_flux.so LAMA_GUEST_CRUN=$crun_prefix \
  suite tests/guest/run.sh target/debug/lama "$plugins" "${prefixes[@]}" | tee -a "$log"

# What ran beside: their results now.
collect "a site on Debian 13 (started beside the sandboxes)" "$trixie_pid" "$trixie_started" "$trixie_log"
trixie_pid=""
collect "Open MPI's mapper, fuzzing, the Flux suites and the packages" "$beside_pid" "$beside_started" "$beside_log"
beside_pid=""
for n in "${!schedmd_pids[@]}"; do
  collect "SchedMD's own tests with lama loaded, on $(version_of "${releases[$n]}/include")" "${schedmd_pids[$n]}" "$schedmd_started" "${schedmd_logs[$n]}"
  schedmd_pids[$n]=""
done

echo "== pictures: lama plan --format svg rendered by headless Chromium [at $(( $(date +%s) - started )) s]"
suite tests/pictures.sh target/debug/lama target/pictures | tee -a "$log"

echo "== test command took $(( $(date +%s) - started )) s"
# What failed or was skipped, named again, then one closing line with the totals of every test
# binary and suite.
recap "$log"
tally "$log"
