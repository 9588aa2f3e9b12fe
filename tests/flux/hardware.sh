#!/usr/bin/env bash
# The Flux shell plugin on declared hardware: for each of four real machines (the 2x8x2 Intel,
# the KNL in SNC4 mode, the POWER8 with four GPUs, LLNL's Tuolumne MI300A node), a Flux instance of three fake hosts whose
# resources the instance's configuration declares (the machine's cores, and its GPUs), and the
# plugin's conf pointing at the machine's hwloc XML. CPUs are then computed, not bound; every
# task's LAMA_CPUS (and GPUs) must equal `lama plan` on that XML, node by node.
# Usage: tests/flux/hardware.sh LAMA_BINARY PLUGIN_SO FLUX_PREFIX
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"
source "$top/tests/harness.sh"

# The machine's cores and GPUs, counted in its XML here (not by lama).
count() { python3 -c 'import re, sys; print(len(re.findall(r"type=\"%s\"" % sys.argv[2], open(sys.argv[1]).read())))' "$1" "$2"; }

# machine XML GPUS: this script again, inside a fresh instance for the machine.
machine() {
  local xml=$top/tests/topologies/$1 gpus=$2 cores conf
  cores=$(count "$xml" Core)
  conf=$work/conf.${xml##*/}
  mkdir -p "$conf"
  { echo "[resource]"; echo "noverify = true"; echo "[[resource.config]]"
    echo "hosts = \"fake[0-2]\""; echo "cores = \"0-$((cores - 1))\""
    [ "$gpus" -gt 0 ] && echo "gpus = \"0-$((gpus - 1))\""; } > "$conf/resource.toml"
  userrc "${xml##*/}" "topology = \"$xml\"" > /dev/null
  # The instance's own lines, then whether it (flux start, and the script inside) ran to its end.
  LAMA_FLUX_XML=$xml LAMA_FLUX_GPUS=$gpus LAMA_FLUX_RC=$work/${xml##*/}.lua timeout 300 "$flux" start --test-size=3 \
    --test-hosts='fake[0-2]' -c "$conf" bash "$0" "$lama" "$plugin" "${flux%/bin/flux}" 2>&1 | tee "$work/instance.out"
  verdict "hardware.sh on ${1%.xml}" "${PIPESTATUS[0]}" "$work/instance.out"
}

if [ -z "${LAMA_FLUX_XML:-}" ]; then
  machines="32em64t-2n8c2t-pci-normalio.xml 0
64intel64-fakeKNL-SNC4-hybrid.xml 0
power8gpudistances.xml 4
flux-core-tuolumne-mi300a-tpx.xml 12"
  while read -r xml gpus; do machine "$xml" "$gpus" </dev/null; done <<<"$machines"
  # Every `flux run` example of the docs runs in one of these instances (below).
  examples=$(python3 "$top/tests/examples.py" setups flux)
  [ -n "$examples" ] || not_ok "flux run examples in the docs: none marked"
  while read -r xml gpus; do
    grep -qxF "$xml $gpus" <<<"$machines" || not_ok "docs example set-up '$xml gpus=$gpus': no instance here declares it"
  done <<<"$examples"
  done_testing
  exit 0
fi
xml=$LAMA_FLUX_XML
name=${xml##*/}
name=${name%.xml}
tap_name="hardware.sh on $name"

# lama plan's JSON for the node as "rank cpus gpus threads" lines (CPUs as a cpulist, GPUs as
# Flux numbers them, or none).
plan_json() {
  "$lama" plan --topology "$xml" "$@" --format json | python3 -c 'import json,sys
def runs(c):
  c, out, i = sorted(c), [], 0
  while i < len(c):
      j = i
      while j + 1 < len(c) and c[j + 1] == c[j] + 1: j += 1
      out.append(str(c[i]) if i == j else "%d-%d" % (c[i], c[j])); i = j + 1
  return ",".join(out)
for r in json.load(sys.stdin)["ranks"]:
  print(r["rank"], runs(r["cpus"]), ",".join(g[4:] for g in r["gpus"]) or "none", r.get("threads", "-"))'
}

# LLNL's Tuolumne node (4 MI300A APUs in TPX mode: 12 partitions, rsmi0-11, three per APU):
# lama.policy=auto with as many tasks as partitions, and twice as many. Each task's partition
# (ROCR_VISIBLE_DEVICES, Flux's numbering, the runtime's) and CPUs must be lama plan's; and,
# read from the XML with hwloc's tools: 12 tasks get 12 distinct partitions, 24 tasks two
# neighbouring ranks per partition, every task's CPUs within its APU's.
if [ "$name" = flux-core-tuolumne-mi300a-tpx ]; then
  for np in 12 24; do
    timeout 120 "$flux" run --exclusive -N1 -n$np -o lama.policy=auto -o userrc="$LAMA_FLUX_RC" sh -c \
      'echo T $FLUX_TASK_RANK ${LAMA_CPUS:-none} ${ROCR_VISIBLE_DEVICES:-none}' >"$work/out" 2>"$work/err"
    got=$(awk '$1 == "T" {print $2, $3, $4}' "$work/out" | sort -n)
    want=$(plan_json --np $np --policy auto | cut -d" " -f1-3)
    bad=""
    while read -r r cpus part; do
      [[ $part =~ ^[0-9]+$ ]] || { bad+="task $r has partition '$part'; "; continue; }
      apu=$(hwloc-calc -i "$xml" "os=rsmi$part" --intersect pu --physical-output)
      for c in $(expand "$cpus" | tr , ' '); do
        [[ ,$apu, == *,$c,* ]] || { bad+="task $r on CPU $c, outside partition $part's APU; "; break; }
      done
      [ "$np" = 12 ] || [ "$part" = $((r / 2)) ] || bad+="task $r on partition $part, not $((r / 2)); "
    done <<<"$got"
    distinct=$(awk '{print $3}' <<<"$got" | sort -u | wc -l)
    if [ "$(wc -l <<<"$got")" = $np ] && [ "$got" = "$want" ] && [ "$distinct" = 12 ] && [ -z "$bad" ]; then
      ok "declared $name: -n$np lama.policy=auto: 12 distinct partitions, each task beside its APU, as lama plan says ($(awk '{print $3}' <<<"$got" | paste -sd' '))"
    else not_ok "declared $name: -n$np lama.policy=auto" "$bad" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
  done
  done_testing
  exit 0
fi

# One job: every task's LAMA_CPUS (and LAMA_GPUS, CUDA_VISIBLE_DEVICES) against lama plan.
hw_case() {
  local what=$1 plan_args=$2 map got want rc
  shift 2
  timeout 120 "$flux" run --exclusive "$@" -o userrc="$LAMA_FLUX_RC" sh -c \
    'echo T $FLUX_TASK_RANK ${LAMA_CPUS:-none} ${LAMA_GPUS:-none} ${CUDA_VISIBLE_DEVICES:-none}' \
    >"$work/out" 2>"$work/err"; rc=$?
  map=$("$flux" job taskmap "$("$flux" job last)" 2>&1)
  got=$(awk '$1 == "T" {print $2, $3}' "$work/out" | sort -n)
  want=$(expected_cpus "$map" --topology "$xml" $plan_args)
  if [ $rc -eq 0 ] && [ -n "$got" ] && [ "$got" = "$want" ]; then
    ok "declared $name: $what: every task's LAMA_CPUS is lama plan's on its node"
  else not_ok "declared $name: $what (rc $rc)" "got:" "$got" "want:" "$want" "$(cat "$work/out" "$work/err")"; fi
}

hw_case "block -N3 -n6 lama.map=csbnh lama.bind=1c" "--map csbnh --bind 1c" -N3 -n6 -o lama.map=csbnh -o lama.bind=1c
hw_case "cyclic -N3 -n12 lama.map=scbnh lama.bind=2c" "--map scbnh --bind 2c" -N3 -n12 --taskmap=cyclic -o lama.map=scbnh -o lama.bind=2c
hw_case "-N3 -n6 lama.map-by=numa lama.bind-to=core" "--map-by numa --bind-to core" -N3 -n6 -o lama.map-by=numa -o lama.bind-to=core
# The whole node is the job's (--exclusive), its GPUs too, as lama plan --policy auto counts them.
step_gpus=""; [ "$LAMA_FLUX_GPUS" -gt 0 ] || step_gpus="--step-gpus none"
hw_case "-N3 -n6 lama.policy=auto" "--policy auto $step_gpus" -N3 -n6 -o lama.policy=auto

# lama.mem by tier on the declared KNL (issue 49): each task's LAMA_MEMS (named, not bound: the
# hardware is declared) is lama plan --mem's for its place on its node: the quadrant's DRAM for
# local and interleave, its MCDRAM for hbm and prefer-hbm.
if [ "$name" = 64intel64-fakeKNL-SNC4-hybrid ]; then
  for mode in local hbm prefer-hbm interleave; do
    timeout 120 "$flux" run --exclusive -N3 -n12 -o lama.policy=auto -o lama.mem=$mode -o userrc="$LAMA_FLUX_RC" \
      sh -c 'echo T $FLUX_TASK_RANK ${LAMA_MEMS:-none}' >"$work/out" 2>"$work/err"
    decode_map "$("$flux" job taskmap "$("$flux" job last)" 2>&1)" > "$work/assign"
    want=$(for n in 0 1 2; do
      paste -d' ' <(awk -v n=$n '$2 == n {print $1}' "$work/assign") \
        <("$lama" plan --topology "$xml" --policy auto --np 4 --mem $mode --format json |
          python3 -c 'import json,sys; [print(",".join(map(str, r["mems"]))) for r in json.load(sys.stdin)["ranks"]]')
    done | sort -n)
    got=$(awk '$1 == "T" {print $2, $3}' "$work/out" | sort -n)
    if [ -n "$got" ] && [ "$got" = "$want" ] && [ "$(wc -l <<<"$got")" = 12 ]; then
      ok "declared $name: lama.mem=$mode: each task's LAMA_MEMS is lama plan --mem's ($(awk '{print $2}' <<<"$got" | head -n 4 | paste -sd' ') on each node)"
    else not_ok "declared $name: lama.mem=$mode" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
  done
fi

# lama.nics: each task's nearest NIC (the 2x8x2 Intel has one InfiniBand HCA), as lama plan names it.
if [ "$name" = 32em64t-2n8c2t-pci-normalio ]; then
  timeout 120 "$flux" run --exclusive -N1 -n2 -o lama.map=scbnh -o lama.bind=1c -o lama.nics=1 -o userrc="$LAMA_FLUX_RC" \
    sh -c 'echo T $FLUX_TASK_RANK ${LAMA_NICS:-none} ${UCX_NET_DEVICES:-none}' >"$work/out" 2>"$work/err"
  got=$(awk '$1 == "T" {print $2, $3}' "$work/out" | sort -n)
  want=$("$lama" plan --topology "$xml" --np 2 --map scbnh --bind 1c --nics 1 --format json |
    python3 -c 'import json,sys; [print(r["rank"], ",".join(r["nics"])) for r in json.load(sys.stdin)["ranks"]]')
  if [ -n "$got" ] && [ "$got" = "$want" ] && ! grep -q ' none$' "$work/out"; then
    ok "declared $name: lama.nics=1: each task's LAMA_NICS is lama plan's ($(awk '{print $2}' <<<"$got" | paste -sd' ')), UCX_NET_DEVICES set"
  else not_ok "declared $name: lama.nics=1" "got:" "$got" "want:" "$want" "$(cat "$work/out" "$work/err")"; fi
fi

if [ "$LAMA_FLUX_GPUS" -gt 0 ]; then
  # One -N3 -n6 job (options: $2) against `lama plan --np 2` of each node (options: $3): each
  # task's GPUs as lama plan names them and as Flux numbers them (cudaK is Flux's GPU K, PCI
  # order).
  gpu_case() {
    local what=$1 job_opts=$2 plan_opts=$3 map want got
    timeout 120 "$flux" run --exclusive -N3 -n6 $job_opts -o userrc="$LAMA_FLUX_RC" sh -c \
      'echo T $FLUX_TASK_RANK ${LAMA_GPUS:-none} ${CUDA_VISIBLE_DEVICES:-none}' >"$work/out" 2>"$work/err"
    map=$("$flux" job taskmap "$("$flux" job last)" 2>&1)
    decode_map "$map" > "$work/assign"
    want=$(for n in 0 1 2; do
      paste -d' ' <(awk -v n=$n '$2 == n {print $1}' "$work/assign") \
        <("$lama" plan --topology "$xml" --np 2 $plan_opts --format json |
          python3 -c 'import json,sys; [print(",".join(r["gpus"]), ",".join(g[4:] for g in r["gpus"])) for r in json.load(sys.stdin)["ranks"]]')
    done | sort -n)
    got=$(awk '$1 == "T" {print $2, $3, $4}' "$work/out" | sort -n)
    if [ -n "$got" ] && [ "$got" = "$want" ]; then
      ok "declared $name: $what: each task's GPUs are lama plan's, CUDA_VISIBLE_DEVICES in Flux's numbering"
    else not_ok "declared $name: $what" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
  }
  # Each task's nearest GPU among the four Flux gave the node.
  gpu_case "lama.gpus=1" "-o lama.map=csbnh -o lama.gpus=1" "--map csbnh --gpus 1"
  # The policy shares the node's four GPUs out.
  gpu_case "lama.policy=auto" "-o lama.policy=auto" "--policy auto"
  # `flux run -c N` under the policy: each task's workers are N, as srun's -c N is under Slurm
  # (lama plan --cpus-per-task N), with and without lama.threads=auto; not Flux's cores per slot
  # of the exclusive job's R, which would count the whole node.
  slot_case() {
    local what=$1 job_opts=$2 plan_opts=$3 want got
    timeout 120 "$flux" run --exclusive -N1 -n2 -c4 -g1 $job_opts -o userrc="$LAMA_FLUX_RC" sh -c \
      'echo T $FLUX_TASK_RANK ${LAMA_CPUS:-none} ${OMP_NUM_THREADS:-none}' >"$work/out" 2>"$work/err"
    want=$(plan_json --np 2 --policy auto --cpus-per-task 4 $plan_opts | awk '{print $1, $2, $4}')
    got=$(awk '$1 == "T" {print $2, $3, $4}' "$work/out" | sort -n)
    if [ -n "$got" ] && [ "$got" = "$want" ]; then
      ok "declared $name: flux run -n2 -c4 -g1 $what: each task's CPUs and OMP_NUM_THREADS are lama plan --cpus-per-task 4's ($(awk '{print $3}' <<<"$got" | paste -sd' ') threads)"
    else not_ok "declared $name: -c4 $what" "got (rank cpus threads):" "$got" "want:" "$want" "$(cat "$work/err")"; fi
  }
  slot_case "lama.policy=auto" "-o lama.policy=auto" ""
  slot_case "lama.policy=auto lama.threads=auto" "-o lama.policy=auto -o lama.threads=auto" "--threads auto"
  # What Flux users ask of a placement (flux-core issues): one job each on one node, its tasks'
  # lines "rank cpus gpus" against lama plan's JSON for the same request.
  one_node() {
    local opts=$1
    timeout 120 "$flux" run --exclusive -N1 $opts -o userrc="$LAMA_FLUX_RC" sh -c \
      'echo T $FLUX_TASK_RANK ${LAMA_CPUS:-none} ${CUDA_VISIBLE_DEVICES:-none}' >"$work/out" 2>"$work/err"
    awk '$1 == "T" {print $2, $3, $4}' "$work/out" | sort -n
  }
  # #4622, #6965: GPUs paired with tasks by locality, not by index. #4723: more tasks than GPUs,
  # every task still gets one, shared evenly (8 tasks, 4 GPUs: two each).
  got=$(one_node "-n8 -o lama.policy=auto")
  want=$(plan_json --np 8 --policy auto | cut -d" " -f1-3)
  shares=$(awk '{print $3}' <<<"$got" | sort | uniq -c | awk '{print $1}' | sort -u | paste -sd,)
  if [ -n "$got" ] && [ "$got" = "$want" ] && [ "$shares" = 2 ]; then
    ok "declared $name: -n8 over 4 GPUs (flux-core #4723, #4622): every task gets its nearest GPU, two tasks each"
    echo "# -n8 lama.policy=auto (rank cpus CUDA_VISIBLE_DEVICES): $(paste -sd';' <<<"$got")"
  else not_ok "declared $name: more tasks than GPUs" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
  # #4525, #3069, #7212: -c that does not divide the node, on cores of two hardware threads:
  # no core shared between tasks (this XML numbers core k's threads 8k and 8k+1), as lama plan
  # --cpus-per-task 3 places them.
  got=$(one_node "-n3 -c3 -o lama.policy=auto")
  want=$(plan_json --np 3 --policy auto --cpus-per-task 3 | cut -d" " -f1-3)
  shared=$(while read -r r cpus _; do
    python3 -c 'import sys
for p in sys.argv[1].split(","):
    a, _, b = p.partition("-"); b = b or a
    for c in range(int(a), int(b) + 1): print(c // 8)' "$cpus" | sort -u
  done <<<"$got" | sort | uniq -d)
  if [ -n "$got" ] && [ "$got" = "$want" ] && [ -z "$shared" ]; then
    ok "declared $name: -n3 -c3 on 8 cores of 2 threads (flux-core #4525, #3069, #7212): no core shared between tasks, as lama plan --cpus-per-task 3"
    echo "# -n3 -c3 lama.policy=auto (rank cpus CUDA_VISIBLE_DEVICES): $(paste -sd';' <<<"$got")"
  else not_ok "declared $name: -c3" "got:" "$got" "want:" "$want" "$(cat "$work/err")"; fi
  # lama.gpu-visibility=all: every GPU of the node, the task's nearest first.
  got=$(one_node "-n2 -o lama.map=scbnh -o lama.bind=1c -o lama.gpus=1 -o lama.gpu-visibility=all")
  want=$(plan_json --np 2 --map scbnh --bind 1c --gpus 1 | cut -d" " -f1-3)
  bad=""
  while read -r r cpus cvd; do
    first=$(awk -v r="$r" '$1 == r {print $3}' <<<"$want")
    [ "${cvd%%,*}" = "$first" ] && [ "$(tr , '\n' <<<"$cvd" | sort | paste -sd,)" = 0,1,2,3 ] || bad+="task $r sees $cvd (nearest: $first); "
  done <<<"$got"
  if [ -n "$got" ] && [ -z "$bad" ]; then ok "declared $name: lama.gpu-visibility=all: each task sees every GPU, its nearest first ($(awk '{print $3}' <<<"$got" | paste -sd' '))"
  else not_ok "declared $name: gpu-visibility=all" "$bad" "$got" "$(cat "$work/err")"; fi
  # More GPUs per task than the job has on its node: the job fails with the reason.
  timeout 120 "$flux" run -N1 -n1 -g1 -o lama.gpus=2 -o userrc="$LAMA_FLUX_RC" sh -c 'echo TASK-RAN' >"$work/out" 2>"$work/err"
  if ! grep -q TASK-RAN "$work/out" && grep -q 'job.exception.*GPU' "$work/err"; then
    ok "declared $name: lama.gpus=2 in a job given one GPU: the job fails, the exception says why"
  else not_ok "declared $name: too few GPUs" "$(cat "$work/out" "$work/err")"; fi
fi

# The docs' `flux run` examples marked for this machine, run where a user would: beside their
# ./app and a lama.lua that loads the plugin (here with the XML as its topology). The pages show a
# later job's costs: one job first keeps the topology in the plugin's cache.
timeout 120 "$flux" run -N3 -n3 -o userrc="$LAMA_FLUX_RC" -o lama.bind=1c true >/dev/null 2>&1
PATH=$(dirname "$flux"):$PATH python3 "$top/tests/examples.py" run flux "$name.xml" "$LAMA_FLUX_GPUS" lama.lua="$LAMA_FLUX_RC" </dev/null
done_testing
