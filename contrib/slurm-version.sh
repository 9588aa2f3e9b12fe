#!/usr/bin/env bash
# The Slurm release a header folder is for, from its slurm/slurm_version.h.
# Usage: contrib/slurm-version.sh INCLUDE_DIR [--hex]
#   prints X.YY.Z (e.g. 22.05.8), or with --hex the SLURM_VERSION_NUMBER (e.g. 0x160508)
set -euo pipefail
h=$1/slurm/slurm_version.h
v=$(awk '$1 == "#define" && $2 == "SLURM_VERSION_NUMBER" {print $3}' "$h" 2>/dev/null || true)
[ -n "$v" ] || { echo "slurm-version: no SLURM_VERSION_NUMBER in $h" >&2; exit 1; }
if [ "${2:-}" = --hex ]; then printf '0x%x\n' "$((v))"
else printf '%d.%02d.%d\n' $((v >> 16)) $(((v >> 8) & 255)) $((v & 255)); fi
