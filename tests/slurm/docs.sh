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
while read -r xml gpus; do
  file=$top/tests/topologies/$xml
  extra=()
  [ "$gpus" -gt 0 ] && extra=(LAMA_SANDBOX_GPUS="$gpus" LAMA_SANDBOX_CONSTRAIN_DEVICES=1)
  cluster LAMA_SANDBOX_TOPOLOGY="$file" "${extra[@]}"
  plugstack "required $plugin topology=$file"
  # Where a user would run them: beside their ./app, with lama on the PATH.
  PATH=$(dirname "$lama"):$PATH python3 "$top/tests/examples.py" run slurm "$xml" "$gpus" </dev/null
done <<<"$setups"
done_testing
