//! The `lama` SPANK plugin. In srun and sbatch it registers and checks the `--lama-*` options;
//! in slurmstepd, once per node per step, it places that node's tasks on the CPUs Slurm gave the
//! step, loads the node's NICs and GPUs when asked for, and computes the step's `TASK_MAP`; per
//! task it binds, chooses the task's nearest devices among those Slurm gave it, and exports
//! `TASK_MAP`, `LAMA_CPUS` and the device variables. All decisions are made by
//! `lama::plugin`; this crate only talks to Slurm.
//!
//! Failures never unwind into Slurm: a placement error is kept, said once per node by the first
//! task to start there, and every task of the node then ends before the user's program runs
//! (Slurm 22.05 lets srun exit 0 when `user_init` fails). Nothing lama exports may break a task:
//! a variable too long for one environment string, or one that would take the task's
//! environment past what `execve` allows, is withheld and said once (`lama::environ`).

use std::error::Error;
use std::fmt;
use std::time::{Duration, Instant};

use lama::environ::{
    exec_limit, export_bytes, tasks_must_check, variable_fits, Group, Withheld, MAX_TASK_MAP_BLOCKS,
};
use lama::locality::{gpus_per_task, Locality, Weights};
use lama::plugin::{
    GpuVisibility, NodeDevices, Options, Placing, Settings, TaskBinding, OMP_VARIABLES,
};
use lama::slurm::node_order::STEP_ORDER_VAR;
use lama::slurm::{check_step_map, MapCheck, StepEnv};
use lama::taskmap::{rfc34, TaskMap};
use slurm_spank::{spank_log, Context, LogLevel, Plugin, SpankHandle};

/// A line on a task's stderr (the user's output), bounded like every log line: what a user typed
/// can neither start a line of its own nor flood the output (`lama::quote`).
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!("{}", lama::quote::for_log(&format!($($arg)*)))
    };
}

/// Slurm's log (slurmd's, or srun's stderr), one bounded line per message (see [`say`]).
pub(crate) fn log(level: LogLevel, msg: &str) {
    spank_log(level, &lama::quote::for_log(msg));
}

mod affinity;
mod auto;
mod containers;
mod exports;
mod node;
mod once;
mod options;
mod place;
mod probe;
mod room;
mod srun;
mod step_order;
mod task;

use once::NodeOnce;

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
    log(LogLevel::Error, &format!("lama: {msg}"));
    Box::new(Reported)
}

/// Said with a task map that does not match Slurm's tasks on a release that lays block steps out
/// in topology order, when srun passed no order.
const TOPO_ORDER_UNKNOWN: &str = " (Slurm numbers a block step's tasks in the order of the network topology, which lama learns from lama in srun: srun passed none; is lama in the plugstack.conf srun reads?)";

#[derive(Default)]
struct Lama {
    settings: Settings,
    user: Options,
    step: Option<Step>,
    /// srun said the step's `SLURM_THREADS_PER_CORE` is the job's, which its own `--hint`
    /// dropped ([`room::STEP_THREADS`]): every thread of the step's cores is the step's.
    all_threads: bool,
    /// In srun: it makes its own job (no allocation around it), so its `--thread-spec` is the
    /// job's.
    allocating: bool,
    /// The order srun passed for a block step's nodes ([`step_order`]), read before
    /// `user_init` removes it from the step's environment.
    node_order: Option<String>,
    /// What the user asked Slurm's own binding for (`lama::slurm::site_default`): in srun, read
    /// from its options as it starts; on the nodes, from [`room::STEP_SLURM_BINDING`].
    slurm_asked: Option<String>,
}

/// What each task needs to choose its devices. The choice is made per task because Slurm's GPU
/// plugin writes the GPUs it gave (`CUDA_VISIBLE_DEVICES`, `SLURM_STEP_GPUS`, ...) into each
/// task's environment after `user_init`, replacing whatever the user had set.
struct Devices {
    loc: Locality,
    weights: Option<Weights>,
    /// NICs and GPUs per task.
    counts: (usize, usize),
    /// Which of the step's GPUs each task sees.
    visibility: GpuVisibility,
    /// Each placed task's devices as `user_init` chose them, when the choice cannot depend on the
    /// task's environment (no GPUs asked for), or the automatic policy made it: tasks then need
    /// not choose again.
    chosen: Option<NodeDevices>,
    /// The automatic policy chose: each task checks its GPUs against those Slurm left it.
    policy: bool,
}

/// What `user_init` decided for this node, used by every task.
#[derive(Default)]
struct Step {
    host: String,
    nodeid: u32,
    /// Why no task may start, when placement failed.
    failure: Option<String>,
    /// Shown once per node, not fatal (TASK_MAP could not be computed). A warning that every
    /// node would give alike is kept on node 0 only, so the step says it once.
    warning: Option<String>,
    /// Whether the user asked lama for anything (an option or `SLURM_LAMA_*`): only then do
    /// notes and warnings go on a task's stderr (`tell!` in task.rs).
    asked: bool,
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
    /// The OpenMP variables the job itself set, seen in `user_init`: the user's, which lama's do
    /// not replace. One that appears only by `task_init` came from another plugin (a container
    /// image's environment under pyxis) and is replaced.
    job_omp: Vec<&'static str>,
    placing: bool,
    /// False with `topology=FILE`: CPUs are computed and exported, not bound.
    bind: bool,
    verbose: bool,
    /// Whether each task measures its own arguments and environment before lama exports into it
    /// (placing steps, and steps whose environment is near what `execve` allows).
    check_room: bool,
    /// What `execve` allows the tasks' arguments and environment.
    exec_limit: usize,
    /// Lets the first of the node's tasks to notice something say it for all of them. Not
    /// mapped for a node of one task, which is its own first task.
    once: Option<NodeOnce>,
    /// Time `user_init` spent on this node (topology, layout, placement).
    elapsed: Duration,
    /// The same per phase, for `--lama-verbose`: where the time went.
    phases: Vec<(&'static str, Duration)>,
    /// When the current phase started.
    lap: Option<Instant>,
    /// How the tasks' memory is bound: `--lama-mem=local`, or Slurm's `--mem-bind=local|rank`
    /// (with `prefer`) following the CPUs lama chose; `None` leaves memory alone.
    mem_policy: Option<lama::memory::MemPolicy>,
    /// Which of each task's NUMA nodes `mem_policy` binds: its default memory, or its fast
    /// tier (`--lama-mem=hbm|prefer-hbm`).
    mem_mode: lama::tiers::MemMode,
    /// Per placed task, the NUMA nodes local to its CPUs (bound unless `topology=FILE`, where
    /// they are only named) when `mem_policy` is set; empty otherwise.
    mems: Vec<Vec<u32>>,
    /// The node's NUMA nodes, kept from its topology for `mem_policy`.
    numa: Option<Vec<lama::locality::Numa>>,
    /// What the automatic policy chose on this node, for `--lama-verbose`.
    policy: Option<String>,
    /// The node's domains (their CPUs), in a step with GPUs that lama does not choose, for each
    /// task to follow the GPUs Slurm binds task by task (`task.rs`, `lama::slurm::gpu_bind`).
    gpu_domains: Option<Vec<Vec<u32>>>,
    /// Under the policy, the domain of each of its task slots (rank order; `None` for one over
    /// several): each task takes the slot in the domain of its Slurm GPUs. Without it (a map
    /// step), a task lama placed away from them says so.
    slot_domains: Option<Vec<Option<usize>>>,
    /// The step's GPUs on the node as Slurm numbers them, with the CPUs near each, where Slurm
    /// may bind them by task id (`map_gpu`, `mask_gpu`, `per_task`): each task works every
    /// local task's GPUs out from them (`lama::slurm::gpu_by_id::ById`).
    bound_gpus: Option<lama::slurm::gpu_by_id::BoundGpus>,
}

impl Step {
    /// The map, when exporting it is all `task_init` would do in each task: no failure or
    /// warning to show, no per-task check, nothing placed.
    fn taskmap_only(&self) -> Option<&str> {
        let quiet = self.failure.is_none() && self.warning.is_none();
        let simple =
            self.manage_taskmap && self.per_task_map.is_none() && !self.placing && !self.check_room;
        self.taskmap.as_deref().filter(|_| quiet && simple)
    }

    /// A placement the site made the default (`policy=auto` in `plugstack.conf`) never fails a
    /// step that Slurm alone would run: where it cannot place as designed (`why`), the node's
    /// tasks keep Slurm's own binding, said once per node.
    #[cold]
    #[inline(never)]
    fn leave_to_slurm(&mut self, why: &str) {
        self.placing = false;
        self.tasks.clear();
        self.devices = None;
        self.omp.clear();
        self.mem_policy = None;
        self.policy = None;
        self.gpu_domains = None;
        self.slot_domains = None;
        self.bound_gpus = None;
        self.warning = Some(format!(
            "the site's automatic policy cannot place this step on node {} {} ({why}); its tasks keep Slurm's own binding (--lama-policy=auto would fail the step instead)",
            self.nodeid, self.host
        ));
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
    /// A step of MPI launcher daemons, one per node, which fork the ranks themselves: lama
    /// neither places nor binds them (that would confine every rank of the node), and exports
    /// no `TASK_MAP`, which would describe the daemons rather than the ranks. Node 0 says so
    /// when the step asked lama to place. Kept out of the hot layout (spank/hot.ld).
    #[cold]
    #[inline(never)]
    fn daemon_step(&self, spank: &SpankHandle, what: &str) -> Step {
        let nodeid = spank.job_nodeid().unwrap_or_default();
        // A map left in the job's environment would describe another step.
        let _ = spank.unsetenv("TASK_MAP");
        let asked = !matches!(
            self.settings.placing(&self.user, None),
            Ok(Placing::LeftAlone)
        ) || !matches!(self.settings.devices(&self.user), Ok((0, 0)))
            || !matches!(self.settings.threads(&self.user), Ok(None));
        let note = asked.then(|| lama::slurm::launcher::daemon_note(what));
        if let Some(n) = &note {
            log(LogLevel::Info, &format!("lama: {n}"));
        }
        Step {
            host: affinity::hostname(),
            nodeid,
            asked,
            warning: note.filter(|_| nodeid == 0),
            ..Step::default()
        }
    }

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
            asked: self.user.any(),
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
                match self.settings.placing(&self.user, None) {
                    Ok(Placing::LeftAlone) => {
                        st.warning = Some(format!("TASK_MAP not exported: {e}"))
                    }
                    _ => st.failure = Some(e),
                }
                return st;
            }
        };
        let het_size = ["SLURM_HET_SIZE", "SLURM_PACK_SIZE"]
            .iter()
            .find_map(|k| crate::room::var(k)?.trim().parse::<u32>().ok());
        st.het = het_size.is_some_and(|n| n > 1);
        st.lap("Slurm's items");
        if st.manage_taskmap {
            // Read only for a step that holds an order (Slurm's items, not the environment).
            let step_id = self
                .node_order
                .as_ref()
                .and_then(|_| spank.job_id().ok().zip(spank.job_stepid().ok()))
                .map(|(j, s)| format!("{j}.{s}"));
            let env = StepEnv {
                node_order: self.node_order.clone(),
                step_id,
                ..StepEnv::from_lookup(crate::room::var)
            };
            // A layout that cannot be read is the same on every node, unless the host file could
            // not be read here.
            let step_wide = std::cell::Cell::new(true);
            // Slurm's node count bounds what the layout variables may cost (a forged list of a
            // million nodes is refused before any is made).
            // (A heterogeneous step's variables span its components: not checked there.)
            let nodes = (!st.het)
                .then(|| spank.job_nnodes().ok().map(|n| n as usize))
                .flatten();
            let map = env
                .taskmap_of_step(MAX_TASK_MAP_BLOCKS, nodes)
                .map_err(|e| {
                    let unreadable = env.hostfile.as_deref().is_some_and(|p| {
                        let max = lama::limits::MAX_HOSTFILE_BYTES;
                        lama::limits::open_regular(std::path::Path::new(p), max).is_err()
                    });
                    step_wide.set(!unreadable);
                    e.to_string()
                })
                .and_then(|m| {
                    let Some(m) = m else {
                        return Ok((None, MapCheck::Node));
                    };
                    step_wide.set(false);
                    let total = spank.job_total_task_count().map_err(|e| {
                        format!("cannot read the step's task count from Slurm: {e}")
                    })?;
                    check_step_map(&m, st.nodeid, &ranks, total, het_size)
                        .map(|how| (Some(m), how))
                        .map_err(|e| match env.node_order {
                            None if cfg!(topo_order) => format!("{e}{TOPO_ORDER_UNKNOWN}"),
                            _ => e.to_string(),
                        })
                });
            match map {
                Ok((None, _)) => {
                    // Too long to export, whatever the rest: node 0 says it for the step.
                    let blocks = MAX_TASK_MAP_BLOCKS;
                    st.warning = Some(Withheld::MapTooLong { blocks }.to_string());
                    step_wide.set(true);
                }
                Ok((Some(m), how)) => {
                    let text = rfc34::encode_wrapped(&m);
                    if variable_fits("TASK_MAP", &text) {
                        st.taskmap = Some(text);
                        if how == MapCheck::PerTask {
                            st.per_task_map = Some(m);
                        }
                    } else {
                        // Every node computes the same map: node 0 says it for the step.
                        st.warning = Group::task_map(text).too_long().map(|w| w.to_string());
                        step_wide.set(true);
                    }
                }
                Err(e) => st.warning = Some(format!("TASK_MAP not exported: {e}")),
            }
            if step_wide.get() && st.nodeid != 0 {
                st.warning = None;
            }
        }
        st.local_ranks = ranks.clone();
        st.lap("TASK_MAP");
        let placing = self.placing(ranks.len(), &mut st);
        match placing {
            Ok(Placing::LeftAlone) => {}
            Ok(Placing::Map(req)) => {
                st.placing = true;
                if let Err(e) = self.place(spank, &req, &ranks, &mut st) {
                    st.failure = Some(e);
                }
            }
            Ok(Placing::Policy) => {
                st.placing = true;
                if let Err(e) = self.place_auto(spank, &ranks, &mut st) {
                    if self.user.policy.is_some() {
                        st.failure = Some(e);
                    } else {
                        st.leave_to_slurm(&e);
                    }
                }
            }
            Err(e) => st.failure = Some(e),
        }
        if st.placing && st.failure.is_none() {
            if let Err(e) = self.prepare_memory(&mut st) {
                st.failure = Some(e);
            }
        }
        // Read only when lama has OpenMP variables to export.
        if st.omp.iter().any(|v| !v.is_empty()) {
            st.job_omp = OMP_VARIABLES
                .into_iter()
                .filter(|k| matches!(spank.getenv(k), Ok(Some(_))))
                .collect();
        }
        if st.placing && st.failure.is_none() && st.nodeid == 0 && st.warning.is_none() {
            st.warning = containers::oci_note();
        }
        self.room(&mut st);
        st
    }

    /// Whether the tasks must measure their environment before lama exports into it: always when
    /// placing (each task gets several variables), and for `TASK_MAP` alone only when the
    /// step's environment leaves less than `lama::environ::TASK_SETUP_BYTES` to spare.
    fn room(&self, st: &mut Step) {
        if !st.placing && st.taskmap.is_none() {
            return;
        }
        let propagated = crate::room::var("SLURM_RLIMIT_STACK");
        st.exec_limit = exec_limit(room::task_stack_limit(propagated.as_deref()));
        st.check_room = st.placing
            || match (&st.taskmap, room::measure(&[])) {
                (Some(m), Some((size, _))) => tasks_must_check(
                    size,
                    export_bytes([("TASK_MAP", m.as_str())]),
                    st.exec_limit,
                ),
                _ => true,
            };
        st.lap("environment");
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
        if ctx == Context::Local {
            self.allocating = ["SLURM_JOB_ID", "SLURM_JOBID"]
                .iter()
                .all(|v| std::env::var_os(v).is_none());
        }
        let args = spank
            .plugin_argv()
            .map_err(|e| fail(&format!("plugstack.conf arguments: {e}")))?;
        exports::set_init_failure(Settings::init_failure_of(&args));
        self.settings = Settings::parse(&args).map_err(|e| fail(&e.to_string()))?;
        if ctx == Context::Slurmd && self.settings.topology.is_none() {
            node::write_cache(&self.settings);
        }
        Ok(())
    }

    fn init_post_opt(&mut self, spank: &mut SpankHandle) -> Result {
        let ctx = spank.context()?;
        if ctx == Context::Allocator {
            // sbatch's and salloc's own command line and input variable: the job's
            // --thread-spec, for its steps.
            let args = srun::own_options(spank, ctx);
            let var = match std::env::args_os().next() {
                Some(a) if a.to_string_lossy().ends_with("salloc") => "SALLOC_THREAD_SPEC",
                _ => "SBATCH_THREAD_SPEC",
            };
            srun::pass_thread_spec(&args, var);
        }
        if matches!(ctx, Context::Local | Context::Allocator) {
            // vars_os: a variable that is not UTF-8 (anyone's) must not stop srun.
            let env: Vec<(String, String)> = std::env::vars_os()
                .filter(|(k, _)| {
                    k.as_encoded_bytes()
                        .starts_with(lama::plugin::ENV_PREFIX.as_bytes())
                })
                .map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.to_string_lossy().into_owned(),
                    )
                })
                .collect();
            self.user = options::user_options(&env).map_err(|e| fail(&e))?;
            // Before srun writes the step's own variables (the site's CpuBind= among them).
            if ctx == Context::Local {
                self.slurm_asked = srun::binding_asked(spank);
            }
            self.settings
                .placing(&self.user, None)
                .map_err(|e| fail(&e.to_string()))?;
            let (_, gpus) = self
                .settings
                .devices(&self.user)
                .map_err(|e| fail(&e.to_string()))?;
            // srun takes --gpus-per-task and --gpu-bind from these variables too (sbatch and
            // salloc export them): then every node would refuse the step, so srun does, once.
            // srun's own --gpu-bind or --tres-bind beats the job's variables.
            if gpus > 0 {
                let options = srun::own_options(spank, ctx);
                let gpu = lama::slurm::own_option(&options, "--gpu-bind");
                let tres = lama::slurm::own_option(&options, "--tres-bind");
                let own = gpu.is_some() || tres.is_some();
                let get = |k: &str| {
                    match k {
                        "SLURM_GPU_BIND" if own => gpu.clone(),
                        "SLURM_TRES_BIND" if own => tres.clone(),
                        _ => std::env::var(k).ok(),
                    }
                    .filter(|v| !v.trim().is_empty())
                };
                let why = gpus_per_task(get, "SLURM_TRES_BIND")
                    .or_else(|| gpus_per_task(get, "SLURM_GPU_BIND"));
                if let Some(why) = why {
                    return Err(fail(&format!("--lama-gpus: {why}")));
                }
            }
            self.settings
                .threads(&self.user)
                .map_err(|e| fail(&e.to_string()))?;
            self.settings
                .gpu_visibility(&self.user)
                .map_err(|e| fail(&e.to_string()))?;
            self.settings
                .mem(&self.user)
                .map_err(|e| fail(&e.to_string()))?;
        }
        Ok(())
    }

    /// In srun, once the step exists and before any task starts: srun has written the step's
    /// own `--cpu-bind` and `--mem-bind` into its environment by now (they are not there when
    /// the options are read), so a binding that contradicts lama's placement fails the step
    /// here, once, and one the site's default placement yields to is said here, once.
    fn local_user_init(&mut self, spank: &mut SpankHandle) -> Result {
        self.step_created(spank)
    }

    fn user_init(&mut self, spank: &mut SpankHandle) -> Result {
        exports::withdraw_task_map();
        if spank.job_stepid()? >= FIRST_SPECIAL_STEP {
            return Ok(());
        }
        let vars = room::lama_variables();
        if let Some((_, inherited)) = &vars {
            // Only a release that lays block steps out in topology order has one to read; it
            // stays in the tasks' environment for `lama taskmap --from-slurm`.
            self.node_order = (cfg!(topo_order) && inherited.contains(&STEP_ORDER_VAR))
                .then(|| room::var(STEP_ORDER_VAR))
                .flatten();
            self.slurm_asked = inherited
                .contains(&room::STEP_SLURM_BINDING)
                .then(|| room::var(room::STEP_SLURM_BINDING))
                .flatten();
            for name in inherited.iter().filter(|&&n| n != STEP_ORDER_VAR) {
                let _ = spank.unsetenv(name);
            }
        }
        self.all_threads = vars
            .as_ref()
            .is_some_and(|(_, inherited)| inherited.contains(&room::STEP_THREADS));
        let settings = vars.as_ref().map_or(&[][..], |(s, _)| s.as_slice());
        let st = match (options::user_options(settings), room::launcher_daemon()) {
            (Ok(u), Some(what)) => {
                self.user = u;
                self.daemon_step(spank, what)
            }
            (Ok(u), None) => {
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
            (Err(e), _) => Step {
                failure: Some(e),
                ..Step::default()
            },
        };
        // For the admin, in slurmd's log; the user sees it from task_init on the step's stderr.
        if let Some(f) = &st.failure {
            log(LogLevel::Info, &format!("lama: no task started: {f}"));
        }
        let mut st = st;
        match st.taskmap_only() {
            Some(map) => exports::offer_task_map(map),
            None => st.once = (st.local_ranks.len() > 1).then(NodeOnce::new),
        }
        self.step = Some(st);
        Ok(())
    }

    fn task_init(&mut self, spank: &mut SpankHandle) -> Result {
        match &self.step {
            Some(st) => task::init(st, spank),
            None => Ok(()),
        }
    }
}
