#!/usr/bin/env bash
# Host files for `srun -m arbitrary` on the real sandbox cluster: a layout with relative host
# indexes (`lama hostfile`) and whole-job LAMA plans (`lama plan --slurm-hostfile`), each run in a
# 3-node allocation. Every task's host, CPUs and TASK_MAP must be what the layout or plan said.
# Usage: tests/slurm/hostfile.sh LAMA_BINARY PLUGIN_SO   (restarts the cluster; the caller stops it)
# Prints one "ok - ..." or "not ok - ..." line per case, with the evidence under a failure.
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"

# Each task writes: rank, host, real affinity, LAMA_CPUS, TASK_MAP.
cat > "$work/task.sh" <<'EOF'
echo "$SLURM_PROCID $(hostname) $(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status) ${LAMA_CPUS:-none} ${TASK_MAP:-none}"
EOF

# in_job MAKE_HOSTS SRUN_ARGS: inside a 3-node exclusive allocation, runs MAKE_HOSTS (which writes
# $work/hosts), then the step from that host file. Leaves $work/nodes (the job's hosts in node
# order), $work/tasks (one line per task, by rank) and $work/job.log.
in_job() {
  rm -f "$work/hosts" "$work/tasks"
  cat > "$work/job.sh" <<EOF
set -e
scontrol show hostnames "\$SLURM_JOB_NODELIST" > "$work/nodes"
$1
SLURM_HOSTFILE="$work/hosts" srun -m arbitrary -n "\$(wc -l < "$work/hosts")" --whole $2 bash "$work/task.sh" > "$work/tasks.raw"
EOF
  timeout 180 salloc -N3 --exclusive bash "$work/job.sh" > "$work/job.log" 2>&1
  sort -n "$work/tasks.raw" > "$work/tasks" 2>/dev/null
}

# agree NAME COLUMN WANT TASKMAP: the tasks' "rank host cpus" (cpus from COLUMN: 3 real affinity,
# 4 LAMA_CPUS) equal WANT, and every task has TASK_MAP.
agree() {
  local name=$1 col=$2 want=$3 map=$4 got maps
  got=$(awk -v c="$col" '{print $1, $2, $c}' "$work/tasks" 2>/dev/null)
  maps=$(awk '{print $NF}' "$work/tasks" 2>/dev/null | sort -u)
  if [ -n "$got" ] && [ "$got" = "$want" ] && [ "$maps" = "$map" ]; then ok "$name"
  else not_ok "$name" "got (rank host cpus):" "$got" "want:" "$want" "TASK_MAP got: $maps" \
    "TASK_MAP want: $map" "$(cat "$work/job.log")"; fi
}

# plan_case NAME COLUMN PLAN_ARGS SRUN_ARGS: the plan's host file drives the step; each rank runs
# on the plan's node with the plan's CPUs.
plan_case() {
  local name=$1 col=$2 plan_args=$3 srun_args=$4 want map
  in_job "'$lama' plan $plan_args --slurm-hostfile '$work/hosts' > '$work/plan'" "$srun_args"
  want=$(awk '/^node [0-9]+ / {n = $2} /^  rank / {print $2, n, $NF}' "$work/plan" | sort -n |
    awk 'NR == FNR {host[NR - 1] = $1; next} {print $1, host[$2], $3}' "$work/nodes" -)
  map=$(sed -n 's/^TASK_MAP=//p' "$work/plan")
  agree "$name: every rank on the plan's node, with its CPUs and TASK_MAP" "$col" "$want" "$map"
}

echo "# host files on this machine's real cores"
cluster
# Worked by hand on n1..n3 (each with at least 2 CPUs): +n2 is n3 (one slot), +e:1 the first node
# no earlier entry used (n1, two slots), then n2 by name, then n3 again.
cat > "$work/layout" <<'EOF'
# relative and absolute entries mixed
+n2 slots=1
+e:1 slots=2

n2 slots=1   # by name
+n2 slots=1
EOF
in_job "'$lama' hostfile '$work/layout' > '$work/hosts'" "--lama-map=csbnh --lama-bind=1c"
hosts=$(tr '\n' ' ' < "$work/hosts" 2>/dev/null)
if [ "$hosts" = "n3 n1 n1 n2 n3 " ]; then ok "lama hostfile in the job: n3 n1 n1 n2 n3"
else not_ok "lama hostfile in the job" "got: $hosts" "want: n3 n1 n1 n2 n3" "$(cat "$work/job.log")"; fi
# Per node, its ranks in order get `lama plan` for that many tasks on one node.
expected=(n3 n1 n1 n2 n3)
want=""
for host in n1 n2 n3; do
  ranks=()
  for r in "${!expected[@]}"; do [ "${expected[r]}" = "$host" ] && ranks+=("$r"); done
  mapfile -t cpus < <(plan_lines --this-machine --np "${#ranks[@]}" --map csbnh --bind 1c | awk '{print $3}')
  for i in "${!ranks[@]}"; do want+="${ranks[i]} $host ${cpus[i]:-missing}"$'\n'; done
done
# Ranks 0-4 on nodes 2 0 0 1 2 (n1 is node 0): RFC 34 runs [2,1,1,1] [0,1,2,1], then [1,2,1,1]
# (nodes 1 and 2, one task each).
agree "relative layout through srun -m arbitrary: hosts, real bindings, TASK_MAP" 3 \
  "$(sed '/^$/d' <<<"$want" | sort -n)" '{"version":1,"map":[[2,1,1,1],[0,1,2,1],[1,2,1,1]]}'
plan_case "plan nbsch 1c, real bindings" 3 "--this-machine --map nbsch --bind 1c" "--lama-map=nbsch --lama-bind=1c"

echo "# host files from plans on nodes declared as a 2x8x2 Intel XML (plugstack.conf topology=FILE)"
x1=$top/tests/topologies/32em64t-2n8c2t-pci-normalio.xml
cluster LAMA_SANDBOX_TOPOLOGY="$x1"
plugstack "required $plugin topology=$x1"
plan_case "plan nbsch 1c -np 24" 4 "--topology $x1 --map nbsch --bind 1c --np 24" "--lama-map=nbsch --lama-bind=1c"
plan_case "plan sbnch 1c mppr 2:s" 4 "--topology $x1 --map sbnch --bind 1c --mppr 2:s" "--lama-map=sbnch --lama-bind=1c --lama-mppr=2:s"
done_testing
