#!/usr/bin/env bash
# TASK_MAP on a cluster with a network topology, on the real sandbox cluster: four nodes whose
# topology.conf puts n3 and n4 before n1 and n2 (topology/tree: two leaf switches; topology/block:
# two blocks). From Slurm 26.05 a block step numbers its tasks in that order; earlier releases in
# node order. Every task's TASK_MAP is decoded and held against Slurm's own witnesses
# (SLURM_PROCID, SLURM_NODEID), as is `lama taskmap --from-slurm` inside the task, and `lama
# check` of a running job; each case also checks which node Slurm gave task 0, so that the
# topology's order is known to be in play.
# Usage: tests/slurm/topology.sh LAMA_BINARY PLUGIN_SO
#   (restarts the cluster with four nodes; the caller stops it)
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"
# Backfill every second: a heterogeneous job waits for it (every 30 s by default).
network() {
  cluster LAMA_SANDBOX_NODES=4 LAMA_SANDBOX_NETWORK="$1 n[3-4] n[1-2]" \
    LAMA_SANDBOX_CONF_EXTRA=SchedulerParameters=bf_interval=1 "${@:2}"
}
network tree
release=$(srun --version | awk '{print $2}')
# 26.05 and later lay block steps out in the topology's order.
ordered=0
[ "$(printf '%s\n' 26.05 "$release" | sort -V | head -n 1)" = 26.05 ] && ordered=1

# Each task: rank, node id, host, TASK_MAP, the node TASK_MAP gives its rank, the node
# `lama taskmap --from-slurm` gives it.
cat > "$work/task.sh" <<EOF
m=\$("$lama" taskmap --nodeid="\$SLURM_PROCID" 2>/dev/null || echo none)
s=\$("$lama" taskmap --from-slurm --nodeid="\$SLURM_PROCID" 2>/dev/null || echo none)
echo "\$SLURM_PROCID \$SLURM_NODEID \$SLURMD_NODENAME \${TASK_MAP:-none} \$m \$s"
EOF
chmod 755 "$work" "$work/task.sh"

# case NAME FIRST_HOST SRUN_ARGS...: every task has one and the same TASK_MAP, which (and
# `lama taskmap --from-slurm`) puts it on the node Slurm ran it on; task 0 ran on FIRST_HOST.
case_() {
  local name=$1 first=$2 out n lines maps wrong host0
  shift 2
  if [[ " $* " == *" --jobid= "* ]]; then
    # A step of a salloc -N4 job.
    local args=() a
    for a in "$@"; do [ "$a" = --jobid= ] || args+=("$a"); done
    out=$(timeout 120 salloc -N4 srun "${args[@]}" bash "$work/task.sh" 2>&1 | sort -n)
  else
    out=$(run "$@" bash "$work/task.sh" 2>&1 | sort -n)
  fi
  n=$(grep -cE '^[0-9]+ [0-9]+ ' <<<"$out")
  lines=$(awk 'NF == 6 && $1 ~ /^[0-9]+$/' <<<"$out")
  maps=$(awk '{print $4}' <<<"$lines" | sort -u | wc -l)
  wrong=$(awk '$4 == "none" || $5 != $2 || $6 != $2' <<<"$lines" | wc -l)
  host0=$(awk '$1 == 0 {print $3}' <<<"$lines")
  local want=${ntasks:-}
  if [ "$n" -gt 0 ] && [ "$n" = "$(wc -l <<<"$lines")" ] && [ "$maps" = 1 ] && [ "$wrong" = 0 ] &&
    { [ "$first" = any ] || [ "$host0" = "$first" ]; } && { [ -z "$want" ] || [ "$n" = "$want" ]; }; then
    ok "$kind: $name: $n tasks, each TASK_MAP and lama taskmap --from-slurm on Slurm's node (task 0 on $first)"
  else
    not_ok "$kind: $name: $n tasks, $maps different maps, $wrong on another node than Slurm's, task 0 on ${host0:-?} (want $first)" \
      "srun $*" "rank nodeid host TASK_MAP map-node from-slurm-node:" "$out"
  fi
}

# The first host of a block step on nodes n1-n4: n3 where Slurm orders by topology.
topo_first=n1
[ "$ordered" = 1 ] && topo_first=n3

networks=(tree)
# topology/block is 23.11's.
[ "$(printf '%s\n' 23.11 "$release" | sort -V | head -n 1)" = 23.11 ] && networks+=(block)
for kind in "${networks[@]}"; do
  [ "$kind" = tree ] || network "$kind"
  echo "# Slurm $release, topology/$kind: n3 n4 | n1 n2"
  ntasks=4 case_ "-N4 -n4, nothing asked" $topo_first -N4 -n4
  ntasks=8 case_ "-N4 -n8 --lama-map=csbnh --lama-bind=1c" $topo_first -N4 -n8 --lama-map=csbnh --lama-bind=1c
  ntasks=4 case_ "-N4 -n4 --lama-policy=auto" $topo_first -N4 -n4 --lama-policy=auto
  ntasks=6 case_ "-N4 -n6 (uneven)" $topo_first --overcommit -N4 -n6
  # What does not depend on how the network ranks the nodes runs under topology/tree alone.
  if [ "$kind" = tree ]; then
    ntasks=4 case_ "-N4 -n4 -w n1,n2,n3,n4" $topo_first -N4 -n4 -w n1,n2,n3,n4
    # A job on one node of each switch (topology/block allocates whole blocks only).
    ntasks=5 case_ "-N2 -n5 -w n1,n4" "$([ "$ordered" = 1 ] && echo n4 || echo n1)" --overcommit -N2 -n5 -w n1,n4
    ntasks=6 case_ "-N4 -n6 -m cyclic" n1 --overcommit -N4 -n6 -m cyclic
    ntasks=6 case_ "-N4 -n6 -m plane=2" n1 --overcommit -N4 -n6 -m plane=2
  fi
  # A step on fewer nodes than its job: the job's n1-n4, the step's n2 and n3 (their switches'
  # order).
  ntasks=3 case_ "a -N2 -n3 -w n2,n3 step of a salloc -N4 job" "$([ "$ordered" = 1 ] && echo n3 || echo n2)" \
    --overcommit -N2 -n3 -w n2,n3 --jobid=""
  # lama plan --from-slurm inside a task of the running step: the policy's plan numbers the
  # ranks as the step does.
  if [ "$kind" = tree ]; then
    out=$(run -N4 -n4 bash -c 'echo "map $TASK_MAP"; [ "$SLURM_PROCID" != 0 ] ||
      echo "plan $("'"$lama"'" plan --from-slurm --policy auto --format json | python3 -c "import json, sys; print(json.dumps(json.load(sys.stdin)[\"taskmap\"], separators=(\",\", \":\")))")"' 2>&1)
    maps=$(awk '$1 == "map" {print $2}' <<<"$out" | sort -u)
    plan=$(awk '$1 == "plan" {print $2}' <<<"$out")
    if [ "$(wc -l <<<"$maps")" = 1 ] && [ -n "$plan" ] && [ "$(python3 -c "import json, sys; print(json.loads(sys.argv[1]) == json.loads(sys.argv[2]))" "$maps" "$plan" 2>&1)" = True ]; then
      ok "$kind: lama plan --from-slurm --policy auto inside the step's task 0: its task map is the step's TASK_MAP $maps"
    else not_ok "$kind: lama plan --from-slurm inside a task" "$out"; fi
  fi
  # A heterogeneous step: Slurm numbers its nodes and tasks component after component.
  [ "$kind" = tree ] && ntasks=4 case_ "heterogeneous -N3 -n3 -w n1,n2,n3 : -N1 -n1 -w n4" any -N3 -n3 -w n1,n2,n3 : -N1 -n1 -w n4
  # An srun that does not load lama (another plugstack.conf than the nodes'): the nodes cannot
  # learn the order, so they withhold TASK_MAP and say why in slurmd's log (the step asked lama
  # for nothing); without a topology order the map stands.
  sed "s|^PlugStackConfig=.*|PlugStackConfig=$work/empty.conf|" "$SLURM_CONF" >"$work/srun.conf"
  : >"$work/empty.conf"
  before=$(slurmd_logged_text "srun passed none")
  out=$(SLURM_CONF=$work/srun.conf run -N4 -n4 bash -c 'echo "$SLURM_PROCID ${TASK_MAP:-none}"' 2>&1)
  said=$(($(slurmd_logged_text "srun passed none") - before))
  maps=$(grep -cE '^[0-9]+ \{' <<<"$out")
  if { [ "$ordered" = 1 ] && [ "$maps" = 0 ] && [ "$said" -ge 1 ]; } ||
    { [ "$ordered" = 0 ] && [ "$maps" = 4 ] && [ "$said" = 0 ]; }; then
    ok "$kind: an srun without lama: $maps tasks with TASK_MAP, the reason in slurmd's log $said times"
  else
    not_ok "$kind: an srun without lama: $maps tasks with TASK_MAP, the reason in slurmd's log $said times" "$out"
  fi
  # lama check of a running step in the topology's order: TASK_MAP and the nodes agree.
  [ "$kind" = tree ] || continue
  timeout 120 srun -N4 -n4 bash -c 'echo $SLURM_PROCID $SLURM_NODEID $TASK_MAP; sleep 4' >"$work/check.out" 2>&1 &
  job=""
  for _ in $(seq 120); do
    job=$(squeue -h -s -o %i 2>/dev/null | sed -n 's/\.0$//p' | head -n 1)
    [ -n "$job" ] && [ "$(grep -c map "$work/check.out")" = 4 ] && break
    sleep 0.5
  done
  out=$(timeout 120 "$lama" check --jobid "$job" --sample 1 2>&1)
  rc=$?
  wait
  wait_idle || true
  maps=$(awk 'NF == 3 {print $3}' "$work/check.out" | sort -u)
  first=$(awk '$1 == 0 {print $2}' "$work/check.out")
  want_first=0
  [ "$ordered" = 1 ] && want_first=2
  if [ $rc -eq 0 ] && grep -q '^no findings' <<<"$out" && [ "$(wc -l <<<"$maps")" = 1 ] &&
    [[ $maps == *'"map":'* ]] && [ "$first" = "$want_first" ]; then
    ok "$kind: lama check of a running -N4 -n4 step with TASK_MAP $maps: no finding"
  else
    not_ok "$kind: lama check of a running -N4 -n4 step (exit $rc, task 0 on node ${first:-?}, want $want_first)" "$out" "tasks:" "$(cat "$work/check.out")"
  fi
done

# CR_NO_DIST_TOPO_BLOCK (26.05's): block steps in node order again.
if [ "$ordered" != 1 ]; then
  skip_all "CR_NO_DIST_TOPO_BLOCK: Slurm $(srun --version | awk '{print $2}') orders no step by its network topology"
fi
network tree LAMA_SANDBOX_SELECT_PARAMS=CR_Core,CR_NO_DIST_TOPO_BLOCK
kind="tree, CR_NO_DIST_TOPO_BLOCK"
ntasks=6 case_ "-N4 -n6" n1 --overcommit -N4 -n6
done_testing
