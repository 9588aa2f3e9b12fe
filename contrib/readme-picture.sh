#!/usr/bin/env bash
# Regenerates the README's picture, docs/pictures/plan.svg: lama plan's SVG of 8 ranks on the
# 2-socket, 8-core, 2-thread Intel of tests/topologies/, each with its nearest NIC and GPU.
# cli/tests/docs.rs runs this script to a scratch file and fails when the committed picture
# differs.
# Usage: contrib/readme-picture.sh [LAMA_BINARY [OUTPUT]]
#   (default: builds target/debug/lama; writes docs/pictures/plan.svg)
set -euo pipefail
cd "$(dirname "$0")/.."
lama=${1:-}
output=${2:-docs/pictures/plan.svg}
if [ -z "$lama" ]; then cargo build --quiet -p lama-cli; lama=target/debug/lama; fi
mkdir -p "$(dirname "$output")"
"$lama" plan --topology tests/topologies/32em64t-2n8c2t-pci-normalio.xml --np 8 --map scbnh \
  --bind 2c --nics 1 --gpus 1 --format svg --output "$output"
