#!/usr/bin/env bash
# The launch path of two lama trees side by side, in one run: an older tree (a git revision, or
# a folder holding its liblama_spank.so and liblama_probe.so) against this one. Each build runs
# on a sandbox cluster of its own (its slurmd writes its own topology cache, in its own format),
# both TaskPlugin=task/affinity on this machine, and every comparison alternates between them:
#   per node  --lama-verbose's "node placed in" of a placed step, for the policy
#             (--lama-policy=auto), the policy with memory binding (--lama-mem=local) and a map
#             (--lama-map=csbnh --lama-bind=1c), each build's median over STEPS steps x 3 nodes,
#             and the phases of its median node;
#   per step  whole steps, srun -N3 -n3 and -N3 -n6, ROUNDS rounds in a rotating order of four
#             kinds: old (the old build placing: the map above), new (this build placing),
#             slurm (no plugin, Slurm's --cpu-bind=cores) and rust (a Rust SPANK plugin that
#             does nothing, contrib/bench/rust-floor.sh, with --cpu-bind=cores: the floor of
#             any Rust plugin); medians of the per-round ratios with 95% distribution-free
#             intervals. lama refuses an explicit --cpu-bind beside its own options, so the
#             placing steps give none (task/affinity's default binding, which lama replaces).
# Usage: contrib/bench/launch-ab.sh OLD [ROUNDS [STEPS]]   (defaults 200 and 20)
#   OLD     a git revision of this repository (built once into /var/cache/lama/launch-ab/REV,
#           or $LAMA_AB_CACHE), or a folder with an older build's two libraries
# Environment: LAMA_SLURM_PREFIX (a Slurm built by contrib/slurm-build.sh instead of Debian's),
#   LAMA_SANDBOX_PORT (the first cluster's port base, default 23800; the second's is +1000),
#   LAMA_AB_SHAPES (task counts per step, default "3 6"; "none" for the per-node figures alone).
# Needs root (the sandbox). Prints tables only; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$PWD
stats=$top/contrib/bench/stats.awk
old=${1:?usage: launch-ab.sh OLD [ROUNDS [STEPS]]}
rounds=${2:-200}
steps=${3:-20}
contrib/deps.sh
if [ -n "${LAMA_SLURM_PREFIX:-}" ]; then
  export SLURM_INCLUDE_DIR=$LAMA_SLURM_PREFIX/include PATH=$LAMA_SLURM_PREFIX/bin:$LAMA_SLURM_PREFIX/sbin:$PATH
fi
release=$(contrib/slurm-version.sh "${SLURM_INCLUDE_DIR:-/usr/include}")
work=$(mktemp -d /tmp/lama-launch-ab.XXXXXX)
a=$work/old b=$work/new
port=${LAMA_SANDBOX_PORT:-23800}
stop_all() {
  for d in $a $b; do LAMA_SANDBOX=$d contrib/sandbox.sh stop >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap stop_all EXIT

# The old build: a folder as given, or the revision built once in a worktree of its own.
if [ -d "$old" ]; then
  olddir=$(cd "$old" && pwd) oldname=$olddir
else
  rev=$(git rev-parse --verify "$old^{commit}") || { echo "launch-ab: '$old' is neither a folder nor a revision" >&2; exit 2; }
  olddir=${LAMA_AB_CACHE:-/var/cache/lama/launch-ab}/$rev-$release
  oldname="$(git log -1 --format='%h (%ad)' --date=short "$rev")"
  if [ ! -f "$olddir/.complete" ]; then
    echo "launch-ab: building $oldname for Slurm $release into $olddir" >&2
    rm -rf "$olddir"
    mkdir -p "$olddir"
    git worktree add -q --detach "$olddir/src" "$rev"
    (cd "$olddir/src" && CARGO_TARGET_DIR=$olddir/target cargo build --release --quiet -p lama-spank -p lama-probe)
    cp "$olddir/target/release/liblama_spank.so" "$olddir/target/release/liblama_probe.so" "$olddir/"
    git worktree remove --force "$olddir/src"
    rm -rf "$olddir/target"
    touch "$olddir/.complete"
  fi
fi
for f in liblama_spank.so liblama_probe.so; do
  [ -f "$olddir/$f" ] || { echo "launch-ab: no $f in $olddir" >&2; exit 2; }
done
cargo build --release --quiet -p lama-spank -p lama-probe
# Each build beside its own hwloc helper, under the plugin's own name (the sandbox keeps the
# cache of a liblama_spank.so line in the cluster's folder).
mkdir -p "$work/old-lib" "$work/new-lib"
cp "$olddir"/liblama_spank.so "$olddir"/liblama_probe.so "$work/old-lib/"
cp target/release/liblama_spank.so target/release/liblama_probe.so "$work/new-lib/"
floor=$(contrib/bench/rust-floor.sh "$top/target/release/rust-floor")
line_old="required $work/old-lib/liblama_spank.so cache=$a/cache"
line_new="required $work/new-lib/liblama_spank.so cache=$b/cache"
LAMA_SANDBOX=$a LAMA_SANDBOX_PORT=$port LAMA_SANDBOX_TASK_PLUGIN=task/affinity \
  LAMA_SANDBOX_PLUGIN="$line_old" contrib/sandbox.sh start >/dev/null
LAMA_SANDBOX=$b LAMA_SANDBOX_PORT=$((port + 1000)) LAMA_SANDBOX_TASK_PLUGIN=task/affinity \
  LAMA_SANDBOX_PLUGIN="$line_new" contrib/sandbox.sh start >/dev/null
echo "machine: $(nproc) CPUs, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo); Slurm $(SLURM_CONF=$a/slurm.conf srun --version | awk '{print $2}')"
echo "old: $oldname; new: this tree, $(git describe --always --dirty)"

allocate() {  # DIR TASKS: an allocation on the 3 nodes of that cluster; prints its job id
  SLURM_CONF=$1/slurm.conf salloc --no-shell -N3 -n"$2" 2>&1 | awk '/Granted job allocation/ {print $NF}'
}

# --- per node -----------------------------------------------------------------------------
ja=$(allocate $a 3) jb=$(allocate $b 3)
[ -n "$ja" ] && [ -n "$jb" ] || { echo "launch-ab: no allocation on the sandbox clusters" >&2; exit 1; }
out=$work/node.txt
for i in $(seq 0 "$steps"); do
  for mode in policy mem map; do
    case $mode in
      policy) args=(--lama-policy=auto) ;;
      mem) args=(--lama-policy=auto --lama-mem=local) ;;
      map) args=(--lama-map=csbnh --lama-bind=1c) ;;
    esac
    for v in old new; do
      dir=$a job=$ja; [ $v = new ] && dir=$b job=$jb
      r=$(SLURM_CONF=$dir/slurm.conf srun --jobid="$job" -N3 -n3 "${args[@]}" --lama-verbose true 2>&1) ||
        { echo "launch-ab: a $v $mode step failed: $r" >&2; exit 1; }
      # Step 0 warms both paths up.
      [ "$i" -gt 0 ] && sed -n "s/.*\(node placed in .*\)/$v $mode \1/p" <<<"$r"
    done
  done
done > "$out"
awk -f "$stats" -f /dev/stdin "$out" <<'AWK'
  { k = $1 " " $2; c[k]++; v[k, c[k]] = $6 + 0; l[k, c[k]] = $0 }
  END {
    printf "plugin per node (--lama-verbose's \"node placed in\", ms; median [p10, p90] of steps x 3 nodes)\n"
    split("policy mem map", ms, " ")
    for (x = 1; x <= 3; x++) for (y = 1; y <= 2; y++) {
      k = (y == 1 ? "old" : "new") " " ms[x]; m = c[k]; if (!m) continue
      for (i = 1; i <= m; i++) a[i] = v[k, i]
      sort(a, m); md = a[int((m + 1) / 2)]
      for (i = 1; i <= m && v[k, i] != md; i++) ;
      line = l[k, i]; sub(/.*node placed in [0-9.]+ ms: /, "", line); sub(/\)$/, "", line)
      printf "  %-11s %5.3f [%5.3f, %5.3f]  median node: %s\n", k, md, a[int(m / 10) + 1], a[int(m * 9 / 10)], line
    }
  }
AWK
SLURM_CONF=$a/slurm.conf scancel "$ja"
SLURM_CONF=$b/slurm.conf scancel "$jb"

# --- per step ------------------------------------------------------------------------------
kinds=(old new slurm rust)
shapes=${LAMA_AB_SHAPES:-3 6}
[ "$shapes" = none ] && shapes=""
for n in $shapes; do
  ja=$(allocate $a "$n") jb=$(allocate $b "$n")
  [ -n "$ja" ] && [ -n "$jb" ] || { echo "launch-ab: no allocation on the sandbox clusters" >&2; exit 1; }
  step() {  # KIND: one step of that kind; prints "KIND microseconds"
    local dir=$b job=$jb line="" args=(--lama-map=csbnh --lama-bind=1c)
    case $1 in
      old) dir=$a job=$ja line=$line_old ;;
      new) line=$line_new ;;
      slurm) args=(--cpu-bind=cores) ;;
      rust) line="required $floor" args=(--cpu-bind=cores) ;;
    esac
    # srun and every slurmstepd read plugstack.conf anew for each step.
    echo "$line" > "$dir/plugstack.conf"
    local t=$(date +%s%N)
    SLURM_CONF=$dir/slurm.conf srun --jobid="$job" -N3 -n"$n" "${args[@]}" true || echo "FAILED $1"
    echo "$1 $(( ($(date +%s%N) - t) / 1000 ))"
  }
  out=$work/step-$n.txt
  {
    for k in "${kinds[@]}"; do step "$k" >/dev/null; done
    for i in $(seq 1 "$rounds"); do
      for j in "${!kinds[@]}"; do step "${kinds[(i + j) % ${#kinds[@]}]}"; done
    done
  } > "$out" 2>&1
  echo "$line_new" > "$b/plugstack.conf"
  SLURM_CONF=$a/slurm.conf scancel "$ja"
  SLURM_CONF=$b/slurm.conf scancel "$jb"
  if grep -q FAILED "$out"; then grep FAILED "$out" >&2; exit 1; fi
  awk -v n="$n" -v rounds="$rounds" -f "$stats" -f /dev/stdin "$out" <<'AWK'
    /^(old|new|slurm|rust) [0-9]+$/ { k = $1; c[k]++; v[k, c[k]] = $2 / 1000 }
    END {
      printf "srun -N3 -n%d true, %d rounds (ms per step, median; ratio: median of per-round ratios [95%% interval])\n", n, rounds
      split("old new slurm rust", ks, " ")
      for (x = 1; x <= 4; x++) { k = ks[x]; m = c[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]; sort(a, m); med[k] = median(a, m) }
      printf "  %-5s %-46s %7.2f   vs slurm %s\n", "old", "the old build places (csbnh, 1c)", med["old"], ratio("old", "slurm")
      printf "  %-5s %-46s %7.2f   vs slurm %s\n", "new", "this build places (csbnh, 1c)", med["new"], ratio("new", "slurm")
      printf "  %-5s %-46s %7.2f   vs slurm %s\n", "rust", "a Rust plugin that does nothing", med["rust"], ratio("rust", "slurm")
      printf "  %-5s %-46s %7.2f\n", "slurm", "no plugin, --cpu-bind=cores", med["slurm"]
      printf "  %-52s %7s   vs old   %s\n", "new against old", "", ratio("new", "old")
      printf "  %-52s %7s   vs rust  %s\n", "new against the do-nothing Rust plugin", "", ratio("new", "rust")
    }
AWK
done
