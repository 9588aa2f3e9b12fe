#!/usr/bin/env bash
# What a lama failure does to the node, on the real sandbox cluster (docs/admin-guide.md, "What a
# failure does to the node"): a user's bad option, in srun or in a batch job, and a damaged
# topology cache never drain a node; a plugstack.conf broken on a running node fails a batch
# job's start as the admin chose: from Slurm 25.05, `init-failure=node` (Slurm's default) drains
# the node and requeues the job, `init-failure=job` fails the job and keeps the node; lama loaded
# twice acts once and says so once; another plugin failing beside lama (tests/slurm/spank-fail.c)
# ends a batch job and its node as it does without lama.
# Usage: tests/slurm/failures.sh LAMA_BINARY PLUGIN_SO
#   (LAMA_SANDBOX and LAMA_SANDBOX_PORT name the cluster this script restarts and leaves running)
set -uo pipefail
source "$(dirname "$0")/lib.sh" "$@"
report='echo "$SLURM_PROCID $SLURM_NODEID $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status)"'
want=$(plan_lines --this-machine --nodes 2 --map csbnh --bind 1c --np 4)
job_state() { scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
# Waits until job $1 leaves the states that come before its end; prints its state.
settle() {
  local s
  for _ in $(seq 120); do
    s=$(job_state "$1")
    case $s in PENDING | CONFIGURING | RUNNING | COMPLETING | "") sleep 0.5 ;; *) break ;; esac
  done
  echo "$s"
}
cluster
release=$(srun --version | awk '{print $2}')
read -r major minor _ <<<"${release//./ }"
modes=$([ $((10#$major * 100 + 10#$minor)) -ge 2505 ] && echo yes || echo no)

# --- lama loaded twice -------------------------------------------------------------------------
plugstack "required $plugin"
cat "$LAMA_SANDBOX/plugstack.conf" "$LAMA_SANDBOX/plugstack.conf" > "$work/twice"
cp "$work/twice" "$LAMA_SANDBOX/plugstack.conf"
before=$(cat "$LAMA_SANDBOX"/log/slurmd-*.log | grep -c 'provided by both')
got=$(run -N2 -n4 -m block --lama-map=csbnh --lama-bind=1c bash -c "$report" 2>"$work/err" | sort -n)
err=$(cat "$work/err")
policy=$(run -N1 -n2 --lama-policy=auto true 2>&1)
after=$(cat "$LAMA_SANDBOX"/log/slurmd-*.log | grep -c 'provided by both')
if [ "$got" = "$want" ] && [ "$(grep -c 'loads lama more than once' <<<"$err")" = 1 ] && [ "$(wc -l <<<"$err")" = 1 ] \
  && [ "$policy" = "$err" ] && [ "$before" = "$after" ]; then
  ok "plugstack.conf loading lama twice: bindings as planned, srun says so once ($err), no option registered twice (srun, slurmd's log), the policy's step says nothing else"
else not_ok "lama loaded twice" "got:" "$got" "want:" "$want" "srun said:" "$err" "the policy's step said:" "$policy" "'provided by both' in slurmd's logs: $before, then $after"; fi
plugstack "required $plugin"

# --- a user's bad input never drains a node ----------------------------------------------------
out=$(sbatch -N1 --lama-bind=2q --wrap true 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -qF "invalid --lama-bind '2q'" <<<"$out" && wait_idle; then
  ok "sbatch --lama-bind=2q: refused before submission ($out), every node idle"
else not_ok "sbatch --lama-bind=2q (rc $rc)" "$out" "$(states)"; fi
job=$(sbatch --parsable -N1 -o "$work/bad.out" --wrap 'srun --lama-bind=2q true; SLURM_LAMA_MAP=zz srun true; echo script-ended' 2>&1)
s=$(settle "$job")
if [ "$s" = COMPLETED ] && grep -q script-ended "$work/bad.out" && grep -qF "invalid --lama-bind '2q'" "$work/bad.out" && wait_idle; then
  ok "a batch job whose steps give bad lama options: each step refused in srun, the job ends $s, every node idle ($(states))"
else not_ok "batch job with bad lama options (state $s)" "$(cat "$work/bad.out" 2>&1)" "$(states)"; fi
printf 'not a topology cache\n' > "$work/garbage"
for f in "$LAMA_SANDBOX"/cache/*; do [ -f "$f" ] && cp "$work/garbage" "$f"; done
job=$(sbatch --parsable -N2 -n4 -o "$work/cache.out" --wrap "srun -n4 -m block --lama-map=csbnh --lama-bind=1c bash -c '$report'" 2>&1)
s=$(settle "$job")
got=$(grep -E '^[0-9]+ [0-9]+ ' "$work/cache.out" | sort -n)
if [ "$s" = COMPLETED ] && [ "$got" = "$want" ] && wait_idle; then
  ok "the topology cache damaged on every node: a batch job's step still binds as planned (the node is probed), the job ends $s, every node idle"
else not_ok "damaged cache under a batch job (state $s)" "got:" "$got" "want:" "$want" "$(cat "$work/cache.out" 2>&1)" "$(states)"; fi
cluster

# --- a broken site configuration ---------------------------------------------------------------
# plugstack.conf broken on the running nodes (slurmd read it when it started; every slurmstepd
# reads it anew), while sbatch on a login node still has a good one (a slurm.conf of its own).
sed "s#^PlugStackConfig=.*#PlugStackConfig=$work/login-plugstack.conf#" "$SLURM_CONF" > "$work/login.conf"
plugstack_line=$(cat "$LAMA_SANDBOX/plugstack.conf")
echo "$plugstack_line" > "$work/login-plugstack.conf"
# fate JOB: waits until n1 drains or JOB ends; prints what JOB and n1 came to, then cancels JOB,
# puts lama's line back alone and resumes n1.
fate() {
  local job=$1 s
  for _ in $(seq 60); do
    s=$(job_state "$job")
    [[ $(sinfo -h -n n1 -o %T) == drain* ]] && break
    case $s in FAILED | COMPLETED | NODE_FAIL | CANCELLED) break ;; esac
    sleep 0.5
  done
  sleep 1
  echo "job $(job_state "$job"), restarts $(scontrol show job "$job" | grep -o 'Restarts=[0-9]*' | cut -d= -f2), n1 $(sinfo -h -n n1 -o '%T: %E')"
  scancel "$job" 2>/dev/null
  echo "$plugstack_line" > "$LAMA_SANDBOX/plugstack.conf"
  scontrol update nodename=n1 state=resume 2>/dev/null
  wait_idle
}
broken() {
  local mode=$1
  echo "$plugstack_line polcy=auto${mode:+ init-failure=$mode}" > "$LAMA_SANDBOX/plugstack.conf"
  fate "$(SLURM_CONF=$work/login.conf sbatch --parsable -N1 -w n1 -o /dev/null --wrap true 2>&1)"
}
logged=$(grep -c "unknown argument 'polcy'" "$LAMA_SANDBOX/log/slurmd-n1.log")
default=$(broken "")
said=$(grep -c "unknown argument 'polcy'" "$LAMA_SANDBOX/log/slurmd-n1.log")
job_mode=$(broken job)
echo "# a batch job's slurmstepd finds plugstack.conf broken (required lama, Slurm $release): by default: $default; init-failure=job: $job_mode"
if [ "$said" -gt "$logged" ]; then ok "plugstack.conf broken on a running node: slurmd's log names the bad argument"
else not_ok "plugstack.conf broken: nothing in slurmd-n1.log" "$(tail -n 5 "$LAMA_SANDBOX/log/slurmd-n1.log")"; fi
if [ "$modes" = yes ]; then
  if [[ $default == *"restarts 1"* && $default == *"n1 drain"* && $job_mode == "job FAILED"* && $job_mode == *"n1 idle"* ]]; then
    ok "Slurm $release, a batch job started under a broken plugstack.conf: by default the node drains and the job is requeued; with init-failure=job the job fails and the node stays idle"
  else not_ok "Slurm $release, broken plugstack.conf" "default: $default" "init-failure=job: $job_mode"; fi
else
  if [[ $default == "$job_mode" ]]; then
    ok "Slurm $release (before 25.05, no slurm_spank_init_failure_mode): init-failure= changes nothing: $default"
  else not_ok "Slurm $release, init-failure= should change nothing" "default: $default" "init-failure=job: $job_mode"; fi
fi

# --- another plugin's failure beside lama (the case of SchedMD's test_147_2) --------------------
# A site plugin whose slurm_spank_init fails in slurmstepd (tests/slurm/spank-fail.c) decides a
# batch job's fate as it does alone: with lama beside it (its defaults, and a site's policy=auto)
# the job and the node end the same. From 25.05 its failure is the node's (drain, requeue) or the
# job's (fail, keep the node), as Slurm documents; before, Slurm has one failure.
failer=$work/spank-fail.so
# outcome MODE [LAMA_LINE]: what a batch job and n1 come to with the failing plugin after LAMA_LINE.
outcome() {
  printf '%s\n' ${2:+"$2"} "required $failer $1" > "$LAMA_SANDBOX/plugstack.conf"
  fate "$(sbatch --parsable -N1 -w n1 -o /dev/null --wrap 'srun true' 2>&1)"
}
if ! gcc -shared -fPIC -o "$failer" -I"${LAMA_SLURM_PREFIX:-/usr}/include" "$top/tests/slurm/spank-fail.c" 2>"$work/gcc.err"; then
  not_ok "a failing SPANK plugin built against Slurm $release's headers" "$(cat "$work/gcc.err")"
else
  for mode in $([ "$modes" = yes ] && echo node job || echo job); do
    alone=$(outcome $mode)
    defaults=$(outcome $mode "$plugstack_line")
    auto=$(outcome $mode "$plugstack_line policy=auto")
    case $modes/$mode in
      yes/node) want='job PENDING, restarts 1, n1 drain*' ;;
      yes/job) want='job FAILED, restarts 0, n1 idle*' ;;
      *) want='*' ;;
    esac
    # shellcheck disable=SC2053 # $want is a pattern
    if [ "$defaults" = "$alone" ] && [ "$auto" = "$alone" ] && [[ $alone == $want ]]; then
      ok "another SPANK plugin failing in slurmstepd ($([ "$modes" = yes ] && echo "ESPANK_${mode^^}_FAILURE" || echo ESPANK_ERROR)) beside lama, with its defaults and under policy=auto: the batch job and the node end as with that plugin alone ($alone)"
    else not_ok "another plugin's failure ($mode) beside lama changes its outcome" "alone: $alone" "lama's defaults: $defaults" "policy=auto: $auto" "expected: $want"; fi
  done
fi
done_testing
