//! Slurm step layouts: hostlist expressions, `SLURM_STEP_TASKS_PER_NODE` strings, distributions,
//! and which global task runs on which node, as Slurm lays them out.
//!
//! Slurm has already computed how many tasks each node gets; given those counts, its block layout
//! numbers tasks node by node, cyclic deals one task per node per round, plane deals blocks of
//! `plane_size` per node per round (both skipping nodes that are full), and arbitrary follows the
//! host file line by line. (For cyclic, this equals Slurm's own layout unless a node was
//! overcommitted beyond its CPUs, where Slurm's cycle counts CPUs rather than tasks.)

use super::distribution::Distribution;
use super::hostlist::{expand_counts_within, expand_hostlist_within, LayoutError};
use super::node_order::{decode_order, order_of_step, ordered_block_map, STEP_ORDER_VAR};
use super::step_map::{
    arbitrary_map, arbitrary_map_within, counts_map, counts_map_within, HostFile,
};
use crate::limits::{MAX_NODES, MAX_TASKS};
use crate::taskmap::TaskMap;

fn bad(msg: impl Into<String>) -> LayoutError {
    LayoutError(msg.into())
}

/// The node index of every task of a step.
///
/// `counts[i]` is the number of tasks on node `i` (from `SLURM_STEP_TASKS_PER_NODE`); `hosts` are
/// the step's nodes in order (needed only for arbitrary).
pub fn layout(
    counts: &[u32],
    dist: &Distribution,
    hosts: &[String],
) -> Result<Vec<u32>, LayoutError> {
    let total = check_total(counts)?;
    let mut out = Vec::with_capacity(total);
    match dist {
        Distribution::Block => {
            for (i, &c) in counts.iter().enumerate() {
                out.extend(std::iter::repeat_n(i as u32, c as usize));
            }
        }
        Distribution::Cyclic | Distribution::Plane(_) => {
            let p = match dist {
                Distribution::Plane(p) => *p,
                _ => 1,
            };
            let mut left: Vec<u32> = counts.to_vec();
            while out.len() < total {
                for (i, l) in left.iter_mut().enumerate() {
                    let k = (*l).min(p);
                    out.extend(std::iter::repeat_n(i as u32, k as usize));
                    *l -= k;
                }
            }
        }
        Distribution::Arbitrary(lines) => {
            if lines.len() < total {
                return Err(bad(format!(
                    "host file lists {} hosts, the step has {total} tasks",
                    lines.len()
                )));
            }
            // One lookup table: a step may have a million tasks on thousands of hosts.
            let index: std::collections::HashMap<&str, usize> = hosts
                .iter()
                .enumerate()
                .rev()
                .map(|(i, h)| (h.as_str(), i))
                .collect();
            for (t, h) in lines.iter().take(total).enumerate() {
                let i = index.get(h.as_str()).copied().ok_or_else(|| {
                    bad(format!(
                        "host file line for task {t}: host '{h}' is not in the step's node list"
                    ))
                })?;
                out.push(i as u32);
            }
            let mut seen = vec![0u32; counts.len()];
            for &i in &out {
                if let Some(s) = seen.get_mut(i as usize) {
                    *s += 1;
                }
            }
            if let Some(i) = (0..counts.len()).find(|&i| seen[i] != counts[i]) {
                return Err(bad(format!(
                    "host file gives node {i} ({}) {} tasks, Slurm's tasks per node say {}",
                    hosts.get(i).map_or("?", String::as_str),
                    seen[i],
                    counts[i]
                )));
            }
        }
    }
    Ok(out)
}

/// A step's task count, refused past the most tasks lama places.
fn check_total(counts: &[u32]) -> Result<usize, LayoutError> {
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    if total > MAX_TASKS as u64 {
        return Err(bad(format!(
            "the step has {total} tasks, more than the {MAX_TASKS} lama places"
        )));
    }
    Ok(total as usize)
}

/// The RFC 34 task map of a step, without one entry per task for block, cyclic and plane (the
/// same map as encoding [`layout`]).
pub fn step_taskmap(
    counts: &[u32],
    dist: &Distribution,
    hosts: &[String],
) -> Result<TaskMap, LayoutError> {
    check_total(counts)?;
    match counts_map(counts, dist) {
        Some(map) => Ok(map),
        None => Ok(TaskMap::encode(&layout(counts, dist, hosts)?)),
    }
}

/// The values a step's layout is read from, as Slurm names them in the task environment
/// (`SLURM_STEP_TASKS_PER_NODE`, `SLURM_STEP_NODELIST`, `SLURM_DISTRIBUTION`,
/// `SLURM_DIST_PLANESIZE`, `SLURM_HOSTFILE`), and the node order lama's srun passes
/// ([`super::node_order`]). Empty means not given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepEnv {
    /// Tasks per node, e.g. `2(x3),1`.
    pub tasks_per_node: Option<String>,
    /// The step's hosts in node order, e.g. `n[1-3]` (needed only for arbitrary).
    pub nodelist: Option<String>,
    /// `block`, `cyclic`, `plane[=N]`, `arbitrary`, with optional `:...` sub-levels (default block).
    pub distribution: Option<String>,
    /// Plane size for `plane`.
    pub plane_size: Option<String>,
    /// Path of the host file for `arbitrary`.
    pub hostfile: Option<String>,
    /// The order a block step's nodes take their tasks in when it is not node order
    /// ([`super::node_order::STEP_ORDER_VAR`], passed by lama in srun from Slurm's layout).
    pub node_order: Option<String>,
    /// The step these values are of, `JOB.STEP` (Slurm's items in the plugin; a task's
    /// `SLURM_JOB_ID` and `SLURM_STEP_ID`, [`StepEnv::task_step_id`], in the `lama` command): a
    /// node order written for another step is ignored. Not read by [`StepEnv::from_lookup`].
    pub step_id: Option<String>,
}

impl StepEnv {
    /// Reads the values through `get` (for example `std::env::var`), treating empty as unset.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> StepEnv {
        let g = |n: &str| get(n).filter(|v| !v.is_empty());
        StepEnv {
            tasks_per_node: g("SLURM_STEP_TASKS_PER_NODE"),
            nodelist: g("SLURM_STEP_NODELIST").or_else(|| g("SLURM_JOB_NODELIST")),
            distribution: g("SLURM_DISTRIBUTION"),
            plane_size: g("SLURM_DIST_PLANESIZE"),
            hostfile: g("SLURM_HOSTFILE"),
            node_order: g(STEP_ORDER_VAR),
            step_id: None,
        }
    }

    /// The step a task runs in, `JOB.STEP`, from its `SLURM_JOB_ID` and `SLURM_STEP_ID`.
    pub fn task_step_id(get: impl Fn(&str) -> Option<String>) -> Option<String> {
        let g = |n: &str| {
            get(n)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        g("SLURM_JOB_ID")
            .zip(g("SLURM_STEP_ID"))
            .map(|(j, s)| format!("{j}.{s}"))
    }

    /// The step's task map; `read` returns a file's contents (the host file of `arbitrary`), or
    /// why it cannot, for example [`read_hostfile_text`].
    pub fn taskmap(
        &self,
        read: impl Fn(&str) -> Result<String, String>,
    ) -> Result<TaskMap, LayoutError> {
        self.map_with(usize::MAX, None, |counts, hosts, path| {
            let text = read(path).map_err(|e| bad(format!("cannot read host file {path}: {e}")))?;
            arbitrary_map(counts, hosts, HostFile::Text(&text)).map(Some)
        })
        .map(Option::unwrap_or_default)
    }

    /// The step's task map, the host file of `arbitrary` read from disk a buffer at a time (a
    /// regular file of at most [`crate::limits::MAX_HOSTFILE_BYTES`], opened without blocking),
    /// so that a host file of millions of lines is never held in memory.
    pub fn taskmap_from_files(&self) -> Result<TaskMap, LayoutError> {
        self.taskmap_from_files_within(usize::MAX)
            .map(Option::unwrap_or_default)
    }

    /// [`StepEnv::taskmap_from_files`], or `None` as soon as an arbitrary step's map has more
    /// than `max_blocks` blocks (see [`crate::slurm::step_map::arbitrary_map_within`]): what the plugin
    /// runs on every node, where a longer map could not be exported.
    pub fn taskmap_from_files_within(
        &self,
        max_blocks: usize,
    ) -> Result<Option<TaskMap>, LayoutError> {
        self.taskmap_of_step(max_blocks, None)
    }

    /// [`StepEnv::taskmap_from_files_within`] for a step Slurm says has `nodes` nodes (its
    /// `S_JOB_NNODES` item): tasks per node for any other number are refused before any entry
    /// is made, so a forged value costs nothing (what the plugin runs on every node).
    pub fn taskmap_of_step(
        &self,
        max_blocks: usize,
        nodes: Option<usize>,
    ) -> Result<Option<TaskMap>, LayoutError> {
        self.map_with(max_blocks, nodes, |counts, hosts, path| {
            let file = HostFile::Path(path, crate::limits::MAX_HOSTFILE_BYTES);
            arbitrary_map_within(counts, hosts, file, max_blocks)
        })
    }

    /// The map, `None` when it would have more than `max_blocks` blocks (see
    /// [`counts_map_within`]); `arbitrary(counts, hosts, host file path)` makes an arbitrary
    /// step's.
    fn map_with(
        &self,
        max_blocks: usize,
        nodes: Option<usize>,
        arbitrary: impl FnOnce(&[u32], &[String], &str) -> Result<Option<TaskMap>, LayoutError>,
    ) -> Result<Option<TaskMap>, LayoutError> {
        let tpn = self.tasks_per_node.as_deref().ok_or_else(|| {
            bad("no tasks per node (SLURM_STEP_TASKS_PER_NODE is not set: run inside a job step)")
        })?;
        let counts = expand_counts_within(tpn, nodes.unwrap_or(MAX_NODES))?;
        if let Some(n) = nodes.filter(|&n| n != counts.len()) {
            return Err(bad(format!(
                "the tasks per node list {} nodes, Slurm says the step has {n}",
                counts.len()
            )));
        }
        let dist = self.distribution.as_deref().unwrap_or("block");
        // Slurm sets the plane size only for plane steps: any other value is the user's.
        let is_plane = dist
            .split(':')
            .next()
            .map(str::trim)
            .is_some_and(|d| d.starts_with("plane"));
        let plane = match self.plane_size.as_ref().filter(|_| is_plane) {
            Some(v) => Some(
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| bad(format!("plane size '{v}' is not a number")))?,
            ),
            None => None,
        };
        let arbitrary_step = dist.split(':').next().map(str::trim) == Some("arbitrary");
        if !arbitrary_step {
            let d = Distribution::parse(dist, plane, None)?;
            check_total(&counts)?;
            // Only a block step is laid out in the topology's order.
            if let (Distribution::Block, Some(value)) = (&d, &self.node_order) {
                if let Some(text) = order_of_step(value, self.step_id.as_deref())? {
                    let order = decode_order(text, counts.len())?;
                    return Ok(ordered_block_map(&counts, &order, max_blocks));
                }
            }
            return Ok(counts_map_within(&counts, &d, max_blocks).flatten());
        }
        let path = self.hostfile.as_deref().ok_or_else(|| {
            bad("arbitrary distribution needs a host file (SLURM_HOSTFILE is not set)")
        })?;
        let list = self
            .nodelist
            .as_deref()
            .ok_or_else(|| bad("arbitrary distribution needs the step's node list"))?;
        // No more names are made than the step has nodes.
        let hosts = expand_hostlist_within(list, counts.len())?;
        if hosts.len() != counts.len() {
            return Err(bad(format!(
                "the node list has {} hosts, the tasks per node list {} nodes",
                hosts.len(),
                counts.len()
            )));
        }
        check_total(&counts)?;
        arbitrary(&counts, &hosts, path)
    }
}
