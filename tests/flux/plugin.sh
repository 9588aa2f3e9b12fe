#!/usr/bin/env bash
# The Flux shell plugin on a real Flux instance of three brokers on this machine (flux start
# --test-size=3): real bindings against `lama plan`, TASK_MAP against `flux job taskmap`, Flux's
# own binding left alone without lama options, bad options and topologies failing only their
# job, and hybrid MPI + OpenMP with Debian's MPICH (which Flux launches through its PMI-1 server).
# Usage: tests/flux/plugin.sh LAMA_BINARY PLUGIN_SO FLUX_PREFIX
# Prints one "ok - ..." or "not ok - ..." line per case, with the evidence under a failure.
set -uo pipefail
if [ -z "${LAMA_FLUX_INSTANCE:-}" ]; then
  LAMA_FLUX_INSTANCE=1 exec timeout 900 "$3/bin/flux" start --test-size=3 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh" "$@"

# Runs a job: stdout in $work/out, stderr in $work/err, $rc, and its id in $jobid.
job() {
  timeout 120 "$flux" run "$@" >"$work/out" 2>"$work/err"; rc=$?
  jobid=$("$flux" job last 2>/dev/null)
}
# Each task's "T rank cpus LAMA_CPUS TASK_MAP", real CPUs read in the task.
probe='echo T $FLUX_TASK_RANK $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status) ${LAMA_CPUS:-none} ${TASK_MAP:-none}'
tasks() { awk '$1 == "T" {print $2, $'"$1"'}' "$work/out" | sort -n; }

# Real bindings equal lama plan's, node by node, and TASK_MAP equals flux job taskmap.
binding_case() {
  local name=$1 plan_args=$2 map got want
  shift 2
  job "$@" -o userrc="$urc" sh -c "$probe"
  map=$("$flux" job taskmap "$jobid" 2>&1)
  got=$(tasks 3)
  want=$(expected_cpus "$map" --this-machine $plan_args)
  if [ $rc -eq 0 ] && [ -n "$got" ] && [ "$got" = "$want" ] && [ "$(tasks 4)" = "$got" ]; then
    ok "bindings: $name: every task's CPUs (and LAMA_CPUS) are lama plan's on its node"
  else not_ok "bindings: $name (rc $rc)" "got (task cpus):" "$got" "want:" "$want" "$(cat "$work/out" "$work/err")"; fi
  taskmap_check "$name" "$map"
}

taskmap_check() {
  local name=$1 map seen
  map=$(canon "$2")
  seen=$(awk '$1 == "T" {print $5}' "$work/out" | sort -u)
  [ "$(wc -l <<<"$seen")" = 1 ] && seen=$(canon "$seen")
  if [ "$seen" = "$map" ] && [ "$(wc -l < "$work/out")" -gt 0 ]; then
    ok "TASK_MAP: $name: every task's TASK_MAP is flux job taskmap's $map"
  else not_ok "TASK_MAP: $name" "flux job taskmap: $map" "tasks saw: $seen"; fi
}

binding_case "block -N3 -n6 lama.map=csbnh" "--map csbnh" -N3 -n6 -o lama.map=csbnh
binding_case "block -N3 -n6 lama.bind=1c" "--bind 1c" -N3 -n6 -o lama.bind=1c
binding_case "cyclic -N3 -n6 lama.map=csbnh lama.bind=1c" "--map csbnh --bind 1c" -N3 -n6 --taskmap=cyclic -o lama.map=csbnh -o lama.bind=1c
binding_case "-N3 -n3 -c2 lama.map-by=core lama.bind-to=core" "--map-by core --bind-to core" -N3 -n3 -c2 -o lama.map-by=core -o lama.bind-to=core
binding_case "lama scheme --taskmap=lama:ncsbh -N3 -n6" "--map ncsbh" -N3 -n6 --taskmap=lama:ncsbh
binding_case "the automatic policy -N3 -n6 lama.policy=auto" "--policy auto" -N3 -n6 -o lama.policy=auto

# The shell's topology cache (cache=, the job's user's own folder): the first job on a node reads
# the node's XML with hwloc and keeps what it read, named by the XML's content; later jobs read
# that instead (lama.verbose names the source) and place the same. The three brokers share this
# machine's XML, so the first job's three shells may race to write one file.
sources() { grep -o 'topology (hwloc) [0-9.]*\|topology from the cache [0-9.]*' "$work/err" | sed 's/ [0-9.]*$//' | sort | uniq -c | awk '{$1 = $1; print}' | paste -sd, -; }
crc=$(userrc cached "cache = \"$work/own-cache-%u\"")
want=$(expected_cpus "[[0,3,1,1]]" --this-machine --bind 1c)
job -N3 -n3 -o lama.bind=1c -o lama.verbose -o userrc="$crc" sh -c "$probe"
first=$(sources) first_cpus=$(tasks 3)
job -N3 -n3 -o lama.bind=1c -o lama.verbose -o userrc="$crc" sh -c "$probe"
second=$(sources) second_cpus=$(tasks 3)
kept=$(ls "$work/own-cache-$(id -u)" 2>&1)
if [[ $first == *"topology (hwloc)"* ]] && [ "$second" = "3 topology from the cache" ] &&
  [ "$first_cpus" = "$want" ] && [ "$second_cpus" = "$want" ] && [[ $kept == xml-*.json ]]; then
  ok "topology cache: the first job reads the XML with hwloc ($first), the next job's three shells read $kept, both bind as lama plan"
else not_ok "topology cache" "first: $first" "second: $second" "kept: $kept" "cpus: $first_cpus / $second_cpus, want $want" "$(cat "$work/err")"; fi
# A folder another user owns is not trusted: the job reads its XML with hwloc and says why in the
# shell's log (-o verbose).
planted=$work/planted
mkdir -p "$planted" && cp "$work/own-cache-$(id -u)"/xml-*.json "$planted"/ && chown -R 65534 "$planted"
prc=$(userrc planted "cache = \"$planted\"")
job -N3 -n3 -o lama.bind=1c -o lama.verbose -o verbose -o userrc="$prc" sh -c "$probe"
if [ $rc -eq 0 ] && [ "$(sources)" = "3 topology (hwloc)" ] && [ "$(tasks 3)" = "$want" ] &&
  grep -q "is owned by uid 65534, not root; lama trusts only a cache root wrote; reading the XML with hwloc" "$work/err"; then
  ok "topology cache in a folder another user owns: not read (said in the shell's log), the XML read with hwloc, bindings unchanged"
else not_ok "topology cache in a folder another user owns" "rc $rc, sources $(sources)" "$(tasks 3)" "$(cat "$work/err")"; fi

# lama.mem=local: each task's memory bound to the NUMA node of its CPUs, as the kernel reports
# the task's policy in /proc/self/numa_maps ("bind:N"; "default" without), and LAMA_MEMS.
nodes=$(cat /sys/devices/system/node/online 2>/dev/null || echo 0)
mem_probe='echo M $FLUX_TASK_RANK ${LAMA_MEMS:-none} $(awk "NR == 1 {print \$2}" /proc/self/numa_maps)'
job -N3 -n6 -o lama.policy=auto -o lama.mem=local -o userrc="$urc" sh -c "$mem_probe"
got=$(awk '$1 == "M" {print $3, $4}' "$work/out" | sort | uniq -c | awk '{print $1, $2, $3}')
if [ $rc -eq 0 ] && [ "$got" = "6 $nodes bind:$nodes" ]; then ok "lama.mem=local: every task's memory bound to NUMA node $nodes (numa_maps), LAMA_MEMS=$nodes"
else not_ok "lama.mem=local (rc $rc)" "$got" "$(cat "$work/out" "$work/err")"; fi
job -N3 -n6 -o lama.policy=auto -o lama.mem=interleave -o userrc="$urc" sh -c "$mem_probe"
got=$(awk '$1 == "M" {print $3, $4}' "$work/out" | sort | uniq -c | awk '{print $1, $2, $3}')
if [ $rc -eq 0 ] && [ "$got" = "6 $nodes interleave:$nodes" ]; then ok "lama.mem=interleave: every task's memory interleaved over NUMA node(s) $nodes (numa_maps), LAMA_MEMS=$nodes"
else not_ok "lama.mem=interleave (rc $rc)" "$got" "$(cat "$work/out" "$work/err")"; fi
job -N3 -n6 -o lama.policy=auto -o userrc="$urc" sh -c "$mem_probe"
got=$(awk '$1 == "M" {print $3, $4}' "$work/out" | sort -u)
if [ $rc -eq 0 ] && [ "$got" = "none default" ]; then ok "without lama.mem the tasks' memory policy is the default"
else not_ok "without lama.mem (rc $rc)" "$got" "$(cat "$work/err")"; fi

# The lama scheme's map is lama plan's across the job's three nodes.
job -N3 -n6 --taskmap=lama:ncsbh -o userrc="$urc" true
map=$("$flux" job taskmap "$jobid" 2>&1)
want=$(canon "$("$lama" plan --this-machine --nodes 3 --np 6 --map ncsbh --format json | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["taskmap"]))')")
if [ "$(canon "$map")" = "$want" ]; then
  ok "lama scheme: flux job taskmap after --taskmap=lama:ncsbh is lama plan's map over 3 nodes ($want)"
else not_ok "lama scheme map" "flux: $map" "lama plan: $want" "$(cat "$work/err")"; fi

# TASK_MAP without lama options, for Flux's own schemes.
for how in block cyclic "manual:[[0,3,1,1],[0,3,1,1]]" "manual:[[2,1,2,1],[0,2,1,2]]"; do
  args=(-N3 -n6); [ "$how" = block ] || args+=("--taskmap=$how")
  job "${args[@]}" -o userrc="$urc" sh -c "$probe"
  taskmap_check "no lama option, --taskmap=$how" "$("$flux" job taskmap "$jobid" 2>&1)"
done

# Without lama options, Flux's own cpu-affinity binds as it does without the plugin.
job -N3 -n6 -o cpu-affinity=per-task sh -c "$probe"; without=$(tasks 3)
job -N3 -n6 -o cpu-affinity=per-task -o userrc="$urc" sh -c "$probe"; with=$(tasks 3)
if [ -n "$with" ] && [ "$with" = "$without" ] && [ "$(tasks 4 | awk '{print $2}' | sort -u)" = none ]; then
  ok "no lama option: Flux's cpu-affinity=per-task binds as without the plugin, no LAMA_CPUS"
else not_ok "no lama option and Flux's per-task binding" "with:" "$with" "without:" "$without"; fi
# With lama options it is replaced, and said once.
job -N3 -n6 -o cpu-affinity=per-task -o lama.bind=1c -o userrc="$urc" sh -c "$probe"
if [ $rc -eq 0 ] && [ "$(grep -c 'cpu-affinity=per-task is replaced' "$work/err")" = 1 ]; then
  ok "lama options replace Flux's cpu-affinity=per-task, said once for the job"
else not_ok "cpu-affinity replaced" "$(cat "$work/err")"; fi
# A TASK_MAP inherited from the job's environment (an instance started by srun) is replaced.
job -N3 -n3 --env=TASK_MAP='{"version":1,"map":[[0,1,9,1]]}' -o userrc="$urc" sh -c "$probe"
taskmap_check "an inherited TASK_MAP is replaced" "$("$flux" job taskmap "$jobid" 2>&1)"

# Bad options and topologies fail their job before any task, with a job exception that names
# them; the instance goes on.
refused() {
  local name=$1 expect=$2
  shift 2
  job "$@" sh -c 'echo TASK-RAN'
  if [ $rc -ne 0 ] && grep -q "job.exception.*$expect" "$work/err" && ! grep -q TASK-RAN "$work/out"; then
    ok "refused: $name: the job fails, no task ran, the exception says why"
  else not_ok "refused: $name (rc $rc, wanted an exception matching: $expect)" "$(cat "$work/out" "$work/err")"; fi
}
refused "unknown option" "unknown option lama.mapp; valid: lama.policy, lama.map," -N3 -n6 -o lama.mapp=csbnh -o userrc="$urc"
refused "bad map" "invalid lama.map 'xyz'" -N3 -n6 -o lama.map=xyz -o userrc="$urc"
refused "policy with a map" "lama.policy=auto places the tasks itself and cannot be combined with lama.map" -N1 -n2 -o lama.policy=auto -o lama.map=csbnh -o userrc="$urc"
refused "bad lama.mem" "invalid lama.mem 'far'" -N1 -n2 -o lama.mem=far -o userrc="$urc"
refused "lama.mem=hbm on a machine without a faster tier" "memory mode hbm: no memory faster than the default memory" -N1 -n2 -o lama.policy=auto -o lama.mem=hbm -o userrc="$urc"
refused "bad device count" "invalid lama.gpus 'many'" -N1 -n2 -o lama.gpus=many -o userrc="$urc"
refused "not an object" "lama's options are given one by one" -N1 -n1 -o lama=csbnh -o userrc="$urc"
refused "bad conf" "the lama plugin's conf: invalid apply=sometimes" -N1 -n1 -o lama.bind=1c -o userrc="$(userrc badconf 'apply = "sometimes"')"
refused "unusable topology" "missing.xml" -N1 -n1 -o lama.bind=1c -o userrc="$(userrc missing "topology = \"$work/missing.xml\"")"
echo '<topology>' > "$work/broken.xml"
refused "broken topology XML" "broken.xml" -N1 -n1 -o lama.bind=1c -o userrc="$(userrc broken "topology = \"$work/broken.xml\"")"
refused "scheme leaving a node empty" "leaves node 2 without a task" -N3 -n4 --taskmap=lama:csbnh -o lama.bind=1c -o userrc="$urc"

# A job with lama beside a job without, at once; then a plain job after the failures above.
a=$("$flux" submit -N3 -n3 --output="$work/a.out" -o userrc="$urc" -o lama.bind=1c sh -c "$probe")
b=$("$flux" submit -N3 -n3 --output="$work/b.out" sh -c "$probe")
"$flux" job wait-event -t 60 "$a" clean >/dev/null 2>&1; "$flux" job wait-event -t 60 "$b" clean >/dev/null 2>&1
la=$(awk '$1 == "T" {print $4}' "$work/a.out" | sort -u); lb=$(awk '$1 == "T" {print $4 $5}' "$work/b.out" | sort -u)
if [ "$(grep -c '^T' "$work/a.out")" = 3 ] && [ "$la" != none ] && [ "$(grep -c '^T' "$work/b.out")" = 3 ] && [ "$lb" = nonenone ]; then
  ok "a job with lama beside one without: both ran, only the first has lama's variables"
else not_ok "jobs side by side" "$(cat "$work/a.out" "$work/b.out")"; fi
job -N3 -n3 hostname
if [ $rc -eq 0 ] && [ "$(wc -l < "$work/out")" = 3 ]; then ok "the instance runs jobs after the refused ones"
else not_ok "instance after failures (rc $rc)" "$(cat "$work/err")"; fi

# Verbose: one line per task, the node's cost on its first task's, on the job's stderr.
job -N3 -n6 -o lama.bind=1c -o lama.verbose -o userrc="$urc" true
lines=$(grep -c '^lama: task [0-9]* on .* (node [0-2]): bound to cpus' "$work/err")
costs=$(grep -c 'node placed in' "$work/err")
if [ "$lines" = 6 ] && [ "$costs" = 3 ]; then ok "lama.verbose: a line per task, the node's cost once per node"
else not_ok "verbose ($lines lines, $costs costs)" "$(cat "$work/err")"; fi
job -N3 -n6 -o lama.policy=auto -o lama.verbose -o userrc="$urc" true
said=$(grep -c '^lama: policy auto on .* (node [0-2]): 2 task(s) over ' "$work/err")
if [ "$said" = 3 ]; then ok "lama.verbose with the policy: what it chose, once per node"
else not_ok "verbose with the policy ($said lines)" "$(cat "$work/err")"; fi

# Hybrid MPI + OpenMP with MPICH: each rank's binding (read by its shell just before exec) is
# lama plan's, the runtime's places are lama plan's, each thread runs on a CPU of its place.
if mpicc.mpich -fopenmp -O1 -o "$work/probe" "$top/tests/mpi/probe.c" 2>"$work/cc.err"; then
  job -N3 -n3 -c2 -o lama.map=csbnh -o lama.threads=auto -o userrc="$urc" bash -c \
    'echo "pre $FLUX_TASK_RANK $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status)"; exec "$0" omp' "$work/probe"
  plan=$("$lama" plan --this-machine --np 1 --map csbnh --threads auto | awk '/^  rank / {for (i = 1; i <= NF; i++) { if ($i == "cpus") c = $(i+1); if ($i == "places") p = $(i+1) } print c, p}')
  bad=""
  for r in 0 1 2; do
    pre=$(awk -v r=$r '$1 == "pre" && $2 == r {print $3}' "$work/out")
    places=$(awk -v r=$r '$1 == "places" && $2 == r {print $4}' "$work/out")
    size=$(awk -v r=$r '$1 == "rank" && $2 == r {print $10}' "$work/out")
    [ "$pre $places" = "$plan" ] || bad+="rank $r: bound $pre places $places, lama plan: $plan; "
    [ "$size" = 3 ] || bad+="rank $r: MPI size '$size'; "
    # Every thread on a CPU of its place.
    bad+=$(awk -v r=$r '$1 == "thread" && $2 == r { n = split($9, c, ","); hit = 0; for (i = 1; i <= n; i++) if (c[i] == $11) hit = 1; if (!hit) printf "thread %s.%s on cpu %s outside its place %s; ", r, $3, $11, $9 }' "$work/out")
    [ "$(awk -v r=$r '$1 == "thread" && $2 == r' "$work/out" | wc -l)" = "$(awk -F'}' '{print NF - 1}' <<<"$places")" ] || bad+="rank $r: not one thread per place; "
  done
  if [ $rc -eq 0 ] && [ -z "$bad" ]; then ok "MPICH + OpenMP under flux run: ranks bound and threads on places as lama plan says"
  else not_ok "MPICH + OpenMP under flux (rc $rc)" "$bad" "$(cat "$work/out" "$work/err")"; fi
else not_ok "probe builds with mpicc.mpich" "$(cat "$work/cc.err")"; fi
done_testing
