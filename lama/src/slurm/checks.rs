//! What the SPANK plugin checks against Slurm's own items on a node: the step's task map
//! (computed from the environment) against the tasks Slurm runs there, and `SLURM_CPU_BIND*`
//! rewritten for lama's binding.

use crate::idset::format_list;
use crate::plugin::error::StepError;
use crate::taskmap::TaskMap;

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
