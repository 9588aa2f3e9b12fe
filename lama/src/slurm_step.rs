//! What the SPANK plugin decides for a step on a node, as pure functions: the CPUs Slurm gave the
//! step, that node's tasks placed in global rank order, the task map checked against Slurm's
//! items, `SLURM_CPU_BIND` for lama's binding, and each task's devices. The options and
//! `plugstack.conf` arguments are [`crate::slurm_options`]'s, re-exported here. Slurm itself is
//! not touched here.

use thiserror::Error;

use crate::idset::{format_list, parse_list};
use crate::level::Level;
use crate::locality::{
    allowed_gpus, choose, task_env, AllowedGpus, Kind, Locality, LocalityError, TaskDevices,
    Weights,
};
use crate::mapper::{plan, PlacementError};
use crate::openmp::{plan_threads, ProcBind, ThreadPlan, Threads};
use crate::spec::Request;
use crate::taskmap::TaskMap;
use crate::topology::NodeTopology;

pub use crate::slurm_options::{
    env_name, mem_bind_conflict, Apply, GpuVisibility, OptionInfo, Options, Placing, SettingInfo,
    Settings, ThreadRequest, ENV_PREFIX, OMP_VARIABLES, OPTIONS, SETTINGS,
};

/// Why a step cannot be placed, in words for the user.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum StepError {
    /// A bad `--lama-*` value or combination.
    #[error("{0}")]
    Option(String),
    /// A bad `plugstack.conf` argument.
    #[error("plugstack.conf: {0}")]
    Setting(String),
    /// The CPUs Slurm gave the step do not fit the topology.
    #[error("{0}")]
    Cpus(String),
    /// The layout read from the step's environment disagrees with Slurm's items.
    #[error("{0}")]
    Layout(String),
    /// Placement failed (oversubscribed, no resources).
    #[error("{0}")]
    Placement(#[from] PlacementError),
    /// Devices could not be read or chosen.
    #[error("{0}")]
    Devices(String),
    /// The automatic policy could not place the node's tasks.
    #[error("{0}")]
    Policy(#[from] crate::policy::PolicyError),
}

/// The CPUs (OS indexes) of the cores Slurm gave a step on a node (`S_STEP_ALLOC_CORES`, Slurm's
/// abstract core numbers: the k-th core of the node in hwloc's logical order). A machine without
/// core objects counts its PUs as cores. `threads_per_core` (`SLURM_THREADS_PER_CORE`, from
/// `--hint=nomultithread` or `--threads-per-core=N`) keeps only each core's first N hardware
/// threads, in hwloc's logical order.
pub fn cores_to_cpus(
    topo: &NodeTopology,
    cores: &str,
    threads_per_core: Option<u32>,
) -> Result<Vec<u32>, StepError> {
    let ids = parse_list(cores)
        .map_err(|e| StepError::Cpus(format!("Slurm's core list '{cores}' cannot be read: {e}")))?;
    let pus = topo.pus();
    let spans: Vec<(u32, u32)> = if topo.has(Level::Core) {
        topo.objects(Level::Core)
            .iter()
            .map(|s| (s.start, s.end))
            .collect()
    } else {
        (0..pus.len() as u32).map(|i| (i, i + 1)).collect()
    };
    let mut out = Vec::new();
    for &k in &ids {
        let &(a, b) = spans.get(k as usize).ok_or_else(|| {
            StepError::Cpus(format!(
                "Slurm gave the step core {k}, but this node's topology has {} cores (cores {cores}); does slurm.conf describe this node as hwloc sees it?",
                spans.len()
            ))
        })?;
        let b = match threads_per_core {
            Some(n) => b.min(a.saturating_add(n.max(1))),
            None => b,
        };
        out.extend_from_slice(&pus[a as usize..b as usize]);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// One task of a node, placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskBinding {
    /// Global task id (Slurm's `SLURM_PROCID`).
    pub rank: u32,
    /// The CPUs to bind it to (OS indexes, ascending).
    pub cpus: Vec<u32>,
    /// The node's picture with the bound PUs marked, when asked for (drawing the whole node for
    /// every task costs more than placing them).
    pub picture: Option<String>,
}

/// The step's CPUs (from [`cores_to_cpus`]) that this process may use (`usable`, ascending:
/// offline CPUs and CPUs outside its cpuset are not); an error naming both sets when none is left.
pub fn usable_cpus(step: Vec<u32>, usable: &[u32]) -> Result<Vec<u32>, StepError> {
    if !step.iter().any(|c| usable.binary_search(c).is_ok()) {
        return Err(StepError::Cpus(format!(
            "none of the CPUs Slurm gave this step ({}) may be used here: this slurmstepd may use only CPUs '{}' (offline CPUs, or a cpuset without them)",
            format_list(&step),
            format_list(usable)
        )));
    }
    let mut step = step;
    step.retain(|c| usable.binary_search(c).is_ok());
    Ok(step)
}

/// Places one node's tasks on the step's CPUs of `node` (OS indexes; `ranks` are the global ids
/// of the tasks Slurm put on this node). Tasks are placed in global rank order with the odometer
/// for one node; the result is in ascending rank order, pictured on the whole node when
/// `pictures`.
pub fn place_node(
    node: &NodeTopology,
    step_cpus: &[u32],
    request: &Request,
    ranks: &[u32],
    pictures: bool,
) -> Result<Vec<TaskBinding>, StepError> {
    let (topo, allowed, sorted) = on_step_cpus(node, step_cpus, ranks, pictures)?;
    let topo = &*topo;
    let mut req = request.clone();
    req.np = Some(sorted.len());
    if sorted.is_empty() {
        return Ok(Vec::new());
    }
    let nodes = [topo];
    let p = plan(&nodes, &req)?;
    Ok(sorted
        .iter()
        .zip(p.placements())
        .map(|(&rank, pl)| {
            let cpus = topo.span_cpus(pl.span);
            TaskBinding {
                rank,
                picture: pictures.then(|| node.picture_cpus(&cpus, &allowed)),
                cpus,
            }
        })
        .collect())
}

/// What [`on_step_cpus`] gives: the restricted node, the CPUs drawn as allowed, the ranks.
type OnStepCpus<'a> = (std::borrow::Cow<'a, NodeTopology>, Vec<u32>, Vec<u32>);

/// The node restricted to the step's CPUs, those CPUs when pictures are drawn (else none), and
/// the node's ranks in ascending order: what both kinds of placement start from.
fn on_step_cpus<'a>(
    node: &'a NodeTopology,
    step_cpus: &[u32],
    ranks: &[u32],
    pictures: bool,
) -> Result<OnStepCpus<'a>, StepError> {
    let topo = node
        .restricted(step_cpus)
        .map_err(|e| StepError::Cpus(e.to_string()))?;
    let allowed = if pictures { topo.cpus() } else { Vec::new() };
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    Ok((topo, allowed, sorted))
}

/// One node's tasks placed by the automatic policy ([`crate::policy`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoPlaced {
    /// The tasks, in rank order, as [`place_node`] gives them.
    pub tasks: Vec<TaskBinding>,
    /// Each task's GPUs (device indexes), nearest first.
    pub gpus: Vec<Vec<usize>>,
    /// What the policy chose, and the expert options that give the same CPUs, when some do.
    pub summary: String,
}

/// Places one node's tasks with the automatic policy on the step's CPUs of `node`, given the
/// step's GPUs there, `workers` threads per task, and whether tasks may share hardware threads
/// (`stack`). `summary` asks for [`AutoPlaced::summary`], which costs more than placing.
pub fn place_auto(
    node: &NodeTopology,
    step_cpus: &[u32],
    gpus: &[crate::policy::PolicyGpu],
    ranks: &[u32],
    (workers, stack): (usize, bool),
    pictures: bool,
    summary: bool,
) -> Result<AutoPlaced, StepError> {
    let (topo, allowed, sorted) = on_step_cpus(node, step_cpus, ranks, pictures)?;
    let topo = &*topo;
    let placed = crate::policy::auto(topo, gpus, sorted.len(), workers, stack)?;
    let summary = if summary {
        policy_summary(topo, gpus, &placed)
    } else {
        String::new()
    };
    let (tasks, gpus) = sorted
        .iter()
        .zip(placed)
        .map(|(&rank, t)| {
            let b = TaskBinding {
                rank,
                picture: pictures.then(|| node.picture_cpus(&t.cpus, &allowed)),
                cpus: t.cpus,
            };
            (b, t.gpus)
        })
        .unzip();
    Ok(AutoPlaced {
        tasks,
        gpus,
        summary,
    })
}

/// Workers per task for the policy: `--lama-threads=N`, else the task's CPUs as the resource
/// manager counts them (`--cpus-per-task`), else 1.
pub fn auto_workers(threads: Option<&ThreadRequest>, per_task: Option<usize>) -> usize {
    match threads.map(|t| t.threads) {
        Some(Threads::Count(n)) => n as usize,
        _ => per_task.unwrap_or(1).max(1),
    }
}

/// The OpenMP places of tasks the policy placed: as `threads` asks, else one thread per CPU the
/// policy gave (one per core unless workers outnumber cores), spread.
pub fn auto_threads(
    topo: &NodeTopology,
    tasks: &[TaskBinding],
    threads: Option<&ThreadRequest>,
) -> Result<Vec<ThreadPlan>, StepError> {
    let bind = threads.map_or(ProcBind::default(), |t| t.bind);
    tasks
        .iter()
        .map(|task| {
            let n = match threads.map(|t| t.threads) {
                Some(Threads::Count(n)) => Threads::Count(n),
                _ => Threads::Count(task.cpus.len() as u32),
            };
            plan_threads(topo, task.rank, &task.cpus, n, bind)
                .map_err(|e| StepError::Option(e.to_string()))
        })
        .collect()
}

/// The policy's choice in words, with the expert options that give the same CPUs when some do.
pub fn policy_summary(
    topo: &NodeTopology,
    gpus: &[crate::policy::PolicyGpu],
    placed: &[crate::policy::AutoTask],
) -> String {
    let mut out = crate::policy::describe(topo, gpus, placed);
    match crate::policy::equivalent(topo, placed) {
        Some(req) => {
            out.push_str(&format!(
                "; the same CPUs as --lama-map={} --lama-bind={}",
                req.map_string(),
                req.bind
            ));
            if !req.mppr.is_empty() {
                out.push_str(&format!(" --lama-mppr={}", req.mppr_string()));
            }
        }
        None => out.push_str("; no --lama-map/--lama-bind/--lama-mppr gives the same CPUs"),
    }
    out
}

/// Checks that a step's task map puts exactly `ranks` on node `nodeid`: the task map comes from
/// environment values, the ranks from Slurm's own items.
pub fn check_node(map: &TaskMap, nodeid: u32, ranks: &[u32]) -> Result<(), StepError> {
    let mut want = ranks.to_vec();
    want.sort_unstable();
    let mut got = Vec::new();
    for (a, b) in map.tasks_on(u64::from(nodeid)) {
        got.extend((a..=b).filter_map(|t| u32::try_from(t).ok()));
    }
    if got == want {
        Ok(())
    } else {
        Err(StepError::Layout(format!(
            "the task map from the step's layout puts tasks {} on node {nodeid}, Slurm runs {} there",
            format_list(&got),
            format_list(&want)
        )))
    }
}

/// The `SLURM_CPU_BIND*` variables describing lama's binding of a node's tasks, replacing those
/// Slurm's task plugin wrote for its own binding (`previous`, the task's `SLURM_CPU_BIND`, keeps
/// its `verbose`/`quiet` word). `local` holds each task's CPUs in Slurm's local task order, as
/// Slurm lists its masks.
pub fn cpu_bind_env(previous: &str, local: &[&[u32]]) -> Vec<(String, String)> {
    let verbose = if previous.split(',').any(|w| w == "verbose") {
        "verbose"
    } else {
        "quiet"
    };
    let list = local
        .iter()
        .map(|c| crate::idset::hex_mask(c))
        .collect::<Vec<_>>()
        .join(",");
    vec![
        (
            "SLURM_CPU_BIND".into(),
            format!("{verbose},mask_cpu:{list}"),
        ),
        ("SLURM_CPU_BIND_TYPE".into(), "mask_cpu:".into()),
        ("SLURM_CPU_BIND_LIST".into(), list),
        ("SLURM_CPU_BIND_VERBOSE".into(), verbose.into()),
    ]
}

/// How a step's task map was checked against Slurm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapCheck {
    /// Against the tasks Slurm's items put on this node ([`check_node`]).
    Node,
    /// One component of a heterogeneous step: Slurm's items count tasks and nodes within the
    /// component, while the layout Slurm exports (and so the map) spans the whole step, as do the
    /// `SLURM_PROCID` and `SLURM_NODEID` slurmstepd writes for each task. Each task is checked
    /// with those ([`check_task`]).
    PerTask,
}

/// Checks a step's task map (computed from the step's environment) against Slurm's items: this
/// node's id, the global ids of its tasks, and the step's task count. `het_size` is the number
/// of components of a heterogeneous step (`SLURM_HET_SIZE`), if any: there the map covers every
/// component, and is checked per task instead.
pub fn check_step_map(
    map: &TaskMap,
    nodeid: u32,
    ranks: &[u32],
    total: u32,
    het_size: Option<u32>,
) -> Result<MapCheck, StepError> {
    if het_size.is_some_and(|n| n > 1) && map.total_tasks() > u64::from(total) {
        return Ok(MapCheck::PerTask);
    }
    check_node(map, nodeid, ranks).map(|_| MapCheck::Node)
}

/// Checks that the map puts task `procid` on node `nodeid` (the `SLURM_PROCID` and
/// `SLURM_NODEID` slurmstepd wrote for a task of a heterogeneous step).
pub fn check_task(map: &TaskMap, procid: &str, nodeid: &str) -> Result<(), StepError> {
    let (Ok(task), Ok(node)) = (procid.trim().parse::<u64>(), nodeid.trim().parse::<u64>()) else {
        return Err(StepError::Layout(format!(
            "Slurm's task ids cannot be read (SLURM_PROCID '{procid}', SLURM_NODEID '{nodeid}')"
        )));
    };
    match map.node_of(task) {
        Some(n) if n == node => Ok(()),
        got => Err(StepError::Layout(format!(
            "the task map from the step's layout puts task {task} on node {}, Slurm runs it on node {node}",
            got.map_or_else(|| "none".to_string(), |n| n.to_string())
        ))),
    }
}

/// What a node hands its placed tasks: per task (in the order of `tasks`), its devices, and how
/// to write them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeDevices {
    picks: Vec<TaskDevices>,
    /// How Slurm numbered the GPUs it gave, per device.
    entries: Vec<(usize, String)>,
    nics: bool,
    gpus: bool,
    /// The step's GPUs on the node.
    step_gpus: Vec<usize>,
    /// Whether every task also sees all of [`Self::step_gpus`] (`--lama-gpu-visibility=all`).
    share_all: bool,
}

impl NodeDevices {
    /// Whether a task may get other devices than this choice gave it: GPUs are chosen among
    /// those Slurm wrote into each task's environment, so a step with GPUs chooses again per
    /// task; NICs do not depend on it.
    pub fn depends_on_task_env(&self) -> bool {
        self.gpus
    }

    /// Task `i`'s device environment (`LAMA_NICS`, `UCX_NET_DEVICES`, `LAMA_GPUS` and the GPU
    /// runtimes' variables); empty for a task that does not exist.
    pub fn env(&self, loc: &Locality, i: usize) -> Vec<(String, String)> {
        match self.picks.get(i) {
            Some(p) => task_env(
                loc,
                p,
                self.nics,
                self.gpus,
                &self.entries,
                self.share_all.then_some(self.step_gpus.as_slice()),
            ),
            None => Vec::new(),
        }
    }

    /// Which of the step's GPUs each task sees besides its own.
    pub fn sharing(mut self, v: GpuVisibility) -> NodeDevices {
        self.share_all = v == GpuVisibility::All;
        self
    }
}

/// The devices of each placed task: the node's tasks in rank order share the node's devices as
/// [`crate::locality::choose`] decides. `get` reads the step's environment (the GPUs Slurm gave
/// the job).
pub fn choose_devices(
    loc: &Locality,
    tasks: &[TaskBinding],
    (nics, gpus): (usize, usize),
    weights: Option<&Weights>,
    get: impl Fn(&str) -> Option<String>,
) -> Result<NodeDevices, StepError> {
    let given = if gpus > 0 {
        allowed_gpus(loc, get).map_err(|e| StepError::Devices(e.to_string()))?
    } else {
        None
    };
    choose_among(loc, tasks, (nics, gpus), weights, given)
}

/// [`choose_devices`] with the GPUs the job was given already known (`None`: every GPU of the
/// node), as the Flux shell knows them from the job's resources.
pub fn choose_among(
    loc: &Locality,
    tasks: &[TaskBinding],
    (nics, gpus): (usize, usize),
    weights: Option<&Weights>,
    given: Option<AllowedGpus>,
) -> Result<NodeDevices, StepError> {
    let err = |e: LocalityError| StepError::Devices(e.to_string());
    let cpus: Vec<&[u32]> = tasks.iter().map(|t| t.cpus.as_slice()).collect();
    let picks = choose(
        loc,
        &cpus,
        nics,
        gpus,
        given.as_ref().map(|g| g.devices.as_slice()),
        weights,
    )
    .map_err(err)?;
    let step_gpus = loc.candidates(Kind::Gpu, given.as_ref().map(|g| g.devices.as_slice()));
    Ok(NodeDevices {
        picks,
        entries: given.map(|g| g.entries).unwrap_or_default(),
        nics: nics > 0,
        gpus: gpus > 0,
        step_gpus,
        share_all: false,
    })
}

/// The devices of tasks the automatic policy placed: its GPUs (`gpus`, per task), and the
/// `nics` nearest NICs chosen as [`choose_among`] does. `given` are the GPUs Slurm gave the step.
pub fn auto_devices(
    loc: &Locality,
    tasks: &[TaskBinding],
    gpus: &[Vec<usize>],
    nics: usize,
    weights: Option<&Weights>,
    given: Option<AllowedGpus>,
) -> Result<NodeDevices, StepError> {
    let mut d = choose_among(loc, tasks, (nics, 0), weights, given)?;
    for (p, g) in d.picks.iter_mut().zip(gpus) {
        p.gpus = g.clone();
    }
    d.gpus = gpus.iter().any(|g| !g.is_empty());
    Ok(d)
}

/// Each placed task's device environment ([`NodeDevices::env`]), in the order of `tasks`.
pub fn node_devices(
    loc: &Locality,
    tasks: &[TaskBinding],
    counts: (usize, usize),
    weights: Option<&Weights>,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Vec<Vec<(String, String)>>, StepError> {
    let d = choose_devices(loc, tasks, counts, weights, get)?;
    Ok((0..tasks.len()).map(|i| d.env(loc, i)).collect())
}

/// The devices and OpenMP places of a task's verbose line (` gpus=cuda0 omp_places={0},{1}`),
/// from the variables it was given.
pub fn verbose_extras<'a>(vars: impl IntoIterator<Item = &'a (String, String)>) -> String {
    vars.into_iter()
        .filter_map(|(k, v)| match k.as_str() {
            "LAMA_NICS" | "LAMA_GPUS" => Some(format!(" {}={v}", k[5..].to_lowercase())),
            "OMP_PLACES" => Some(format!(" omp_places={v}")),
            _ => None,
        })
        .collect()
}

/// The node's cost in a verbose line: ` (node placed in 1.92 ms: topology 1.764, placement 0.016)`.
pub fn placed_in(elapsed: std::time::Duration, phases: &[(&str, std::time::Duration)]) -> String {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let phases: Vec<String> = phases
        .iter()
        .map(|(what, d)| format!("{what} {:.3}", ms(*d)))
        .collect();
    format!(
        " (node placed in {:.2} ms: {})",
        ms(elapsed),
        phases.join(", ")
    )
}
