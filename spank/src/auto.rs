//! The automatic policy (`--lama-policy=auto`, `policy=auto`) and memory binding
//! (`--lama-mem=local`) in the plugin: reading what the policy needs from Slurm (the step's
//! CPUs and GPUs on the node, `--cpus-per-task`), and Slurm's own binding options beside lama's.
//! The placement itself is `lama::policy`'s.

use lama::locality::{allowed_gpus, gpus_per_task, may_name_gpus, named_gpus, GPU_VARIABLES};
use lama::plugin::{auto_devices, auto_threads, auto_workers, place_auto, Options};
use lama::policy::gpus_of;
use lama::slurm::gpu_by_id::BoundGpus;
use lama::slurm::Beside;

use crate::{affinity, Devices, Lama, Step};
use slurm_spank::SpankHandle;

/// What Slurm's own `--cpu-bind` and `--mem-bind` for the step (`get` reads the variables srun
/// writes for them: srun's own environment before launch, the step's in slurmstepd) change for a
/// step lama places ([`lama::slurm::binding`]).
/// `lama_mem` says whether `--lama-mem=local` (or the site's `mem=local`) binds the memory.
pub fn slurm_binding(
    user: &Options,
    lama_mem: bool,
    get: impl Fn(&str) -> Option<String>,
) -> Beside {
    lama::slurm::beside(
        get("SLURM_CPU_BIND_TYPE").as_deref(),
        get("SLURM_MEM_BIND_TYPE").as_deref(),
        get("SLURM_MEM_BIND_PREFER").as_deref(),
        user.asked_placement().as_deref(),
        lama_mem,
    )
}

/// Said once when the policy's tasks run more OpenMP threads than they have hardware threads.
fn crowded_note(p: &lama::openmp::ThreadPlan, tasks: usize, pus: usize, st: &Step) -> String {
    format!(
        "{} OpenMP threads per task do not fit on node {} {}: its {tasks} task(s) share the step's {pus} hardware thread(s) there, as few as {} each, so threads share them (ask for fewer threads or tasks to give each thread its own)",
        p.threads(),
        st.nodeid,
        st.host,
        p.places.len()
    )
}

impl Lama {
    /// Places this node's tasks with the automatic policy, with their GPUs (those Slurm gave
    /// the step, read from the step's environment, which Slurm's GPU plugin writes before
    /// `user_init`), `--lama-nics` and their OpenMP threads.
    #[cold]
    #[inline(never)]
    pub(crate) fn place_auto(
        &self,
        spank: &SpankHandle,
        ranks: &[u32],
        st: &mut Step,
    ) -> Result<(), String> {
        let get = |k: &str| crate::room::var(k);
        let (nics, _) = self
            .settings
            .devices(&self.user)
            .map_err(|e| e.to_string())?;
        // A step whose variables name no GPU (most steps) and that asks for no NIC is placed
        // without the node's devices: the cache's devices line is not even parsed.
        let signs = crate::room::vars(GPU_VARIABLES);
        let sign = |k: &str| {
            let i = GPU_VARIABLES.iter().position(|&v| v == k)?;
            signs[i].clone()
        };
        let devices = nics > 0 || may_name_gpus(sign);
        let (topo, cpus, loc) = self.step_node(spank, st, devices)?;
        let loc = match (devices, loc) {
            (false, _) => None,
            (true, Some(loc)) => Some(loc),
            (true, None) => return Err("lama could not read this node's devices".into()),
        };
        // Under --gpus-per-task, Slurm binds the GPUs task by task, but the step's environment
        // (unlike each task's) still names them all: the policy weighs the domains by them, and
        // each task follows the GPUs Slurm binds to it. Where no variable names them, the
        // policy weighs the domains by cores and leaves the GPUs to Slurm, and says so.
        let given = match loc.as_ref().map(|loc| allowed_gpus(loc, get)) {
            None => None,
            Some(Ok(g)) => g,
            Some(Err(e)) => {
                let named = gpus_per_task(get, "SLURMD_TRES_BIND")
                    .and_then(|_| named_gpus(loc.as_ref()?, get).ok().flatten());
                if named.is_none() && st.nodeid == 0 && st.warning.is_none() {
                    st.warning = Some(format!(
                        "the automatic policy places by cores and leaves this step's GPUs to Slurm: {e}"
                    ));
                }
                named
            }
        };
        // A step Slurm gave no GPUs has none: under the policy, every GPU is one Slurm gave.
        let gpus = match (&given, &loc) {
            (Some(g), Some(loc)) => gpus_of(loc, Some(&g.devices)),
            _ => Vec::new(),
        };
        let threads = self
            .settings
            .threads(&self.user)
            .map_err(|e| e.to_string())?;
        let per_task = get("SLURM_CPUS_PER_TASK").and_then(|v| v.trim().parse::<usize>().ok());
        let workers = auto_workers(threads.as_ref(), per_task);
        // srun's --overcommit is the user's permission to stack tasks, as --lama-oversubscribe is.
        let asked = self.settings.oversubscribe(&self.user);
        let overcommit = lama::slurm::overcommit(crate::room::var("SLURM_OVERCOMMIT").as_deref());
        let stack = asked || overcommit;
        let placed = place_auto(
            &topo,
            &cpus,
            &gpus,
            ranks,
            (workers, stack),
            st.verbose,
            st.verbose,
        )
        .map_err(|e| e.to_string())?;
        st.lap("placement");
        if overcommit && !asked && ranks.len() > cpus.len() && st.warning.is_none() {
            st.warning = Some(format!(
                "{} tasks share the step's {} hardware thread(s) on node {} {}: srun's --overcommit lets the automatic policy stack them, as evenly as it can",
                ranks.len(),
                cpus.len(),
                st.nodeid,
                st.host
            ));
        }
        st.policy = st.verbose.then(|| placed.summary.clone());
        if let Some(loc) = loc.as_ref().filter(|_| !gpus.is_empty()) {
            st.gpu_domains = Some(placed.domain_cpus);
            st.slot_domains = Some(placed.domains);
            st.bound_gpus = BoundGpus::read(loc, get);
        }
        st.tasks = placed.tasks;
        let plans = auto_threads(&topo, &st.tasks, threads.as_ref(), per_task)
            .map_err(|e| e.to_string())?;
        if let Some(p) = plans.iter().find(|p| p.extra > 0) {
            if st.warning.is_none() {
                st.warning = Some(crowded_note(p, ranks.len(), cpus.len(), st));
            }
        }
        st.omp = plans.iter().map(|p| p.env()).collect();
        st.omp_replace = threads.is_some_and(|t| t.replace);
        if let Some(loc) = loc.filter(|_| nics > 0 || !gpus.is_empty()) {
            let weights = self.weights(&loc)?;
            let visibility = self
                .settings
                .gpu_visibility(&self.user)
                .map_err(|e| e.to_string())?;
            let chosen = auto_devices(&loc, &st.tasks, &placed.gpus, nics, weights.as_ref(), given)
                .map_err(|e| e.to_string())?
                .sharing(visibility);
            st.devices = Some(Devices {
                loc,
                weights,
                counts: (nics, 0),
                visibility,
                chosen: Some(chosen),
                policy: true,
            });
        }
        st.lap("devices");
        Ok(())
    }

    /// Memory binding (`--lama-mem=local`, or Slurm's `--mem-bind=local|rank` following lama's
    /// CPUs): each task's NUMA nodes, chosen here from the node's topology (the cache's record of
    /// hwloc's NUMA nodes) before the tasks fork, so that each task binds with one system call
    /// and no hwloc.
    #[cold]
    #[inline(never)]
    pub(crate) fn prepare_memory(&self, st: &mut Step) -> Result<(), String> {
        if st.mem_policy.is_none() {
            return Ok(());
        }
        let numa = st
            .numa
            .take()
            .ok_or("lama could not read this node's NUMA nodes")?;
        st.mems = affinity::tasks_numa(
            &numa,
            st.tasks.iter().map(|t| t.cpus.as_slice()),
            st.mem_mode,
            st.bind,
        )?;
        st.lap("memory");
        Ok(())
    }
}
