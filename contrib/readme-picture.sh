#!/usr/bin/env bash
# Regenerates the README's picture, docs/pictures/plan.svg: lama plan's SVG of 8 ranks on the
# 2-socket, 8-core, 2-thread Intel of tests/topologies/, each with its nearest NIC and GPU.
# cli/tests/docs.rs runs the same command and fails when the committed picture differs.
# Usage: contrib/readme-picture.sh [LAMA_BINARY]   (default: builds target/debug/lama)
set -euo pipefail
cd "$(dirname "$0")/.."
lama=${1:-}
if [ -z "$lama" ]; then cargo build --quiet -p lama-cli; lama=target/debug/lama; fi
mkdir -p docs/pictures
"$lama" plan --topology tests/topologies/32em64t-2n8c2t-pci-normalio.xml --np 8 --map scbnh \
  --bind 2c --nics 1 --gpus 1 --format svg --output docs/pictures/plan.svg
