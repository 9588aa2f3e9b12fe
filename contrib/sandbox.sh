#!/usr/bin/env bash
# A local Slurm cluster on this machine: munge, slurmctld and N slurmd nodes (n1 ... nN, three
# unless LAMA_SANDBOX_NODES says otherwise), each slurmd in its own UTS namespace so its tasks see
# their node's host name.
#
# Usage: contrib/sandbox.sh start|stop|status|env|free-port|plugstack LINE
#   start   install missing packages, write the configs, start the daemons, wait for the nodes
#   stop    cancel jobs, stop every daemon this script started, remove the state directory
#   env     print the exports a shell needs to use the cluster (eval "$(contrib/sandbox.sh env)")
#   free-port  exit 0 when nothing listens on the ports this cluster would use
#   plugstack LINE  rewrite the cluster's plugstack.conf (read anew by every step) as LINE
#   (the lama plugin's topology cache is kept in $LAMA_SANDBOX/cache unless LINE names a cache=)
# Environment: LAMA_SANDBOX (state directory, default /tmp/lama-sandbox),
#   LAMA_SANDBOX_NODES (how many nodes, default 3; 256 start in well under a minute here, see the
#   docs/admin-guide.md for what limits the count),
#   LAMA_SANDBOX_PLUGIN (the plugstack.conf line written to $LAMA_SANDBOX/plugstack.conf, e.g.
#   "required /path/liblama_spank.so"; default: no plugin; slurmstepd rereads it for every step),
#   LAMA_SANDBOX_PLUGSTACK (use this plugstack.conf file instead),
#   LAMA_SANDBOX_CACHE=default (leave the plugin's topology cache in its default /run/lama; by
#   default each sandbox keeps its own in $LAMA_SANDBOX/cache),
#   LAMA_SANDBOX_NODE (the NodeName hardware line, default this machine's sockets/cores/threads),
#   LAMA_SANDBOX_TOPOLOGY (an hwloc XML: declare the nodes with its sockets/cores/threads),
#   LAMA_SANDBOX_MEMORY (RealMemory= of each node in MB, so that jobs may ask for memory; default
#   none declared, which Slurm counts as 1 MB),
#   LAMA_SANDBOX_SLURMD_ENV (extra VAR=value words for the slurmd environment, e.g. HWLOC_XMLFILE=...),
#   LAMA_SANDBOX_PORT (port base, default 16800: slurmctld on base+17, slurmd on base+101..base+100+N),
#   LAMA_SANDBOX_CGROUP=1 (the usual site setting: proctrack/cgroup, TaskPlugin=task/affinity,task/cgroup,
#   ConstrainCores=yes; the node line must then match this machine),
#   LAMA_SANDBOX_TASK_PLUGIN (TaskPlugin when neither of the cgroup settings below is given,
#   default task/none; task/affinity for Slurm's own binding),
#   LAMA_SANDBOX_GPUS=N (N fake GPUs per node through GRES: character devices made with mknod under
#   $LAMA_SANDBOX/dev, gres.conf with AutoDetect=off),
#   LAMA_SANDBOX_GPU_CORES ("0-3 0-3 4-7 4-7": each GPU's Cores= in gres.conf, one word per GPU),
#   LAMA_SANDBOX_SHARDS=N, LAMA_SANDBOX_MPS=N (with LAMA_SANDBOX_GPUS: gres/shard and gres/mps,
#   N of each per GPU on its device file, AutoDetect=off),
#   LAMA_SANDBOX_NVML=FILE (AutoDetect=nvml over the tests' stand-in NVML, tests/nvml/, whose
#   description FILE lists the GPUs and MIG instances; needs a LAMA_SLURM_PREFIX built by
#   contrib/slurm-build.sh; each slurmd gets NVIDIA's device files in a mount namespace of its own),
#   LAMA_SANDBOX_NVML_FLAGS (with LAMA_SANDBOX_NVML: a gres.conf Flags= for the GPUs, e.g. env_uuid),
#   LAMA_SANDBOX_NETWORK ("tree GROUP..." or "block GROUP...": a network topology in topology.conf,
#   TopologyPlugin=topology/tree with one leaf switch per GROUP, a hostlist such as n[3-4], under one
#   top switch, or topology/block with one block per GROUP; in the order given, which from Slurm 26.05
#   on is the order a block step's nodes take their tasks in),
#   LAMA_SANDBOX_SELECT_PARAMS (SelectTypeParameters, default CR_Core; e.g. CR_Core,CR_NO_DIST_TOPO_BLOCK),
#   LAMA_SANDBOX_OCI_CONF (a file copied as the cluster's oci.conf, beside slurm.conf: steps may
#   then run in OCI containers, `srun --container=BUNDLE`; needs a Slurm with serializer/json),
#   LAMA_SANDBOX_CONF_EXTRA (more slurm.conf lines, e.g. AllowSpecResourcesUsage=yes),
#   LAMA_SANDBOX_CONSTRAIN_DEVICES=1 (ConstrainDevices=yes; without LAMA_SANDBOX_CGROUP=1 this uses
#   task/cgroup alone, so that nodes may be declared bigger than the machine),
#   LAMA_SLURM_PREFIX (run the Slurm installed in this prefix, e.g. by contrib/slurm-build.sh,
#   instead of Debian's packages).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${LAMA_SANDBOX:-/tmp/lama-sandbox}
count=${LAMA_SANDBOX_NODES:-3}
[[ $count =~ ^[1-9][0-9]*$ ]] && [ "$count" -le 4096 ] ||
  { echo "sandbox: LAMA_SANDBOX_NODES must be a whole number from 1 to 4096, not '$count'" >&2; exit 1; }
[ -z "${LAMA_SANDBOX_MEMORY:-}" ] || [[ $LAMA_SANDBOX_MEMORY =~ ^[1-9][0-9]{0,7}$ ]] ||
  { echo "sandbox: LAMA_SANDBOX_MEMORY must be a number of MB, not '$LAMA_SANDBOX_MEMORY'" >&2; exit 1; }
nodes=()
for ((i = 1; i <= count; i++)); do nodes+=("n$i"); done
prefix=${LAMA_SLURM_PREFIX:-}
if [ -n "$prefix" ]; then
  export PATH=$prefix/bin:$prefix/sbin:$PATH
  slurm_path=$prefix/bin:$prefix/sbin:
fi
conf=$dir/slurm.conf
port=${LAMA_SANDBOX_PORT:-16800}

die() { echo "sandbox: $*" >&2; exit 1; }

deps() {
  local pkgs=(munge util-linux hwloc iproute2)
  [ -n "$prefix" ] || pkgs+=(slurmctld slurmd slurm-client libslurm-dev)
  [ -z "$prefix" ] || [ -x "$prefix/sbin/slurmd" ] || die "no Slurm in $prefix (build one with contrib/slurm-build.sh)"
  "$top/contrib/deps.sh" "${pkgs[@]}"
}

# Whether a process is alive (PID 1 reaps late here: a zombie counts as gone).
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# Whether a pid from a pid file names a live process.
alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  running "$pid"
}

hardware() {
  local memory=${LAMA_SANDBOX_MEMORY:+ RealMemory=$LAMA_SANDBOX_MEMORY}
  cores | sed "s/\$/$memory/"
}

cores() {
  if [ -n "${LAMA_SANDBOX_NODE:-}" ]; then echo "$LAMA_SANDBOX_NODE"; return; fi
  if [ -n "${LAMA_SANDBOX_TOPOLOGY:-}" ]; then
    local x=$LAMA_SANDBOX_TOPOLOGY np nc nt
    np=$(hwloc-calc -i "$x" --number-of package all) nc=$(hwloc-calc -i "$x" --number-of core all)
    nt=$(hwloc-calc -i "$x" --number-of pu all)
    [ "$np" -gt 0 ] && [ "$nc" -gt 0 ] || die "cannot read sockets and cores from $x"
    echo "Sockets=$np CoresPerSocket=$((nc / np)) ThreadsPerCore=$((nt / nc))"
    return
  fi
  local s c t
  s=$(lscpu | awk -F: '/^Socket\(s\)/ {gsub(/ /,"",$2); print $2}')
  c=$(lscpu | awk -F: '/^Core\(s\) per socket/ {gsub(/ /,"",$2); print $2}')
  t=$(lscpu | awk -F: '/^Thread\(s\) per core/ {gsub(/ /,"",$2); print $2}')
  echo "Sockets=${s:-1} CoresPerSocket=${c:-1} ThreadsPerCore=${t:-1}"
}

# AutoDetect=nvml over the stand-in NVML: what slurmd needs beside the description (the library,
# the driver's MIG minor numbers), gres.conf, and the node's GPU count (whole GPUs and MIG
# instances). Sets gres and gres_types for the node lines.
nvml_conf() {
  [ -n "$prefix" ] && [ -f "$prefix/lib/slurm/gpu_nvml.so" ] ||
    die "LAMA_SANDBOX_NVML needs LAMA_SLURM_PREFIX, a Slurm built with gpu/nvml by contrib/slurm-build.sh"
  [ "$gpus" = 0 ] || die "LAMA_SANDBOX_NVML and LAMA_SANDBOX_GPUS exclude each other"
  local s=$dir/nvml inc whole migs
  mkdir -p "$s"
  cp "$LAMA_SANDBOX_NVML" "$s/gpus" || die "cannot read LAMA_SANDBOX_NVML=$LAMA_SANDBOX_NVML"
  inc=$("$top/contrib/nvml-dev.sh")
  gcc -shared -fPIC -O2 -I"$inc" "$top/tests/nvml/nvml_standin.c" -o "$s/libnvidia-ml.so.1" ||
    die "cannot build the stand-in NVML"
  ln -sf libnvidia-ml.so.1 "$s/libnvidia-ml.so"
  # The driver's capability files: one for each MIG instance's GPU instance, one for its compute
  # instance.
  awk 'BEGIN {m = 3} $1 == "mig" {
      printf "gpu%s/gi%s/access %d\ngpu%s/gi%s/ci%s/access %d\n", $2, $3, m, $2, $3, $4, m + 1; m += 2 }' \
    "$s/gpus" > "$s/mig-minors"
  whole=$(awk '$1 == "gpu" {g[$2] = 1} $1 == "mig" {m[$2] = 1}
    END {n = 0; for (k in g) if (!(k in m)) n++; print n}' "$s/gpus")
  migs=$(grep -c '^mig ' "$s/gpus" || true)
  { echo AutoDetect=nvml
    [ -z "${LAMA_SANDBOX_NVML_FLAGS:-}" ] || echo "NodeName=n[1-$count] Name=gpu Flags=$LAMA_SANDBOX_NVML_FLAGS"
  } > "$dir/gres.conf"
  gres="Gres=gpu:$((whole + migs))"
}

write_conf() {
  mkdir -p "$dir"/{munge,state,log,spool}
  # Each node's own TmpFS: Slurm's PMIx plugin names its per-step directory there by uid, job
  # and step only, so nodes sharing one /tmp would collide.
  local n
  for n in "${nodes[@]}"; do mkdir -p "$dir/tmp/$n"; done
  chmod 1777 "$dir"/tmp/*
  chmod 0755 "$dir" "$dir/munge"
  local plug=${LAMA_SANDBOX_PLUGSTACK:-$dir/plugstack.conf}
  [ -f "$plug" ] || plugstack_line "${LAMA_SANDBOX_PLUGIN:-}" > "$plug"
  local hw; hw=$(hardware)
  local proctrack=proctrack/linuxproc task=${LAMA_SANDBOX_TASK_PLUGIN:-task/none} cores=no devices=no gres="" gres_types=gpu gpus=${LAMA_SANDBOX_GPUS:-0}
  if [ "${LAMA_SANDBOX_CGROUP:-0}" = 1 ]; then
    proctrack=proctrack/cgroup task=task/affinity,task/cgroup cores=yes
  fi
  if [ "${LAMA_SANDBOX_CONSTRAIN_DEVICES:-0}" = 1 ]; then
    proctrack=proctrack/cgroup devices=yes
    [ "$task" != task/none ] || task=task/cgroup
  fi
  # This machine offers cgroup v1 (with a v2 "unified" mount beside it, which autodetection
  # would pick on some releases).
  printf 'CgroupPlugin=cgroup/v1\nConstrainCores=%s\nConstrainDevices=%s\n' "$cores" "$devices" > "$dir/cgroup.conf"
  if [ "$gpus" -gt 0 ]; then
    # Fake NVIDIA devices (major 195): slurmd only needs them to exist as character devices, and
    # device cgroups allow or deny them by number.
    mkdir -p "$dir/dev"
    for ((i = 0; i < gpus; i++)); do mknod -m 0666 "$dir/dev/nvidia$i" c 195 "$i"; done
    if [ -n "${LAMA_SANDBOX_GPU_CORES:-}" ]; then
      # One gres.conf line per GPU, each with its Cores=.
      local i=0 cores
      { echo AutoDetect=off
        for cores in $LAMA_SANDBOX_GPU_CORES; do
          echo "NodeName=n[1-$count] Name=gpu File=$dir/dev/nvidia$i Cores=$cores"; i=$((i + 1))
        done; } > "$dir/gres.conf"
      [ "$i" = "$gpus" ] || die "LAMA_SANDBOX_GPU_CORES names $i GPUs' cores, LAMA_SANDBOX_GPUS is $gpus"
    else
      printf 'AutoDetect=off\nNodeName=n[1-%d] Name=gpu File=%s/dev/nvidia[0-%d]\n' "$count" "$dir" $((gpus - 1)) > "$dir/gres.conf"
    fi
    gres="Gres=gpu:$gpus"
    # Shared GPUs: N shards or N MPS shares of each GPU, on its own device file.
    local pair var kind per
    for pair in SHARDS:shard MPS:mps; do
      var=LAMA_SANDBOX_${pair%%:*} kind=${pair#*:} per=${!var:-0}
      [[ $per =~ ^[0-9]+$ ]] || die "$var must be a number per GPU, not '$per'"
      [ "$per" -gt 0 ] || continue
      for ((i = 0; i < gpus; i++)); do
        echo "NodeName=n[1-$count] Name=$kind Count=$per File=$dir/dev/nvidia$i"
      done >> "$dir/gres.conf"
      gres+=",$kind:$((per * gpus))"
      gres_types+=",$kind"
    done
  fi
  [ -z "${LAMA_SANDBOX_NVML:-}" ] || nvml_conf
  local network=""
  if [ -n "${LAMA_SANDBOX_NETWORK:-}" ]; then
    local kind group i=0
    read -r kind groups <<<"$LAMA_SANDBOX_NETWORK"
    [ -n "${groups:-}" ] || die "LAMA_SANDBOX_NETWORK needs groups of nodes after '$kind'"
    for group in $groups; do
      case $kind in
        tree) echo "SwitchName=s$i Nodes=$group" ;;
        block) echo "BlockName=b$i Nodes=$group" ;;
        *) die "LAMA_SANDBOX_NETWORK: '$kind' is neither tree nor block" ;;
      esac
      i=$((i + 1))
    done > "$dir/topology.conf"
    [ "$kind" != tree ] || echo "SwitchName=top Switches=s[0-$((i - 1))]" >> "$dir/topology.conf"
    network="TopologyPlugin=topology/$kind"
  fi
  cat > "$conf" <<CONF
ClusterName=lama
SlurmctldHost=localhost
SlurmctldPort=$((port + 17))
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket.2
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
TmpFS=$dir/tmp/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=$proctrack
TaskPlugin=$task
SelectType=select/cons_tres
SelectTypeParameters=${LAMA_SANDBOX_SELECT_PARAMS:-CR_Core}
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
PlugStackConfig=$plug
${gres:+GresTypes=$gres_types}
$network
SlurmdTimeout=$((30 + count / 8))
# Every slurmd shares two CPUs: a step over hundreds of nodes needs longer than the default 10 s
# for its launch messages to be answered.
MessageTimeout=$((count > 32 ? 60 : 10))
InactiveLimit=0
KillWait=2
${LAMA_SANDBOX_CONF_EXTRA:-}
CONF
  for ((i = 1; i <= count; i++)); do
    echo "NodeName=n$i NodeAddr=127.0.0.1 Port=$((port + 100 + i)) $hw $gres State=UNKNOWN"
  done >> "$conf"
  echo "PartitionName=debug Nodes=n[1-$count] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO" >> "$conf"
}

# The daemons' environment: nothing of the caller's but what is named here. LAMA_SANDBOX_DAEMON
# marks every process the daemons start before a task's exec (slurmstepd), so that `stop` finds
# them all.
clean_env() {
  env -i PATH=${slurm_path:-}/usr/sbin:/usr/bin:/sbin:/bin HOME=/root SLURM_CONF="$conf" \
    LAMA_SANDBOX_DAEMON="$dir" ${LAMA_SANDBOX_SLURMD_ENV:-} "$@"
}

# The pids of the processes started for this sandbox (daemons and slurmstepds).
ours() {
  grep -lszxF "LAMA_SANDBOX_DAEMON=$dir" /proc/[0-9]*/environ | sed -E 's|^/proc/([0-9]+)/environ$|\1|' |
    while read -r p; do running "$p" && echo "$p"; done
  return 0
}

# A plugstack.conf line for this sandbox: the lama plugin keeps its topology cache in the
# sandbox's own folder unless the line names one, since two sandboxes on one machine declare
# different machines under the same node names (/run/lama would serve one's nodes to the other).
plugstack_line() {
  local line=$*
  if [[ $line == *liblama_spank* && $line != *cache=* && ${LAMA_SANDBOX_CACHE:-own} == own ]]; then
    line+=" cache=$dir/cache"
  fi
  echo "$line"
}

# Which of the sandbox's ports (base+17, base+101 ... base+100+count) something listens on.
busy_ports() {
  ss -Htln 2>/dev/null | awk -v ctl=$(($1 + 17)) -v lo=$(($1 + 101)) -v hi=$(($1 + 100 + $2)) \
    '{ n = split($4, a, ":"); p = a[n] + 0; if (p == ctl || (p >= lo && p <= hi)) print p }' | sort -un | tr '\n' ' ' | sed 's/ $//'
}

start() {
  deps
  # Ports the kernel hands out for outgoing connections (srun, slurmstepd) could be taken when a
  # slurmd binds its own.
  local low
  low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  if [ $((port + 100 + count)) -ge "$low" ] && [ "$port" -lt "$(awk '{print $2}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 60999)" ]; then
    die "ports $((port + 17)) to $((port + 100 + count)) reach the kernel's ephemeral range (from $low): choose a lower LAMA_SANDBOX_PORT or fewer nodes"
  fi
  if alive "$dir/slurmctld.pid"; then die "already running in $dir (stop it first)"; fi
  # A port some other program listens on would leave a daemon unable to start.
  local busy
  busy=$(busy_ports "$port" "$count")
  [ -z "$busy" ] || die "ports $busy are already in use here (another sandbox, or another program): choose another LAMA_SANDBOX_PORT"
  rm -rf "$dir"
  write_conf
  [ -z "${LAMA_SANDBOX_OCI_CONF:-}" ] || cp "$LAMA_SANDBOX_OCI_CONF" "$dir/oci.conf" ||
    die "cannot read LAMA_SANDBOX_OCI_CONF=$LAMA_SANDBOX_OCI_CONF"
  mungekey --create --keyfile="$dir/munge/munge.key" >/dev/null 2>&1
  chmod 0400 "$dir/munge/munge.key"
  clean_env munged --socket="$dir/munge/munge.socket.2" --key-file="$dir/munge/munge.key" \
    --log-file="$dir/log/munged.log" --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/seed" --force
  clean_env slurmctld -f "$conf" -i
  for n in "${nodes[@]}"; do
    if [ -n "${LAMA_SANDBOX_NVML:-}" ]; then
      clean_env LD_LIBRARY_PATH="$dir/nvml" LAMA_NVML_STANDIN="$dir/nvml/gpus" unshare --uts --mount \
        sh -c "hostname $n && exec '$top/tests/nvml/namespace.sh' '$dir/nvml' $n slurmd -f '$conf' -N $n"
    else
      clean_env unshare --uts sh -c "hostname $n && exec slurmd -f '$conf' -N $n"
    fi
  done
  export SLURM_CONF=$conf
  # About 0.1 s per node on two CPUs; give each a second, and at least 20 s.
  local waited=0 limit=$((count > 20 ? count : 20)) began=$SECONDS
  while [ $waited -lt $((limit * 5)) ]; do
    if [ "$(sinfo -h -o '%T %D' 2>/dev/null | sort -u)" = "idle $count" ]; then
      echo "sandbox: $count nodes up in $((SECONDS - began)) s in $dir (export SLURM_CONF=$conf)"
      return 0
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
  sinfo >&2 || true
  tail -n 20 "$dir"/log/*.log >&2 || true
  die "nodes did not come up"
}

stop() {
  [ -f "$conf" ] && SLURM_CONF=$conf timeout 30 scancel --user=root >/dev/null 2>&1 || true
  local pids=() f p left
  for f in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -f "$f" ] && alive "$f" && pids+=("$(cat "$f")")
  done
  # Daemons whose pid file is gone, and slurmstepds still running a step.
  mapfile -t -O ${#pids[@]} pids < <(ours)
  [ ${#pids[@]} -gt 0 ] && kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 100); do
    left=0
    for p in "${pids[@]}"; do
      if running "$p"; then left=1; break; fi
    done
    [ $left -eq 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  # What the KILL reached is gone once reaped; anything still marked is a stray.
  for _ in $(seq 1 50); do
    [ -z "$(ours)" ] && break
    sleep 0.1
  done
  left=$(ours | tr '\n' ' ')
  rm -rf "$dir"
  if [ -n "$left" ]; then echo "sandbox: stopped, but processes $left are still running" >&2; return 1; fi
  echo "sandbox: stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) SLURM_CONF=$conf sinfo ;;
  free-port) busy=$(busy_ports "$port" "$count"); [ -z "$busy" ] ;;
  plugstack) shift; plugstack_line "$@" > "$dir/plugstack.conf" ;;
  env)
    echo "export SLURM_CONF=$conf"
    [ -z "$prefix" ] || echo "export PATH=$prefix/bin:$prefix/sbin:\$PATH"
    ;;
  *) die "usage: $0 start|stop|status|env|free-port|plugstack LINE" ;;
esac
