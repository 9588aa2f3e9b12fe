#!/usr/bin/env bash
# The site-kernel suite, run inside the guest (contrib/guest.sh) as root: Slurm under systemd
# with cgroup v2 (proctrack/cgroup, task/cgroup,task/affinity, ConstrainCores, ConstrainRAMSpace,
# ConstrainDevices), on 2 sockets x 2 cores x 2 threads, two NUMA nodes and three CPU-less ones (HMAT). Expected bindings
# come from `lama plan` on the guest's own topology, restricted to the CPUs Slurm gave the step.
# Usage: suite.sh PREFIX LAMA PLUGIN_SO TOP
#   PREFIX  the Slurm to run (/usr for Debian's 22.05, or a prefix of contrib/slurm-build.sh)
#   LAMA    the lama command; PLUGIN_SO the plugin built for that Slurm (liblama_probe.so beside it)
#   TOP     the repository (tests/guest/add-gpus.py)
# Prints one "ok - ..." or "not ok - ..." line per case, and "# done: suite.sh" at its end.
set -uo pipefail
prefix=$1 lama=$2 plugin=$3 top=$4
export PATH=$prefix/bin:$prefix/sbin:$PATH SLURM_CONF=/etc/slurm/slurm.conf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$top/tests/tap.sh"
run() { timeout 300 srun "$@"; }
expand() { awk -F, '{ for (i = 1; i <= NF; i++) { n = split($i, r, "-"); if (n == 1) r[2] = r[1]; for (c = r[1]; c <= r[2]; c++) printf "%s%d", (o++ ? "," : ""), c } print "" }' <<<"$1"; }

# --- Slurm under systemd --------------------------------------------------------------------
# LAMA_GUEST_UNITS=debian: the distribution's own slurmctld.service (as user slurm) and
# slurmd.service run Slurm, as on a site (Debian 13); otherwise units made here run PREFIX's.
if [ "${LAMA_GUEST_UNITS:-}" = debian ]; then
  ctld=slurmctld slurmd=slurmd user=slurm var=/var/lib/slurm logs=/var/log/slurm
  pids=("SlurmctldPidFile=/run/slurmctld/slurmctld.pid" "SlurmdPidFile=/run/slurm/slurmd.pid")
else
  ctld=lama-slurmctld slurmd=lama-slurmd user=root var=/var/lib/lama-slurm logs=/var/log/lama-slurm
  pids=("SlurmctldPidFile=/run/lama-slurmctld.pid" "SlurmdPidFile=/run/lama-slurmd.pid")
fi
systemctl stop $slurmd $ctld 2>/dev/null
rm -rf "$var/state" "$var/spool"
mkdir -p /etc/slurm "$var/state" "$var/spool" "$logs"
chown "$user" "$var/state" "$logs"
# GPUs backed by device nodes made here (NVIDIA's major number; no driver: opening one that is
# permitted fails with ENXIO, one the device filter denies with EPERM).
for i in 0 1 2 3; do [ -e /dev/nvidia$i ] || mknod -m 666 /dev/nvidia$i c 195 $i; done
hw=$(slurmd -C | head -n 1 | sed -E 's/^NodeName=[^ ]+ //; s/ *UpTime=.*//; s/RealMemory=([0-9]+)/RealMemory=\1/')
mem=$(sed -E 's/.*RealMemory=([0-9]+).*/\1/' <<<"$hw")
hw=$(sed -E "s/RealMemory=[0-9]+/RealMemory=$((mem - 256))/" <<<"$hw")
cat > /etc/slurm/slurm.conf <<EOF
ClusterName=guest
SlurmctldHost=guest
SlurmUser=$user
AuthType=auth/munge
StateSaveLocation=$var/state
SlurmdSpoolDir=$var/spool
SlurmctldLogFile=$logs/slurmctld.log
SlurmdLogFile=$logs/slurmd.log
${pids[0]}
${pids[1]}
PlugStackConfig=/etc/slurm/plugstack.conf
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=128
GresTypes=gpu
MpiDefault=none
# TCG is slow, and a busy host slower: launch messages get time (the default 10 s was seen to
# run out).
MessageTimeout=60
ReturnToService=2
NodeName=guest $hw Gres=gpu:4 State=UNKNOWN
PartitionName=debug Nodes=guest Default=YES MaxTime=INFINITE State=UP
EOF
cat > /etc/slurm/cgroup.conf <<EOF
CgroupPlugin=cgroup/v2
ConstrainCores=yes
ConstrainRAMSpace=yes
ConstrainDevices=yes
EOF
# Two GPUs per package, tied to its cores (Slurm's core ids: 0-1 on package 0, 2-3 on package 1).
printf 'Name=gpu File=/dev/nvidia[0-1] Cores=0-1\nName=gpu File=/dev/nvidia[2-3] Cores=2-3\n' > /etc/slurm/gres.conf
plugstack() { echo "$*" > /etc/slurm/plugstack.conf; }
plugstack "required $plugin"
# The settings of Debian's slurmd.service and slurmctld.service, for either Slurm.
[ $ctld = slurmctld ] || for d in slurmctld slurmd; do
  extra=""
  [ $d = slurmctld ] || extra=$'Delegate=yes\nLimitMEMLOCK=infinity\nLimitSTACK=infinity\nTasksMax=infinity'
  cat > /etc/systemd/system/lama-$d.service <<EOF
[Unit]
After=munge.service network-online.target
[Service]
Type=simple
Environment=SLURM_CONF=$SLURM_CONF
ExecStart=$prefix/sbin/$d -D -s
KillMode=process
LimitNOFILE=131072
$extra
EOF
done
rm -rf /run/lama
systemctl daemon-reload
systemctl start munge $ctld $slurmd
# wait_idle: until the node is idle again after slurmd (re)starts, two minutes at most.
wait_idle() { for _ in $(seq 120); do [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && break; sleep 1; done; }
wait_idle
release=$(srun --version | awk '{print $2}')
if [ "$(sinfo -h -o %T)" != idle ]; then
  not_ok "Slurm $release under systemd in the guest: the node is not idle" "$(sinfo 2>&1)" "$(tail -n 20 $logs/slurmd.log)"
  exit 0
fi
echo "# Slurm $release in the guest: $(nproc) CPUs, $(ls -d /sys/devices/system/node/node* | wc -l) NUMA nodes, $(stat -fc %T /sys/fs/cgroup)"
# LAMA_GUEST_SETUP_ONLY=1: Slurm is left running for other tests (contrib/schedmd-tests.sh).
[ "${LAMA_GUEST_SETUP_ONLY:-}" != 1 ] || exit 0
# LAMA_GUEST_FIRST: a command run on this Slurm before the cases, which must leave its
# plugstack.conf as it found it (tests/trixie/run.sh: SchedMD's test7.11, without a second set-up,
# through tests/schedmd/differential.sh, whose verdict counts only when it ran to its end).
if [ -n "${LAMA_GUEST_FIRST:-}" ]; then
  source "$top/tests/harness.sh"
  bash -c "$LAMA_GUEST_FIRST" 2>&1 | tee "$work/first.out"
  verdict differential.sh "${PIPESTATUS[0]}" "$work/first.out"
fi

# Each task's view, one line: task, its CPUs, the step's cgroup CPUs, its cgroup, the NUMA nodes
# its pages are bound to (numa_maps), and the GPU variables.
cat > "$work/where.sh" <<'EOF'
cg=$(cat /proc/self/cgroup)
step=/sys/fs/cgroup${cg#0::}
step=${step%/user/task_*}
binds=$(grep -o 'bind:[0-9,-]*' /proc/self/numa_maps | sort -u | paste -sd' ' -)
heap=$(grep -m 1 'bind:[0-9,-]* heap' /proc/self/numa_maps)
echo "task $SLURM_PROCID cpus $(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status) step $(cat "$step/cpuset.cpus.effective") cgroup $cg mems ${binds:-none} lines $(wc -l < /proc/self/cgroup) heap ${heap:-none}"
EOF
# The NUMA node of each CPU.
declare -A numa_of
for n in /sys/devices/system/node/node[0-9]*; do
  for c in $(expand "$(cat "$n/cpulist")" | tr , ' '); do numa_of[$c]=${n##*node}; done
done
# "task cpus" lines from lama plan on this machine, restricted to the step's CPUs.
plan_tasks() {
  local step=$1
  shift
  "$lama" plan --this-machine --restrict "$step" "$@" |
    awk '/^  rank / { c = $NF; for (i = 1; i < NF; i++) if ($i == "cpus") c = $(i+1); print $2, c }' | sort -n
}
# One step: every task bound as lama plan says for the step's CPUs, inside them, in a cgroup v2
# task cgroup; with --lama-mem=local every task's pages bound to its CPUs' NUMA node.
step_case() {
  local name=$1 srun_args=$2 plan_args=$3 out step got want bad="" task cpus mems c nodes
  out=$(run $srun_args bash "$work/where.sh" 2>&1)
  step=$(awk '$1 == "task" {print $6; exit}' <<<"$out")
  got=$(awk '$1 == "task" {print $2, $4}' <<<"$out" | sort -n)
  want=$(plan_tasks "${step:-none}" $plan_args)
  while read -r _ task _ cpus _ _ _ cg _ mems; do
    mems=${mems% lines*}
    # 22.05 names the job's cgroup job_N, 26.05 an opaque id; the step's and task's are alike.
    [[ $cg =~ ^0::/system.slice/guest_slurmstepd.scope/[^/]+/step_[0-9]+/user/task_[0-9]+$ ]] || bad+="task $task is in cgroup '$cg', not a cgroup v2 task cgroup under slurmd's systemd scope; "
    for c in $(expand "$cpus" | tr , ' '); do
      [[ ,$(expand "$step"), == *,$c,* ]] || bad+="task $task bound to CPU $c outside the step's cpuset.cpus.effective $step; "
    done
    if [[ $srun_args == *--lama-mem=local* || $srun_args == *--mem-bind=local* ]]; then
      nodes=$(for c in $(expand "$cpus" | tr , ' '); do echo "${numa_of[$c]}"; done | sort -u | paste -sd, -)
      [ "$mems" = "bind:$nodes" ] || bad+="task $task on CPUs $cpus (NUMA $nodes) has pages bound as '$mems'; "
    fi
  done < <(grep '^task ' <<<"$out")
  if [ -n "$want" ] && [ "$got" = "$want" ] && [ -z "$bad" ]; then
    ok "[guest, Slurm $release] $name: every task bound as lama plan says on the step's CPUs $step, in a cgroup v2 task cgroup${4:-}"
    [ -z "${show:-}" ] || { echo "# $name, as the tasks saw it (and their heap's line of /proc/self/numa_maps):"; grep '^task ' <<<"$out" | sort -n -k2 | sed 's/ lines [0-9]* heap / numa_maps: /; s/ numa_maps: none$//; s/^/#   /'; }
  else not_ok "[guest, Slurm $release] $name" "got:" "$got" "want (step $step):" "$want" "$bad" "$out"; fi
}

# --- cgroup v2 under systemd ----------------------------------------------------------------
slurmd_cg=$(cat /proc/"$(systemctl show -p MainPID --value $slurmd)"/cgroup)
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] && [ "$(ps -p 1 -o comm=)" = systemd ] &&
  [[ $slurmd_cg == 0::/system.slice/$slurmd.service || $slurmd_cg == 0::/system.slice/$slurmd.service/* ]] &&
  grep -q 'cgroup/v2' /etc/slurm/cgroup.conf; then
  ok "[guest, Slurm $release] systemd is PID 1, /sys/fs/cgroup is cgroup2, slurmd runs in its own delegated unit ($slurmd_cg)"
else not_ok "[guest, Slurm $release] cgroup v2 under systemd" "$(stat -fc %T /sys/fs/cgroup) $(ps -p 1 -o comm=) $slurmd_cg"; fi

# --- maps ------------------------------------------------------------------------------------
show=1 step_case "block -n4 -c2 --lama-map=csbnh --lama-bind=1c" "-n4 -c2 --lama-map=csbnh --lama-bind=1c" "--np 4 --map csbnh --bind 1c"
step_case "cyclic over sockets -n4 -c2 --lama-map=scbnh --lama-bind=1c" "-n4 -c2 --lama-map=scbnh --lama-bind=1c" "--np 4 --map scbnh --bind 1c"
step_case "-n2 -c4 --lama-map=csbnh --lama-bind=2c" "-n2 -c4 --lama-map=csbnh --lama-bind=2c" "--np 2 --map csbnh --bind 2c"
step_case "multi-level, hardware threads first: -n8 --exclusive --lama-map=hsNcbn --lama-bind=1h" "-n8 --exclusive --lama-map=hsNcbn --lama-bind=1h" "--np 8 --map hsNcbn --bind 1h"

# --- the automatic policy over two NUMA domains, memory bound locally -------------------------
show=1 step_case "--lama-policy=auto --lama-mem=local -n2 -c4 (one task per NUMA domain)" \
  "-n2 -c4 --lama-policy=auto --lama-mem=local" "--np 2 --policy auto --cpus-per-task 4" ", pages bound to its NUMA node"
step_case "--lama-policy=auto --lama-mem=local -n4 -c2 (a core with both threads each)" \
  "-n4 -c2 --lama-policy=auto --lama-mem=local" "--np 4 --policy auto --cpus-per-task 2" ", pages bound to its NUMA node"
step_case "--lama-policy=auto --lama-mem=local -n8 --exclusive (one hardware thread each)" \
  "-n8 --exclusive --lama-policy=auto --lama-mem=local" "--np 8 --policy auto" ", pages bound to its NUMA node"

# --- Slurm's own placement options beside lama's (issue 48) --------------------------------
# -c with fewer tasks than NUMA domains: one task of 8 workers runs over both domains on every
# hardware thread (it had one thread per core, 4 CPUs, and OMP_NUM_THREADS=4).
out=$(timeout 300 salloc -n1 -c8 srun --lama-policy=auto bash -c 'echo "omp $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status) $OMP_NUM_THREADS"' 2>&1)
if [ "$(awk '$1 == "omp" {print $2, $3}' <<<"$out")" = "0-7 8" ]; then ok "[guest, Slurm $release] salloc -n1 -c8, srun --lama-policy=auto: the task has all 8 hardware threads and OMP_NUM_THREADS=8"
else not_ok "[guest, Slurm $release] -n1 -c8 under the policy" "$out"; fi
# --mem-bind=local beside a lama map: Slurm binds task 1's memory to NUMA node 1 (its own mask
# was on socket 1), lama moves task 1 to socket 0 (csbnh packs the first socket): its memory
# must follow to node 0. Slurm alone (--lama-off) is shown first.
echo "# -n2 -c4 --mem-bind=local --lama-off (Slurm's binding alone):"
run -n2 -c4 --mem-bind=local --lama-off bash "$work/where.sh" 2>&1 | grep '^task ' | sort -n -k2 | sed 's/ lines [0-9]* heap / numa_maps: /; s/^/#   /'
show=1 step_case "--mem-bind=local beside --lama-map=csbnh --lama-bind=1c -n2 -c4: memory follows lama's CPUs" \
  "-n2 -c4 --mem-bind=local --lama-map=csbnh --lama-bind=1c" "--np 2 --map csbnh --bind 1c" ", pages bound to its NUMA node"
out=$(run -n2 -c4 --mem-bind=prefer,local --lama-map=csbnh --lama-bind=1c bash -c 'grep -m1 -o "[a-z]*:[0-9,-]* heap" /proc/self/numa_maps' 2>&1)
if [ "$(grep -c 'prefer:0 heap' <<<"$out")" = 2 ]; then ok "[guest, Slurm $release] --mem-bind=prefer,local beside a lama map: both tasks' heaps prefer NUMA node 0, their CPUs' node"
else not_ok "[guest, Slurm $release] --mem-bind=prefer,local beside a lama map" "$out"; fi
# Memory by tier (issue 49). The guest's NUMA nodes 2 and 3 hold memory without CPUs, four times
# as fast from package 0's and package 1's CPUs as their DRAM (HMAT, contrib/guest.sh), node 4
# slow memory of package 0. hwloc 2.9 gives them no subtype: lama tells them by bandwidth. Each
# task's heap policy and nodes as the kernel shows them (/proc/self/numa_maps), and LAMA_MEMS;
# expected nodes from the guest's qemu command line, and `lama plan --mem` must agree.
# The heap's pages must be on those nodes too (tests/guest/pages.sh).
source "$top/tests/guest/pages.sh"
tier_probe "$work/tier.sh" SLURM_PROCID
tier_case() {
  local mode=$1 args=$2 plan=$3 want=$4 out got planned pages preview
  out=$(run $args --lama-policy=auto --lama-mem=$mode bash "$work/tier.sh" 2>&1)
  got=$(awk '$1 == "tier" {$1 = ""; print substr($0, 2)}' <<<"$out" | sort -n | paste -sd';' -)
  pages=$(pages_where "$out")
  preview=$("$lama" plan --this-machine --policy auto $plan --mem "$mode" 2>&1)
  planned=$(awk '/^  rank / {print $2, $(NF-1)}' <<<"$preview" | paste -sd';' -)
  if [ "$got" = "$want" ] && [ -n "$pages" ] && ! grep -qv ' ok$' <<<"$pages" &&
    [ "$(awk -F';' '{for (i = 1; i <= NF; i++) {split($i, f, " "); printf "%s%s %s", (i > 1 ? ";" : ""), f[1], f[2]}}' <<<"$got")" = "$planned" ]; then
    ok "[guest, Slurm $release] --lama-mem=$mode $args: $got (task, LAMA_MEMS, numa_maps), as lama plan --mem says; the heap's pages on those nodes"
    echo "#   lama plan --this-machine --policy auto $plan --mem $mode:"
    grep '^  rank ' <<<"$preview" | sed 's/^  /#     /'
    heap_lines "$out"
  else not_ok "[guest, Slurm $release] --lama-mem=$mode $args" "wanted: $want" "got: $got" "lama plan: $planned" "pages (task, nodes, verdict): $pages" "$out"; fi
}
echo "# the guest's NUMA nodes: $(for n in /sys/devices/system/node/node[0-9]*; do echo -n "${n##*node}:$(cat "$n/cpulist" | sed 's/^$/-/') "; done)"
tier_case local "-n2 -c4" "--np 2 --cpus-per-task 4" "0 0 bind:0;1 1 bind:1"
tier_case hbm "-n2 -c4" "--np 2 --cpus-per-task 4" "0 2 bind:2;1 3 bind:3"
tier_case prefer-hbm "-n2 -c4" "--np 2 --cpus-per-task 4" "0 2 prefer (many):2;1 3 prefer (many):3"
tier_case interleave "-n1 -c8" "--np 1 --cpus-per-task 8" "0 0-1 interleave:0-1"
# --cpu-bind=verbose: Slurm's line for each task, then lama's in the same form with the mask the
# task really has.
out=$(run -n2 -c4 --cpu-bind=verbose --lama-map=csbnh --lama-bind=1c bash -c 'echo "mask $SLURM_PROCID $(taskset -p $$ | sed "s/.*: //")"' 2>&1)
bad=""
for t in 0 1; do
  real=$(awk -v t=$t '$1 == "mask" && $2 == t {print $3}' <<<"$out")
  slurm_line=$(grep -n "^cpu-bind[-a-z]*=[A-Z]* *- guest, task  $t " <<<"$out" | grep -v LAMA | head -n 1 | cut -d: -f1)
  lama_line=$(grep -n "^cpu-bind=LAMA - guest, task  $t " <<<"$out" | head -n 1)
  lama_mask=$(sed -E 's/.*mask 0x([0-9A-Fa-f]+) set$/\1/' <<<"${lama_line#*:}")
  [ -n "$slurm_line" ] && [ -n "$lama_line" ] && [ "${lama_line%%:*}" -gt "$slurm_line" ] || bad+="task $t: Slurm's line then lama's wanted; "
  [ "$(tr a-f A-F <<<"$lama_mask")" = "$(tr a-f A-F <<<"$real")" ] || bad+="task $t: lama's line says 0x$lama_mask, the task runs on 0x$real; "
done
if [ -z "$bad" ]; then ok "[guest, Slurm $release] --cpu-bind=verbose beside a lama map: after Slurm's line, lama's line with the mask each task really has"
  grep '^cpu-bind' <<<"$out" | sed 's/^/#   /'
else not_ok "[guest, Slurm $release] --cpu-bind=verbose beside a lama map" "$bad" "$out"; fi
# Explicit Slurm bindings beside lama's options are refused in srun, once; under the site's
# policy=auto they win, the step stays Slurm's, and srun says so once.
for slurm_opt in --cpu-bind=none --cpu-bind=map_cpu:0,2 --mem-bind=map_mem:1; do
  out=$(run -n2 $slurm_opt --lama-policy=auto bash -c 'echo TASK-RAN' 2>&1); rc=$?
  if [ $rc -ne 0 ] && [ "$(grep -c "lama: ${slurm_opt%%:*}.* and --lama-policy=auto cannot be used together" <<<"$out")" = 1 ] && ! grep -q TASK-RAN <<<"$out"; then
    ok "[guest, Slurm $release] $slurm_opt with --lama-policy=auto: refused once in srun, no task ran"
  else not_ok "[guest, Slurm $release] $slurm_opt with --lama-policy=auto (rc $rc)" "$out"; fi
done
plugstack "required $plugin policy=auto"
out=$(run -n2 -c2 --cpu-bind=none bash -c 'echo "free $SLURM_PROCID ${LAMA_CPUS:-unplaced} $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status) $(cat /sys/fs/cgroup$(sed "s/^0:://; s|/user/task_.*||" /proc/self/cgroup)/cpuset.cpus.effective)"' 2>&1)
bad=$(awk '$1 == "free" && ($3 != "unplaced" || $4 != $5)' <<<"$out")
if [ "$(grep -c '^free ' <<<"$out")" = 2 ] && [ -z "$bad" ] && [ "$(grep -c 'lama: --cpu-bind=none: this step is left to Slurm' <<<"$out")" = 1 ]; then
  ok "[guest, Slurm $release] site policy=auto, srun --cpu-bind=none: the tasks stay unbound on the step's whole cpuset, said once"
else not_ok "[guest, Slurm $release] site policy=auto with --cpu-bind=none" "$out"; fi
plugstack "required $plugin"

# --- a step on both sockets, beside another job --------------------------------------------
hog=$(sbatch --parsable -o /dev/null -n1 -c2 --wrap 'sleep 600')
for _ in $(seq 100); do [ "$(squeue -h -j "$hog" -o %T)" = RUNNING ] && break; sleep 0.5; done
out=$(run -n3 -c2 bash -c 'cat /sys/fs/cgroup$(sed "s/^0:://; s|/user/task_.*||" /proc/self/cgroup)/cpuset.cpus.effective' 2>&1 | sort -u)
spans=$(expand "$out" | tr , '\n' | awk -v s=0 '{ if ($1 < 4) a = 1; else b = 1 } END { print a + b }')
[ "$spans" = 2 ] || not_ok "[guest, Slurm $release] beside a job holding core 0, -n3 -c2 should span both sockets" "$out"
step_case "beside a job holding core 0, -n3 -c2 on both sockets --lama-map=csbnh --lama-bind=1c" \
  "-n3 -c2 --lama-map=csbnh --lama-bind=1c" "--np 3 --map csbnh --bind 1c"
scancel "$hog"

# --- lama plan --from-slurm inside an allocation -------------------------------------------
from_slurm_case() {
  local name=$1 alloc=$2 plan_args=$3 srun_args=$4 out want got
  out=$(timeout 300 salloc $alloc bash -c "'$lama' plan --from-slurm $plan_args | awk '/^  rank / { c = \$NF; for (i = 1; i < NF; i++) if (\$i == \"cpus\") c = \$(i+1); print \"plan\", \$2, c }'
    srun $srun_args bash '$work/where.sh'" 2>&1)
  want=$(awk '$1 == "plan" {print $2, $3}' <<<"$out" | sort -n)
  got=$(awk '$1 == "task" {print $2, $4}' <<<"$out" | sort -n)
  if [ -n "$want" ] && [ "$got" = "$want" ]; then ok "[guest, Slurm $release] salloc $alloc: lama plan --from-slurm $plan_args plans what srun $srun_args binds"
  else not_ok "[guest, Slurm $release] --from-slurm $name" "plan:" "$want" "srun:" "$got" "$out"; fi
}
from_slurm_case "policy -c4" "-n2 -c4" "--policy auto" "--lama-policy=auto"
from_slurm_case "map" "-n4" "--map csbnh --bind 1c" "--lama-map=csbnh --lama-bind=1c"

# --- lama exec under srun without the plugin, and lama plan --format srun (issue 67) --------
# One allocation: the plugin's step is the reference; then, the plugin unloaded, lama exec's
# step and the srun line of `lama plan --format srun` binding by srun's own options (mask_cpu,
# map_mem), on real hardware threads and NUMA nodes: each task's CPUs and pages as the plugin's.
out=$(timeout 300 salloc -n4 -c2 bash -c "srun --lama-policy=auto --lama-mem=local bash '$work/where.sh' | sed 's/^task /reference /'
  echo '# no plugin' > /etc/slurm/plugstack.conf
  srun '$lama' exec --mem local -- bash '$work/where.sh' | sed 's/^task /exec /'
  '$lama' plan --from-slurm --policy auto --mem local --format srun --output '$work/srun.sh' &&
    sh '$work/srun.sh' bash '$work/where.sh' | sed 's/^task /format /'
  echo 'required $plugin' > /etc/slurm/plugstack.conf" 2>&1)
want=$(awk '$1 == "reference" {print $2, $4, $10}' <<<"$out" | sort -n)
for how in exec format; do
  got=$(awk -v h=$how '$1 == h {print $2, $4, $10}' <<<"$out" | sort -n)
  name="lama exec --mem local (the policy by default)"
  [ $how = exec ] || name="lama plan --from-slurm --policy auto --mem local --format srun"
  if [ -n "$want" ] && [ "$got" = "$want" ]; then
    ok "[guest, Slurm $release] salloc -n4 -c2, no plugin: $name binds every task's CPUs and pages as srun --lama-policy=auto --lama-mem=local ($(awk '{print $2 "/" $3}' <<<"$got" | paste -sd' '))"
  else not_ok "[guest, Slurm $release] $name" "plugin (task cpus mems):" "$want" "without it:" "$got" "$out"; fi
done

# --- the topology cache written by slurmd under systemd -------------------------------------
cache=/run/lama/topology-guest.json
out=$(run -n1 --lama-map=csbnh --lama-bind=1c --lama-verbose true 2>&1)
if [ "$(stat -c %U "$cache" 2>/dev/null)" = root ] && grep -q 'topology from the cache' <<<"$out"; then
  ok "[guest, Slurm $release] slurmd under systemd wrote $cache (root's) and the step placed from it"
else not_ok "[guest, Slurm $release] topology cache" "$(ls -la /run/lama 2>&1)" "$out"; fi

# --- GPUs behind cgroup v2's eBPF device filter ---------------------------------------------
# hwloc sees no GPU here: the plugin reads the guest's topology with four GPUs added (two per
# package), so CPUs are computed, not bound; the device filter is Slurm's, and real.
lstopo-no-graphics --of xml > "$work/guest.xml" 2>/dev/null
python3 "$top/tests/guest/add-gpus.py" "$work/guest.xml" /root/guest-gpus.xml 4
plugstack "required $plugin topology=/root/guest-gpus.xml"
cat > "$work/gpu.sh" <<'EOF'
open=""
for f in /dev/nvidia[0-3]; do
  case $( (exec 3<"$f") 2>&1 ) in *"not permitted"*) ;; *"No such device"*) open+="${f##*nvidia},";; *) open+="?${f##*nvidia},";; esac
done
echo "gpu $SLURM_PROCID ${CUDA_VISIBLE_DEVICES:-none} ${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS:-none}} ${open%,}"
EOF
# Slurm's own CUDA_VISIBLE_DEVICES for the step (--lama-off) lists the GPUs as the tasks may name
# them; lama's must name only those (one each with --lama-gpus=1, all of them with visibility=all).
# One task per socket: task t runs on package t, whose GPUs are 2t and 2t+1 (add-gpus.py's
# order, which is Slurm's: gres.conf lists /dev/nvidia0-3 in that order), so its nearest GPU of
# the step is the one of its package.
gpu_case() {
  local name=$1 args=$2 out slurm bad="" t cvd step open i steps g
  slurm=$(run $args --lama-off bash "$work/gpu.sh" 2>&1 | awk '$1 == "gpu" {print $3; exit}')
  out=$(run $args bash "$work/gpu.sh" 2>&1)
  while read -r _ t cvd step open; do
    [ "$open" = "$step" ] || bad+="task $t may open GPUs $open, the step was given $step; "
    for i in ${cvd//,/ }; do
      [[ ,$slurm, == *,$i,* ]] || bad+="task $t: CUDA_VISIBLE_DEVICES=$cvd names $i, not among the step's ($slurm as Slurm numbers them); "
    done
    IFS=, read -ra steps <<<"$step"
    g=${steps[${cvd%%,*}]:-none}
    [[ $name == *all* ]] || { [ "$g" != none ] && [ $((g / 2)) = "$t" ]; } || bad+="task $t on package $t got GPU $g (CUDA_VISIBLE_DEVICES=$cvd of the step's $step), not its package's; "
    case $name in
      *all*) [ "$(tr , '\n' <<<"$cvd" | sort | paste -sd,)" = "$(tr , '\n' <<<"$slurm" | sort | paste -sd,)" ] || bad+="task $t sees $cvd, not every GPU of the step ($slurm); " ;;
      *) [ "$(tr , '\n' <<<"$cvd" | wc -l)" = 1 ] || bad+="task $t: CUDA_VISIBLE_DEVICES=$cvd, one GPU wanted; " ;;
    esac
  done < <(grep '^gpu ' <<<"$out")
  if [ "$(grep -c '^gpu ' <<<"$out")" = 2 ] && [ -n "$slurm" ] && [ -z "$bad" ]; then
    ok "[guest, Slurm $release] $name: opening a GPU outside the step fails with EPERM, the step's with ENXIO, CUDA_VISIBLE_DEVICES names only permitted GPUs"
    echo "# $name (task, CUDA_VISIBLE_DEVICES, the step's GPUs, the GPUs it could open; Slurm's own CUDA_VISIBLE_DEVICES: $slurm):"
    grep '^gpu ' <<<"$out" | sort -n -k2 | sed 's/^gpu /#   task /'
  else not_ok "[guest, Slurm $release] $name" "$bad" "Slurm's CUDA_VISIBLE_DEVICES: $slurm" "$out"; fi
}
# GPUs Slurm binds task by task under the automatic policy (issue 48, case 1): Slurm's default
# binding of -n4 -c2 puts tasks 0 and 2 on package 0 and 1 and 3 on package 1; --gpu-bind=closest
# (or --ntasks-per-gpu=1, and --gpus-per-task=1 from 23.11) gives each the GPUs of its package
# only (its device cgroup allows no other); map_gpu, mask_gpu, per_task (--gpus-per-task before
# 23.11) and --tres-bind's map choose by task id. The policy packs tasks 0,1 into domain 0: the
# GPU decides instead, so every task's CPUs lie in the package of the GPU it may open (the
# device filter says which), no two tasks share a CPU, and no task is handed a GPU it may not
# open.
cat > "$work/follow.sh" <<'EOF'
open=""
for f in /dev/nvidia[0-3]; do
  case $( (exec 3<"$f") 2>&1 ) in *"No such device"*) open+="${f##*nvidia},";; esac
done
echo "follow $SLURM_PROCID ${LAMA_CPUS:-none} ${open%,} ${CUDA_VISIBLE_DEVICES:-none}"
EOF
follow_case() {
  local n=$1 args=$2 out bad="" all="" t cpus open cvd pkg gp dup c g
  out=$(run $args bash "$work/follow.sh" 2>&1)
  while read -r _ t cpus open cvd; do
    pkg=""
    for c in $(expand "$cpus" | tr , ' '); do pkg+="$((c / 4)) "; all+="$c "; done
    pkg=$(tr ' ' '\n' <<<"$pkg" | grep . | sort -u | paste -sd, -)
    gp=$(for g in ${open//,/ }; do echo $((g / 2)); done | sort -u | paste -sd, -)
    [ -n "$gp" ] && [ "$pkg" = "$gp" ] || bad+="task $t on CPUs $cpus (package $pkg) may open GPUs $open (package $gp); "
    [ "$(tr , '\n' <<<"$cvd" | wc -l)" -le "$(tr , '\n' <<<"$open" | wc -l)" ] || bad+="task $t: CUDA_VISIBLE_DEVICES=$cvd names more GPUs than it may open ($open); "
  done < <(grep '^follow ' <<<"$out")
  dup=$(tr ' ' '\n' <<<"$all" | grep . | sort | uniq -d | paste -sd, -)
  [ -z "$dup" ] || bad+="CPUs $dup given to two tasks; "
  if [ "$(grep -c '^follow ' <<<"$out")" = "$n" ] && [ -z "$bad" ]; then
    ok "[guest, Slurm $release] $args: every task's CPUs in the package of the GPU Slurm bound it to, none shared"
    grep '^follow ' <<<"$out" | sort -n -k2 | sed 's/^follow /#   task /'
  else not_ok "[guest, Slurm $release] the policy beside $args" "$bad" "$out"; fi
}
follow=("--gres=gpu:4 --gpu-bind=closest" "--gres=gpu:4 --ntasks-per-gpu=1" "--gres=gpu:4 --gpu-bind=map_gpu:0,2,1,3"
  "--gres=gpu:4 --gpu-bind=mask_gpu:0x4,0x1,0x8,0x2" "--gpus-per-task=1")
# --tres-bind came with Slurm 23.11.
if srun --help 2>&1 | grep -- --tres-bind >/dev/null; then follow+=("--gres=gpu:4 --tres-bind=gres/gpu:map:3,1,2,0"); fi
# Another job holds GPU 0, so the step gets GPUs 1 and 2, one on each package.
hog=$(sbatch --parsable -o /dev/null -n1 -c2 --gres=gpu:1 --wrap 'sleep 600')
for _ in $(seq 100); do [ "$(squeue -h -j "$hog" -o %T)" = RUNNING ] && break; sleep 0.5; done
gpu="-n2 --ntasks-per-socket=1 -c2 --gres=gpu:2 --lama-map=scbnh --lama-bind=1c --lama-gpus=1"
gpu_case "beside a job holding GPU 0, --gres=gpu:2 --lama-gpus=1" "$gpu"
gpu_case "beside a job holding GPU 0, --gres=gpu:2 --lama-gpus=1 --lama-gpu-visibility=all" "$gpu --lama-gpu-visibility=all"
# Under ConstrainDevices a map counts the step's GPUs (1, 2 and 3 here), not the node's: map_gpu:1,0
# gives task 0 GPU 2 (package 1) and task 1 GPU 1 (package 0), where the node's numbers would
# put both on package 0.
follow_case 2 "-n2 -c2 --gres=gpu:3 --gpu-bind=map_gpu:1,0 --lama-policy=auto"
scancel "$hog"
for bind in "${follow[@]}"; do follow_case 4 "-n4 -c2 $bind --lama-policy=auto"; done
# A map step without --lama-gpus keeps Slurm's GPUs. csbnh packs tasks 0,1 on package 0 while
# Slurm bound task 1's GPUs on package 1: srun says so once for the node. scbnh follows Slurm's
# order over sockets: every task beside its GPUs, nothing said.
far="lama: note: lama placed task [0-9]* on cpus [0-9,-]*, away from cpus [0-9,-]* where Slurm bound its GPUs"
out=$(run -n4 -c2 --gres=gpu:4 --gpu-bind=closest --lama-map=csbnh --lama-bind=1c bash "$work/follow.sh" 2>&1)
if [ "$(grep -c "$far" <<<"$out")" = 1 ] && [ "$(grep -c '^follow ' <<<"$out")" = 4 ]; then
  ok "[guest, Slurm $release] --gpu-bind=closest beside --lama-map=csbnh: the tasks run, and srun says once that lama placed one away from its GPUs"
  grep "$far" <<<"$out" | sed 's/^/#   /'
else not_ok "[guest, Slurm $release] --gpu-bind=closest beside --lama-map=csbnh" "$out"; fi
out=$(run -n4 -c2 --gres=gpu:4 --gpu-bind=map_gpu:0,2,1,3 --lama-map=csbnh --lama-bind=1c bash "$work/follow.sh" 2>&1)
if [ "$(grep -c "$far.*GPU [12] by its task id" <<<"$out")" = 1 ] && [ "$(grep -c '^follow ' <<<"$out")" = 4 ]; then
  ok "[guest, Slurm $release] --gpu-bind=map_gpu:0,2,1,3 beside --lama-map=csbnh: the tasks run, and srun says once that lama placed a task (1 or 2, whichever speaks first) away from its GPU"
  grep "$far" <<<"$out" | sed 's/^/#   /'
else not_ok "[guest, Slurm $release] --gpu-bind=map_gpu:0,2,1,3 beside --lama-map=csbnh" "$out"; fi
out=$(run -n4 -c2 --gres=gpu:4 --gpu-bind=closest --lama-map=scbnh --lama-bind=1c bash "$work/follow.sh" 2>&1)
bad=$(awk '$1 == "follow" { split($3, r, "[-,]"); split($4, g, ","); if (int(r[1] / 4) != int(g[1] / 2)) print "task " $2 " on " $3 " with GPUs " $4 }' <<<"$out")
if ! grep -q "$far" <<<"$out" && [ "$(grep -c '^follow ' <<<"$out")" = 4 ] && [ -z "$bad" ]; then
  ok "[guest, Slurm $release] --gpu-bind=closest beside --lama-map=scbnh: every task in its GPUs' package, nothing said"
else not_ok "[guest, Slurm $release] --gpu-bind=closest beside --lama-map=scbnh" "$bad" "$out"; fi
plugstack "required $plugin"

# --- lama check on real NUMA domains (issue 51) ----------------------------------------------
# A task Slurm bound over CPUs 2-5 (two of each domain) in a job of every CPU: numa-span; a task
# on CPU 0 whose memory Slurm bound to NUMA node 1: remote-memory. The tasks sleep far longer
# than a check takes (scancel ends them): in a TCG guest beside other work a minute was once too
# short ("job ended while it was being checked").
for c in "numa-span:--cpu-bind=mask_cpu:0x3c" "remote-memory:--cpu-bind=map_cpu:0 --mem-bind=map_mem:1"; do
  kind=${c%%:*} args=${c#*:}
  job=$(sbatch --parsable --exclusive -n1 -o /dev/null --wrap "srun --whole $args sleep 900")
  for _ in $(seq 600); do squeue -h -s -j "$job" -o %i | grep -q "^$job\.0$" && break; sleep 0.5; done
  sleep 3
  out=$(timeout 300 "$lama" check --jobid "$job" --sample 0.5 2>&1); rc=$?
  scancel "$job"
  if [ $rc -eq 1 ] && grep -q "^  $kind: rank 0 on guest" <<<"$out"; then
    ok "[guest, Slurm $release] lama check of srun $args: $kind, exit 1"
    echo "# lama check of srun $args:"; sed 's/^/#   /' <<<"$out"
  else not_ok "[guest, Slurm $release] lama check of srun $args (exit $rc)" "$out"; fi
done
# Every GPU visible to both tasks (--gpu-bind=none): task 1, on package 1, would use GPU 0 of
# package 0 (the first it sees) while the job has GPUs 2 and 3 beside it: far-gpu. The probe
# reads the guest's topology with its GPUs (hwloc honours HWLOC_XMLFILE; Slurm passes lama
# check's environment to its probe step).
job=$(sbatch --parsable --exclusive -n2 --gres=gpu:4 -o /dev/null --wrap "srun --whole --gres=gpu:4 --gpu-bind=none --cpu-bind=map_cpu:0,4 sleep 900")
for _ in $(seq 600); do squeue -h -s -j "$job" -o %i | grep -q "^$job\.0$" && break; sleep 0.5; done
sleep 3
out=$(HWLOC_XMLFILE=/root/guest-gpus.xml timeout 300 "$lama" check --jobid "$job" --sample 0.5 2>&1); rc=$?
scancel "$job"
if [ $rc -eq 1 ] && grep -q "^  far-gpu: rank 1 on guest: .*rank 1 uses GPU 0 .* where GPU 2-3 is nearer" <<<"$out"; then
  ok "[guest, Slurm $release] lama check of --gpu-bind=none, a task on package 1: far-gpu (it would use GPU 0), exit 1"
  echo "# lama check of --gpu-bind=none:"; sed 's/^/#   /' <<<"$out"
else not_ok "[guest, Slurm $release] lama check of --gpu-bind=none (exit $rc)" "$out"; fi

# --- the docs' guest examples ------------------------------------------------------------------
# Every srun example a page marks `<!-- example: guest -->`, run here as a user would.
# (On an idle node: srun would otherwise say it waited for the GPU job cancelled above.)
for _ in $(seq 120); do [ -z "$(squeue -h)" ] && break; sleep 0.5; done
PATH=$(dirname "$lama"):$PATH python3 "$top/tests/examples.py" run guest none 0 </dev/null |
  sed -E "s/^(not )?ok - /&[guest, Slurm $release] /"


# --- tasks in containers (issue 76) ----------------------------------------------------------
# pyxis + enroot with LAMA_GUEST_PYXIS and LAMA_GUEST_ENROOT (tests/guest/pyxis.sh).
[ -z "${LAMA_GUEST_PYXIS:-}" ] || source "$top/tests/guest/pyxis.sh"

# Slurm's OCI containers under crun 1.27.1.
# With LAMA_GUEST_CRUN (contrib/crun-build.sh's prefix, shared read-only) and a Slurm that writes
# the task's environment into each container (not 22.05): `srun --container` on cgroup v2 with
# ConstrainCores. crun resets each container's affinity to its cgroup's CPUs (the step's), and
# the node says so once; through `lama oci-run` every task keeps lama's CPUs, memory policy and
# variables, as the same step outside a container. With LAMA_GUEST_CHARLIECLOUD=1, `ch-run`
# inside the same step's tasks too.
if [ -n "${LAMA_GUEST_CRUN:-}" ] && [[ $release != 22.05* ]]; then
  crun=$LAMA_GUEST_CRUN/bin/crun
  bundle=$work/bundle
  mkdir -p "$bundle/rootfs"/{bin,usr/bin,proc,sys,dev,tmp,etc}
  cp /bin/busybox "$bundle/rootfs/bin/"
  for c in sh cat grep cut; do ln -s /bin/busybox "$bundle/rootfs/bin/$c"; ln -s /bin/busybox "$bundle/rootfs/usr/bin/$c"; done
  (cd "$bundle" && "$crun" spec && jq '.process.terminal = false' config.json >c && mv c config.json)
  source "$top/tests/containers/lib.sh"
  oci_conf() {
    local rt="$crun --cgroup-manager=disabled --root=$work/crun-state" id="%n.%u.%j.%s.%t"
    printf 'RunTimeQuery="%s state %s"\nRunTimeKill="%s kill -a %s"\nRunTimeDelete="%s delete --force %s"\nRunTimeRun="%s%s run --bundle %%b %s"\n' \
      "$rt" "$id" "$rt" "$id" "$rt" "$id" "$1" "$rt" "$id" >/etc/slurm/oci.conf
  }
  step=(-n2 -c2 --lama-map=csbnh --lama-bind=1c --lama-mem=local --lama-threads=auto)
  host=$(run "${step[@]}" sh -c "$report" 2>"$work/host.err" | sort)
  # Outside a container each task runs on its LAMA_CPUS (the binding against lama plan is
  # checked by the cases above).
  bound=$(awk '{c = $2; sub("cpus=", "", c); l = $4; sub("LAMA_CPUS=", "", l); if (c == l && c != "") n++} END {print n + 0}' <<<"$host")
  oci_conf ""
  plain=$(run "${step[@]}" --container="$bundle" sh -c "$report" 2>"$work/oci.err" | sort)
  warned=$(grep -c 'not through `lama oci-run`' "$work/oci.err")
  oci_conf "$lama oci-run "
  kept=$(run "${step[@]}" --container="$bundle" sh -c "$report" 2>"$work/oci2.err" | sort)
  rm -f /etc/slurm/oci.conf
  if [ "${LAMA_GUEST_CHARLIECLOUD:-}" = 1 ]; then
    echo "$report" >"$bundle/rootfs/report.sh"
    ch=$(run "${step[@]}" env USER=root ch-run --no-passwd "$bundle/rootfs" -- sh /report.sh 2>"$work/ch.err" | sort)
    if [ -n "$ch" ] && [ "$ch" = "$host" ]; then
      ok "[guest, Slurm $release] Charliecloud $(USER=root ch-run --version 2>&1) inside each task: its CPUs, memory policy, TASK_MAP and LAMA_* as outside a container"
    else not_ok "[guest, Slurm $release] Charliecloud inside each task" "outside:" "$host" "in ch-run:" "$ch" "$(cat "$work/ch.err")"; fi
  fi
  if [ "$(wc -l <<<"$host")" = 2 ] && [ "$bound" = 2 ] && grep -q 'TASK_MAP={' <<<"$host" && grep -q 'mem=bind:' <<<"$host" &&
    [ "$(sed 's/cpus=[^ ]* //' <<<"$plain")" = "$(sed 's/cpus=[^ ]* //' <<<"$host")" ] &&
    [ "$(cut -d' ' -f2 <<<"$plain" | sort -u | wc -l)" = 1 ] && [ "$plain" != "$host" ] && [ "$warned" = 1 ]; then
    ok "[guest, Slurm $release] crun $("$crun" --version | awk '/^crun version/ {print $3}') as it is, cgroup v2: both tasks widened to $(cut -d' ' -f2 <<<"$plain" | sort -u) (the step's CPUs), memory policy and variables kept; node 0 says so once"
  else not_ok "[guest, Slurm $release] crun as it is under cgroup v2 (want both tasks widened to the same CPUs, one warning)" "outside:" "$host" "in crun:" "$plain" "$(cat "$work/oci.err")"; fi
  if [ -n "$kept" ] && [ "$kept" = "$host" ] && ! grep -q 'lama' "$work/oci2.err"; then
    ok "[guest, Slurm $release] crun through lama oci-run, cgroup v2: every task's CPUs ($(cut -d' ' -f2 <<<"$kept" | paste -sd' ' -)), memory policy, TASK_MAP, LAMA_* and OpenMP variables as outside a container"
  else not_ok "[guest, Slurm $release] crun through lama oci-run under cgroup v2" "outside:" "$host" "through lama oci-run:" "$kept" "$(cat "$work/oci2.err")"; fi
elif [ -n "${LAMA_GUEST_CRUN:-}" ]; then
  skip "[guest, Slurm $release] crun under srun --container: Slurm 22.05 writes none of the task's environment into a container (as tests/containers/oci.sh says)"
fi

# --- core specialization without cgroup core confinement (issue 48, case 5) ------------------
# CoreSpecCount=1, then CpuSpecList=2,3 (core 1), and TaskPlugin=task/affinity alone: slurmd pins
# itself to the specialized CPUs and every slurmstepd inherits that affinity. The CPUs lama may
# use are the step's cores from Slurm's credential within the cgroup's cpuset, never that
# affinity: a step on every other core binds as lama plan says over them, never on the
# specialized core.
sed -i 's|^TaskPlugin=.*|TaskPlugin=task/affinity|' /etc/slurm/slurm.conf
for setting in CoreSpecCount=1 CpuSpecList=2,3; do
  sed -i -E "s/^(NodeName=guest .*) (CoreSpecCount|CpuSpecList)=[0-9,]+ State=UNKNOWN$/\1 State=UNKNOWN/; s/^(NodeName=guest .*) State=UNKNOWN$/\1 $setting State=UNKNOWN/" /etc/slurm/slurm.conf
  systemctl restart $ctld
  systemctl restart $slurmd
  wait_idle
  spec=$(scontrol show node guest | grep -o 'CPUSpecList=[0-9,-]*' | cut -d= -f2)
  slurmd_cpus=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/"$(systemctl show -p MainPID --value $slurmd)"/status)
  free=$(for c in $(seq 0 $(($(nproc) - 1))); do [[ ,$(expand "${spec:-none}"), == *,$c,* ]] || echo "$c"; done | paste -sd, -)
  out=$(run -n3 -c2 --lama-map=csbnh --lama-bind=1c bash -c 'echo "task $SLURM_PROCID $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status)"' 2>&1)
  got=$(awk '$1 == "task" {print $2, $3}' <<<"$out" | sort -n)
  want=$(plan_tasks "$free" --np 3 --map csbnh --bind 1c)
  bad=""
  for c in $(awk '$1 == "task" {print $3}' <<<"$out" | while read -r l; do expand "$l"; done | tr , ' '); do
    [[ ,$(expand "${spec:-none}"), == *,$c,* ]] && bad+="CPU $c is specialized; "
  done
  if [ -n "$spec" ] && [ -n "$want" ] && [ "$got" = "$want" ] && [ -z "$bad" ]; then
    ok "[guest, Slurm $release] $setting, TaskPlugin=task/affinity (slurmd's own affinity: CPUs $slurmd_cpus; specialized: $spec): -n3 -c2 binds as lama plan says over CPUs $free, never on the specialized core"
    echo "# $setting, slurmd on CPUs $slurmd_cpus:"; sed 's/^/#   task /' <<<"$got"
  else not_ok "[guest, Slurm $release] $setting with task/affinity (specialized: '$spec', slurmd on $slurmd_cpus)" "got:" "$got" "want:" "$want" "$bad" "$out"; fi
done

systemctl stop $slurmd $ctld
done_testing
