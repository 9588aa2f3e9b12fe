#!/usr/bin/env bash
# Writes lama's plans for every shipped hwloc XML (tests/topologies) into OUT, one file per
# XML and request (the command's output, its error and exit status): what tests/trixie/run.sh
# compares between hwloc releases.
# Usage: tests/trixie/plans.sh LAMA OUT
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
lama=$1 out=$2
mkdir -p "$out"
requests=(
  "--map csbnh --bind 1c"
  "--map-by numa --bind-to core --gpus 1"
  "--map-by core --bind-to core --nics 1"
  "--policy auto"
  "--policy auto --threads auto --mem local"
  "--policy auto --mem hbm"
  "--policy auto --mem prefer-hbm"
  "--policy auto --mem interleave"
)
for xml in "$top"/tests/topologies/*.xml; do
  name=$(basename "$xml" .xml)
  i=0
  for r in "${requests[@]}"; do
    # shellcheck disable=SC2086 # each request is a list of words
    "$lama" plan --topology "$xml" $r --format json >"$out/$name.$i" 2>&1
    echo "exit $? ($r)" >>"$out/$name.$i"
    i=$((i + 1))
  done
done
