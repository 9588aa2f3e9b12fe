# Shared by the Flux tests, sourced with their arguments (LAMA_BINARY PLUGIN_SO FLUX_PREFIX): sets
# $lama, $plugin, $flux, $top and $work (a scratch directory removed on exit), the result lines
# (tests/tap.sh: a suite ends with done_testing), userrc files that load the plugin, a decoder of RFC 34 task maps written here (not
# lama's), and `lama plan` as lines.
lama=$(realpath "$1")
plugin=$(realpath "$2")
flux=$3/bin/flux
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

source "$top/tests/tap.sh"
# A cpulist such as 0-2,5 as 0,1,2,5.
expand() { awk -F, '{ for (i = 1; i <= NF; i++) { n = split($i, r, "-"); if (n == 1) r[2] = r[1]; for (c = r[1]; c <= r[2]; c++) printf "%s%d", (o++ ? "," : ""), c } print "" }' <<<"$1"; }

# A userrc that loads the plugin, with an optional Lua conf table's contents ("topology = ...").
# Its topology cache is the test's own (no test reads what an earlier run left) unless named.
userrc() {
  local file=$work/$1.lua conf=${2:-}
  [[ $conf == *cache* ]] || conf="${conf:+$conf, }cache = \"$work/cache-%u\""
  echo "plugin.load { file = \"$plugin\", conf = { $conf } }" > "$file"
  echo "$file"
}
urc=$(userrc plain)

# RFC 34 map -> "task node" lines, one per task, by this script's own reading of the format.
decode_map() {
  python3 -c '
import json, sys
m = json.loads(sys.argv[1])
m = m["map"] if isinstance(m, dict) else m
t = 0
for node, nnodes, ppn, repeat in m:
    for _ in range(repeat):
        for n in range(node, node + nnodes):
            for _ in range(ppn):
                print(t, n); t += 1
' "$1"
}

# A task map, wrapped ({"version":1,"map":...}) or bare as `flux job taskmap` prints it, as the
# bare map in compact JSON.
canon() { python3 -c 'import json,sys; m = json.loads(sys.argv[1]); m = m["map"] if isinstance(m, dict) else m; print(json.dumps(m, separators=(",", ":")))' "$1" 2>/dev/null || echo "unreadable: $1"; }

# `lama plan` text as "rank cpus" lines.
plan_cpus() { "$lama" plan "$@" | awk '/^  rank / {for (i = 1; i <= NF; i++) if ($i == "cpus") print $2, $(i+1)}'; }

# Per task "task cpus" expected from the job's map ($1) and `lama plan` of each node's share
# (rest: plan arguments): each node's tasks in rank order take the node's plan ranks in order.
expected_cpus() {
  local map=$1 n
  shift
  decode_map "$map" > "$work/assign"
  for n in $(awk '{print $2}' "$work/assign" | sort -nu); do
    paste -d' ' <(awk -v n="$n" '$2 == n {print $1}' "$work/assign") \
      <(plan_cpus --np "$(awk -v n="$n" '$2 == n' "$work/assign" | wc -l)" "$@" | awk '{print $2}')
  done | sort -n
}
