#!/usr/bin/env bash
# The Flux shell plugin on nodes that differ: a Flux instance of three brokers, broker 1 given a
# one-core view of this machine (FLUX_HWLOC_XMLFILE, set for that broker alone by a wrapper), the
# others the whole machine, so R gives jobs different cores per node. --taskmap=lama:MAP must lay
# the job out by each node's own core count (the shell sees only its own node's topology), as
# `lama plan` with each node's XML does, and every node must bind its tasks there.
# Usage: tests/flux/shapes.sh LAMA_BINARY PLUGIN_SO FLUX_PREFIX
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"

if [ -z "${LAMA_FLUX_SHAPES:-}" ]; then
  whole=$work/whole.xml one=$work/one.xml
  lstopo-no-graphics --of xml "$whole" 2>/dev/null
  lstopo-no-graphics --restrict 0x1 --of xml "$one" 2>/dev/null
  # Broker ranks come from the test instance's PMI (PMI_RANK).
  cat > "$work/wrap.sh" <<EOF
#!/bin/sh
[ "\$PMI_RANK" = 1 ] && export FLUX_HWLOC_XMLFILE=$one
exec "\$@"
EOF
  chmod +x "$work/wrap.sh"
  LAMA_FLUX_SHAPES="$whole $one" exec timeout 300 "$flux" start --test-size=3 --wrap="$work/wrap.sh" \
    bash "$0" "$lama" "$plugin" "${flux%/bin/flux}"
fi
read -r whole one <<<"$LAMA_FLUX_SHAPES"
cores=$("$flux" resource list -no '{rlist}' 2>&1)
echo "# brokers' resources: $cores"

# The job's map and each task's binding against lama plan over the three nodes' own XMLs.
shape_case() {
  local what=$1 map_arg=$2 plan_args=$3 got want map rc bad=""
  shift 3
  timeout 120 "$flux" run "$@" --taskmap="lama:$map_arg" -o userrc="$urc" sh -c \
    'echo T $FLUX_TASK_RANK $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status)' >"$work/out" 2>"$work/err"; rc=$?
  map=$("$flux" job taskmap "$("$flux" job last)" 2>&1)
  "$lama" plan --topology "$whole" --topology "$one" --topology "$whole" --map "$map_arg" $plan_args > "$work/plan"
  want=$(sed -n 's/^TASK_MAP=//p' "$work/plan")
  got=$(awk '$1 == "T" {print $2, $3}' "$work/out" | sort -n)
  [ "$(canon "$map")" = "$(canon "$want")" ] || bad+="flux job taskmap says $map, lama plan $want; "
  local plan_cpus
  plan_cpus=$(awk '/^  rank / {for (i = 1; i <= NF; i++) if ($i == "cpus") print $2, $(i+1)}' "$work/plan" | sort -n)
  [ "$got" = "$plan_cpus" ] || bad+="bindings differ; "
  if [ $rc -eq 0 ] && [ -z "$bad" ]; then
    ok "nodes of 2, 1 and 2 cores: $what: the job's map and every task's binding are lama plan's over the three nodes"
    echo "# $what: TASK_MAP $map; tasks (rank cpus): $(paste -sd';' <<<"$got")"
  else not_ok "nodes that differ: $what (rc $rc)" "$bad" "got:" "$got" "lama plan:" "$(cat "$work/plan")" "$(cat "$work/out" "$work/err")"; fi
}
# Flux's scheduler fills the nodes (2, 1 and 2 tasks); lama's scheme then lays them out.
shape_case "flux run -n5 --taskmap=lama:ncsbh -o lama.bind=1c" ncsbh "--np 5 --bind 1c" -n5 -o lama.bind=1c
shape_case "flux run -n5 --taskmap=lama:scbnh -o lama.bind=1c" scbnh "--np 5 --bind 1c" -n5 -o lama.bind=1c

# A binding wider than a node's cores: the job fails before any task starts, naming the node.
timeout 120 "$flux" run -N3 -n3 --exclusive --taskmap=lama:ncsbh -o lama.bind=2c -o userrc="$urc" sh -c 'echo TASK-RAN' >"$work/out" 2>"$work/err"; rc=$?
if [ $rc -ne 0 ] && ! grep -q TASK-RAN "$work/out" && grep -q 'job.exception.*lama.*but node 1 has 1 ' "$work/err"; then
  ok "nodes of 2, 1 and 2 cores: lama.bind=2c, wider than node 1: the job fails before any task starts, naming node 1 (rc $rc)"
  sed 's/^/#   /' "$work/err"
else not_ok "nodes that differ: 2c on a one-core node (rc $rc)" "$(cat "$work/out" "$work/err")"; fi
done_testing
