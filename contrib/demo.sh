#!/usr/bin/env bash
# The main job: a local Slurm cluster (munge, slurmctld, three slurmd nodes n1-n3 on this machine)
# with the lama plugin enabled, and demonstration steps showing each task's binding and TASK_MAP.
#
# Usage: contrib/demo.sh [start|stop]
#   start (default)  install what is missing, build, start the cluster, run the demo steps, and
#                    leave the cluster running for your own srun (eval "$(contrib/sandbox.sh env)")
#   stop             stop every daemon the cluster started and remove its state
# Environment: LAMA_SLURM_PREFIX=PREFIX runs a Slurm built by contrib/slurm-build.sh instead of
#   Debian's packages (the plugin is then built against its headers).
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
export LAMA_SANDBOX=${LAMA_SANDBOX:-/tmp/lama-sandbox}
case "${1:-start}" in
  start) ;;
  stop) exec contrib/sandbox.sh stop ;;
  *) echo "usage: $0 [start|stop]" >&2; exit 1 ;;
esac

contrib/deps.sh
contrib/deps.sh --mpi
# A Slurm built from source (contrib/slurm-build.sh): its commands, and the plugin built for it.
if [ -n "${LAMA_SLURM_PREFIX:-}" ]; then
  export SLURM_INCLUDE_DIR=$LAMA_SLURM_PREFIX/include PATH=$LAMA_SLURM_PREFIX/bin:$LAMA_SLURM_PREFIX/sbin:$PATH
fi
echo "demo: building lama (cargo build --release: a few minutes on 2 cores the first time)"
cargo build --release --quiet -p lama-spank -p lama-probe -p lama-cli
plugin=$top/target/release/liblama_spank.so
lama=$top/target/release/lama
xml=$top/tests/topologies/32em64t-2n8c2t-pci-normalio.xml
export SLURM_CONF=$LAMA_SANDBOX/slurm.conf
# Runs a command shown as typed; srun --label output is sorted by task so each task's lines
# (its binding on stderr, its report on stdout) stay together.
# salloc's progress messages are left out.
show() {
  echo; echo "\$ $*"
  "$@" 2>&1 | grep -vE '^salloc: (Pending|job [0-9]+ (queued|has been allocated)|Granted|Relinquishing|Job allocation [0-9]+ has been revoked)' | sort -n -s -k1,1
}
task='echo "on $(hostname): Cpus_allowed_list $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status)  LAMA_CPUS=$LAMA_CPUS"; [ "$SLURM_PROCID" = 0 ] && echo "TASK_MAP=$TASK_MAP"; true'

contrib/sandbox.sh stop >/dev/null 2>&1 || true
echo "== 1. What-if: nodes declared as a 2-socket, 8-core, 2-thread Intel server; lama places on"
echo "==    its hwloc XML (plugstack.conf topology=...), so CPUs are computed and exported, not bound."
LAMA_SANDBOX_TOPOLOGY=$xml LAMA_SANDBOX_PLUGIN="required $plugin topology=$xml" contrib/sandbox.sh start
# -c8: 4 tasks x 8 CPUs, so that the step gets every core of each 32-PU node.
show srun -N3 -n12 -c8 --label --lama-map=sbnch --lama-bind=1c --lama-verbose bash -c '[ "$SLURM_PROCID" = 0 ] && echo "TASK_MAP=$TASK_MAP"; true'
echo
echo "# Each task's nearest NIC and GPU: on this XML the ConnectX (mlx5_0) and both GPUs (a Tesla,"
echo "# cuda0, and an AMD OpenCL device) hang off package 1, so every task gets mlx5_0 and the GPUs alternate:"
show srun -N2 -n4 -c8 --label --lama-map=scbnh --lama-bind=1c --lama-nics=1 --lama-gpus=1 --lama-verbose bash -c 'echo "UCX_NET_DEVICES=$UCX_NET_DEVICES CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-} ROCR_VISIBLE_DEVICES=${ROCR_VISIBLE_DEVICES:-}"'
echo
echo "# A whole-job plan decides the nodes too: lama plan writes each rank's host (sbnch, at most 2"
echo "# per socket, so ranks go 2 per node round the nodes), srun -m arbitrary follows that file:"
cat > "$LAMA_SANDBOX/plan-job.sh" <<EOF
$lama plan --topology $xml --map sbnch --mppr 2:s --bind 1c --slurm-hostfile $LAMA_SANDBOX/plan.hosts >/dev/null
echo "hosts: \$(tr '\n' ' ' < $LAMA_SANDBOX/plan.hosts)"
SLURM_HOSTFILE=$LAMA_SANDBOX/plan.hosts srun -m arbitrary -n 12 --whole --label --lama-map=sbnch --lama-mppr=2:s --lama-bind=1c --lama-verbose true
EOF
sed 's/^/#   /' "$LAMA_SANDBOX/plan-job.sh"
show salloc -N3 --exclusive bash "$LAMA_SANDBOX/plan-job.sh"
contrib/sandbox.sh stop >/dev/null

echo
echo "== 2. This machine's real cores: nodes declared as this machine; tasks really bound."
LAMA_SANDBOX_PLUGIN="required $plugin" contrib/sandbox.sh start
cpus=$(nproc)
show srun -N3 -n$((3 * cpus)) -m cyclic --label --lama-map=ncsbh --lama-bind=1c --lama-verbose bash -c "$task"
echo
echo "# Without a --lama option the plugin only exports TASK_MAP (plane=2 layout here):"
show srun -N3 -n$((3 * cpus)) -m plane=2 --label bash -c "$task"
echo
echo "# Relative host indexes: one task on the last node (+n2), the first node no entry used (+e:1,"
echo "# with all its slots), n2 by name; lama hostfile turns them into the host file srun follows:"
cat > "$LAMA_SANDBOX/layout-job.sh" <<EOF
$lama hostfile --host '+n2 slots=1,+e:1,n2 slots=1' > $LAMA_SANDBOX/layout.hosts
echo "hosts: \$(tr '\n' ' ' < $LAMA_SANDBOX/layout.hosts)"
SLURM_HOSTFILE=$LAMA_SANDBOX/layout.hosts srun -m arbitrary -n \$(wc -l < $LAMA_SANDBOX/layout.hosts) --whole --label --lama-map=csbnh --lama-bind=1c bash -c '$task'
EOF
sed 's/^/#   /' "$LAMA_SANDBOX/layout-job.sh"
show salloc -N3 --exclusive bash "$LAMA_SANDBOX/layout-job.sh"
echo
echo "# A hybrid MPI + OpenMP job: Open MPI ranks (srun --mpi=pmix), one per node with $cpus cores each,"
echo "# and inside each rank one OpenMP thread per core (--lama-threads=auto). The probe prints what"
echo "# MPI and the OpenMP runtime see: rank, node-local group, the runtime's places, each thread's CPU:"
mpicc.openmpi -fopenmp -O1 -o "$LAMA_SANDBOX/probe" tests/mpi/probe.c
show srun -N3 -n3 -c"$cpus" --mpi=pmix --lama-map=ncsbh --lama-bind="${cpus}c" --lama-threads=auto --lama-verbose "$LAMA_SANDBOX/probe" omp
echo
echo "# A bad value stops srun before anything starts:"
show srun -N1 -n1 --lama-bind=2q true || echo "(srun exited $?)"
echo
echo "The cluster is still running. Use it with:  eval \"\$(contrib/sandbox.sh env)\""
echo "Stop it with:  contrib/demo.sh stop"
