//! Judging a running step's real placement (`lama check`): what each task and thread was seen
//! using on its node, against the CPUs Slurm gave the job there, the node's NUMA domains and GPUs,
//! and, when lama placed the step, its plan. Pure: the observations come from `lama check`'s
//! probes, which read `/proc` on each node.
//!
//! Each rule yields at most one [`Finding`] per node and kind, naming every task concerned, so a
//! report of a thousand misplaced tasks stays a few lines.

use serde::Serialize;

use crate::idset::format_list;
use crate::locality::{Kind, Locality, Numa};
use crate::memory::local_nodes;

/// One thread of a task, as sampled.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ThreadSeen {
    /// Its thread id.
    pub tid: u32,
    /// The CPUs it may run on (`Cpus_allowed_list`).
    pub cpus: Vec<u32>,
    /// The CPUs it was seen running on during the sample (`/proc/.../stat`, field 39).
    pub last_cpus: Vec<u32>,
    /// Whether it used CPU time during the sample.
    #[serde(skip)]
    pub busy: bool,
}

/// One task of the step on its node, as the probe saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TaskSeen {
    /// The node's name, as Slurm knows it.
    pub host: String,
    /// The task's rank (MPI's, or Slurm's task id).
    pub rank: u32,
    /// Its main process.
    pub pid: u32,
    /// The CPUs it was bound to: what lama or Slurm bound it to when they say (`LAMA_CPUS`,
    /// Slurm's mask list), else what its threads may use together.
    pub cpus: Vec<u32>,
    /// Its threads (every process of the task).
    pub threads: Vec<ThreadSeen>,
    /// The NUMA nodes its pages sit on, most pages first.
    pub mems: Vec<u32>,
    /// The NUMA nodes its memory policy names, with the policy (`bind`, `interleave`, ...).
    #[serde(skip)]
    pub policy: Option<(String, Vec<u32>)>,
    /// Its pages per NUMA node (node, pages).
    #[serde(skip)]
    pub pages: Vec<(u32, u64)>,
    /// The GPUs it sees, as the node numbers them.
    pub gpus: Vec<u32>,
    /// The NICs it is told to use (`UCX_NET_DEVICES`, `LAMA_NICS`, ...).
    pub nics: Vec<String>,
    /// The CPUs lama placed it on (`LAMA_CPUS`), when lama placed the step.
    #[serde(skip)]
    pub planned: Option<Vec<u32>>,
    /// The node `TASK_MAP` puts its rank on, when the task has one (node index in the step).
    #[serde(skip)]
    pub planned_node: Option<u32>,
}

/// One node of the job, as `lama check` knows it.
#[derive(Clone, Debug)]
pub struct NodeSeen {
    /// The node's name.
    pub host: String,
    /// Its index among the step's nodes (`TASK_MAP`'s numbering).
    pub index: u32,
    /// The CPUs Slurm gave the job there (OS indexes).
    pub allocated: Vec<u32>,
    /// Its NUMA nodes.
    pub numa: Vec<Numa>,
    /// Its devices and their distances, when read.
    pub locality: Option<Locality>,
    /// The GPUs Slurm gave the job there, as the node numbers them.
    pub job_gpus: Vec<u32>,
}

/// What is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// Tasks of the step share CPUs while allocated CPUs sit idle.
    SharedCpu,
    /// A task's busy threads crowd onto fewer CPUs than its binding has.
    StackedThreads,
    /// A task spans NUMA domains it could fit inside one of.
    NumaSpan,
    /// A task's GPU (the first it sees, which a program uses by default) is not among the
    /// nearest to its CPUs while a nearer one is the job's.
    FarGpu,
    /// A task's pages are bound to, or sit on, NUMA nodes other than its CPUs'.
    RemoteMemory,
    /// Allocated CPUs no task may use.
    IdleCpus,
    /// The binding differs from lama's plan.
    NotAsPlanned,
}

impl FindingKind {
    /// The name reports use (`shared-cpu`, ...).
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::SharedCpu => "shared-cpu",
            FindingKind::StackedThreads => "stacked-threads",
            FindingKind::NumaSpan => "numa-span",
            FindingKind::FarGpu => "far-gpu",
            FindingKind::RemoteMemory => "remote-memory",
            FindingKind::IdleCpus => "idle-cpus",
            FindingKind::NotAsPlanned => "not-as-planned",
        }
    }
}

/// One finding: its kind, what was seen and the fix, and the ranks concerned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What kind of problem.
    pub kind: FindingKind,
    /// What was seen, where, and the fix.
    pub message: String,
    /// The ranks concerned.
    pub tasks: Vec<u32>,
}

/// The pages a task must have touched before where they sit is judged (1 MiB of 4 KiB pages).
const MIN_PAGES: u64 = 256;

fn union(sets: impl IntoIterator<Item = impl AsRef<[u32]>>) -> Vec<u32> {
    let mut out: Vec<u32> = sets.into_iter().flat_map(|s| s.as_ref().to_vec()).collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn overlaps(a: &[u32], b: &[u32]) -> bool {
    a.iter().any(|c| b.contains(c))
}

/// A task's CPUs that lie in `domain`.
fn within(cpus: &[u32], domain: &[u32]) -> usize {
    cpus.iter().filter(|c| domain.contains(c)).count()
}

/// "ranks 0, 1 and 5" for a message.
fn ranks(r: &[u32]) -> String {
    let list = format_list(r);
    if r.len() == 1 {
        format!("rank {list}")
    } else {
        format!("ranks {list}")
    }
}

/// The ranks a per-task rule flags, and the first flagged task's example (`None` when no task
/// is flagged): a finding names every task but shows one.
fn flag(
    tasks: &[&TaskSeen],
    mut rule: impl FnMut(&TaskSeen) -> Option<String>,
) -> Option<(Vec<u32>, String)> {
    let mut flagged = Vec::new();
    let mut example = None;
    for t in tasks {
        if let Some(e) = rule(t) {
            example.get_or_insert(e);
            flagged.push(t.rank);
        }
    }
    example.map(|e| (flagged, e))
}

/// Every finding for the tasks seen on `node`, in [`FindingKind`] order.
pub fn judge_node(node: &NodeSeen, tasks: &[&TaskSeen]) -> Vec<Finding> {
    let mut out = Vec::new();
    let host = &node.host;
    let mut push = |kind, message, tasks| {
        out.push(Finding {
            kind,
            message,
            tasks,
        })
    };
    let used = union(tasks.iter().map(|t| &t.cpus));
    let idle: Vec<u32> = node
        .allocated
        .iter()
        .copied()
        .filter(|c| !used.contains(c))
        .collect();

    // shared-cpu: tasks whose bindings overlap, while some of the job's CPUs are in no binding.
    let mut sharing = Vec::new();
    for (i, a) in tasks.iter().enumerate() {
        if tasks
            .iter()
            .enumerate()
            .any(|(j, b)| i != j && overlaps(&a.cpus, &b.cpus))
        {
            sharing.push(a.rank);
        }
    }
    if !sharing.is_empty() && !idle.is_empty() {
        sharing.sort_unstable();
        let shared = union(
            tasks
                .iter()
                .filter(|t| sharing.contains(&t.rank))
                .map(|t| &t.cpus),
        );
        push(
            FindingKind::SharedCpu,
            format!(
                "{} on {host} share CPUs {} while the job's CPUs {} there run no task: bind each task to CPUs of its own (srun --cpu-bind=cores, or --lama-map=csbnh --lama-bind=1c)",
                ranks(&sharing),
                format_list(&shared),
                format_list(&idle)
            ),
            sharing,
        );
    }

    if let Some((r, example)) = flag(tasks, stacked_threads) {
        push(
            FindingKind::StackedThreads,
            format!(
                "{} on {host}: threads crowd onto fewer CPUs than the task's binding has ({example}): give OpenMP one place per thread (OMP_PLACES=threads or cores with OMP_PROC_BIND=spread or close, or --lama-threads)",
                ranks(&r)
            ),
            r,
        );
    }

    let domains: Vec<Vec<u32>> = node
        .numa
        .iter()
        .filter(|n| n.default && !n.cpus.is_empty())
        .map(|n| n.cpus.clone())
        .collect();
    if let Some((r, example)) = flag(tasks, |t| numa_span(node, &domains, t)) {
        push(
            FindingKind::NumaSpan,
            format!(
                "{} on {host}: over NUMA domains one of which could hold the task ({example}): keep each task in one domain (--lama-policy=auto, --lama-map=csbnh, or srun --cpu-bind=ldoms)",
                ranks(&r)
            ),
            r,
        );
    }

    if let Some(loc) = &node.locality {
        let gpus: Vec<(usize, u32)> = loc
            .devices()
            .iter()
            .enumerate()
            .filter(|(_, d)| d.kind == Kind::Gpu)
            .filter_map(|(i, d)| Some((i, d.index?)))
            .filter(|(_, idx)| node.job_gpus.contains(idx))
            .collect();
        if let Some((r, example)) = flag(tasks, |t| far_gpu(loc, &gpus, t)) {
            push(
                FindingKind::FarGpu,
                format!(
                    "{} on {host}: a GPU farther from the task's CPUs than one the job has ({example}): --gpu-bind=closest, or --lama-gpus=1 to give each task its nearest",
                    ranks(&r)
                ),
                r,
            );
        }
    }

    if let Some((r, example)) = flag(tasks, |t| remote_memory(&node.numa, t)) {
        push(
            FindingKind::RemoteMemory,
            format!(
                "{} on {host}: memory away from the task's CPUs ({example}): bind memory with the CPUs (--lama-mem=local, or srun --mem-bind=local)",
                ranks(&r)
            ),
            r,
        );
    }

    // idle-cpus: the job's CPUs on the node that no task may use.
    if !idle.is_empty() && !tasks.is_empty() {
        push(
            FindingKind::IdleCpus,
            format!(
                "the job's CPUs {} on {host} are in no task's binding: run more tasks or threads there, or ask for fewer CPUs (a step that uses part of its job on purpose may ignore this)",
                format_list(&idle)
            ),
            Vec::new(),
        );
    }

    if let Some((r, example)) = flag(tasks, |t| not_as_planned(node.index, t)) {
        push(
            FindingKind::NotAsPlanned,
            format!(
                "{} on {host}: not bound as lama placed the task ({example}): something rebound it after launch (a launcher, a runtime's own binding, taskset)",
                ranks(&r)
            ),
            r,
        );
    }
    out
}

/// stacked-threads: the task's busy threads ran on fewer CPUs than its binding offered them.
fn stacked_threads(t: &TaskSeen) -> Option<String> {
    let busy: Vec<&ThreadSeen> = t.threads.iter().filter(|th| th.busy).collect();
    if busy.len() < 2 {
        return None;
    }
    let ran = union(busy.iter().map(|th| &th.last_cpus));
    let room = busy.len().min(t.cpus.len());
    (!ran.is_empty() && ran.len() < room).then(|| {
        format!(
            "rank {}'s {} busy threads ran on CPUs {} of its {}",
            t.rank,
            busy.len(),
            format_list(&ran),
            format_list(&t.cpus)
        )
    })
}

/// numa-span: the task is over several domains while one domain's allocated CPUs could hold it.
fn numa_span(node: &NodeSeen, domains: &[Vec<u32>], t: &TaskSeen) -> Option<String> {
    let touched = domains.iter().filter(|d| within(&t.cpus, d) > 0).count();
    let fits = domains
        .iter()
        .any(|d| within(&node.allocated, d) >= t.cpus.len());
    (touched > 1 && fits).then(|| {
        format!(
            "rank {} on CPUs {} over {touched} NUMA domains",
            t.rank,
            format_list(&t.cpus)
        )
    })
}

/// far-gpu: the task's GPU is farther from its CPUs than one of the job's `gpus` (device index
/// in `loc`, GPU number) on the node.
fn far_gpu(loc: &Locality, gpus: &[(usize, u32)], t: &TaskSeen) -> Option<String> {
    if t.gpus.is_empty() || t.cpus.is_empty() {
        return None;
    }
    let dist = loc.distances(&t.cpus, None);
    let best = gpus.iter().map(|&(i, _)| dist[i]).min()?;
    // The GPU a program uses unless told otherwise: the first it sees.
    let (d, idx) = t
        .gpus
        .first()
        .and_then(|g| gpus.iter().find(|(_, idx)| idx == g))
        .map(|&(i, idx)| (dist[i], idx))
        .filter(|&(d, _)| d > best)?;
    let near: Vec<u32> = gpus
        .iter()
        .filter(|&&(i, _)| dist[i] == best)
        .map(|&(_, idx)| idx)
        .collect();
    Some(format!(
        "rank {} uses GPU {idx} (distance {d}) where GPU {} is nearer (distance {best})",
        t.rank,
        format_list(&near)
    ))
}

/// remote-memory: most of the task's pages, or its policy's nodes, away from its CPUs.
fn remote_memory(numa: &[Numa], t: &TaskSeen) -> Option<String> {
    let local = local_nodes(numa, &t.cpus, None);
    if local.is_empty() {
        return None;
    }
    let total: u64 = t.pages.iter().map(|&(_, p)| p).sum();
    let away: u64 = t
        .pages
        .iter()
        .filter(|(n, _)| !local.contains(n) && is_default(numa, *n))
        .map(|&(_, p)| p)
        .sum();
    let bound_away = t.policy.as_ref().is_some_and(|(p, nodes)| {
        // A bind to memory without CPUs (HBM, CXL, ...) is a tier choice, not a mistake.
        p == "bind"
            && !nodes.is_empty()
            && nodes
                .iter()
                .all(|n| !local.contains(n) && is_default(numa, *n))
    });
    // A few pages say nothing: a task that has touched under 1 MiB is judged by its policy.
    if !(bound_away || (total >= MIN_PAGES && away * 2 > total)) {
        return None;
    }
    Some(match &t.policy {
        Some((p, nodes)) if bound_away => format!(
            "rank {}'s memory is bound ({p}) to NUMA node {}, its CPUs' is {}",
            t.rank,
            format_list(nodes),
            format_list(&local)
        ),
        _ => format!(
            "{away} of rank {}'s {total} pages sit away from NUMA node {}, its CPUs'",
            t.rank,
            format_list(&local)
        ),
    })
}

/// not-as-planned: the task may run outside what lama placed it on, or runs on another node
/// (index `here`) than `TASK_MAP` says.
fn not_as_planned(here: u32, t: &TaskSeen) -> Option<String> {
    if let Some(n) = t.planned_node.filter(|&n| n != here) {
        return Some(format!(
            "TASK_MAP puts rank {} on node {n}, it runs on node {here}",
            t.rank
        ));
    }
    let planned = t.planned.as_ref()?;
    let may = union(t.threads.iter().map(|th| &th.cpus));
    may.iter().any(|c| !planned.contains(c)).then(|| {
        format!(
            "rank {} was placed on CPUs {}, its threads may run on {}",
            t.rank,
            format_list(planned),
            format_list(&may)
        )
    })
}

fn is_default(numa: &[Numa], os: u32) -> bool {
    numa.iter().any(|n| n.os_index == os && n.default)
}

/// Every finding of a step: each node's, in node order.
pub fn judge(nodes: &[NodeSeen], tasks: &[TaskSeen]) -> Vec<Finding> {
    nodes
        .iter()
        .flat_map(|n| {
            let here: Vec<&TaskSeen> = tasks.iter().filter(|t| t.host == n.host).collect();
            judge_node(n, &here)
        })
        .collect()
}
