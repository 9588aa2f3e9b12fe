#!/usr/bin/env bash
# How long dlopen() of each plugin takes in a fresh process, as Slurm loads it into srun, sbatch,
# salloc and every slurmstepd: the plugins alternate, ROUNDS runs each; prints the median and the
# 10th and 90th percentiles in microseconds, then the cost of one cpuid instruction here.
# Usage: contrib/bench/dlopen.sh [ROUNDS] [PLUGIN.so...]   (default: 200 rounds, the noop plugin
#   and this tree's release build; LAMA_SLURM_PREFIX=PREFIX links a built Slurm's libslurmfull)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-200}
shift || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lib=${LAMA_SLURM_PREFIX:+$LAMA_SLURM_PREFIX/lib/slurm}
lib=${lib:-/usr/lib/x86_64-linux-gnu/slurm-wlm}
inc=${LAMA_SLURM_PREFIX:+$LAMA_SLURM_PREFIX/include}
gcc -O2 -o "$work/dlopen" contrib/bench/dlopen.c -L"$lib" -Wl,-rpath,"$lib" -Wl,--no-as-needed -lslurmfull
plugins=("$@")
if [ ${#plugins[@]} = 0 ]; then
  if [ -n "${LAMA_SLURM_PREFIX:-}" ]; then export SLURM_INCLUDE_DIR=$inc; fi
  cargo build --release --quiet -p lama-spank
  gcc -O2 -shared -fPIC -I"${inc:-/usr/include}" contrib/bench/noop_spank.c -o "$work/noop_spank.so"
  plugins=("$work/noop_spank.so" target/release/liblama_spank.so)
fi
for r in $(seq "$rounds"); do
  for i in "${!plugins[@]}"; do echo "$i $("$work/dlopen" "${plugins[$i]}")"; done
done > "$work/times"
for i in "${!plugins[@]}"; do
  awk -v i="$i" '$1 == i {print $2}' "$work/times" | sort -n | awk -v p="${plugins[$i]}" '
    {t[NR] = $1} END {printf "%-50s median %6.1f us  [p10 %.1f, p90 %.1f]\n", p, t[int((NR + 1) / 2)] / 1000, t[int(NR / 10) + 1] / 1000, t[int(NR * 9 / 10)] / 1000}'
done
echo "one cpuid instruction: $(( $("$work/dlopen" --cpuid) )) ns"
