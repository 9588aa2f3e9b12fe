#!/usr/bin/env bash
# Another Slurm release at run time: builds it from its source tarball (contrib/slurm-build.sh,
# cached), the plugin against its headers, and runs the suites every release sites run must pass
# on a sandbox of its daemons: Slurm's options beside lama's (beside.sh), TASK_MAP (layouts.sh,
# topology.sh), the policy (policy.sh), the task, cgroup and GRES configurations (configs.sh) and
# tasks in pyxis containers, Slurm's OCI containers and Charliecloud (tests/containers/).
# The test command runs it for Slurm 25.11; the admin guide's release table says which release
# runs what, and 25.05 runs it by hand:
#   contrib/release-suites.sh ../shared/vendor/slurm/slurm-25.05.8.tar.xz
# Usage: contrib/release-suites.sh TARBALL [PLUGIN [OTHER_PLUGIN]]   (root)
#   PLUGIN        lama's plugin built for this release, liblama_probe.so beside it (tests/headers.sh
#                 makes one from the release's public headers); default: built here
#   OTHER_PLUGIN  a plugin built for another release, which this release's slurmstepd must refuse
#                 (configs.sh)
# Environment: LAMA_SANDBOX, LAMA_SANDBOX_PORT (the sandbox's state and ports), and
#   contrib/slurm-build.sh's.
# Prints each suite's lines and time, and `# done: release-suites.sh` at its end.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
source tests/tap.sh
source tests/harness.sh
tarball=$1 plugin=${2:-} other=${3:-}
prefix=$(contrib/slurm-build.sh "$tarball") || { not_ok "Slurm from $tarball builds"; exit 1; }
version=$(contrib/slurm-version.sh "$prefix/include")
cargo build --quiet -p lama-cli || { not_ok "lama builds"; exit 1; }
if [ -z "$plugin" ]; then
  plugin=$top/target/plugins/$version/liblama_spank.so
  mkdir -p "$(dirname "$plugin")"
  if ! SLURM_INCLUDE_DIR=$prefix/include cargo build --quiet -p lama-spank -p lama-probe; then
    not_ok "the plugin builds against Slurm $version's headers"
    exit 1
  fi
  cp target/debug/liblama_spank.so target/debug/liblama_probe.so "$(dirname "$plugin")/"
  # Leave the default build (the installed Slurm's headers) in target/debug, as tests/headers.sh does.
  cargo build --quiet -p lama-spank 2>/dev/null || true
fi
export LAMA_SLURM_PREFIX=$prefix PATH=$prefix/bin:$prefix/sbin:$PATH
contrib/sandbox.sh stop >/dev/null 2>&1 || true
LAMA_SANDBOX_PLUGIN="required $plugin" contrib/sandbox.sh start || { not_ok "a sandbox of Slurm $version starts"; exit 1; }
export SLURM_CONF=$LAMA_SANDBOX/slurm.conf
{
  suite tests/slurm/layouts.sh target/debug/lama
  suite tests/slurm/topology.sh target/debug/lama "$plugin"
  suite tests/slurm/policy.sh target/debug/lama "$plugin"
  suite tests/slurm/beside.sh target/debug/lama "$plugin"
  suite tests/slurm/configs.sh target/debug/lama "$plugin" $other
  suite tests/containers/pyxis.sh target/debug/lama "$plugin" \
    "$(contrib/pyxis-build.sh "$prefix/include")/spank_pyxis.so" "$(contrib/enroot-build.sh)"
  suite tests/containers/oci.sh target/debug/lama "$plugin" "$(contrib/crun-build.sh)/bin/crun"
  suite tests/containers/charliecloud.sh target/debug/lama "$plugin"
} 2>&1 | sed -E "s/^(not ok|ok|skip) - /&[Slurm $version] /"
contrib/sandbox.sh stop >/dev/null 2>&1
done_testing
