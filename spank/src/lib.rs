//! The `lama` SPANK plugin. In srun and sbatch it registers and checks the `--lama-*` options;
//! in slurmstepd, once per node per step, it places that node's tasks on the CPUs Slurm gave the
//! step, loads the node's NICs and GPUs when asked for, and computes the step's `TASK_MAP`; per
//! task it binds, chooses the task's nearest devices among those Slurm gave it, and exports
//! `TASK_MAP`, `LAMA_CPUS` and the device variables. All decisions are made by
//! `lama::slurm_step`; this crate only talks to Slurm.
//!
//! Failures never unwind into Slurm: a placement error is kept and reported by every task's
//! `task_init`, which then fails so that no task of the step starts (Slurm 22.05 lets srun exit 0
//! when `user_init` fails).

use std::error::Error;
use std::fmt;
use std::time::{Duration, Instant};

use lama::idset::format_list;
use lama::locality::{Locality, Weights};
use lama::openmp::plan_threads;
use lama::slurm_layout::StepEnv;
use lama::slurm_step::{
    check_step_map, check_task, choose_devices, cores_to_cpus, cpu_bind_env, place_node,
    usable_cpus, MapCheck, NodeDevices, Options, Settings, TaskBinding, OMP_VARIABLES,
};
use lama::taskmap::{rfc34, TaskMap};
use slurm_spank::{spank_log, Context, LogLevel, Plugin, SpankHandle};

mod affinity;
mod exports;
mod node;
mod options;
mod probe;

include!(concat!(env!("OUT_DIR"), "/slurm_version.rs"));

/// Step ids at or above this are Slurm's special steps (batch script, extern, interactive).
const FIRST_SPECIAL_STEP: u32 = 0xFFFF_FFF0;

/// An error already reported to the user; Slurm only needs to know the callback failed.
#[derive(Debug)]
struct Reported;

impl fmt::Display for Reported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("lama: reported above")
    }
}

impl Error for Reported {}

type Result = std::result::Result<(), Box<dyn Error>>;

fn fail(msg: &str) -> Box<dyn Error> {
    spank_log(LogLevel::Error, &format!("lama: {msg}"));
    Box::new(Reported)
}

#[derive(Default)]
struct Lama {
    settings: Settings,
    user: Options,
    step: Option<Step>,
}

/// What each task needs to choose its devices. The choice is made per task because Slurm's GPU
/// plugin writes the GPUs it gave (`CUDA_VISIBLE_DEVICES`, `SLURM_STEP_GPUS`, ...) into each
/// task's environment after `user_init`, replacing whatever the user had set.
struct Devices {
    loc: Locality,
    weights: Option<Weights>,
    /// NICs and GPUs per task.
    counts: (usize, usize),
    /// Each placed task's devices as `user_init` chose them, when the choice cannot depend on the
    /// task's environment (no GPUs asked for): tasks then need not choose again.
    chosen: Option<NodeDevices>,
}

/// What `user_init` decided for this node, used by every task.
#[derive(Default)]
struct Step {
    host: String,
    nodeid: u32,
    /// Why no task may start, when placement failed.
    failure: Option<String>,
    /// Shown once per node, not fatal (TASK_MAP could not be computed).
    warning: Option<String>,
    /// Whether TASK_MAP is lama's business in this step.
    manage_taskmap: bool,
    taskmap: Option<String>,
    /// Set in a heterogeneous step, whose map each task checks against its own ids.
    per_task_map: Option<TaskMap>,
    /// A component of a heterogeneous step: Slurm's items count within the component.
    het: bool,
    /// The global ids of this node's tasks in Slurm's local order.
    local_ranks: Vec<u32>,
    /// Placed tasks in rank order; empty when placement does not apply.
    tasks: Vec<TaskBinding>,
    /// The node's devices, when `--lama-nics` / `--lama-gpus` ask for some.
    devices: Option<Devices>,
    /// Per placed task, its OpenMP variables (`--lama-threads`), and whether they replace the
    /// job's own.
    omp: Vec<Vec<(String, String)>>,
    omp_replace: bool,
    placing: bool,
    /// False with `topology=FILE`: CPUs are computed and exported, not bound.
    bind: bool,
    verbose: bool,
    /// Time `user_init` spent on this node (topology, layout, placement).
    elapsed: Duration,
    /// The same per phase, for `--lama-verbose`: where the time went.
    phases: Vec<(&'static str, Duration)>,
    /// When the current phase started.
    lap: Option<Instant>,
}

impl Step {
    /// The map, when exporting it is all `task_init` would do in each task: no failure or
    /// warning to show, no per-task check, nothing placed.
    fn taskmap_only(&self) -> Option<&str> {
        let quiet = self.failure.is_none() && self.warning.is_none();
        let simple = self.manage_taskmap && self.per_task_map.is_none() && !self.placing;
        self.taskmap.as_deref().filter(|_| quiet && simple)
    }

    /// Ends the current phase, named `what`.
    fn lap(&mut self, what: &'static str) {
        let now = Instant::now();
        if let Some(t) = self.lap.replace(now) {
            self.phases.push((what, now - t));
        }
    }
}

impl Lama {
    fn prepare(&self, spank: &SpankHandle) -> Step {
        let started = Instant::now();
        let mut st = self.decide(spank, started);
        st.elapsed = started.elapsed();
        st
    }

    fn decide(&self, spank: &SpankHandle, started: Instant) -> Step {
        let mut st = Step {
            lap: Some(started),
            host: affinity::hostname(),
            bind: self.settings.topology.is_none(),
            verbose: self.settings.verbose || self.user.verbose,
            manage_taskmap: self.settings.taskmap && !self.user.off,
            ..Step::default()
        };
        let ranks = match node_ranks(spank) {
            Ok((nodeid, r)) => {
                st.nodeid = nodeid;
                r
            }
            // Fatal only when this step asks lama to place; otherwise the step runs as it would
            // without lama, without TASK_MAP.
            Err(e) => {
                match self.settings.request(&self.user, None) {
                    Ok(None) => st.warning = Some(format!("TASK_MAP not exported: {e}")),
                    _ => st.failure = Some(e),
                }
                return st;
            }
        };
        let het_size = ["SLURM_HET_SIZE", "SLURM_PACK_SIZE"]
            .iter()
            .find_map(|k| spank.getenv(k).ok().flatten()?.trim().parse::<u32>().ok());
        st.het = het_size.is_some_and(|n| n > 1);
        st.lap("Slurm's items");
        if st.manage_taskmap {
            let env = StepEnv::from_lookup(|n| spank.getenv(n).ok().flatten());
            let map = env
                .taskmap(lama::slurm_layout::read_hostfile_text)
                .map_err(|e| e.to_string())
                .and_then(|m| {
                    let total = spank.job_total_task_count().map_err(|e| {
                        format!("cannot read the step's task count from Slurm: {e}")
                    })?;
                    check_step_map(&m, st.nodeid, &ranks, total, het_size)
                        .map(|how| (m, how))
                        .map_err(|e| e.to_string())
                });
            match map {
                Ok((m, how)) => {
                    st.taskmap = Some(rfc34::encode_wrapped(&m));
                    if how == MapCheck::PerTask {
                        st.per_task_map = Some(m);
                    }
                }
                Err(e) => st.warning = Some(format!("TASK_MAP not exported: {e}")),
            }
        }
        st.local_ranks = ranks.clone();
        st.lap("TASK_MAP");
        match self.settings.request(&self.user, Some(ranks.len())) {
            Ok(None) => {}
            Ok(Some(req)) => {
                st.placing = true;
                if let Err(e) = self.place(spank, &req, &ranks, &mut st) {
                    st.failure = Some(e);
                }
            }
            Err(e) => st.failure = Some(e.to_string()),
        }
        st
    }

    /// Places this node's tasks and, when asked for, hands them their devices; the node's hwloc
    /// topology is read once for both.
    fn place(
        &self,
        spank: &SpankHandle,
        req: &lama::Request,
        ranks: &[u32],
        st: &mut Step,
    ) -> std::result::Result<(), String> {
        let counts = self.settings.devices(&self.user).map_err(|e| e.to_string());
        let want_devices = matches!(counts, Ok(c) if c != (0, 0));
        let (topo, usable, loc, source) = node::find(&self.settings, &st.host, want_devices)?;
        st.lap(source);
        let cores = spank
            .step_alloc_cores()
            .map_err(|e| format!("Slurm did not say which cores the step has: {e}"))?;
        // Slurm's cores, and of those only CPUs this slurmstepd may use (its cgroup's cpuset).
        // --hint=nomultithread and --threads-per-core=N: only the first N threads of each core.
        let threads = spank
            .getenv("SLURM_THREADS_PER_CORE")
            .ok()
            .flatten()
            .and_then(|v| v.trim().parse::<u32>().ok());
        let cpus = cores_to_cpus(&topo, cores, threads)
            .and_then(|c| usable_cpus(c, &usable))
            .map_err(|e| e.to_string())?;
        st.tasks = place_node(&topo, &cpus, req, ranks, st.verbose).map_err(|e| e.to_string())?;
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
        if let Some(loc) = loc {
            let weights = match &self.settings.weights {
                Some(path) => {
                    let text = lama::limits::read_text(path, lama::limits::MAX_WEIGHTS_BYTES)
                        .map_err(|e| format!("cannot read weights file {}: {e}", path.display()))?;
                    let w = Weights::parse(&text, &loc)
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    Some(w)
                }
                None => None,
            };
            // Checked here with this node's own devices, so that a node without enough of them
            // fails the step before any task starts; each task chooses again with its GPUs.
            let chosen = choose_devices(&loc, &st.tasks, counts, weights.as_ref(), |_| None)
                .map_err(|e| e.to_string())?;
            st.devices = Some(Devices {
                loc,
                weights,
                counts,
                chosen: (!chosen.depends_on_task_env()).then_some(chosen),
            });
            st.lap("devices");
        }
        Ok(())
    }
}

impl Devices {
    /// Task `i`'s device variables: the node's tasks share the devices this task may use (the
    /// GPUs Slurm wrote into its environment), so tasks that see the same GPUs agree.
    fn for_task(
        &self,
        spank: &SpankHandle,
        tasks: &[TaskBinding],
        i: usize,
    ) -> std::result::Result<Vec<(String, String)>, String> {
        if let Some(chosen) = &self.chosen {
            return Ok(chosen.env(&self.loc, i));
        }
        let all = choose_devices(&self.loc, tasks, self.counts, self.weights.as_ref(), |k| {
            spank.getenv(k).ok().flatten()
        })
        .map_err(|e| e.to_string())?;
        Ok(all.env(&self.loc, i))
    }
}

/// This node's id and the global ids of its tasks, from Slurm's items.
fn node_ranks(spank: &SpankHandle) -> std::result::Result<(u32, Vec<u32>), String> {
    let item =
        |e: slurm_spank::SpankError| format!("cannot read the step's layout from Slurm: {e}");
    let nodeid = spank.job_nodeid().map_err(item)?;
    let local = spank.job_local_task_count().map_err(item)?;
    let ranks = (0..local)
        .map(|i| spank.local_to_global_id(i).map_err(item))
        .collect::<std::result::Result<Vec<u32>, String>>()?;
    Ok((nodeid, ranks))
}

unsafe impl Plugin for Lama {
    fn setup(&mut self, _spank: &mut SpankHandle) -> Result {
        // A panic is a bug: its message and place go to Slurm's log for the admin's bug
        // report (the default hook would print them into the job's output instead). The
        // callback that caught it then fails the step.
        std::panic::set_hook(Box::new(|info| {
            spank_log(
                LogLevel::Error,
                &format!("lama: bug: {}", info.to_string().replace('\n', " ")),
            );
        }));
        Ok(())
    }

    fn report_error(&self, _spank: &mut SpankHandle, _error: &dyn Error) {}

    fn init(&mut self, spank: &mut SpankHandle) -> Result {
        // The options are registered by the exported hook (exports.rs), before this runs.
        let ctx = spank.context()?;
        let args = spank
            .plugin_argv()
            .map_err(|e| fail(&format!("plugstack.conf arguments: {e}")))?;
        self.settings = Settings::parse(&args).map_err(|e| fail(&e.to_string()))?;
        if ctx == Context::Slurmd && self.settings.topology.is_none() {
            node::write_cache(&self.settings);
        }
        Ok(())
    }

    fn init_post_opt(&mut self, spank: &mut SpankHandle) -> Result {
        if matches!(spank.context()?, Context::Local | Context::Allocator) {
            self.user = options::user_options().map_err(|e| fail(&e))?;
            self.settings
                .request(&self.user, None)
                .map_err(|e| fail(&e.to_string()))?;
            self.settings
                .devices(&self.user)
                .map_err(|e| fail(&e.to_string()))?;
            self.settings
                .threads(&self.user)
                .map_err(|e| fail(&e.to_string()))?;
        }
        Ok(())
    }

    fn user_init(&mut self, spank: &mut SpankHandle) -> Result {
        exports::withdraw_task_map();
        if spank.job_stepid()? >= FIRST_SPECIAL_STEP {
            return Ok(());
        }
        let st = match options::user_options() {
            Ok(u) => {
                self.user = u;
                // A panic here (a bug, in lama or a library) must fail the step cleanly rather
                // than poison the crate's global state for every later callback.
                let this = &*self;
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| this.prepare(spank)))
                    .unwrap_or_else(|_| Step {
                        failure: Some(
                            "internal error while placing (a bug in lama; slurmd's log has the details)"
                                .into(),
                        ),
                        host: affinity::hostname(),
                        nodeid: spank.job_nodeid().unwrap_or_default(),
                        ..Step::default()
                    })
            }
            Err(e) => Step {
                failure: Some(e),
                ..Step::default()
            },
        };
        // For the admin, in slurmd's log; the user sees it from task_init on the step's stderr.
        if let Some(f) = &st.failure {
            spank_log(LogLevel::Error, &format!("lama: no task started: {f}"));
        }
        if let Some(map) = st.taskmap_only() {
            exports::offer_task_map(map);
        }
        self.step = Some(st);
        Ok(())
    }

    fn task_init(&mut self, spank: &mut SpankHandle) -> Result {
        let Some(st) = &self.step else {
            return Ok(());
        };
        // The usual step, TASK_MAP only, does not come here: slurm_spank_task_init
        // (exports.rs) hands Slurm the map `user_init` offered. Slurm's items are read only
        // where something needs them. (TASK_MAP is written in each task, not once into the step's
        // environment in user_init: Slurm's setenv allocates a 256 KiB buffer, and the first one
        // in the multithreaded slurmstepd costs an mmap and munmap, about 80 us more in user_init
        // here, against about 25 us in each task's own process, in parallel.)
        // The node's first task speaks for it.
        let first_task = || spank.task_id().map(|id| id == 0);
        if let Some(f) = &st.failure {
            if first_task()? {
                eprintln!(
                    "lama: error: {f} (node {} {}: no task of this step was started there)",
                    st.nodeid, st.host
                );
            }
            return Err(Box::new(Reported));
        }
        if let Some(w) = &st.warning {
            if first_task()? {
                eprintln!("lama: warning: {w}");
            }
        }
        if st.manage_taskmap {
            // slurmstepd has written this task's SLURM_PROCID and SLURM_NODEID by now.
            let checked = match &st.per_task_map {
                Some(map) => {
                    let var = |k: &str| spank.getenv(k).ok().flatten().unwrap_or_default();
                    check_task(map, &var("SLURM_PROCID"), &var("SLURM_NODEID"))
                }
                None => Ok(()),
            };
            match (&st.taskmap, checked) {
                (Some(m), Ok(())) => spank.setenv("TASK_MAP", m, true)?,
                (Some(_), Err(e)) => {
                    eprintln!("lama: warning: TASK_MAP not exported: {e}");
                    spank.unsetenv("TASK_MAP")?;
                }
                (None, _) => spank.unsetenv("TASK_MAP")?,
            }
        }
        if !st.placing {
            return Ok(());
        }
        let first = first_task()?;
        let rank = spank.task_global_id()?;
        let Ok(i) = st.tasks.binary_search_by_key(&rank, |t| t.rank) else {
            eprintln!(
                "lama: error: task {rank} was not placed on node {}",
                st.host
            );
            return Err(Box::new(Reported));
        };
        let t = &st.tasks[i];
        let list = format_list(&t.cpus);
        spank.setenv("LAMA_CPUS", &list, true)?;
        // Set when Slurm's task plugin bound the task (task/affinity); lama's binding replaces it.
        let slurm_bind = spank.getenv("SLURM_CPU_BIND").ok().flatten();
        let before = if st.verbose && st.bind && slurm_bind.is_some() {
            affinity::allowed().ok()
        } else {
            None
        };
        if st.bind {
            if let Err(e) = affinity::bind(&t.cpus) {
                eprintln!(
                    "lama: error: cannot bind task {rank} on {} to cpus {list}: {e}",
                    st.host
                );
                return Err(Box::new(Reported));
            }
            if let Some(previous) = slurm_bind {
                let local: Vec<&[u32]> = st
                    .local_ranks
                    .iter()
                    .filter_map(|r| st.tasks.binary_search_by_key(r, |t| t.rank).ok())
                    .map(|j| st.tasks[j].cpus.as_slice())
                    .collect();
                for (k, v) in cpu_bind_env(&previous, &local) {
                    spank.setenv(&k, &v, true)?;
                }
            }
        }
        let devices = match &st.devices {
            Some(d) => match d.for_task(spank, &st.tasks, i) {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("lama: error: task {rank} on {}: {e}", st.host);
                    return Err(Box::new(Reported));
                }
            },
            None => Vec::new(),
        };
        for (k, v) in &devices {
            spank.setenv(k, v, true)?;
        }
        let mut omp = st.omp.get(i).map(Vec::as_slice).unwrap_or_default();
        if !omp.is_empty() && !st.omp_replace {
            let set: Vec<&str> = OMP_VARIABLES
                .into_iter()
                .filter(|k| matches!(spank.getenv(k), Ok(Some(_))))
                .collect();
            if !set.is_empty() {
                if first {
                    eprintln!(
                        "lama: note: the job sets {}, so lama's OpenMP places are not exported (--lama-omp-override replaces them)",
                        set.join(", ")
                    );
                }
                omp = &[];
            }
        }
        for (k, v) in omp {
            spank.setenv(k, v, true)?;
        }
        if st.verbose {
            let how = if st.bind { "bound to" } else { "computed" };
            let shown: String = devices
                .iter()
                .filter(|(k, _)| k.starts_with("LAMA_"))
                .map(|(k, v)| format!(" {}={v}", k.to_lowercase().replace("lama_", "")))
                .chain(
                    omp.iter()
                        .filter(|(k, _)| k == "OMP_PLACES")
                        .map(|(_, v)| format!(" omp_places={v}")),
                )
                .collect();
            let cost = if first {
                let ms = |d: Duration| d.as_secs_f64() * 1000.0;
                let phases: Vec<String> = st
                    .phases
                    .iter()
                    .map(|(what, d)| format!("{what} {:.3}", ms(*d)))
                    .collect();
                format!(
                    " (node placed in {:.2} ms: {})",
                    ms(st.elapsed),
                    phases.join(", ")
                )
            } else {
                String::new()
            };
            let replaced = match before {
                Some(b) if b != t.cpus => format!(" (replaces Slurm's cpus {})", format_list(&b)),
                _ => String::new(),
            };
            // In a heterogeneous step, the ids the task sees span every component.
            let id = |k: &str, own: u32| match spank.getenv(k) {
                Ok(Some(v)) if st.het => v,
                _ => own.to_string(),
            };
            eprintln!(
                "lama: task {} on {} (node {}): {how} cpus {list} {}{shown}{replaced}{cost}",
                id("SLURM_PROCID", rank),
                st.host,
                id("SLURM_NODEID", st.nodeid),
                t.picture.as_deref().unwrap_or_default()
            );
        }
        Ok(())
    }
}
