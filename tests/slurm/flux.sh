#!/usr/bin/env bash
# Flux started by srun inside a Slurm allocation, with lama in both layers: the SPANK plugin
# (here with the site's policy=auto, and with SLURM_LAMA_* variables) must leave the broker step
# alone, so that the instance spans the whole allocation, and lama's Flux plugin then places the
# instance's jobs as srun places the same request; so does lama exec in a job without the plugin.
# Usage: tests/slurm/flux.sh LAMA_BINARY PLUGIN_SO FLUX_PLUGIN_SO FLUX_PREFIX
#   (restarts the cluster; the caller stops it)
set -uo pipefail
flux_plugin=$(realpath "$3")
flux=$4/bin/flux
source "$(dirname "$0")/lib.sh" "$1" "$2"

cluster
echo "# Slurm $(srun --version | awk '{print $2}'): srun ... flux start, lama on in both layers"
echo "plugin.load { file = \"$flux_plugin\", conf = { cache = \"$work/cache-%u\" } }" > "$work/lama.lua"
all_cpus=0-$(($(nproc) - 1))
# Inside the instance: each broker's view (run on every node by flux exec), then one job placed
# by lama's Flux plugin, each task's CPUs.
# exit-timeout=none: a task slower than the others under load (one lama exec asking Flux for
# the job's map) is waited for, not killed 30 s after the first task ends (Flux's default, met
# once in a loaded run); salloc's 300 s bound stays.
cat > "$work/inside.sh" <<EOF
"$flux" exec -r all sh -c 'echo "broker \$(hostname) \$(awk "/^Cpus_allowed_list/ {print \\\$2}" /proc/self/status) \${LAMA_CPUS:-none} \${OMP_NUM_THREADS:-none} \${TASK_MAP:-none}"'
echo "cores \$("$flux" resource list -no '{ncores}' -s all)"
"$flux" run -N3 -n6 -o exit-timeout=none -o userrc="$work/lama.lua" -o lama.policy=auto -o lama.mem=local sh -c 'echo "task \$FLUX_TASK_RANK \$(hostname) \$(awk "/^Cpus_allowed_list/ {print \\\$2}" /proc/self/status) \${OMP_NUM_THREADS:-}/\${OMP_PLACES:-}/\$(awk "NR == 1 {print \\\$2}" /proc/self/numa_maps)"'
# The same job without the plugin, each task run by lama exec (which asks flux for the job's map).
PATH=$(dirname "$flux"):\$PATH "$flux" run -N3 -n6 -o exit-timeout=none "$lama" exec --mem local -- sh -c 'echo "exec \$FLUX_TASK_RANK \$(hostname) \$(awk "/^Cpus_allowed_list/ {print \\\$2}" /proc/self/status) \$TASK_MAP \${OMP_NUM_THREADS:-}/\${OMP_PLACES:-}/\$(awk "NR == 1 {print \\\$2}" /proc/self/numa_maps)"'
EOF
# How srun places the same request in an allocation alike.
timeout -s KILL 120 salloc -N3 --exclusive srun -N3 -n6 --lama-policy=auto bash -c \
  'echo "task $SLURM_PROCID $(hostname) $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status)"' >"$work/srun" 2>&1
by_node() { awk '$1 == "task" {print $3, $4}' | sort; }

flux_case() {
  local how=$1 out brokers cores bad=""
  shift
  # Into a file, not a pipe: a salloc killed by the timeout leaves its srun behind, which would
  # hold a pipe open for ever; its job is cancelled then.
  timeout -s KILL 300 env "$@" salloc -N3 --exclusive srun -N3 --ntasks-per-node=1 --mpi=pmi2 \
    "$flux" start bash "$work/inside.sh" >"$work/case.out" 2>&1 || scancel --user=root >/dev/null 2>&1
  out=$(cat "$work/case.out")
  brokers=$(grep '^broker ' <<<"$out")
  [ "$(wc -l <<<"$brokers")" = 3 ] || bad+="$(wc -l <<<"$brokers") brokers reported; "
  while read -r _ host cpus lcpus omp map; do
    [ "$cpus" = "$all_cpus" ] || bad+="broker on $host bound to $cpus, not the node's $all_cpus; "
    [ "$lcpus $omp $map" = "none none none" ] || bad+="broker on $host has LAMA_CPUS=$lcpus OMP_NUM_THREADS=$omp TASK_MAP=$map; "
  done <<<"$brokers"
  cores=$(awk '$1 == "cores" {print $2}' <<<"$out")
  [ "$cores" = $((3 * $(nproc))) ] || bad+="the instance has $cores cores, not the allocation's $((3 * $(nproc))); "
  [ "$(grep -c "runs Flux's brokers" <<<"$out")" = 1 ] || bad+="lama's note on the broker step is not said once; "
  # Each task's CPUs, OpenMP threads and places, and memory policy, rank by rank.
  [ "$(awk '$1 == "exec" {print $2, $3, $4, $6}' <<<"$out" | sort -n)" = "$(awk '$1 == "task" {print $2, $3, $4, $5}' <<<"$out" | sort -n)" ] ||
    bad+="lama exec's tasks (rank host cpus omp/places/memory): $(awk '$1 == "exec" {print $2, $3, $4, $6}' <<<"$out" | sort -n | paste -sd';'), the plugin's: $(awk '$1 == "task" {print $2, $3, $4, $5}' <<<"$out" | sort -n | paste -sd';'); "
  [ "$(awk '$1 == "exec" {print $5}' <<<"$out" | sort -u)" = '{"version":1,"map":[[0,3,2,1]]}' ] ||
    bad+="lama exec's TASK_MAP: $(awk '$1 == "exec" {print $5}' <<<"$out" | sort -u | paste -sd' '); "
  [ "$(by_node <<<"$out")" = "$(by_node < "$work/srun")" ] || bad+="the Flux job's tasks (host cpus): $(by_node <<<"$out" | paste -sd';'), srun's: $(by_node < "$work/srun" | paste -sd';'); "
  if [ -z "$bad" ] && [ -n "$(by_node < "$work/srun")" ]; then
    ok "srun flux start with $how: the brokers span the allocation unbound, without lama's variables (said once), a flux run -o lama.policy=auto job is placed as srun --lama-policy=auto places it, and lama exec places a job without the plugin alike (CPUs, OpenMP variables, memory policy), with Flux's TASK_MAP"
    echo "# with $how, the Flux job's tasks (host cpus): $(by_node <<<"$out" | paste -sd';' -)"
  else not_ok "srun flux start with $how" "$bad" "$out"; fi
}
plugstack "required $plugin policy=auto"
flux_case "the site's policy=auto" LAMA_NOTHING=
plugstack "required $plugin"
flux_case "SLURM_LAMA_POLICY=auto" SLURM_LAMA_POLICY=auto
done_testing
