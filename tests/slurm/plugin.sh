#!/usr/bin/env bash
# The lama SPANK plugin on the real sandbox cluster. Expected bindings come from `lama plan`,
# expected nodes from Slurm itself (SLURM_NODEID), and affinities from /proc/self/status.
# Usage: tests/slurm/plugin.sh LAMA_BINARY PLUGIN_SO RELEASE_PLUGIN_SO
#   (RELEASE_PLUGIN_SO is the release build for the same Slurm release, for the code-layout
#   check; run from the repository; LAMA_SANDBOX and LAMA_SANDBOX_PORT name the cluster this script
#   starts, restarts and leaves running; the caller stops it)
# Prints one "ok - ..." or "not ok - ..." line per case, with the evidence under a failure.
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"
release=${3:+$(realpath -m "$3")}
# Each task prints: rank, Slurm's node index, and the CPUs it may run on.
report='echo "$SLURM_PROCID $SLURM_NODEID $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status)"'

# Whole-job plan equals the real bindings (Slurm's layout is the one the map implies).
whole_job() {
  local name=$1 srun_args=$2 plan_args=$3 got want
  got=$(run $srun_args bash -c "$report" 2>"$work/err" | sort -n)
  want=$(plan_lines --this-machine $plan_args)
  if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "$name: real bindings equal lama plan"
  else not_ok "$name" "srun $srun_args" "got:" "$got" "want (lama plan $plan_args):" "$want" "$(cat "$work/err")"; fi
}


# Per node: each task's LAMA_CPUS, LAMA_NICS, LAMA_GPUS equal `lama plan [--nics --gpus]` for the
# node's ranks in ascending order, rank by rank, and UCX_NET_DEVICES / CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES
# name those devices as the runtimes do (hwloc's cudaN is CUDA device N; the XMLs here have one
# AMD GPU, opencl0d1, so its ROCm index is 0; mlx5_0 has port 1 active).
report_dev='echo "$SLURM_PROCID $SLURM_NODEID ${LAMA_CPUS:-none} ${LAMA_NICS:-none} ${LAMA_GPUS:-none} ${UCX_NET_DEVICES:-none} ${CUDA_VISIBLE_DEVICES:-none} ${ROCR_VISIBLE_DEVICES:-none}"'
runtime_names() {
  local ucx=() cuda=() rocr=() d
  for d in ${1//,/ }; do case $d in mlx5_0) ucx+=(mlx5_0:1) ;; none) ;; *) ucx+=("$d") ;; esac; done
  for d in ${2//,/ }; do case $d in cuda*) cuda+=("${d#cuda}") ;; opencl0d1) rocr+=(0) ;; esac; done
  local IFS=,
  echo "${ucx[*]:-none} ${cuda[*]:-none} ${rocr[*]:-none}"
}
per_node() {
  local name=$1 xml=$2 srun_args=$3 plan_args=$4 got want="" node ranks n i line
  got=$(run $srun_args bash -c "$report_dev" 2>"$work/err" | sort -n)
  for node in $(awk '{print $2}' <<<"$got" | sort -un); do
    ranks=($(awk -v n="$node" '$2 == n {print $1}' <<<"$got" | sort -n))
    n=${#ranks[@]}
    mapfile -t lines < <("$lama" plan --topology "$xml" --np "$n" $plan_args |
      awk '/^  rank / { c = n = g = "none"; for (i = 1; i < NF; i++) { if ($i == "cpus") c = $(i+1); if ($i == "nics") n = $(i+1); if ($i == "gpus") g = $(i+1) }
             gsub("^-$", "none", n); gsub("^-$", "none", g); print c, n, g }')
    for ((i = 0; i < n; i++)); do
      read -r c nn gg <<<"${lines[i]:-missing missing missing}"
      want+="${ranks[i]} $node $c $nn $gg $(runtime_names "$nn" "$gg")"$'\n'
    done
  done
  want=$(sort -n <<<"$want" | sed '/^$/d')
  if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "$name: exported CPUs and devices equal lama plan per node"
  else not_ok "$name" "srun $srun_args" "got (rank node cpus nics gpus ucx cuda rocr):" "$got" "want:" "$want" "$(cat "$work/err")"; fi
}

# Every task finds in TASK_MAP the node Slurm really ran it on.
taskmap_case() {
  local name=$1; shift
  local out lines agree n nodes=-N3
  n=$(grep -oE -- '-n ?[0-9]+' <<<"$*" | grep -oE '[0-9]+')
  # The host file decides the nodes of an arbitrary layout (26.05's srun refuses -N with it).
  [[ " $* " == *" -m arbitrary "* ]] && nodes=""
  out=$(run --overcommit $nodes "$@" bash -c \
    'echo "$SLURM_PROCID $SLURM_NODEID $('"$lama"' taskmap --nodeid=$SLURM_PROCID 2>&1) $TASK_MAP"' 2>&1)
  lines=$(grep -cE '^[0-9]+ [0-9]+ ' <<<"$out")
  agree=$(awk '$2 == $3' <<<"$out" | wc -l)
  if [ "$lines" -eq "$n" ] && [ "$agree" -eq "$n" ]; then ok "TASK_MAP $name: every task decodes the node it ran on"
  else not_ok "TASK_MAP $name: $agree of $n tasks agree" "$out"; fi
}


echo "# plugin on this machine's real cores"
touch "$work/before"
sleep 1
cluster
whole_job "block, csbnh 1c" "-N3 -n$((3 * $(nproc))) -m block --lama-map=csbnh --lama-bind=1c" \
  "--nodes 3 --map csbnh --bind 1c --np $((3 * $(nproc)))"
whole_job "cyclic, ncsbh 1c" "-N3 -n$((3 * $(nproc))) -m cyclic --lama-map=ncsbh --lama-bind=1c" \
  "--nodes 3 --map ncsbh --bind 1c --np $((3 * $(nproc)))"
whole_job "cyclic, map-by node, bind-to socket" "-N3 -n3 -c$(nproc) -m cyclic --lama-map-by=node --lama-bind-to=socket" \
  "--nodes 3 --map-by node --bind-to socket --np 3"

# slurmd's topology cache: written at start; a damaged one is reported in slurmd's log and the
# step probes the machine, with the same bindings.
if [ "$LAMA_SANDBOX/cache/topology-n1.json" -nt "$work/before" ] && grep -q '"lama_node_cache":[0-9]' "$LAMA_SANDBOX/cache/topology-n1.json"; then
  ok "slurmd wrote its topology cache at start ($LAMA_SANDBOX/cache/topology-n1.json)"
else not_ok "no topology cache from slurmd" "$(ls -la $LAMA_SANDBOX/cache 2>&1)"; fi
printf '{"lama_node_cache":1,"pus":[' > "$LAMA_SANDBOX/cache/topology-n1.json"
whole_job "damaged cache on n1: block, csbnh 1c" "-N3 -n$((3 * $(nproc))) -m block --lama-map=csbnh --lama-bind=1c" \
  "--nodes 3 --map csbnh --bind 1c --np $((3 * $(nproc)))"
if grep -qF "topology cache $LAMA_SANDBOX/cache/topology-n1.json is not usable" "$LAMA_SANDBOX/log/slurmd-n1.log"; then
  ok "the damaged cache is reported in slurmd's log"
else not_ok "damaged cache not reported" "$(tail -n 5 "$LAMA_SANDBOX/log/slurmd-n1.log")"; fi
cluster

# What each process loads: srun loads the plugin (it registers and checks the options) but not
# libhwloc, nor libgcc_s (the plugin's unwinder is linked in: loading libgcc_s runs a dozen
# cpuid instructions, each a trap to the hypervisor in a virtual machine); a step the cache
# serves does not load the hwloc helper (the task's parent is its slurmstepd, which may link
# libhwloc itself, as Debian's does); without a cache, slurmstepd loads the helper beside the
# plugin, and the helper reads the machine with hwloc.
for cmd in srun salloc sbatch; do
  case $cmd in
    srun) out=$(LD_DEBUG=files run -N1 -n1 --lama-map=csbnh --lama-bind=1c true 2>&1) ;;
    salloc) out=$(LD_DEBUG=files timeout 120 salloc -N1 --lama-map=csbnh --lama-bind=1c true 2>&1) ;;
    sbatch) out=$(LD_DEBUG=files timeout 120 sbatch -N1 -o /dev/null --lama-map=csbnh --lama-bind=1c --wrap true 2>&1) ;;
  esac
  if grep -q "file=$plugin .*dynamically loaded" <<<"$out" && ! grep -qE 'file=[^ ]*(libhwloc|liblama_probe|libgcc_s)' <<<"$out"; then
    ok "$cmd loads the plugin without libhwloc, the hwloc helper or libgcc_s"
  else not_ok "$cmd's libraries" "$(grep -E 'file=.*(lama|hwloc|gcc_s)' <<<"$out" | head -n 8)"; fi
done
maps=$(run -N1 -w n1 -n1 --lama-map=csbnh --lama-bind=1c bash -c 'cat /proc/$PPID/maps' 2>&1)
if grep -q "$plugin" <<<"$maps" && ! grep -q liblama_probe <<<"$maps"; then
  ok "a step served by the topology cache: slurmstepd has the plugin, not the hwloc helper"
else not_ok "slurmstepd's libraries with the cache" "$(grep -E 'lama|hwloc' <<<"$maps" | awk '{print $NF}' | sort -u)"; fi
# The code every step runs is laid out together (spank/hot.ld). What a step costs is the 64 KiB
# windows of the plugin's code it touches (the kernel maps a file's pages a window at a time on a
# fault); tests/slurm/code-windows.sh counts the windows holding the functions a TASK_MAP-only
# slurmstepd and its task run, with a uprobe on every function of the release build for this
# cluster's release (the other tests load the debug build, whose code is not laid out). The count
# depends on the code alone. The functions such a step runs hold about 136 KiB, so no layout
# needs fewer than 3 windows, and where the laid-out run starts inside its first window decides
# between 3 and 4 (the kernel's windows follow the randomised load address anyway); without the
# layout it is 12 (checked on 22.05). So the check is at most one window more than the code's
# own size needs. The Rss of slurmstepd's mapping, which the kernel's fault-around makes depend
# on the page cache and the randomised load address as well (156 to 212 KiB for one build), is
# printed for the record only.
if [ -f "$release" ]; then
  plugstack "required $release"
  if windows=$("$top/tests/slurm/code-windows.sh" "$release" slurmstepd timeout 120 srun -N1 -w n1 -n1 true 2>"$work/windows.err"); then
    read -r count funcs bytes <<<"$windows"
    least=$(( (bytes + 65535) / 65536 ))
    if [ "$funcs" -gt 0 ] && [ "$count" -le $((least + 1)) ]; then
      ok "a TASK_MAP-only step runs $funcs functions ($((bytes / 1024)) KiB) of the release plugin in $count 64 KiB windows of its code (at most $((least + 1)): their size needs $least)"
    else not_ok "a TASK_MAP-only step runs $funcs functions ($((bytes / 1024)) KiB) of the release plugin in $count 64 KiB windows, over $((least + 1))" "$(cat "$work/windows.err")"; fi
  else not_ok "the release plugin's code windows could not be counted" "$(cat "$work/windows.err")"; fi
  run -N1 -w n1 -n1 bash -c 'cat /proc/$PPID/smaps' >"$work/smaps" 2>&1
  code_kib=$(awk -v p="$release" '$NF == p && $2 ~ /x/ {f = 1; next} f && /^Rss:/ {print $2; exit}' "$work/smaps")
  echo "# for the record: this step's slurmstepd has ${code_kib:-no} KiB of the release plugin's code mapped (Rss)"
  plugstack "required $plugin"
else not_ok "no release build of the plugin at '$release' (contrib/test.sh builds one per release)"; fi
mv "$LAMA_SANDBOX/cache/topology-n1.json" "$work/cache-n1.json"
maps=$(run -N1 -w n1 -n1 --lama-map=csbnh --lama-bind=1c bash -c 'cat /proc/$PPID/maps' 2>&1)
mv "$work/cache-n1.json" "$LAMA_SANDBOX/cache/topology-n1.json"
if grep -q "liblama_probe.so" <<<"$maps" && grep -q libhwloc <<<"$maps"; then
  ok "a step without a cache: slurmstepd loads the hwloc helper, and libhwloc with it"
else not_ok "slurmstepd's libraries without a cache" "$(grep -E 'lama|hwloc' <<<"$maps" | awk '{print $NF}' | sort -u)"; fi

hosts=$work/hosts
printf 'n2\nn1\nn1\nn3\nn2\n' > "$hosts"
taskmap_case "block -n5" -n5 -m block
taskmap_case "cyclic -n5" -n5 -m cyclic
taskmap_case "plane=2 -n7" -n7 -m plane=2
SLURM_HOSTFILE=$hosts taskmap_case "arbitrary -n5" -n5 -m arbitrary

refused "bad --lama-map" "invalid --lama-map 'csbnq'" -N1 -n1 --lama-map=csbnq
refused "bad --lama-bind" "invalid --lama-bind '0c'" -N1 -n1 --lama-bind=0c
refused "bad --lama-mppr" "invalid --lama-mppr '1:c,x'" -N1 -n1 --lama-mppr=1:c,x
refused "bad --lama-order" "invalid --lama-order 'z'" -N1 -n1 --lama-order=z
refused "bad --lama-map-by" "invalid --lama-map-by 'sockets'" -N1 -n1 --lama-map-by=sockets
refused "--lama-map not UTF-8" "invalid --lama-map: the value is not UTF-8" -N1 -n1 --lama-map=$'c\xffs'
refused "bad --lama-bind-to" "invalid --lama-bind-to 'cores'" -N1 -n1 --lama-bind-to=cores
refused "bad --lama-rank-by" "invalid --lama-rank-by 'x'" -N1 -n1 --lama-rank-by=x
refused "expert and simple mixed" "--lama-map cannot be combined with --lama-map-by" -N1 -n1 --lama-map=csbnh --lama-map-by=core
refused "oversubscribed" "oversubscribed after placing 1 of 2" -N1 -n2 --lama-map=csbnh --lama-bind=1c --lama-mppr=1:n
plugstack "required $plugin topology=$work/missing.xml"
refused "unreadable topology=FILE" "missing.xml" -N1 -n1 --lama-bind=1c
plugstack "required $plugin"
out=$(timeout 60 sbatch -N1 -n1 --lama-bind=9x --wrap true 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -qF "invalid --lama-bind '9x'" <<<"$out"; then ok "bad option refused by sbatch at submission"
else not_ok "bad option in sbatch (rc $rc)" "$out"; fi

# Options given to sbatch reach the job's steps.
out=$(sbatch_wait -N1 -n"$(nproc)" --lama-map=csbnh --lama-bind=1c -o "$work/batch.out" \
  --wrap "srun bash -c '$report'" 2>&1)
got=$(sort -n "$work/batch.out" | awk '{print $1, $3}')
want=$(plan_lines --this-machine --map csbnh --bind 1c --np "$(nproc)" | awk '{print $1, $3}')
if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "sbatch --lama-* options carried into the job's steps"
else not_ok "sbatch options in steps" "$out" "got:" "$got" "want:" "$want"; fi

# Without any --lama option the step is as without the plugin, except for TASK_MAP. Each task
# writes its affinity and environment names to a file of its own (long lines from several tasks
# interleave on srun's output). TMPDIR is left out: slurmstepd sets it for some tasks and not
# others, with or without the plugin.
probe='{ awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status; env | cut -d= -f1 | grep -vxE "TASK_MAP|TMPDIR" | sort; echo "map=${TASK_MAP:-unset}"; } > "$0/$SLURM_PROCID"'
mkdir -p "$work/with" "$work/without" "$work/off"
run -N3 -n6 bash -c "$probe" "$work/with" >"$work/probe.log" 2>&1
plugstack ""
run -N3 -n6 bash -c "$probe" "$work/without" >>"$work/probe.log" 2>&1
plugstack "required $plugin"
run -N3 -n6 --lama-off bash -c "$probe" "$work/off" >>"$work/probe.log" 2>&1
body() { for f in "$1"/*; do echo "task $(basename "$f")"; grep -v '^map=' "$f"; done; }
maps=$(cat "$work"/with/* | grep -cxF 'map={"version":1,"map":[[0,3,2,1]]}')
unset_maps=$(cat "$work"/without/* | grep -cx 'map=unset')
if [ "$maps" -eq 6 ] && [ "$unset_maps" -eq 6 ] && [ "$(body "$work/with")" = "$(body "$work/without")" ] \
  && diff -r "$work/off" "$work/without" >/dev/null; then
  ok "no --lama option: same affinity and environment as without the plugin, plus TASK_MAP; --lama-off: as without"
else not_ok "default step differs ($maps TASK_MAPs with, $unset_maps unset without)" \
  "$(diff <(body "$work/with") <(body "$work/without"))" "$(diff -r "$work/off" "$work/without")"; fi

echo "# plugin with plugstack.conf topology=FILE on two real-machine XMLs (computed, not bound)"
x1=$top/tests/topologies/32em64t-2n8c2t-pci-normalio.xml
cluster LAMA_SANDBOX_TOPOLOGY="$x1"
plugstack "required $plugin topology=$x1"
per_node "2x8x2 Intel, block, csbnh 1c" "$x1" "-N2 -n16 -c4 -m block --lama-map=csbnh --lama-bind=1c" "--map csbnh --bind 1c"
per_node "2x8x2 Intel, cyclic, sbnch 2c mppr 1:c" "$x1" "-N2 -n16 -c4 -m cyclic --lama-map=sbnch --lama-bind=2c --lama-mppr=1:c" "--map sbnch --bind 2c --mppr 1:c"
per_node "2x8x2 Intel with IB and 2 GPUs on package 1, --lama-nics=1 --lama-gpus=1" "$x1" \
  "-N2 -n8 -c4 -m cyclic --lama-map=scbnh --lama-bind=1c --lama-nics=1 --lama-gpus=1" "--map scbnh --bind 1c --nics 1 --gpus 1"
refused "more GPUs than the node has" "3 GPU(s) per task asked for, but this node has 2" -N1 -n2 --lama-gpus=3
refused "bad --lama-gpus" "invalid --lama-gpus 'all'" -N1 -n1 --lama-gpus=all
x2=$top/tests/topologies/64amd64-4s2n4ca2co.fsroot.xml
cluster LAMA_SANDBOX_TOPOLOGY="$x2"
plugstack "required $plugin topology=$x2"
per_node "4-socket AMD, map-by numa bind-to l3cache" "$x2" "-N2 -n8 -c16 -m block --lama-map-by=numa --lama-bind-to=l3cache" "--map-by numa --bind-to l3cache"
per_node "4-socket AMD, plane=3, NsL3cbnh 1c" "$x2" "-N2 -n16 -c8 -m plane=3 --lama-map=NsL3cbnh --lama-bind=1c" "--map NsL3cbnh --bind 1c"

echo "# devices with topology=FILE on the POWER8 with 2 GPUs per package, and admin weights"
x3=$top/tests/topologies/power8gpudistances.xml
cluster LAMA_SANDBOX_TOPOLOGY="$x3"
plugstack "required $plugin topology=$x3"
per_node "POWER8, 2 GPUs per task" "$x3" "-N2 -n4 -c4 -m block --lama-map=scbnh --lama-bind=1c --lama-gpus=2" "--map scbnh --bind 1c --gpus 2"
printf 'Socket 0 ---1---> cuda3\n |---2---> cuda2\nSocket 1 ---1---> cuda0\n |---2---> cuda1\n' > "$work/weights"
plugstack "required $plugin topology=$x3 weights=$work/weights gpus=1"
per_node "POWER8, plugstack.conf gpus=1 and weights=FILE" "$x3" "-N2 -n8 -c2 -m block --lama-map=scbnh --lama-bind=1c" \
  "--map scbnh --bind 1c --gpus 1 --device-weights $work/weights"
printf 'Socket 7 ---1---> cuda3\n' > "$work/weights"
refused "weights file that does not fit the node" "weights file line 1: no Package 7" -N1 -n1 --lama-bind=1c

echo "# plugin under cgroups (ConstrainCores=yes): a step with part of the node"
cluster LAMA_SANDBOX_CGROUP=1
cpuset='cat /sys/fs/cgroup/cpuset$(awk -F: "\$2 == \"cpuset\" {print \$3}" /proc/self/cgroup)/cpuset.cpus'
out=$(timeout 120 salloc -N1 -n"$(nproc)" bash -c "
  srun -n1 --exact sleep 4 & sleep 1.5
  srun -n1 --exact --lama-map=csbnh --lama-bind=1c bash -c 'echo \"bound \$(awk \"/^Cpus_allowed_list/ {print \\\$2}\" /proc/self/status) cpuset \$($cpuset) lama \$LAMA_CPUS\"'
  wait" 2>&1)
line=$(grep '^bound ' <<<"$out")
read -r _ bound _ set _ lcpus <<<"$line"
if [ -n "$line" ] && [ "$bound" = "$set" ] && [ "$lcpus" = "$set" ] && [ "$set" != "0-$(($(nproc) - 1))" ]; then
  ok "cgroup step on part of the node: bound to $bound, inside its cpuset $set"
else not_ok "cgroup step" "$out"; fi
done_testing
