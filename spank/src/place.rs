//! One node's tasks placed by a map: how Slurm's own binding options change the step
//! (`lama::slurm::binding`), the step's CPUs on the node (Slurm's cores within what this
//! slurmstepd may use), the map, and the devices each task is handed. The automatic policy is
//! `crate::auto`'s; the decisions themselves are `lama::plugin`'s.

use lama::cache::Detail;
use lama::locality::{Locality, Weights};
use lama::openmp::plan_threads;
use lama::plugin::{choose_devices, place_node, usable_cpus, Placing, SlurmGpus, TaskBinding};
use lama::slurm::gpu_by_id::BoundGpus;
use lama::slurm::node_conf::step_cpus;
use lama::slurm::Beside;
use lama::tiers::MemMode;
use slurm_spank::{LogLevel, SpankHandle};

use crate::{auto, log, node, Devices, Lama, Step};

impl Lama {
    /// How this step is placed on the node, `Err` with why no task may start: the user's and the
    /// site's options, then Slurm's own `--cpu-bind` and `--mem-bind` as srun wrote them for the
    /// step (srun has refused or said what they change before launch). Sets the tasks' memory
    /// policy.
    pub(crate) fn placing(&self, tasks: usize, st: &mut Step) -> Result<Placing, String> {
        let p = self
            .settings
            .placing(&self.user, Some(tasks))
            .map_err(|e| e.to_string())?;
        if p == Placing::LeftAlone {
            return Ok(p);
        }
        // srun found the user asked Slurm's binding for something, and lama for nothing.
        if let Some(asked) = self.slurm_asked.as_ref().filter(|_| !self.user.any()) {
            let note = lama::slurm::stand_aside_note(asked);
            log(LogLevel::Info, &format!("lama: {note}"));
            return Ok(Placing::LeftAlone);
        }
        let lama_mem = self.settings.mem(&self.user).map_err(|e| e.to_string())?;
        let get = |k: &str| crate::room::var(k);
        match auto::slurm_binding(&self.user, lama_mem.is_some(), get) {
            Beside::Place(follow) => {
                // lama's own mode, else Slurm's --mem-bind=local|rank followed on lama's CPUs.
                st.mem_mode = lama_mem.unwrap_or(MemMode::Local);
                st.mem_policy = lama_mem.map(MemMode::policy).or(follow);
                Ok(p)
            }
            Beside::LeaveToSlurm(note) => {
                log(LogLevel::Info, &format!("lama: {note}"));
                Ok(Placing::LeftAlone)
            }
            Beside::Refuse(why) => Err(why),
        }
    }

    /// Places this node's tasks and, when asked for, hands them their devices; the node's hwloc
    /// topology is read once for both.
    pub(crate) fn place(
        &self,
        spank: &SpankHandle,
        req: &lama::Request,
        ranks: &[u32],
        st: &mut Step,
    ) -> std::result::Result<(), String> {
        let counts = self.settings.devices(&self.user).map_err(|e| e.to_string());
        let want_devices = matches!(counts, Ok(c) if c != (0, 0));
        let get = |k: &str| crate::room::var(k);
        // Slurm's GPUs stay where lama chooses none: each task works out which it got, to say
        // when lama placed it away from them.
        let slurm_gpus = matches!(counts, Ok((_, 0)))
            && ["SLURM_STEP_GPUS", "SLURM_JOB_GPUS"]
                .iter()
                .any(|k| get(k).is_some());
        let (topo, cpus, loc) = self.step_node(spank, st, want_devices || slurm_gpus)?;
        // srun's -c implies --exact: a step may hold fewer CPUs than a wide binding needs.
        let exact = || {
            let per_task = get("SLURM_CPUS_PER_TASK");
            lama::slurm::exact_note(per_task.as_deref(), ranks.len(), cpus.len())
        };
        let limits = lama::slurm::task_limits(
            get("SLURM_NTASKS_PER_CORE").as_deref(),
            get("SLURM_NTASKS_PER_SOCKET").as_deref(),
        );
        // Slurm's own per-core and per-socket task counts hold inside the node where the step's
        // CPUs allow them; where Slurm itself gave fewer cores or sockets, they cannot, and
        // the step is placed without them, said once.
        let limited = (!limits.is_empty()).then(|| {
            let mut r = req.clone();
            r.mppr.extend(limits.iter().copied());
            place_node(&topo, &cpus, &r, ranks, st.verbose)
        });
        st.tasks = match limited {
            Some(Ok(tasks)) => tasks,
            other => {
                let tasks = place_node(&topo, &cpus, req, ranks, st.verbose).map_err(|e| {
                    match exact() {
                        Some(note) => format!("{e} ({note})"),
                        None => e.to_string(),
                    }
                })?;
                if let (Some(Err(e)), None) = (other, &st.warning) {
                    let l: Vec<String> = limits.iter().map(ToString::to_string).collect();
                    st.warning = Some(format!(
                        "Slurm's --ntasks-per-core/--ntasks-per-socket (MPPR {}) cannot hold on the CPUs Slurm gave this step on node {} {} ({e}); its tasks are placed without them",
                        l.join(","),
                        st.nodeid,
                        st.host
                    ));
                }
                tasks
            }
        };
        let uses_cores = req.uses_level(lama::level::Level::Core);
        if uses_cores && topo.threads_as_cores() && st.warning.is_none() && st.nodeid == 0 {
            st.warning = Some(format!(
                "node {} has no cores in hwloc's description: each hardware thread counts as a core",
                st.host
            ));
        }
        if shares_cpus(&st.tasks) && st.warning.is_none() {
            if let Some(note) = exact() {
                st.warning = Some(format!(
                    "tasks of this step share CPUs on node {} {}: {note}",
                    st.nodeid, st.host
                ));
            }
        }
        st.lap("placement");
        if let Some(t) = self
            .settings
            .threads(&self.user)
            .map_err(|e| e.to_string())?
        {
            st.omp = st
                .tasks
                .iter()
                .map(|task| {
                    plan_threads(&topo, task.rank, &task.cpus, t.threads, t.bind)
                        .map(|p| p.env())
                        .map_err(|e| e.to_string())
                })
                .collect::<std::result::Result<_, _>>()?;
            st.omp_replace = t.replace;
            st.lap("OpenMP places");
        }
        let counts = counts?;
        if slurm_gpus {
            st.gpu_domains = Some(lama::policy::domain_cpus(&topo));
            st.bound_gpus = loc.as_ref().and_then(|l| BoundGpus::read(l, get));
        }
        if let Some(loc) = loc.filter(|_| want_devices) {
            let weights = self.weights(&loc)?;
            // Checked here with this node's own devices, so that a node without enough of them
            // fails the step before any task starts; each task chooses again with its GPUs.
            let visibility = self
                .settings
                .gpu_visibility(&self.user)
                .map_err(|e| e.to_string())?;
            let chosen = choose_devices(&loc, &st.tasks, counts, weights.as_ref(), |_| None)
                .map_err(|e| e.to_string())?
                .sharing(visibility);
            st.devices = Some(Devices {
                loc,
                weights,
                counts,
                visibility,
                chosen: (!chosen.depends_on_task_env()).then_some(chosen),
                policy: false,
            });
            st.lap("devices");
        }
        Ok(())
    }
    /// The site's device weights (`weights=FILE`) for this node's devices.
    pub(crate) fn weights(&self, loc: &Locality) -> std::result::Result<Option<Weights>, String> {
        let Some(path) = &self.settings.weights else {
            return Ok(None);
        };
        let text = lama::limits::read_text(path, lama::limits::MAX_WEIGHTS_BYTES)
            .map_err(|e| format!("cannot read weights file {}: {e}", path.display()))?;
        Weights::parse(&text, loc)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The node's topology, the CPUs of the step there, and the node's devices when asked for.
    pub(crate) fn step_node(
        &self,
        spank: &SpankHandle,
        st: &mut Step,
        devices: bool,
    ) -> std::result::Result<(lama::NodeTopology, Vec<u32>, Option<Locality>), String> {
        // Memory binding reads the node's NUMA nodes from the same source.
        let mem = st.mem_policy.is_some();
        let detail = match (devices, mem) {
            (true, _) => Detail::Devices,
            (false, true) => Detail::Numa,
            (false, false) => Detail::Topology,
        };
        let mut found = node::find(&self.settings, &st.host, detail)?;
        let cores = spank
            .step_alloc_cores()
            .map_err(|e| format!("Slurm did not say which cores the step has: {e}"))?;
        // Slurm's cores, and of those only CPUs this slurmstepd may use (its cgroup's cpuset).
        // --hint=nomultithread and --threads-per-core=N: only the first N threads of each core.
        // A value srun's own --hint dropped (srun said so) is the job's, not the step's.
        let threads = crate::room::var("SLURM_THREADS_PER_CORE")
            .filter(|_| !self.all_threads)
            .and_then(|v| v.trim().parse::<u32>().ok());
        let rule = node::slurm_cores_of(&found, &st.host);
        let mut cpus = step_cpus(&found.topology, cores, rule.as_ref(), threads);
        // A cache of another machine than the one Slurm describes (cores it lacks) is a miss:
        // the step probes the machine, as without a cache, rather than placing from it.
        if let (Err(e), true) = (&cpus, found.source == node::FROM_CACHE) {
            log(
                LogLevel::Error,
                &format!("lama: the topology cache does not describe the cores Slurm gave the step ({e}); probing the machine instead"),
            );
            found = node::probed(detail)?;
            let rule = node::slurm_cores_of(&found, &st.host);
            cpus = step_cpus(&found.topology, cores, rule.as_ref(), threads);
        }
        let cpus = cpus.map_err(|e| e.to_string())?;
        let usable = node::usable(&found, &cpus)?;
        let mut cpus = usable_cpus(cpus, &usable).map_err(|e| e.to_string())?;
        drop(usable);
        st.lap(found.source);
        if mem {
            st.numa = found.numa;
        }
        // The job's --thread-spec threads stay in the step's cores and cpuset; Slurm's own
        // automatic binding keeps tasks off them, and so does lama (Slurm honoured the option
        // only if the job holds the whole node).
        let spec = crate::room::var(lama::slurm::THREAD_SPEC_VAR);
        let whole = || {
            spank
                .job_alloc_cores()
                .is_ok_and(|c| lama::slurm::job_holds_node(&found.topology, c))
        };
        if let Some(n) = spec
            .and_then(|v| v.trim().parse::<u32>().ok())
            .filter(|_| whole())
        {
            let reserved = lama::slurm::reserved_threads(&found.topology, n);
            let before = cpus.len();
            cpus.retain(|c| reserved.binary_search(c).is_err());
            if cpus.is_empty() && before > 0 {
                return Err(format!(
                    "every CPU of this step on {} is one of the {n} hardware thread(s) the job keeps for the system (--thread-spec={n}: cpus {})",
                    st.host,
                    lama::idset::format_list(&reserved)
                ));
            }
        }
        Ok((found.topology, cpus, found.locality))
    }
}

impl Devices {
    /// Task `i`'s device variables: the node's tasks share the devices this task may use (the
    /// GPUs Slurm wrote into its environment), so tasks that see the same GPUs agree.
    pub(crate) fn for_task(
        &self,
        tasks: &[TaskBinding],
        i: usize,
    ) -> std::result::Result<Vec<(String, String)>, String> {
        if let Some(chosen) = &self.chosen {
            return Ok(chosen.env(&self.loc, i));
        }
        let all = choose_devices(
            &self.loc,
            tasks,
            self.counts,
            self.weights.as_ref(),
            crate::room::var,
        )
        .map_err(|e| e.to_string())?
        .sharing(self.visibility);
        Ok(all.env(&self.loc, i))
    }
}

impl Devices {
    /// The automatic policy's devices for task `i`, within the GPUs Slurm left the task (read
    /// from its environment, which Slurm's GPU plugin has just written): where Slurm binds GPUs
    /// task by task, the task keeps Slurm's GPUs, and `Err` says why (with lama's NICs).
    pub(crate) fn for_policy_task(
        &self,
        i: usize,
    ) -> Option<std::result::Result<Vec<(String, String)>, SlurmGpus>> {
        let chosen = self.chosen.as_ref().filter(|_| self.policy)?;
        Some(chosen.env_within_task_gpus(&self.loc, i, crate::room::var))
    }
}

/// Whether two of a node's tasks were given a CPU in common (`--lama-oversubscribe`).
fn shares_cpus(tasks: &[TaskBinding]) -> bool {
    let mut all: Vec<u32> = tasks.iter().flat_map(|t| t.cpus.iter().copied()).collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    all.len() < n
}
