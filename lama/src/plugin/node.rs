//! One node's tasks placed, as both plugins place them: the CPUs the resource manager gave the
//! job there (Slurm's cores, Flux's R), of those the ones the process may use, the tasks on them
//! by a map or by the automatic policy, their OpenMP places, and the verbose line's parts.

use crate::idset::{format_list, parse_list};
use crate::level::Level;
use crate::mapper::plan;
use crate::openmp::{plan_threads, ProcBind, ThreadPlan, Threads};
use crate::spec::Request;
use crate::topology::NodeTopology;

use super::error::StepError;
use super::options::ThreadRequest;

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
    // Open MPI's slots on a node are what the resource manager gave: here, the tasks Slurm put
    // on it (srun never starts more than its CPUs allow without --overcommit).
    if let Some(o) = req.open_mpi.as_mut() {
        o.slots = Some(sorted.len() as u32);
        // More tasks than cores: Slurm counted hardware threads as its CPUs, so they are the
        // CPUs here too (Open MPI's :hwtcpus), each task binding one.
        if sorted.len() > topo.objects(crate::Level::Core).len() {
            o.hwtcpus = true;
        }
    }
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
    /// The domain each task lies in (index into `domain_cpus`), `None` for a task over several.
    pub domains: Vec<Option<usize>>,
    /// The CPUs of each of the node's domains within the step, ascending.
    pub domain_cpus: Vec<Vec<u32>>,
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
    let domains = placed
        .iter()
        .map(|t| match t.domains.as_slice() {
            [d] => Some(*d),
            _ => None,
        })
        .collect();
    let domain_cpus = crate::policy::domain_cpus(topo);
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
        domains,
        domain_cpus,
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

/// The OpenMP places of tasks the policy placed: as `threads` asks, else the CPUs per task the
/// resource manager counts (`per_task`: srun's or Flux's `-c`) when the policy gave a task more
/// than that, else one thread per CPU the policy gave (one per core unless workers outnumber
/// cores), spread.
pub fn auto_threads(
    topo: &NodeTopology,
    tasks: &[TaskBinding],
    threads: Option<&ThreadRequest>,
    per_task: Option<usize>,
) -> Result<Vec<ThreadPlan>, StepError> {
    let bind = threads.map_or(ProcBind::default(), |t| t.bind);
    tasks
        .iter()
        .map(|task| {
            let n = match threads.map(|t| t.threads) {
                Some(Threads::Count(n)) => Threads::Count(n),
                _ => {
                    let cpus = task.cpus.len();
                    Threads::Count(per_task.filter(|&c| c > 0).map_or(cpus, |c| c.min(cpus)) as u32)
                }
            };
            // The policy gave every task what the node holds: more threads than that share.
            match n {
                Threads::Count(k) if k as usize > task.cpus.len() => {
                    ThreadPlan::crowded(topo, task.rank, &task.cpus, k as usize, bind)
                }
                n => plan_threads(topo, task.rank, &task.cpus, n, bind),
            }
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

/// A task's memory binding in its `--lama-verbose` line: ` mems=2 (bind)`; empty when its
/// memory is not bound.
pub fn verbose_mems(nodes: Option<&[u32]>, policy: Option<crate::memory::MemPolicy>) -> String {
    match (nodes, policy) {
        (Some(n), Some(p)) => format!(" mems={} ({})", crate::idset::format_list(n), p.name()),
        _ => String::new(),
    }
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
