#!/usr/bin/env bash
# The docs' srun examples on the real sandbox cluster: every code block a page marks
# `<!-- example: slurm XML gpus=N -->` runs on nodes declared as that hwloc XML (with N fake GPUs
# through GRES), and prints what the page shows (tests/examples.py compares).
# Usage: tests/slurm/docs.sh LAMA_BINARY PLUGIN_SO (restarts the cluster; the caller stops it).
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"

python3 "$top/tests/examples.py" selftest
setups=$(python3 "$top/tests/examples.py" setups slurm)
[ -n "$setups" ] || not_ok "srun examples in the docs: none marked"
# The examples run where a user would: a directory holding their ./app, lama on the PATH.
mkdir -p "$work/run"
printf '#!/bin/sh\nexit 0\n' > "$work/run/app"
chmod +x "$work/run/app"
while read -r xml gpus; do
  file=$top/tests/topologies/$xml
  if [ ! -f "$file" ]; then not_ok "docs example set-up: no tests/topologies/$xml"; continue; fi
  extra=()
  [ "$gpus" -gt 0 ] && extra=(LAMA_SANDBOX_GPUS="$gpus" LAMA_SANDBOX_CONSTRAIN_DEVICES=1)
  cluster LAMA_SANDBOX_TOPOLOGY="$file" "${extra[@]}"
  plugstack "required $plugin topology=$file"
  (cd "$work/run" && PATH=$(dirname "$lama"):$PATH python3 "$top/tests/examples.py" run slurm "$xml" "$gpus" </dev/null)
done <<<"$setups"
