#!/usr/bin/env bash
# Against the real sandbox cluster: for each distribution, every task checks that the node
# `lama taskmap --from-slurm` computes for it is the node Slurm really ran it on.
# Usage: tests/slurm/layouts.sh LAMA_BINARY   (the sandbox must be running; SLURM_CONF set)
# Prints one "ok - ..." or "not ok - ..." line per case.
set -uo pipefail
source "$(dirname "$0")/../tap.sh"
lama=$(realpath "$1")
hostfile=$(mktemp)
trap 'rm -f "$hostfile"' EXIT
printf 'n2\nn1\nn1\nn3\nn2\n' > "$hostfile"

check() {
  local ntasks=$1; shift
  local out nodes=-N3
  # The host file decides the nodes of an arbitrary layout (26.05's srun refuses -N with it).
  [[ " $* " == *" -m arbitrary "* ]] && nodes=""
  out=$(timeout 120 srun --overcommit $nodes -n "$ntasks" "$@" bash -c \
    'echo "$SLURM_PROCID $SLURM_NODEID $('"$lama"' taskmap --from-slurm --nodeid=$SLURM_PROCID 2>&1)"' 2>&1)
  local lines agree
  lines=$(grep -cE '^[0-9]+ [0-9]+ ' <<<"$out")
  agree=$(awk '$2 == $3' <<<"$out" | wc -l)
  if [ "$lines" -eq "$ntasks" ] && [ "$agree" -eq "$ntasks" ]; then
    echo "ok - layout -n $ntasks $*: every task on the node lama computes"
  else
    echo "not ok - layout -n $ntasks $*: $agree of $ntasks tasks agree"
    sed 's/^/#   /' <<<"$out"
  fi
}

check 5 -m block
check 5 -m cyclic
check 7 -m plane=2
check 7 -m cyclic:block
check 4 -m plane=3
SLURM_HOSTFILE=$hostfile check 5 -m arbitrary
done_testing
