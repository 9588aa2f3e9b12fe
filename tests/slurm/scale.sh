#!/usr/bin/env bash
# The plugin on a sandbox of many nodes: steps over every node in block, cyclic, plane and
# arbitrary layouts (TASK_MAP decoded here, by an RFC 34 reader of this script's own, and
# compared task by task with the node Slurm ran it on), placement and binding on every node
# against `lama plan`, a step whose map is too long for the environment, a step whose tasks'
# environment is near execve's limit, refusals counted in lines, and a clean stop.
# Usage: tests/slurm/scale.sh LAMA_BINARY PLUGIN_SO
# Environment: LAMA_SCALE_NODES (the cluster sizes, default "64"), LAMA_TEST_FULL=1 (sizes
#   "64 128 256"), LAMA_SANDBOX and LAMA_SANDBOX_PORT (the cluster this script starts and
#   stops; the caller's cluster, if any, is restarted with 3 nodes at the end).
# Prints one "ok - ..." or "not ok - ..." line per case, with the evidence under a failure.
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"
sizes=${LAMA_SCALE_NODES:-64}
# Every step runs in one allocation of the whole cluster ($job): that is how a large job runs,
# and Slurm 26.05 lays out an arbitrary step of more tasks than a node's CPUs only inside one.
run() { timeout 600 srun --jobid="$job" "$@"; }
[ "${LAMA_TEST_FULL:-0}" = 1 ] && sizes=${LAMA_SCALE_NODES:-64 128 256}

# An RFC 34 map (bare, or wrapped as {"version":1,"map":...}), decoded: "task node" lines.
# Written here, apart from lama's reader.
decode='{ s = $0; sub(/^\{"version":1,"map":/, "", s); sub(/\}$/, "", s)
  gsub(/^\[\[|\]\]$/, "", s); if (s == "[]" || s == "") next
  n = split(s, b, /\],\[/); t = 0
  for (i = 1; i <= n; i++) { split(b[i], f, ",")
    for (r = 0; r < f[4]; r++) for (k = 0; k < f[2]; k++) for (j = 0; j < f[3]; j++) print t++, f[1] + k } }'

# Each task: "T rank node checksum-of-TASK_MAP"; task 0 also writes the map itself to a file (a
# long line on srun's output may be cut among the others' lines).
report='c=$(printf %s "${TASK_MAP-unset}" | cksum); echo "T $SLURM_PROCID $SLURM_NODEID ${c%% *}"
  [ "$SLURM_PROCID" = 0 ] && printf "%s" "${TASK_MAP-unset}" > "$LAMA_TEST_MAP"; true'

# A step whose every task must find in TASK_MAP the node Slurm ran it on, all with one map.
taskmap_step() {
  local name=$1 ntasks=$2 out map sum got want
  shift 2
  rm -f "$work/map"
  out=$(LAMA_TEST_MAP=$work/map run "$@" bash -c "$report" 2>"$work/err")
  quiet "$work/err"
  map=$(cat "$work/map" 2>/dev/null)
  sum=$(printf %s "$map" | cksum); sum=${sum%% *}
  got=$(awk '$1 == "T" {print $2, $3}' <<<"$out" | sort -n)
  want=$(awk "$decode" <<<"$map" | sort -n)
  local tasks same
  tasks=$(grep -c '^T ' <<<"$out")
  same=$(awk -v s="$sum" '$1 == "T" && $4 == s' <<<"$out" | wc -l)
  if [ "$tasks" -eq "$ntasks" ] && [ "$same" -eq "$ntasks" ] && [ "$got" = "$want" ] && [ ! -s "$work/err" ]; then
    ok "$name: all $ntasks tasks see one TASK_MAP ($(printf %s "$map" | wc -c) bytes), which puts each on the node Slurm ran it on"
  else
    not_ok "$name ($tasks of $ntasks tasks, $same with the same map)" "srun $*" "map: ${map:0:300}" \
      "tasks and nodes (first differences):" "$(diff <(echo "$got") <(echo "$want") | head -n 10)" "$(head -n 5 "$work/err")"
  fi
}

# Drops srun's own notes: a step waited for the last one's nodes to be released, and (26.05 from
# about 256 nodes) its connection manager deferred some of the slurmstepds' connections.
quiet() {
  sed -i -E -e '/^srun: (Job [0-9]+ step creation (temporarily disabled, retrying|still disabled, retrying).*|Step created for (job|StepId=)[0-9.]+)$/d' \
    -e '/^srun: warning: _[a-z_]+: \[[^]]*\] Deferring .* due to [0-9]+\/[0-9]+ connections$/d' "$1"
}

# A step placed by lama: every node's tasks bound as `lama plan` places that many tasks on this
# machine, rank order within the node.
placement_step() {
  local name=$1 plan_args=$2 out got want="" node ranks n i lines
  shift 2
  out=$(run "$@" bash -c 'echo "$SLURM_PROCID $SLURM_NODEID $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status) ${LAMA_CPUS:-none}"' 2>"$work/err")
  got=$(sort -n <<<"$out")
  for node in $(awk '{print $2}' <<<"$got" | sort -un); do
    ranks=($(awk -v n="$node" '$2 == n {print $1}' <<<"$got" | sort -n))
    n=${#ranks[@]}
    mapfile -t lines < <(plan_lines --this-machine --np "$n" $plan_args | awk '{print $3}')
    for ((i = 0; i < n; i++)); do want+="${ranks[i]} $node ${lines[i]:-missing} ${lines[i]:-missing}"$'\n'; done
  done
  want=$(sort -n <<<"$want" | sed '/^$/d')
  local nodes
  nodes=$(awk '{print $2}' <<<"$got" | sort -u | wc -l)
  if [ -n "$got" ] && [ "$got" = "$want" ] && [ "$nodes" -eq "$N" ]; then
    ok "$name: every task on all $N nodes bound and LAMA_CPUS as lama plan $plan_args"
  else
    not_ok "$name ($nodes nodes)" "srun $*" "first differences (rank node bound LAMA_CPUS):" \
      "$(diff <(echo "$got") <(echo "$want") | head -n 10)" "$(head -n 5 "$work/err")"
  fi
}

# A shuffled host file of $2 lines over nodes n1..n$1 in which no line names the node of the line
# before it, nor the next one: every task starts a new block of the RFC 34 map.
shuffled() {
  awk -v nodes="$1" -v lines="$2" -v seed="$3" 'BEGIN { srand(seed); p = -5
    for (t = 0; t < lines; t++) { do { n = int(rand() * nodes) } while (n == p || n == p + 1); print "n" (n + 1); p = n } }'
}

for N in $sizes; do
  echo "# $N nodes"
  "$top/contrib/sandbox.sh" stop >/dev/null 2>&1
  began=$(date +%s.%N)
  if ! LAMA_SANDBOX_NODES=$N LAMA_SANDBOX_PLUGIN="required $plugin" "$top/contrib/sandbox.sh" start >"$work/start" 2>&1; then
    not_ok "sandbox of $N nodes starts" "$(tail -n 20 "$work/start")"
    continue
  fi
  idle=$(sinfo -h -o '%T %D' | sort -u)
  if [ "$idle" = "idle $N" ]; then
    ok "sandbox of $N nodes: all idle $(awk -v b="$began" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - b }') s after start"
  else not_ok "sandbox of $N nodes all idle" "$idle"; fi
  job=$(salloc --no-shell -N "$N" --exclusive 2>&1 | awk '/Granted job allocation/ {print $NF}')
  [ -n "$job" ] || { not_ok "an allocation of all $N nodes"; continue; }

  tasks=$((4 * N))
  taskmap_step "$N nodes, block, 4 tasks per node" "$tasks" -N "$N" -n "$tasks" -O -m block
  taskmap_step "$N nodes, block, uneven (SLURM_STEP_TASKS_PER_NODE with two runs)" $((tasks + 3)) -N "$N" -n $((tasks + 3)) -O -m block
  taskmap_step "$N nodes, cyclic" "$tasks" -N "$N" -n "$tasks" -O -m cyclic
  taskmap_step "$N nodes, plane=3" "$tasks" -N "$N" -n "$tasks" -O -m plane=3
  shuffled "$N" "$tasks" "$N" > "$work/hosts"
  SLURM_HOSTFILE=$work/hosts taskmap_step "$N nodes, arbitrary, shuffled host file" "$tasks" -n "$tasks" -O -m arbitrary
  taskmap_step "$N nodes, cyclic with --lama-map placement" $((2 * N)) -N "$N" -n $((2 * N)) -m cyclic --lama-map=csbnh --lama-bind=1c

  placement_step "$N nodes, block, --lama-map=csbnh --lama-bind=1c" "--map csbnh --bind 1c" -N "$N" -n $((2 * N)) -m block --lama-map=csbnh --lama-bind=1c
  placement_step "$N nodes, cyclic, --lama-map=scbnh --lama-bind=1c" "--map scbnh --bind 1c" -N "$N" -n $((2 * N)) -m cyclic --lama-map=scbnh --lama-bind=1c
  placement_step "$N nodes, one task per node, --lama-bind=2c" "--map csbnh --bind 2c" -N "$N" -n "$N" -c 2 --lama-map=csbnh --lama-bind=2c

  # A refusal every node meets: one lama line per node, and none from slurmstepd (a failing
  # task_init gives two per task). srun reports the exit codes itself, grouped per node as the
  # tasks' exits reach it (26.05 may split a node's tasks over a few lines).
  run -N "$N" -n $((8 * N)) -O --lama-bind=2c bash -c 'echo TASK-RAN' >"$work/out" 2>&1; rc=$?
  quiet "$work/out"
  out=$(cat "$work/out")
  lama_lines=$(grep -c '^lama: error: ' <<<"$out")
  srun_lines=$(grep -cE '^srun: error: n[0-9]+: tasks? [0-9,-]+: Exited with exit code 1$' <<<"$out")
  lines=$(wc -l <<<"$out")
  if [ $rc -ne 0 ] && ! grep -q TASK-RAN <<<"$out" && [ "$lama_lines" -eq "$N" ] &&
    [ $((lama_lines + srun_lines)) -eq "$lines" ] && [ "$lines" -lt $((8 * N)) ]; then
    ok "$N nodes, $((8 * N)) tasks refused: $lama_lines lines from lama (one per node), $srun_lines exit reports from srun, nothing else; no task ran"
  else not_ok "$N nodes refused step (rc $rc, $lines lines: $lama_lines from lama, $srun_lines exit reports)" "$(grep -vE '^(lama: error: |srun: error: n[0-9]+: tasks? )' <<<"$out" | head -n 5)" "$(sort <<<"$out" | uniq -c | sort -rn | head -n 4)"; fi

  # Refused in srun, before any node is asked: the job's environment already gives GPUs per task.
  out=$(SLURM_GPUS_PER_TASK=1 run -N "$N" -n "$N" --lama-gpus=1 bash -c 'echo TASK-RAN' 2>&1); rc=$?
  if [ $rc -ne 0 ] && ! grep -q TASK-RAN <<<"$out" && [ "$(grep -c 'lama' <<<"$out")" -le 2 ] &&
    grep -q -- '--lama-gpus: Slurm gives this step' <<<"$out"; then
    ok "$N nodes, --lama-gpus under SLURM_GPUS_PER_TASK refused by srun: $(wc -l <<<"$out") lines"
  else not_ok "srun refuses --lama-gpus with SLURM_GPUS_PER_TASK (rc $rc)" "$out"; fi

  if [ "$N" = "$(awk '{print $1}' <<<"$sizes")" ]; then
    # A map too long for one environment string: 16,384 tasks, each on another node than the
    # task before (about 170 KB of RFC 34 blocks). The step runs as without lama, without
    # TASK_MAP, and says why once.
    big=16384
    shuffled "$N" "$big" 7 > "$work/big"
    # The step asks lama for nothing: the warning goes to slurmd's log, the output stays Slurm's.
    # Task 0 also computes the map the warning names (to a file: a line that long would be cut
    # into pieces among the others'); one step of this size, not two, as it costs about 40 s.
    long='lama: warning: TASK_MAP not exported: (TASK_MAP would take [0-9]+ bytes|the step.s map has more than [0-9]+ blocks), more than the 131071 (bytes )?one environment variable may hold.*lama taskmap --from-slurm'
    before=$(slurmd_logged "$long")
    out=$(SLURM_HOSTFILE=$work/big run -n "$big" -O -m arbitrary bash -c \
      'if [ "$SLURM_PROCID" = 0 ]; then '"$lama"' taskmap --from-slurm > '"$work/bigmap"'; fi; echo "T $SLURM_PROCID $SLURM_NODEID ${TASK_MAP-unset}"' 2>"$work/err")
    ran=$(grep -c '^T [0-9]* [0-9]* unset$' <<<"$out")
    quiet "$work/err"
    errs=$(wc -l < "$work/err")
    logged=$(($(slurmd_logged "$long") - before))
    if [ "$ran" -eq "$big" ] && [ "$errs" -eq 0 ] && [ "$logged" -eq 1 ]; then
      ok "$big tasks on $N nodes with a map too long for the environment: all ran without TASK_MAP; one line in slurmd's log, none on the step's stderr"
    else not_ok "map too long for the environment ($ran of $big tasks ran without TASK_MAP, $errs lines on stderr, $logged in slurmd's logs)" "$(sort "$work/err" | uniq -c | sort -rn | head -n 5)"; fi
    # The map it names, computed inside a task of that step, puts every task on its node.
    got=$(awk '$1 == "T" {print $2, $3}' <<<"$out" | sort -n)
    want=$(awk "$decode" "$work/bigmap" | sort -n)
    if [ "$(wc -l <<<"$got")" -eq "$big" ] && [ "$got" = "$want" ]; then
      ok "lama taskmap --from-slurm inside a task of that step prints the map that puts each of the $big tasks on its node"
    else not_ok "lama taskmap --from-slurm in the big step" "$(diff <(echo "$got") <(echo "$want") | head -n 10)"; fi

    # Near execve's limit: a 1 MiB stack limit leaves 256 KiB for a task's arguments and
    # environment. Filled (measured by a first step without lama's map) so that the tasks start
    # as they are but would not with the step's map too, lama withholds the map (said once per
    # node) and every task runs.
    mid=1200
    shuffled "$N" "$mid" 11 > "$work/mid"
    script='echo "R $SLURM_PROCID ${TASK_MAP-unset} $(env -0 | wc -c) $(env | wc -l)"'
    probe=$(ulimit -s 1024; SLURM_HOSTFILE=$work/mid run -n "$mid" -O -m arbitrary --lama-off bash -c "$script" 2>&1 |
      awk '$1 == "R" { b = $4 + 8 * $5; if (b > max) max = b } END { print max + 0 }')
    # bash -c SCRIPT: three strings and pointers, and the program's path.
    argv=$(( 5 + 3 + ${#script} + 1 + 3 * 8 + 16 ))
    fill=$(( 262144 - 8192 - 2048 - probe - argv ))
    if [ "$probe" -gt 0 ] && [ "$fill" -gt 0 ]; then
      fillers=()
      left=$fill; i=0
      while [ "$left" -gt 64 ]; do
        len=$(( left > 100000 ? 100000 : left - 16 ))
        fillers+=("LAMA_FILL$i=$(head -c "$len" /dev/zero | tr '\0' f)")
        left=$(( left - len - 16 )); i=$((i + 1))
      done
      near='lama: warning: TASK_MAP not exported: with it the task.s arguments and environment would take'
      before=$(slurmd_logged "$near")
      out=$(export "${fillers[@]}" SLURM_HOSTFILE="$work/mid"; ulimit -s 1024; run -n "$mid" -O -m arbitrary bash -c "$script" 2>"$work/err")
      quiet "$work/err"
      ran=$(grep -c '^R [0-9]* unset ' <<<"$out")
      # In slurmd's logs (the step asks lama for nothing), none on the step's stderr.
      warned=$(($(slurmd_logged "$near") - before))
      others=$(grep -c . "$work/err")
      # The map's size, and what the tasks would have needed with it: more than execve allows.
      size=$(SLURM_HOSTFILE=$work/mid "$lama" taskmap --from-slurm --tasks-per-node "$(awk '{c[$1]++} END {for (i = 1; i <= '"$N"'; i++) printf "%s%d", (i > 1 ? "," : ""), c["n" i]}' "$work/mid")" --distribution arbitrary --nodelist "n[1-$N]" | wc -c)
      need=$(( probe + argv + fill + size + 9 + 8 ))
      if [ "$ran" -eq "$mid" ] && [ "$warned" -ge 1 ] && [ "$warned" -le "$N" ] && [ "$others" -eq 0 ] && [ "$need" -gt 262144 ]; then
        ok "near execve's limit ($fill bytes of filler under a 1 MiB stack; with the $size-byte map a task would need about $need of the 262144 bytes execve allows): all $mid tasks ran without TASK_MAP, $warned lines in slurmd's logs (at most one per node), none on the step's stderr"
      else not_ok "near execve's limit ($ran of $mid ran, $warned warnings, $others other lines, about $need bytes needed with the map)" "$(sort "$work/err" | uniq -c | sort -rn | head -n 5)"; fi
    else not_ok "near execve's limit: could not measure the tasks' environment (probe '$probe')"; fi
  fi

  # lama check over the whole allocation: one probe per node, in parallel (issue 51).
  run --overlap -N "$N" -n $((2 * N)) --lama-map=csbnh --lama-bind=1c sleep 120 >/dev/null 2>&1 &
  for _ in $(seq 120); do
    [ "$(squeue -h -s -j "$job" -o %i | grep -c "^$job\.[0-9]")" -ge 1 ] && break
    sleep 0.5
  done
  sleep 3
  began=$(date +%s.%N)
  out=$(timeout 300 "$lama" check --jobid "$job" --sample 0.5 2>&1); rc=$?
  took=$(awk -v b="$began" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - b }')
  rows=$(grep -cE '^  n[0-9]+ +[0-9]+ ' <<<"$out")
  if [ $rc -le 1 ] && [ "$rows" = $((2 * N)) ]; then
    ok "lama check of a step of $((2 * N)) tasks on $N nodes: every task reported, in $took s (exit $rc)"
  else not_ok "lama check on $N nodes (exit $rc, $rows of $((2 * N)) tasks)" "$(head -n 20 <<<"$out")"; fi
  kill %% 2>/dev/null

  scancel "$job"
  began=$(date +%s.%N)
  "$top/contrib/sandbox.sh" stop >"$work/stop" 2>&1; rc=$?
  left=$(grep -lszxF "LAMA_SANDBOX_DAEMON=$LAMA_SANDBOX" /proc/[0-9]*/environ | wc -l)
  if [ $rc -eq 0 ] && [ "$left" -eq 0 ]; then
    ok "sandbox of $N nodes stopped in $(awk -v b="$began" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - b }') s, nothing of it left running"
  else not_ok "sandbox of $N nodes stops ($left processes left)" "$(cat "$work/stop")"; fi
done
done_testing
