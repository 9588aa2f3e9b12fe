//! What `lama exec` decides for a rank that another launcher started: which rank of its node it
//! is ([`rank`]), and the whole node's placement as the plugins make it ([`place_node_ranks`]),
//! so that every rank of a node reaches the same plan without talking to the others. Reading
//! the machine, binding and `exec` are the `lama` command's.
//!
//! | module | what |
//! |---|---|
//! | [`rank`] | the launchers' variables: local rank and size, the launch's key, `torchrun`'s task map |
//! | this file | the node's ranks placed by a map or the policy, with their memory, devices and OpenMP variables |

pub mod rank;

pub use rank::{launch_key, local_rank, torchrun_nodes, Launcher, LocalRank, RankError};

use crate::idset::format_list;
use crate::locality::{AllowedGpus, Locality, Weights};
use crate::memory::MemPolicy;
use crate::openmp::plan_threads;
use crate::plugin::{
    auto_devices, auto_threads, auto_workers, choose_among, place_auto, place_node, Options,
    Placing, Settings, StepError, TaskBinding,
};
use crate::policy::gpus_of;
use crate::topology::NodeTopology;

/// The `--lama-*` spelling of the plugins' messages, as `lama exec` spells its options.
pub fn exec_words(msg: &str) -> String {
    msg.replace("--lama-", "--")
}

/// The user's options as `lama exec` reads them: with no map (nor `--gpus`, which a map goes
/// with) and no `--policy`, the automatic policy places the node.
pub fn with_default_policy(mut user: Options) -> Options {
    let map = [
        &user.map,
        &user.bind,
        &user.mppr,
        &user.order,
        &user.map_by,
        &user.bind_to,
        &user.rank_by,
        &user.gpus,
        &user.policy,
    ]
    .iter()
    .any(|o| o.is_some());
    if !map && !user.off {
        user.policy = Some("auto".into());
    }
    user
}

/// What a node offers the ranks `lama exec` places there.
pub struct ExecNode<'a> {
    /// The node's whole topology.
    pub topology: &'a NodeTopology,
    /// Its devices and NUMA nodes, when the options need them.
    pub locality: Option<&'a Locality>,
    /// The CPUs the job may use there (OS indexes, ascending).
    pub cpus: &'a [u32],
    /// The GPUs the job was given there (`None`: every GPU of the node).
    pub gpus: Option<AllowedGpus>,
    /// CPUs per rank as the scheduler counts them (srun's `-c`): the policy's workers.
    pub cpus_per_rank: Option<usize>,
    /// Whether the job already has OpenMP variables of its own.
    pub has_omp: bool,
    /// The NUMA nodes the job may allocate from (`None`: not known, every node).
    pub mems_allowed: Option<&'a [u32]>,
    /// Device weights (the site's file).
    pub weights: Option<&'a Weights>,
}

/// One rank of the node, placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecRank {
    /// Its CPUs (OS indexes, ascending).
    pub cpus: Vec<u32>,
    /// Its memory's NUMA nodes and how they are bound, when asked for.
    pub mems: Option<(Vec<u32>, MemPolicy)>,
    /// The variables it gets: `LAMA_CPUS`, `LAMA_MEMS`, OpenMP's, its devices'.
    pub env: Vec<(String, String)>,
}

/// The node's ranks placed, in local rank order, and what the policy chose (when it placed
/// them and `summary` asks).
pub struct ExecPlan {
    /// Each rank's placement.
    pub ranks: Vec<ExecRank>,
    /// The policy's choice in words.
    pub summary: Option<String>,
    /// The OpenMP variables the job has and keeps (lama's were not given).
    pub omp_kept: bool,
    /// More OpenMP threads per rank than hardware threads: (threads, hardware threads).
    pub crowded: Option<(usize, usize)>,
}

/// Places `size` ranks on `node` as the plugins place a step's tasks on a node: by a map, or by
/// the automatic policy; then their memory, OpenMP places and devices, as `settings` and `user`
/// ask. Deterministic: every rank of the node computes the same plan.
pub fn place_node_ranks(
    node: &ExecNode,
    settings: &Settings,
    user: &Options,
    size: usize,
    summary: bool,
) -> Result<ExecPlan, StepError> {
    let ids: Vec<u32> = (0..size as u32).collect();
    let topo = node.topology;
    let (tasks, auto) = match settings.placing(user, Some(size))? {
        Placing::Map(req) => (place_node(topo, node.cpus, &req, &ids, false)?, None),
        Placing::Policy => {
            let gpus = match node.locality {
                Some(loc) => gpus_of(loc, node.gpus.as_ref().map(|g| g.devices.as_slice())),
                None => Vec::new(),
            };
            let threads = settings.threads(user)?;
            let workers = auto_workers(threads.as_ref(), node.cpus_per_rank);
            let stack = settings.oversubscribe(user);
            let p = place_auto(
                topo,
                node.cpus,
                &gpus,
                &ids,
                (workers, stack),
                false,
                summary,
            )?;
            let text = summary.then_some(p.summary);
            (p.tasks, Some((p.gpus, text)))
        }
        Placing::LeftAlone => {
            return Err(StepError::Option(
                "--off asks for no placement: lama exec then runs the command as it is".into(),
            ))
        }
    };
    let mut ranks: Vec<ExecRank> = tasks
        .iter()
        .map(|t| ExecRank {
            cpus: t.cpus.clone(),
            mems: None,
            env: vec![("LAMA_CPUS".into(), format_list(&t.cpus))],
        })
        .collect();
    let (omp_kept, crowded) = openmp(node, settings, user, &tasks, auto.is_some(), &mut ranks)?;
    if let Some(mode) = settings.mem(user)? {
        let numa = node.locality.map_or(&[][..], Locality::numa);
        for r in &mut ranks {
            let (nodes, policy) = crate::tiers::task_memory(numa, &r.cpus, mode, node.mems_allowed)
                .map_err(|e| StepError::Devices(e.to_string()))?;
            r.env.push(("LAMA_MEMS".into(), format_list(&nodes)));
            r.mems = Some((nodes, policy));
        }
    }
    let counts = settings.devices(user)?;
    let (policy_gpus, summary) = match auto {
        Some((g, s)) => (Some(g), s),
        None => (None, None),
    };
    let auto_gpus = policy_gpus
        .as_ref()
        .is_some_and(|g| g.iter().any(|t| !t.is_empty()));
    if let (Some(loc), true) = (node.locality, counts != (0, 0) || auto_gpus) {
        let given = node.gpus.clone();
        let chosen = match policy_gpus {
            Some(g) => auto_devices(loc, &tasks, &g, counts.0, node.weights, given)?,
            None => choose_among(loc, &tasks, counts, node.weights, given)?,
        }
        .sharing(settings.gpu_visibility(user)?);
        for (i, r) in ranks.iter_mut().enumerate() {
            r.env.extend(chosen.env(loc, i));
        }
    }
    Ok(ExecPlan {
        ranks,
        summary,
        omp_kept,
        crowded,
    })
}

/// The ranks' OpenMP variables (the policy's, or `--threads`'), unless the job has its own and
/// did not ask to replace them: whether it keeps its own, and how crowded the threads are.
fn openmp(
    node: &ExecNode,
    settings: &Settings,
    user: &Options,
    tasks: &[TaskBinding],
    auto: bool,
    ranks: &mut [ExecRank],
) -> Result<(bool, Option<(usize, usize)>), StepError> {
    let threads = settings.threads(user)?;
    if !auto && threads.is_none() {
        return Ok((false, None));
    }
    if node.has_omp && !threads.is_some_and(|t| t.replace) {
        return Ok((true, None));
    }
    let plans = match threads {
        Some(t) if !auto => tasks
            .iter()
            .map(|task| plan_threads(node.topology, task.rank, &task.cpus, t.threads, t.bind))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| StepError::Option(e.to_string()))?,
        t => auto_threads(node.topology, tasks, t.as_ref(), node.cpus_per_rank)?,
    };
    let crowded = plans
        .iter()
        .find(|p| p.extra > 0)
        .map(|p| (p.threads(), p.places.len()));
    for (p, r) in plans.iter().zip(ranks) {
        r.env.extend(p.env());
    }
    Ok((false, crowded))
}
