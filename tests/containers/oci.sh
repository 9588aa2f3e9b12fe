#!/usr/bin/env bash
# Slurm's own OCI containers (`srun --container=BUNDLE`, oci.conf) on the sandbox: each task's
# CPUs, memory policy, TASK_MAP and LAMA_* inside the container against the same step outside
# one (whose CPUs must be `lama plan`'s), under Debian's runc (which keeps the binding) and the
# vendored crun 1.27.1 (which resets it), each run as it is and through `lama oci-run`. Where
# the runtime widens a binding, node 0 says so once and `lama check` reports not-as-planned.
# Usage: tests/containers/oci.sh LAMA_BINARY PLUGIN_SO CRUN_BINARY
# (LAMA_SANDBOX, LAMA_SANDBOX_PORT and, for a built Slurm, LAMA_SLURM_PREFIX and PATH set; the
# Slurm needs its serializer/json plugin.)
set -uo pipefail
crun=$(realpath -m "$3")
source "$(dirname "$0")/../slurm/lib.sh"
source "$(dirname "$0")/lib.sh"

"$top/contrib/deps.sh" busybox-static runc jq >/dev/null
# The Slurm under test: a built prefix's plugins, or Debian's.
if [ -n "${LAMA_SLURM_PREFIX:-}" ]; then json=$LAMA_SLURM_PREFIX/lib/slurm/serializer_json.so
else json=$(ls /usr/lib/*/slurm-wlm/serializer_json.so 2>/dev/null | head -n 1); fi
[ -f "$json" ] || skip_all "this Slurm has no serializer/json plugin, which oci.conf needs (no --container steps)"

[[ $("$top/contrib/slurm-version.sh" "${LAMA_SLURM_PREFIX:-/usr}/include") != 22.05.* ]] ||
  skip_all "Slurm 22.05 runs one container per node at most and writes none of the task's environment into it (not even SLURM_PROCID): no variable of lama's can reach a --container task there"
# The bundle: a busybox root (the task's command is resolved on the host: /usr/bin/sh) and
# runc's default config.json without a terminal.
bundle=$work/bundle
mkdir -p "$bundle/rootfs"/{bin,usr/bin,proc,sys,dev,tmp,etc}
cp /bin/busybox "$bundle/rootfs/bin/"
for c in sh cat grep cut sleep; do
  ln -s /bin/busybox "$bundle/rootfs/bin/$c"; ln -s /bin/busybox "$bundle/rootfs/usr/bin/$c"
done
(cd "$bundle" && runc spec && jq '.process.terminal = false' config.json >c && mv c config.json) ||
  { not_ok "runc spec makes the bundle's config.json"; done_testing; exit 0; }
# This machine mounts cgroup v1 beside a v2 "unified" tree, which crun refuses ("hybrid
# mode"): crun runs in a mount namespace of its own without the unified tree (a site's node is
# all v1 or all v2). Its cgroups are Slurm's (--cgroup-manager=disabled), as runc's are here.
cat >"$work/crun" <<SH
#!/bin/sh
exec unshare -m --propagation private sh -c 'umount /sys/fs/cgroup/unified 2>/dev/null; exec "\$0" --cgroup-manager=disabled "\$@"' "$crun" "\$@"
SH
chmod 755 "$work/crun"
"$work/crun" --version | grep -q '^crun version' || { not_ok "crun runs here ($crun)"; done_testing; exit 0; }

per=2
n=$((2 * per))
step=(-N2 -n$n -c1 --lama-map=csbnh --lama-bind=1c --lama-mem=local --lama-threads=auto)
lines() { run "$@" sh -c "$report" 2>"$work/err" | sort; }
plan_outside $per
all_ranks=$(seq -s, 0 $((n - 1)))
warned() { grep -c "not through \`lama oci-run\`" "$work/err"; }

# cluster_with NAME RUNTIME...: the sandbox with oci.conf running RUNTIME's `run` (its container
# states under $work, one directory per node).
cluster_with() {
  local name=$1; shift
  local state="--root=$work/state/$name/%n" id="%n.%u.%j.%s.%t"
  mkdir -p "$work/state/$name"
  local runtime=$1 run_line
  shift
  run_line="$* $runtime $state run --bundle %b $id"
  {
    echo "RunTimeQuery=\"$runtime $state state $id\""
    echo "RunTimeKill=\"$runtime $state kill -a $id\""
    echo "RunTimeDelete=\"$runtime $state delete --force $id\""
    echo "RunTimeRun=\"${run_line# }\""
  } >"$work/oci.conf"
  "$top/contrib/sandbox.sh" stop >/dev/null 2>&1
  LAMA_SANDBOX_OCI_CONF=$work/oci.conf LAMA_SANDBOX_PLUGIN="required $plugin" "$top/contrib/sandbox.sh" start >/dev/null
}

cluster_with runc runc
host=$(lines "${step[@]}")
if outside_as_planned "$host" "$n" "$per"; then
  ok "outside a container the step is lama plan's (CPUs, LAMA_CPUS), memory bound, TASK_MAP and OpenMP set"
else
  not_ok "the step outside a container (ranks off the plan:${off_plan:-none}; plan ${planned[*]})" "$host"
  "$top/contrib/sandbox.sh" stop >/dev/null 2>&1; done_testing; exit 0
fi

got=$(lines "${step[@]}" --container="$bundle")
if [ "$got" = "$host" ] && [ "$(warned)" = 1 ]; then
  ok "runc $(runc --version | awk 'NR == 1 {print $3}') as it is: every task keeps its CPUs, memory policy, TASK_MAP, LAMA_* and OpenMP variables; node 0 says once that the line is not through lama oci-run"
else not_ok "runc as it is (want the lines outside a container, one warning)" "$(diff <(echo "$host") <(echo "$got"); cat "$work/err")"; fi

cluster_with runc-lama runc "$lama" oci-run
got=$(lines "${step[@]}" --container="$bundle")
if [ "$got" = "$host" ] && [ "$(warned)" = 0 ]; then
  ok "runc through lama oci-run: every task as outside a container, no warning"
else not_ok "runc through lama oci-run" "$(diff <(echo "$host") <(echo "$got"); cat "$work/err")"; fi

version=$("$work/crun" --version | awk '/^crun version/ {print $3}')
cluster_with crun "$work/crun"
got=$(lines "${step[@]}" --container="$bundle")
widened=$(grep -c 'cpus=0-1 ' <<<"$got")
if [ "$widened" = "$n" ] && [ "$(warned)" = 1 ] && [ "$(sed 's/cpus=[^ ]* //' <<<"$got")" = "$(sed 's/cpus=[^ ]* //' <<<"$host")" ]; then
  ok "crun $version as it is: it widens every task to the node's CPUs (the reset this suite guards against), node 0 says so once; memory policy and variables kept"
else not_ok "crun $version as it is (want every task widened to 0-1, one warning)" "$got$(cat "$work/err")"; fi
# lama check on a running step of that runtime: not-as-planned, task by task. (The step ends by
# itself: a container's first process is its namespace's init, which SIGTERM does not stop.)
job=$(sbatch --parsable -N2 -n$n -o /dev/null --wrap "srun ${step[*]} --container=$bundle sleep 8")
for _ in $(seq 50); do [ "$(squeue -h -j "$job" -s -o %i | grep -c "^$job\.0$")" = 1 ] && break; sleep 0.2; done
sleep 2
out=$(timeout 60 "$lama" check --jobid "$job" --format json 2>&1)
if [ "$(jq '[.findings[] | select(.kind == "not-as-planned")] | length' <<<"$out" 2>/dev/null)" -ge 1 ] 2>/dev/null &&
  [ "$(jq '[.findings[] | select(.kind == "not-as-planned") | .tasks[]] | sort' -c <<<"$out" 2>/dev/null)" = "[$all_ranks]" ]; then
  ok "crun $version as it is: lama check reports every task not-as-planned"
else not_ok "crun $version as it is: lama check (want ranks $all_ranks not-as-planned)" "$out"; fi
wait_idle >/dev/null

cluster_with crun-lama "$work/crun" "$lama" oci-run
got=$(lines "${step[@]}" --container="$bundle")
if [ "$got" = "$host" ] && [ "$(warned)" = 0 ]; then
  ok "crun $version through lama oci-run: every task keeps its CPUs, memory policy, TASK_MAP, LAMA_* and OpenMP variables; no warning"
else not_ok "crun $version through lama oci-run" "$(diff <(echo "$host") <(echo "$got"); cat "$work/err")"; fi
out=$(run -N1 -n1 --container="$bundle" sh -c 'exit 3' 2>&1); rc=$?
if [ "$rc" = 3 ]; then ok "crun $version through lama oci-run: the task's exit status passes (3)"
else not_ok "crun through lama oci-run: exit status (want 3, got $rc)" "$out"; fi
job=$(sbatch --parsable -N2 -n$n -o /dev/null --wrap "srun ${step[*]} --container=$bundle sleep 8")
for _ in $(seq 50); do [ "$(squeue -h -j "$job" -s -o %i | grep -c "^$job\.0$")" = 1 ] && break; sleep 0.2; done
sleep 2
out=$(timeout 60 "$lama" check --jobid "$job" --format json 2>&1)
if [ "$(jq '[.findings[] | select(.kind == "not-as-planned")] | length' <<<"$out" 2>/dev/null)" = 0 ] &&
  [ "$(jq '.tasks | length' <<<"$out" 2>/dev/null)" = "$n" ]; then
  ok "crun $version through lama oci-run: lama check finds all $n tasks and none not-as-planned"
else not_ok "crun through lama oci-run: lama check (want $n tasks, no not-as-planned)" "$out"; fi
wait_idle >/dev/null
"$top/contrib/sandbox.sh" stop >/dev/null 2>&1
done_testing
