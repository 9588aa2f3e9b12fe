#!/usr/bin/env bash
# Builds lama and previews placements on a real machine topology and on this machine.
# Usage: contrib/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
contrib/deps.sh
cargo build --release --quiet
lama=target/release/lama
set -x
# Map by socket, bind to core, on two 2-socket Intel servers with hyper-threading.
$lama plan --topology tests/topologies/32em64t-2n8c2t-pci-normalio.xml --nodes 2 \
  --map sbnch --bind 1c --mppr 1:c --np 8
# Two cores per rank, one rank per NUMA node at most, on a KNL in SNC-4 mode.
$lama plan --topology tests/topologies/64intel64-fakeKNL-SNC4-hybrid.xml --map cNsbnh --bind 2c --mppr 1:N
# The simple level on this machine.
$lama plan --this-machine --map-by core --bind-to core
# The task map of a cyclic step on 3 nodes, per host.
$lama taskmap --from-slurm --tasks-per-node='2(x3)' --distribution=cyclic --nodelist='n[1-3]' --to=hosts
