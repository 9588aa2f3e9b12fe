//! `lama plan --mem MODE`: each rank's memory binding as the plugins would set it (the NUMA
//! nodes, OS indexes, and the policy), from each node's NUMA nodes as hwloc reads them
//! (`lama::tiers`).

use lama::memory::MemPolicy;
use lama::tiers::{task_memory, MemMode};

use super::Model;

/// One rank's memory binding.
pub(super) type RankMemory = (Vec<u32>, MemPolicy);

/// The binding of each rank, given as (node, model index, CPUs), under `mode` (a name clap
/// checked); the error names the first rank that cannot be bound, and its node.
pub(super) fn rank_memory<'a>(
    mode: &str,
    models: &[Model],
    ranks: impl Iterator<Item = (usize, usize, &'a [u32])>,
) -> Result<Vec<RankMemory>, String> {
    let mode = MemMode::parse(mode).ok_or_else(|| format!("--mem: invalid mode '{mode}'"))?;
    ranks
        .enumerate()
        .map(|(r, (node, model, cpus))| {
            let loc = models[model].1.as_ref().ok_or_else(|| {
                format!("--mem: node {node} ({}) has no NUMA nodes to read (give an hwloc XML or this machine)", models[model].0.name())
            })?;
            task_memory(loc.numa(), cpus, mode, None)
                .map_err(|e| format!("--mem: rank {r} on node {node} ({}): {e}", models[model].0.name()))
        })
        .collect()
}

/// The text a rank's line ends with: `  mems 0,1 bind`.
pub(super) fn text(m: &RankMemory) -> String {
    format!("  mems {} {}", lama::idset::format_list(&m.0), m.1.name())
}

/// The JSON fields of a rank: `mems` and `mempolicy`.
pub(super) fn add_json(v: &mut serde_json::Value, m: &RankMemory) {
    v["mems"] = serde_json::json!(m.0);
    v["mempolicy"] = serde_json::json!(m.1.name());
}
