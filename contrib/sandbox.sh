#!/usr/bin/env bash
# A local Slurm cluster on this machine: munge, slurmctld and three slurmd nodes (n1, n2, n3),
# each slurmd in its own UTS namespace so its tasks see their node's host name.
#
# Usage: contrib/sandbox.sh start|stop|status|env
#   start   install missing packages, write the configs, start the daemons, wait for the nodes
#   stop    cancel jobs, stop every daemon this script started, remove the state directory
#   env     print the exports a shell needs to use the cluster (eval "$(contrib/sandbox.sh env)")
# Environment: LAMA_SANDBOX (state directory, default /tmp/lama-sandbox),
#   LAMA_SANDBOX_PLUGIN (the plugstack.conf line written to $LAMA_SANDBOX/plugstack.conf, e.g.
#   "required /path/liblama_spank.so"; default: no plugin; slurmstepd rereads it for every step),
#   LAMA_SANDBOX_PLUGSTACK (use this plugstack.conf file instead),
#   LAMA_SANDBOX_NODE (the NodeName hardware line, default this machine's sockets/cores/threads),
#   LAMA_SANDBOX_TOPOLOGY (an hwloc XML: declare the nodes with its sockets/cores/threads),
#   LAMA_SANDBOX_SLURMD_ENV (extra VAR=value words for the slurmd environment, e.g. HWLOC_XMLFILE=...),
#   LAMA_SANDBOX_PORT (port base, default 16800: slurmctld on base+17, slurmd on base+101..103),
#   LAMA_SANDBOX_CGROUP=1 (the usual site setting: proctrack/cgroup, TaskPlugin=task/affinity,task/cgroup,
#   ConstrainCores=yes; the node line must then match this machine),
#   LAMA_SANDBOX_TASK_PLUGIN (TaskPlugin when neither of the cgroup settings below is given,
#   default task/none; task/affinity for Slurm's own binding),
#   LAMA_SANDBOX_GPUS=N (N fake GPUs per node through GRES: character devices made with mknod under
#   $LAMA_SANDBOX/dev, gres.conf with AutoDetect=off),
#   LAMA_SANDBOX_CONSTRAIN_DEVICES=1 (ConstrainDevices=yes; without LAMA_SANDBOX_CGROUP=1 this uses
#   task/cgroup alone, so that nodes may be declared bigger than the machine),
#   LAMA_SLURM_PREFIX (run the Slurm installed in this prefix, e.g. by contrib/slurm-build.sh,
#   instead of Debian's packages).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${LAMA_SANDBOX:-/tmp/lama-sandbox}
nodes=(n1 n2 n3)
prefix=${LAMA_SLURM_PREFIX:-}
if [ -n "$prefix" ]; then
  export PATH=$prefix/bin:$prefix/sbin:$PATH
  slurm_path=$prefix/bin:$prefix/sbin:
fi
conf=$dir/slurm.conf
port=${LAMA_SANDBOX_PORT:-16800}

die() { echo "sandbox: $*" >&2; exit 1; }

deps() {
  local pkgs=(munge util-linux hwloc)
  [ -n "$prefix" ] || pkgs+=(slurmctld slurmd slurm-client libslurm-dev)
  [ -z "$prefix" ] || [ -x "$prefix/sbin/slurmd" ] || die "no Slurm in $prefix (build one with contrib/slurm-build.sh)"
  "$top/contrib/deps.sh" "${pkgs[@]}"
}

# Whether a pid from a pid file names a live process (PID 1 reaps late here: look at the state).
alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -r "/proc/$pid/stat" ] || return 1
  ! awk '{ exit ($3 == "Z") ? 0 : 1 }' "/proc/$pid/stat"
}

hardware() {
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

write_conf() {
  mkdir -p "$dir"/{munge,state,log,spool} "$dir"/tmp/{n1,n2,n3}
  # Each node's own TmpFS: Slurm's PMIx plugin names its per-step directory there by uid, job
  # and step only, so nodes sharing one /tmp would collide.
  chmod 1777 "$dir"/tmp/{n1,n2,n3}
  chmod 0755 "$dir" "$dir/munge"
  local plug=${LAMA_SANDBOX_PLUGSTACK:-$dir/plugstack.conf}
  [ -f "$plug" ] || echo "${LAMA_SANDBOX_PLUGIN:-}" > "$plug"
  local hw; hw=$(hardware)
  local proctrack=proctrack/linuxproc task=${LAMA_SANDBOX_TASK_PLUGIN:-task/none} cores=no devices=no gres="" gpus=${LAMA_SANDBOX_GPUS:-0}
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
    printf 'AutoDetect=off\nNodeName=n[1-3] Name=gpu File=%s/dev/nvidia[0-%d]\n' "$dir" $((gpus - 1)) > "$dir/gres.conf"
    gres="Gres=gpu:$gpus"
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
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
PlugStackConfig=$plug
${gres:+GresTypes=gpu}
SlurmdTimeout=30
InactiveLimit=0
KillWait=2
NodeName=n1 NodeAddr=127.0.0.1 Port=$((port + 101)) $hw $gres State=UNKNOWN
NodeName=n2 NodeAddr=127.0.0.1 Port=$((port + 102)) $hw $gres State=UNKNOWN
NodeName=n3 NodeAddr=127.0.0.1 Port=$((port + 103)) $hw $gres State=UNKNOWN
PartitionName=debug Nodes=n[1-3] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
}

clean_env() {
  env -i PATH=${slurm_path:-}/usr/sbin:/usr/bin:/sbin:/bin HOME=/root SLURM_CONF="$conf" ${LAMA_SANDBOX_SLURMD_ENV:-} "$@"
}

start() {
  deps
  if alive "$dir/slurmctld.pid"; then die "already running in $dir (stop it first)"; fi
  rm -rf "$dir"
  write_conf
  mungekey --create --keyfile="$dir/munge/munge.key" >/dev/null 2>&1
  chmod 0400 "$dir/munge/munge.key"
  clean_env munged --socket="$dir/munge/munge.socket.2" --key-file="$dir/munge/munge.key" \
    --log-file="$dir/log/munged.log" --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/seed" --force
  clean_env slurmctld -f "$conf" -i
  for n in "${nodes[@]}"; do
    clean_env unshare --uts sh -c "hostname $n && exec slurmd -f '$conf' -N $n"
  done
  export SLURM_CONF=$conf
  for _ in $(seq 1 100); do
    if [ "$(sinfo -h -o '%T' 2>/dev/null | sort -u)" = "idle" ]; then
      echo "sandbox: 3 nodes up in $dir (export SLURM_CONF=$conf)"
      return 0
    fi
    sleep 0.2
  done
  sinfo >&2 || true
  tail -n 20 "$dir"/log/*.log >&2 || true
  die "nodes did not come up"
}

stop() {
  [ -f "$conf" ] && SLURM_CONF=$conf scancel --user=root >/dev/null 2>&1 || true
  local pids=()
  for f in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -f "$f" ] && alive "$f" && pids+=("$(cat "$f")")
  done
  [ ${#pids[@]} -gt 0 ] && kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 50); do
    local left=0
    for p in "${pids[@]}"; do
      [ -r "/proc/$p/stat" ] && ! awk '{ exit ($3 == "Z") ? 0 : 1 }' "/proc/$p/stat" && left=1
    done
    [ $left -eq 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$dir"
  echo "sandbox: stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) SLURM_CONF=$conf sinfo ;;
  env)
    echo "export SLURM_CONF=$conf"
    [ -z "$prefix" ] || echo "export PATH=$prefix/bin:$prefix/sbin:\$PATH"
    ;;
  *) die "usage: $0 start|stop|status|env" ;;
esac
