#!/usr/bin/env bash
# Nodes that slurm.conf declares otherwise than hwloc sees them, on the real sandbox cluster:
# `CPUs=` alone, `ThreadsPerCore=1` on hardware threads, and `SelectTypeParameters=CR_CPU` and
# `CR_Socket_Memory`. slurmd and the steps read this machine's CPUs as cores of two hardware
# threads (HWLOC_XMLFILE, an hwloc synthetic description of them), so that Slurm's cgroup and
# binding are real. Slurm's own witnesses: the step's cgroup cpuset (Slurm's CPUs of its cores),
# or without cgroups the binding Slurm itself gives the same step. lama's bindings are held
# against them and against `lama plan --restrict` on Slurm's CPUs.
# Usage: tests/slurm/declared.sh LAMA_BINARY PLUGIN_SO (restarts the cluster; the caller stops it)
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"

n=$(nproc)
if [ $((n % 2)) != 0 ] || [ "$(cat /sys/devices/system/cpu/online)" != "0-$((n - 1))" ]; then
  skip_all "declared nodes: they need an even number of CPUs online as 0-$((n - 1)) (this machine: $(cat /sys/devices/system/cpu/online))"
fi
xml=$work/smt.xml
lstopo --of xml -i "pack:1 core:$((n / 2)) pu:2" "$xml" --force 2>/dev/null
chmod 644 "$xml"
chmod 755 "$work"
smt="LAMA_SANDBOX_SLURMD_ENV=HWLOC_XMLFILE=$xml"

cat > "$work/task.sh" <<'EOF'
aff=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
# Slurm's cgroup: cgroup v1's cpuset controller here (contrib/sandbox.sh), v2 elsewhere.
v1=$(awk -F: '$2 == "cpuset" {print $3}' /proc/self/cgroup)
v2=$(awk -F: '$1 == 0 {print $3}' /proc/self/cgroup)
set=$(cat "/sys/fs/cgroup/cpuset$v1/cpuset.cpus" 2>/dev/null || cat "/sys/fs/cgroup$v2/cpuset.cpus.effective" 2>/dev/null || echo none)
echo "$SLURM_PROCID $aff $set"
EOF
chmod 644 "$work/task.sh"

# placed NAME SRUN_ARGS PLAN_ARGS WANT_SET: each task's binding is lama plan's on the step's
# cgroup cpuset (PLAN_ARGS, --np added), inside it; the cpuset is WANT_SET (Slurm's rule).
placed() {
  local name=$1 args=$2 plan=$3 want_set=$4 got sets want np
  got=$(run $args bash "$work/task.sh" 2>"$work/err" | sort -n)
  sets=$(awk '{print $3}' <<<"$got" | sort -u)
  np=$(grep -c . <<<"$got")
  want=""
  if [ "$(wc -l <<<"$sets")" = 1 ] && [ "$sets" != none ]; then
    want=$(plan_lines --topology "$xml" --restrict "$sets" $plan --np "$np" | awk '{print $1, $3}')
  fi
  if [ -n "$got" ] && [ "$(expand "$sets")" = "$(expand "$want_set")" ] &&
    [ "$(awk '{print $1, $2}' <<<"$got")" = "$want" ]; then
    ok "$name: Slurm's CPUs $sets; bound as lama plan --restrict $sets says"
  else not_ok "$name" "srun $args" "got (rank affinity cpuset):" "$got" "want cpuset $want_set, bindings:" "$want" "$(cat "$work/err")"; fi
}

cluster LAMA_SANDBOX_NODES=1 LAMA_SANDBOX_NODE="CPUs=$n" LAMA_SANDBOX_SELECT_PARAMS=CR_CPU \
  LAMA_SANDBOX_CGROUP=1 "$smt"
release=$(srun --version | awk '{print $2}')
echo "# Slurm $release: CPUs=$n alone, CR_CPU, task/cgroup: Slurm's core c is the c-th hardware thread"
placed "CPUs= alone: -n1" "-n1 --lama-map=hcsbn --lama-bind=1h" "--map hcsbn --bind 1h" 0
placed "CPUs= alone: -n$n, one per thread" "-n$n --lama-map=hcsbn --lama-bind=1h" \
  "--map hcsbn --bind 1h" "0-$((n - 1))"
placed "CPUs= alone: -n1 -c2" "-n1 -c2 --lama-map=csbnh --lama-bind=1c" "--map csbnh --bind 1c" 0-1
# Without slurmd's cache each step reads slurm.conf itself.
plugstack "required $plugin cache=none"
placed "CPUs= alone, no topology cache: -n$n" "-n$n --lama-map=hcsbn --lama-bind=1h" \
  "--map hcsbn --bind 1h" "0-$((n - 1))"
plugstack "required $plugin"
# A second step beside a running one: Slurm gives it the next thread, which hwloc's core 0 holds.
out=$(timeout 60 salloc -n2 -N1 bash -c "
  srun -n1 --exact sleep 3 &
  sleep 1
  srun -n1 --exact --lama-map=hcsbn --lama-bind=1h bash $work/task.sh
  wait" 2>"$work/err")
read -r _ aff set <<<"$out"
if [ "${set:-}" = 1 ] && [ "$aff" = 1 ]; then ok "CPUs= alone: a step beside another gets Slurm's second thread (1), bound there"
else not_ok "CPUs= alone: the second step" "$out" "$(cat "$work/err")"; fi

echo "# Slurm $release: CPUs=$n alone, task/affinity without cgroups: lama binds inside the CPUs Slurm binds the same step to"
cluster LAMA_SANDBOX_NODES=1 LAMA_SANDBOX_NODE="CPUs=$n" LAMA_SANDBOX_TASK_PLUGIN=task/affinity "$smt"
for shape in "-n1" "-n1 -c2" "-n$n"; do
  slurm=$(run $shape --cpu-bind=threads bash "$work/task.sh" 2>/dev/null | sort -n)
  lama_=$(run $shape --lama-map=csbnh --lama-bind=1c bash "$work/task.sh" 2>"$work/err" | sort -n)
  allowed=$(awk '{print $2}' <<<"$slurm" | paste -sd, -)
  bad=""
  while read -r rank aff _; do
    [ -n "$rank" ] || continue
    for c in $(expand "$aff" | tr , ' '); do
      [[ ",$(expand "$allowed")," == *",$c,"* ]] || bad+="task $rank on CPU $c; "
    done
  done <<<"$lama_"
  if [ -n "$slurm" ] && [ "$(grep -c . <<<"$lama_")" = "$(grep -c . <<<"$slurm")" ] && [ -z "$bad" ]; then
    ok "CPUs= alone without cgroups, $shape: every task inside the CPUs Slurm binds the step to ($allowed)"
  else not_ok "CPUs= alone without cgroups, $shape" "Slurm's --cpu-bind=threads:" "$slurm" "lama:" "$lama_" "$bad" "$(cat "$work/err")"; fi
done

# 22.05 and 23.02 number a core's threads by the configured threads per core (core c is the
# c-th thread); 23.11 and later by the hardware's (core c is hwloc core c's first thread).
first=$(seq -s, 0 2 $((n - 1)))
[ "$(printf '%s\n' 23.11 "$release" | sort -V | head -n 1)" = 23.11 ] || first="0-$((n / 2 - 1))"
echo "# Slurm $release: ThreadsPerCore=1 declared on cores of two threads, task/cgroup: Slurm's cores are $first"
cluster LAMA_SANDBOX_NODES=1 LAMA_SANDBOX_NODE="Sockets=1 CoresPerSocket=$((n / 2)) ThreadsPerCore=1" \
  LAMA_SANDBOX_CGROUP=1 "$smt"
placed "ThreadsPerCore=1: -n$((n / 2))" "-n$((n / 2)) --lama-map=csbnh --lama-bind=1h" "--map csbnh --bind 1h" "$first"

echo "# Slurm $release: CR_Socket_Memory, task/cgroup: a job holds whole sockets"
cluster LAMA_SANDBOX_NODES=1 LAMA_SANDBOX_SELECT_PARAMS=CR_Socket_Memory LAMA_SANDBOX_MEMORY=1000 \
  LAMA_SANDBOX_CGROUP=1 "$smt" LAMA_SANDBOX_TOPOLOGY="$xml"
placed "CR_Socket_Memory: -n1 --mem=100" "-n1 --mem=100 --lama-map=csbnh --lama-bind=1c" "--map csbnh --bind 1c" "0-$((n - 1))"
done_testing
