#!/usr/bin/env bash
# What binding costs at task launch, side by side in one run: the same `srun true` step in seven
# kinds on two sandbox clusters of this machine, alternating within each round (the order
# rotates from round to round). Cluster A runs TaskPlugin=task/affinity, as a site that binds
# with Slurm does; cluster B runs TaskPlugin=task/none with lama as the site's binder.
#   none      A, no plugin, no binding (--cpu-bind=none)
#   noop      A, a SPANK plugin that does nothing (contrib/bench/noop_spank.c): what Slurm's SPANK
#             machinery costs any plugin, the floor under lama's own cost
#   rust      A, a Rust SPANK plugin that does nothing but catch panics, linked as lama is
#             (contrib/bench/rust-floor.sh): what loading any Rust plugin costs (--cpu-bind=none)
#   taskmap   A, the lama plugin without options: TASK_MAP only (--cpu-bind=none)
#   lama      A, lama places and binds on top of task/affinity: --lama-map=csbnh --lama-bind=1c
#             (no --cpu-bind: lama refuses one beside its own options)
#   slurm     A, Slurm's own binding of the same shape: --cpu-bind=cores, no plugin
#   installed A, the same Slurm binding on a site where lama is installed: --cpu-bind=cores, the
#             lama plugin exports TASK_MAP only
#   auto      A, lama's automatic policy: --lama-policy=auto
#   mem       A, the policy with memory binding: --lama-policy=auto --lama-mem=local
#   bare      B, no plugin: a cluster without task/affinity (what task/affinity itself costs)
#   site      B, lama places and binds: --lama-map=csbnh --lama-bind=1c
# For each step shape it prints each kind's median wall time, the median of the per-round
# ratios with a 95% confidence interval (distribution free: order statistics of the ratios),
# then the plugin's own time per node from --lama-verbose (median of five steps per cluster).
# Then whole jobs, `srun -N3 -n3 true` without an allocation (the job's start, its step, its
# end), alternating between cluster A, whose slurmd loaded lama at start, and a third cluster
# C whose slurmd has no plugin: slurmd runs a SPANK prolog and epilog for every job when a
# plugin exports those callbacks.
#
# Usage: contrib/overhead.sh [ROUNDS]   (default 100; builds the release plugin; starts and
#   stops its own clusters in /tmp/lama-overhead-a and -b; LAMA_SLURM_PREFIX=PREFIX measures a
#   Slurm built by contrib/slurm-build.sh instead of Debian's; LAMA_OVERHEAD_PLUGIN=PATH
#   measures that plugin build instead of this tree's, e.g. an older lama for a before/after
#   table, or a plugin that is not lama (a floor: the per-node report then says it has none);
#   LAMA_OVERHEAD_KINDS="none noop taskmap" runs only those kinds, and
#   LAMA_OVERHEAD_SHAPES="3" only those task counts, so that many more rounds fit in the same
#   time when one ratio needs a narrower interval; LAMA_OVERHEAD_JOBS=N whole jobs, 0 for none,
#   default min(ROUNDS, 60))
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
stats=$top/contrib/bench/stats.awk
rounds=${1:-100}
contrib/deps.sh
# A Slurm built from source (contrib/slurm-build.sh): its commands, and the plugin built for it.
if [ -n "${LAMA_SLURM_PREFIX:-}" ]; then
  export SLURM_INCLUDE_DIR=$LAMA_SLURM_PREFIX/include PATH=$LAMA_SLURM_PREFIX/bin:$LAMA_SLURM_PREFIX/sbin:$PATH
fi
cargo build --release --quiet -p lama-spank -p lama-probe
plugin=${LAMA_OVERHEAD_PLUGIN:-$top/target/release/liblama_spank.so}
noop=$top/target/release/noop_spank.so
gcc -O2 -shared -fPIC -I"${SLURM_INCLUDE_DIR:-/usr/include}" contrib/bench/noop_spank.c -o "$noop"
floor=$(contrib/bench/rust-floor.sh "$top/target/release/rust-floor")
a=/tmp/lama-overhead-a b=/tmp/lama-overhead-b c=/tmp/lama-overhead-c
cluster() {  # DIR PORT TASKPLUGIN [LINE]: start a sandbox cluster, lama in its plugstack.conf
  LAMA_SANDBOX=$1 LAMA_SANDBOX_PORT=$2 LAMA_SANDBOX_TASK_PLUGIN=$3 \
    LAMA_SANDBOX_PLUGIN=${4-required $plugin} contrib/sandbox.sh start >/dev/null
}
stop_all() {
  for d in $a $b $c; do LAMA_SANDBOX=$d contrib/sandbox.sh stop >/dev/null 2>&1 || true; done
}
stop_all
trap stop_all EXIT
cluster $a "${LAMA_SANDBOX_PORT:-22800}" task/affinity
cluster $b $((${LAMA_SANDBOX_PORT:-22800} + 1000)) task/none
cpus=$(nproc)
echo "machine: $(nproc) CPUs, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo); Slurm $(SLURM_CONF=$a/slurm.conf srun --version | awk '{print $2}'); $rounds rounds per shape"
# An allocation of N tasks on the 3 nodes of cluster DIR; prints its job id.
allocate() {
  SLURM_CONF=$1/slurm.conf salloc --no-shell -N3 -n"$2" 2>&1 | awk '/Granted job allocation/ {print $NF}'
}
read -r -a kinds <<<"${LAMA_OVERHEAD_KINDS:-none noop taskmap lama slurm bare site}"
has_mem=0; [[ " ${kinds[*]} " == *" mem "* ]] && has_mem=1
for k in "${kinds[@]}"; do
  case $k in none|noop|rust|taskmap|lama|slurm|installed|bare|site|auto|mem) ;; *) echo "overhead: unknown kind '$k' in LAMA_OVERHEAD_KINDS; valid: none noop rust taskmap lama slurm installed bare site auto mem" >&2; exit 2 ;; esac
done
for n in ${LAMA_OVERHEAD_SHAPES:-3 $((3 * cpus))}; do
  ja=$(allocate $a "$n") jb=$(allocate $b "$n")
  [ -n "$ja" ] && [ -n "$jb" ] || { echo "overhead: no allocation on the sandbox clusters" >&2; exit 1; }
  step() {  # KIND: runs one step of that kind, prints "KIND microseconds"
    local dir=$a job=$ja line="" args=()
    case $1 in
      none) args=(--cpu-bind=none) ;;
      noop) line="required $noop" args=(--cpu-bind=none) ;;
      rust) line="required $floor" args=(--cpu-bind=none) ;;
      taskmap) line="required $plugin" args=(--cpu-bind=none) ;;
      lama) line="required $plugin" args=(--lama-map=csbnh --lama-bind=1c) ;;
      slurm) args=(--cpu-bind=cores) ;;
      installed) line="required $plugin" args=(--cpu-bind=cores) ;;
      auto) line="required $plugin" args=(--lama-policy=auto) ;;
      mem) line="required $plugin" args=(--lama-policy=auto --lama-mem=local) ;;
      bare) dir=$b job=$jb ;;
      site) dir=$b job=$jb line="required $plugin" args=(--lama-map=csbnh --lama-bind=1c) ;;
    esac
    # srun and every slurmstepd read plugstack.conf anew for each step.
    echo "$line" > "$dir/plugstack.conf"
    local t=$(date +%s%N)
    SLURM_CONF=$dir/slurm.conf srun --jobid="$job" -N3 -n"$n" "${args[@]}" true || echo "FAILED $1"
    echo "$1 $(( ($(date +%s%N) - t) / 1000 ))"
  }
  out=$(mktemp)
  {
    for k in "${kinds[@]}"; do step "$k" >/dev/null; done   # warm up every path
    for i in $(seq 1 "$rounds"); do
      for j in "${!kinds[@]}"; do step "${kinds[(i + j) % ${#kinds[@]}]}"; done
    done
    # The plugin's own time per node, as it reports it: wall time, so a slurmstepd that the two
    # CPUs' scheduler puts aside mid-phase reads high; five steps per cluster give a median.
    for d in $a $b; do echo "required $plugin" > "$d/plugstack.conf"; done
    for i in 1 2 3 4 5; do
      SLURM_CONF=$a/slurm.conf srun --jobid="$ja" -N3 -n"$n" --lama-map=csbnh \
        --lama-bind=1c --lama-verbose true 2>&1 | sed -n 's/.*\(node placed in .*\)/A \1/p' || true
      SLURM_CONF=$b/slurm.conf srun --jobid="$jb" -N3 -n"$n" --lama-map=csbnh --lama-bind=1c \
        --lama-verbose true 2>&1 | sed -n 's/.*\(node placed in .*\)/B \1/p' || true
      if [ "$has_mem" = 1 ]; then
        SLURM_CONF=$a/slurm.conf srun --jobid="$ja" -N3 -n"$n" --lama-policy=auto \
          --lama-mem=local --lama-verbose true 2>&1 | sed -n 's/.*\(node placed in .*\)/M \1/p' || true
      fi
    done
  } > "$out" 2>&1
  SLURM_CONF=$a/slurm.conf scancel "$ja"
  SLURM_CONF=$b/slurm.conf scancel "$jb"
  if grep -q FAILED "$out"; then grep FAILED "$out" >&2; exit 1; fi
  awk -v n="$n" -f "$stats" -f /dev/stdin "$out" <<'AWK'
    /^(none|noop|rust|taskmap|lama|slurm|installed|bare|site|auto|mem) [0-9]+$/ { k = $1; c[k]++; v[k, c[k]] = $2 / 1000 }
    /node placed in/ { cl = $1; pn[cl]++; pt[cl, pn[cl]] = $5 + 0; pl[cl, pn[cl]] = $0 }
    function row(k, what, against) {
      if (!c[k]) return
      printf "  %-7s %-50s %8.2f", k, what, med[k]
      if (against != "" && c[against]) printf "   vs %-5s %s", against, ratio(k, against)
      printf "\n"
    }
    function pair(what, x, y) {
      if (c[x] && c[y]) printf "  %-58s %8s   vs %-5s %s\n", "  " what, "", y, ratio(x, y)
    }
    END {
      printf "srun -N3 -n%d true (ms per step, median; ratio: median of per-round ratios [95%% interval])\n", n
      split("none noop rust taskmap lama slurm installed bare site auto mem", ks, " ")
      for (x = 1; x <= 11; x++) { k = ks[x]; m = c[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]; sort(a, m); med[k] = median(a, m) }
      print "  cluster A, TaskPlugin=task/affinity:"
      row("none", "no plugin, --cpu-bind=none", "")
      row("noop", "a SPANK plugin that does nothing", "none")
      row("rust", "a Rust SPANK plugin that does nothing", "none")
      row("taskmap", "lama without options (TASK_MAP only)", "none")
      pair("taskmap against the plugin that does nothing", "taskmap", "noop")
      row("lama", "lama csbnh 1c on top of task/affinity", "none")
      row("slurm", "Slurm binds: --cpu-bind=cores", "none")
      pair("lama against Slurm binding, both on task/affinity", "lama", "slurm")
      pair("any Rust plugin against Slurm binding", "rust", "slurm")
      pair("lama against any Rust plugin", "lama", "rust")
      row("installed", "Slurm binds, lama installed (TASK_MAP only)", "slurm")
      pair("lama against Slurm binding, lama installed in both", "lama", "installed")
      row("auto", "lama --lama-policy=auto", "slurm")
      row("mem", "lama --lama-policy=auto --lama-mem=local", "auto")
      print "  cluster B, TaskPlugin=task/none, lama is the binder:"
      row("bare", "no plugin, no binding", "none")
      row("site", "lama csbnh 1c", "slurm")
      # A plugin that is not lama (LAMA_OVERHEAD_PLUGIN=a floor plugin) reports nothing.
      if (!pn["A"] && !pn["B"] && !pn["M"]) print "  plugin per node: no --lama-verbose report from the plugin under test"
      for (x = 1; x <= 3; x++) {
        cl = substr("ABM", x, 1); m = pn[cl]; if (!m) continue
        for (i = 1; i <= m; i++) a[i] = pt[cl, i]
        sort(a, m); md = a[int((m + 1) / 2)]
        for (i = 1; i <= m && pt[cl, i] != md; i++) ;
        printf "  plugin per node, %s (--lama-verbose, %d nodes): median %.2f ms [min %.2f, max %.2f]; the median node: %s\n", (cl == "M" ? "cluster A, --lama-policy=auto --lama-mem=local" : "cluster " cl), m, md, a[1], a[m], substr(pl[cl, i], 3)
      }
    }
AWK
  rm -f "$out"
done

# Whole jobs. Cluster C's slurmd starts without any plugin (an empty plugstack.conf).
jobs=${LAMA_OVERHEAD_JOBS:-$(( rounds < 60 ? rounds : 60 ))}
[ "$jobs" -gt 0 ] || exit 0
cluster $c $((${LAMA_SANDBOX_PORT:-22800} + 2000)) task/affinity ""
echo "required $plugin" > "$a/plugstack.conf"
out=$(mktemp)
for i in $(seq 0 "$jobs"); do
  for k in $( ((i % 2)) && echo "none lama" || echo "lama none"); do
    dir=$a; [ "$k" = none ] && dir=$c
    t=$(date +%s%N)
    SLURM_CONF=$dir/slurm.conf srun -N3 -n3 true || echo "FAILED job $k"
    # Round 0 warms both paths up.
    [ "$i" -gt 0 ] && echo "$k $(( ($(date +%s%N) - t) / 1000 ))"
  done
done > "$out" 2>&1
if grep -q FAILED "$out"; then grep FAILED "$out" >&2; exit 1; fi
awk -f "$stats" -f /dev/stdin "$out" <<'AWK'
  /^(none|lama) [0-9]+$/ { k = $1; c[k]++; v[k, c[k]] = $2 / 1000 }
  END {
    m = c["lama"]
    for (x = 1; x <= 2; x++) { kk = (x == 1) ? "none" : "lama"; for (i = 1; i <= m; i++) a[i] = v[kk, i]; sort(a, m); med[kk] = median(a, m) }
    printf "srun -N3 -n3 true as a whole job (ms per job, median of %d; ratio: median of per-round ratios [95%% interval])\n", m
    printf "  %-7s %-50s %8.2f\n", "none", "cluster C: slurmd without a plugin", med["none"]
    printf "  %-7s %-50s %8.2f   vs none  %s\n", "lama", "cluster A: slurmd and the job with lama", med["lama"], ratio("lama", "none")
  }
AWK
rm -f "$out"
