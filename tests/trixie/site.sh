#!/usr/bin/env bash
# A Debian 13 site as the admin guide sets it up, run inside the trixie guest as
# root after tests/guest/suite.sh (which configured Slurm under Debian's own units): the package
# built for 24.11 installed with dpkg -i and enabled by the admin guide's walk-through, as
# written there (tests/examples.py script NAME); the 22.05 package refused; lama loaded twice (an include added again) acting once and saying so once.
# Usage: site.sh TOP DEB OLD_DEB
#   DEB the package built on Debian 13 (contrib/trixie-build.sh), OLD_DEB one built for 22.05.
# Prints one "ok - ..." or "not ok - ..." line per check.
set -uo pipefail
top=$1 deb=$2 old=$3
export SLURM_CONF=/etc/slurm/slurm.conf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$top/tests/tap.sh"
release=$(dpkg-query -W -f='${Version}' slurm-client)
tap_prefix="[Debian 13, Slurm $release] "
plugstack=/etc/slurm/plugstack.conf
include='include /etc/slurm/plugstack.conf.d/*.conf'
idle() { for _ in $(seq 120); do [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && return 0; sleep 1; done; return 1; }
# Runs the block of the README or a guide marked `script: NAME`, as written, from a folder that
# holds the package where the docs build it (target/package/).
script() {
  python3 "$top/tests/examples.py" script "$1" > "$work/$1.sh" &&
    (cd "$work" && bash -eo pipefail "$1.sh") >"$work/$1.out" 2>&1
}
mkdir -p "$work/target/package"
cp "$deb" "$work/target/package/"

# The suite's last case changed the task plugins and specialized a core, and left Slurm
# stopped; Debian's plugstack.conf (kept by run.sh) and no lama, as before the package.
sed -i -E 's|^TaskPlugin=.*|TaskPlugin=task/cgroup,task/affinity|; s/ (CoreSpecCount|CpuSpecList)=[0-9,]+//' "$SLURM_CONF"
cp /root/plugstack.conf.debian "$plugstack"
dpkg -P lama-slurm >/dev/null 2>&1
systemctl start munge slurmctld slurmd
idle || { not_ok "Slurm under Debian's units is idle" "$(sinfo 2>&1)"; exit 0; }

# The 22.05 package: refused, saying why, nothing configured.
dpkg -i "$old" >"$work/old.log" 2>&1
rc=$?
state=$(dpkg-query -W -f='${db:Status-Abbrev}' lama-slurm 2>/dev/null)
if [ $rc -ne 0 ] && grep -q "lama-slurm depends on slurm-client (<< 22.06~)" "$work/old.log" && [ "${state:0:2}" != ii ]; then
  ok "dpkg -i of the package built for 22.05 is refused: $(grep -m1 'Version of slurm-client' "$work/old.log" | sed 's/^ *//')"
else not_ok "dpkg -i of the 22.05 package (rc $rc, state '$state')" "$(cat "$work/old.log")"; fi
dpkg -P lama-slurm >/dev/null 2>&1

# One step placed by lama as lama plan says, TASK_MAP too, srun's stderr exactly ERR; prints the
# bindings and TASK_MAP.
step() {
  local what=$1 err=$2 got want map
  srun -n4 -c2 --lama-map=csbnh --lama-bind=1c bash -c 'echo "$SLURM_PROCID $(awk "/^Cpus_allowed_list/ {print \$2}" /proc/self/status) $TASK_MAP"' \
    >"$work/step.out" 2>"$work/step.err"
  got=$(sort -n "$work/step.out")
  want=$(lama plan --this-machine --np 4 --map csbnh --bind 1c |
    awk '/^  rank / {print $2, $NF} /^TASK_MAP=/ {sub("TASK_MAP=", ""); m = $0} END {print m > "/dev/stderr"}' 2>"$work/map" | sort -n)
  map=$(cat "$work/map")
  if [ -n "$want" ] && [ "$got" = "$(awk -v m="$map" '{print $0, m}' <<<"$want")" ] && [ "$(cat "$work/step.err")" = "$err" ]; then
    ok "$what: srun -n4 -c2 --lama-map=csbnh --lama-bind=1c binds every task as lama plan says, TASK_MAP too; srun's stderr: ${err:-empty}"
    echo "# rank, CPUs, TASK_MAP:"; sed 's/^/#   /' <<<"$got"
  else not_ok "$what" "got:" "$got" "want (TASK_MAP $map):" "$want" "stderr:" "$(cat "$work/step.err")"; fi
}
# --lama-policy=auto on a step whose job sets no OpenMP variable: nothing said.
quiet_policy() {
  local out
  out=$(srun -n2 --lama-policy=auto true 2>&1)
  if [ -z "$out" ]; then ok "$1: srun -n2 --lama-policy=auto says nothing"
  else not_ok "$1: srun -n2 --lama-policy=auto" "$out"; fi
}

# The admin guide's walk-through (the one place install steps are written; the README links
# to it), from a node without the package.
ran=""
for s in site-install site-enable site-restart; do script "$s" || ran+="$s failed: $(cat "$work/$s.out"); "; done
idle || ran+="the node is not idle after the restart; "
script site-check
check=$(cat "$work/site-check.out")
tasks=$(grep -c '^lama: task [0-3] ' <<<"$check")
if [ -z "$ran" ] && grep -q -- '--lama-map' <<<"$check" && grep -q -- '--lama-policy' <<<"$check" && [ "$tasks" = 4 ] \
  && grep -qxF "$(lama explain --srun | head -n 1)" <<<"$check" \
  && grep -qF "invalid --lama-bind '2q'" <<<"$check"; then
  ok "the admin guide's walk-through (install, enable, restart, check) as written: the options listed, srun --lama-help's guide (as lama explain --srun), one line per task, a bad value stopped in srun"
  sed 's/^/#   /' <<<"$check"
else not_ok "the admin guide's walk-through" "$ran" "$check"; fi
if [ "$(dpkg-query -W -f='${db:Status-Abbrev}' lama-slurm)" = "ii " ] && [ "$(grep -cxF "$include" "$plugstack")" = 1 ] &&
  grep -q '^required /usr/lib/.*/slurm-wlm/lama.so' /etc/slurm/plugstack.conf.d/lama.conf; then
  ok "after the walk-through: the package installed with every dependency satisfied, the snippet enabled, Debian's include kept once"
else not_ok "after the walk-through" "$(cat "$plugstack")" "$(dpkg-query -W -f='${db:Status-Abbrev}' lama-slurm 2>&1)"; fi
step "installed by the admin guide" ""
quiet_policy "installed by the admin guide"

# lama loaded twice: the include added again, as the README once did. The first load acts, the
# second registers nothing (Slurm would warn of every option) and srun says so once.
twice="srun: lama: plugstack.conf loads lama more than once (a second line naming it, or plugstack.conf.d included twice); only the first line acts, with its own arguments: remove the others"
echo "$include" >> "$plugstack"
before=$(grep -c 'provided by both' /var/log/slurm/slurmd.log)
step "plugstack.conf.d included twice" "$twice"
after=$(grep -c 'provided by both' /var/log/slurm/slurmd.log)
if [ "$before" = "$after" ]; then ok "plugstack.conf.d included twice: slurmstepd registers no option twice (slurmd's log)"
else not_ok "plugstack.conf.d included twice: slurmd's log warns of options provided twice" "$(grep 'provided by both' /var/log/slurm/slurmd.log | tail -n 3)"; fi
out=$(srun -n2 --lama-policy=auto true 2>&1)
if [ "$out" = "$twice" ]; then ok "plugstack.conf.d included twice: srun -n2 --lama-policy=auto says only that"
else not_ok "plugstack.conf.d included twice, --lama-policy=auto" "$out"; fi
cp /root/plugstack.conf.debian "$plugstack"

dpkg -P lama-slurm >/dev/null 2>&1
cp /root/plugstack.conf.debian "$plugstack"
systemctl stop slurmd slurmctld
done_testing
