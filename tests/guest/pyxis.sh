# pyxis + enroot on the guest's Slurm (issue 76), sourced by tests/guest/suite.sh (its run,
# plan_tasks, wait_idle, release, plugin and work) when LAMA_GUEST_PYXIS names a spank_pyxis.so built
# against that Slurm and LAMA_GUEST_ENROOT contrib/enroot-build.sh's prefix (shared read-only).
# The sandboxes' cases (tests/containers/pyxis.sh) on a distribution's Slurm run by its own units:
# both plugstack.conf orders (slurmd restarted for each, as a site would), as root and as
# nobody, enroot on slurmd's PATH through /usr/local/bin as a site that installs it there would
# have it.
source "$top/tests/containers/lib.sh"
pyxis_started=$(date +%s)
ln -sf "$LAMA_GUEST_ENROOT"/bin/enroot* /usr/local/bin/
pyxis_images "$(hostname)"
step=(-n2 -c2 --lama-map=csbnh --lama-bind=1c --lama-mem=local --lama-threads=auto)
# The step's CPUs (its cgroup's), and lama plan's for its tasks over them.
cpus=$(run "${step[@]}" sh -c 'cg=$(cut -d: -f3 /proc/self/cgroup); cat "/sys/fs/cgroup${cg%/user/task_*}/cpuset.cpus.effective"' 2>"$work/err" | head -n 1)
mapfile -t planned < <(plan_tasks "$cpus" --np 2 --map csbnh --bind 1c | awk '{print $2}')
for order in pyxis-first lama-first; do
  if [ "$order" = pyxis-first ]; then printf 'required %s\nrequired %s\n' "$LAMA_GUEST_PYXIS" "$plugin"
  else printf 'required %s\nrequired %s\n' "$plugin" "$LAMA_GUEST_PYXIS"; fi >/etc/slurm/plugstack.conf
  # As a site does after changing plugstack.conf: slurmd loads pyxis at start (which makes its
  # /run/pyxis) and writes lama's cache again.
  systemctl restart $slurmd
  wait_idle
  for who in root nobody; do
    name="[guest, Slurm $release] pyxis $order, as $who"
    host=$(lines "$who" "${step[@]}")
    if outside_as_planned "$host" 2 2; then
      ok "$name: outside a container the step is lama plan's on its CPUs $cpus (CPUs, LAMA_CPUS), memory bound, TASK_MAP and OpenMP set"
    else not_ok "$name: the step outside a container (ranks off the plan:${off_plan:-none}; plan ${planned[*]} on $cpus)" "$host" "$(cat "$work/err")"; continue; fi
    pyxis_cases "$order" "$who" "$name" "$host"
  done
done
plugstack "required $plugin"
rm -f /usr/local/bin/enroot*
# slurmd as the cases after these found it: without pyxis.
systemctl restart $slurmd
wait_idle
echo "# $(basename "$(dirname "$LAMA_GUEST_PYXIS")") and enroot $("$LAMA_GUEST_ENROOT/bin/enroot" version) on Slurm $release: $(( $(date +%s) - pyxis_started )) s"
