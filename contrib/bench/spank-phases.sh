#!/usr/bin/env bash
# Where a step's SPANK time goes, per process: uprobes on libslurmfull's spank_init,
# spank_init_post_opt and spank_local_user (srun), spank_user, spank_user_task and spank_fini (and on libc's dlopen inside spank_init) time each phase in srun,
# in every slurmstepd and in every task, for `srun -N3 -n3 true` steps on a sandbox cluster with
#   none   no plugin
#   noop   the C plugin that does nothing (contrib/bench/noop_spank.c)
#   rust   a Rust plugin that does nothing but catch panics, linked as lama is (GCC's unwinder
#          built in, -z nodelete): what any Rust SPANK plugin costs, the floor under lama's own
#   lama   this tree's release plugin without options (TASK_MAP only)
#   place  the same plugin placing and binding (--lama-map=csbnh --lama-bind=1c)
#   slurm  no plugin, Slurm's own binding (--cpu-bind=cores): what placement is compared with
# and prints the median microseconds of each phase, and each kind's median wall time per step. Each probe hit costs a few microseconds
# itself, the same in every kind: compare kinds, not absolute figures.
# Needs root and perf. Usage: contrib/bench/spank-phases.sh [STEPS]   (default 100 per kind;
#   LAMA_SLURM_PREFIX=PREFIX measures a Slurm built by contrib/slurm-build.sh;
#   LAMA_PHASES_KINDS="none slurm place" measures only those kinds; LAMA_PHASES_PLUGIN=FILE
#   measures that build of lama instead of this tree's)
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$PWD
steps=${1:-100}
prefix=${LAMA_SLURM_PREFIX:-}
inc=${prefix:+$prefix/include}
inc=${inc:-/usr/include}
libslurm=${prefix:+$prefix/lib/slurm/libslurmfull.so}
libslurm=${libslurm:-/usr/lib/x86_64-linux-gnu/slurm-wlm/libslurmfull.so}
libc=$(ldd "$libslurm" | awk '$1 ~ /^libc\.so/ {print $3}')
if [ -n "$prefix" ]; then export SLURM_INCLUDE_DIR=$inc PATH=$prefix/bin:$prefix/sbin:$PATH; fi
work=$(mktemp -d)
dir=/tmp/lama-phases
cleanup() {
  perf probe -q -d 'probe_libslurmfull:*' -d 'probe_libc:*' 2>/dev/null || true
  LAMA_SANDBOX=$dir contrib/sandbox.sh stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

cargo build --release --quiet -p lama-spank
gcc -O2 -shared -fPIC -I"$inc" contrib/bench/noop_spank.c -o "$work/noop.so"
floor=$(SLURM_INCLUDE_DIR=$inc contrib/bench/rust-floor.sh "$work/rust")

LAMA_SANDBOX=$dir LAMA_SANDBOX_PORT=${LAMA_SANDBOX_PORT:-25800} contrib/sandbox.sh start >/dev/null
export SLURM_CONF=$dir/slurm.conf
job=$(salloc --no-shell -N3 -n3 2>&1 | awk '/Granted job allocation/ {print $NF}')
[ -n "$job" ] || { echo "spank-phases: no allocation on the sandbox cluster" >&2; exit 1; }
for f in spank_init spank_init_post_opt spank_local_user spank_user spank_user_task spank_fini; do
  perf probe -q -x "$libslurm" -a "$f" -a "$f%return"
done
perf probe -q -x "$libc" -a dlopen -a 'dlopen%return'
lama=${LAMA_PHASES_PLUGIN:-$top/target/release/liblama_spank.so}
read -r -a kinds <<<"${LAMA_PHASES_KINDS:-none noop rust lama place slurm}"
for kind in "${kinds[@]}"; do
  args=(--cpu-bind=none)
  case $kind in
    none) line="" ;;
    noop) line="required $work/noop.so" ;;
    rust) line="required $floor" ;;
    lama) line="required $lama" ;;
    place) line="required $lama" args=(--lama-map=csbnh --lama-bind=1c) ;;
    slurm) line="" args=(--cpu-bind=cores) ;;
    *) echo "spank-phases: unknown kind '$kind'; valid: none noop rust lama place slurm" >&2; exit 2 ;;
  esac
  echo "$line" > "$dir/plugstack.conf"
  srun --jobid="$job" -N3 -n3 "${args[@]}" true   # warm up
  perf record -q -a -e 'probe_libslurmfull:*' -e 'probe_libc:*' -o "$work/$kind.data" -- \
    bash -c "for i in \$(seq $steps); do s=\$(date +%s%N); srun --jobid=$job -N3 -n3 ${args[*]} true; echo wall \$(( (\$(date +%s%N) - s) / 1000 )); done" >"$work/$kind.wall" 2>&1
  perf script -i "$work/$kind.data" -F comm,pid,time,event 2>/dev/null > "$work/$kind.txt"
done
echo "SPANK phases, median microseconds per process, $steps steps of srun -N3 -n3 true per kind"
python3 - $(for k in "${kinds[@]}"; do echo "$work/$k.txt"; done) <<'EOF'
import collections, re, statistics, sys
kinds = [p.rsplit('/', 1)[1][:-4] for p in sys.argv[1:]]
phases = ['spank_init', '  dlopen', 'spank_init_post_opt', 'spank_local_user', 'spank_user', 'spank_user_task', 'spank_fini']
res = collections.defaultdict(list)
for path, kind in zip(sys.argv[1:], kinds):
    events = collections.defaultdict(list)
    for line in open(path):
        m = re.match(r'\s*(\S+)\s+(\d+)\s+([\d.]+):\s+probe_\w+:(\w+?)(__return)?:', line)
        if m:
            comm, pid, t, fn, ret = m.groups()
            events[(comm, pid)].append((float(t) * 1e6, fn, bool(ret)))
    for (comm, _), evs in events.items():
        start, spans = {}, collections.defaultdict(list)
        for t, fn, ret in evs:
            if not ret:
                start.setdefault(fn, t)
            elif fn in start:
                spans[fn].append((start.pop(fn), t))
        for fn in phases:
            for a, b in spans.get(fn, []):
                # A task is a fork of slurmstepd: spank_user_task runs in the task's process.
                res[(comm, fn, kind)].append(b - a)
                if fn == 'spank_init':
                    inside = [y - x for x, y in spans.get('dlopen', []) if a <= x and y <= b]
                    if inside:
                        res[(comm, '  dlopen', kind)].append(inside[-1])
print(f"{'':11s} {'phase':16s}" + ''.join(f"{k:>8s}" for k in kinds))
for comm in ('srun', 'slurmstepd'):
    for ph in phases:
        row = [res.get((comm, ph, k)) for k in kinds]
        if any(row):
            print(f"{comm:11s} {ph:16s}" + ''.join(f"{statistics.median(v):8.0f}" if v else f"{'-':>8s}" for v in row))
walls = []
for path in sys.argv[1:]:
    w = [int(l.split()[1]) for l in open(path[:-4] + '.wall') if l.startswith('wall ')]
    walls.append(statistics.median(w) if w else 0)
print(f"{'step':11s} {'wall (srun)':16s}" + ''.join(f"{w:8.0f}" for w in walls))
EOF
