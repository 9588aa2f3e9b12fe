//! The raw task map of RFC 34's test vectors: node-ordered RFC 22 idsets separated by `;`.

use super::{bad, format_ranges, Encoder, TaskMap, TaskMapError};
use crate::idset;
use crate::limits::{MAX_NODES, MAX_TASKS};

/// Reads `0-1,8-9;2-3,10-11`. Every task id from 0 to the highest must appear exactly once, and
/// each node's ranges must ascend. The empty string is the unknown mapping.
pub fn decode(text: &str) -> Result<TaskMap, TaskMapError> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(TaskMap::default());
    }
    // Ranges with their node, then sorted by task: memory follows the text, not the task ids.
    let mut runs: Vec<(u32, u32, u32)> = Vec::new();
    for (node, part) in t.split(';').enumerate() {
        if node >= MAX_NODES {
            return Err(bad(format!(
                "more than {MAX_NODES} nodes (lama reads maps of at most {MAX_NODES} nodes)"
            )));
        }
        let ranges =
            idset::parse_ranges(part).map_err(|e| bad(format!("node {node}: {}", e.reason)))?;
        let mut prev: Option<u32> = None;
        for (a, b) in ranges {
            if let Some(p) = prev {
                if a <= p {
                    return Err(bad(format!(
                        "node {node}: ranges out of order or overlapping at '{}' (after {p})",
                        if a == b {
                            a.to_string()
                        } else {
                            format!("{a}-{b}")
                        }
                    )));
                }
            }
            prev = Some(b);
            if b as usize >= MAX_TASKS {
                return Err(bad(format!(
                    "node {node}: task id {b} is too large (lama reads maps of at most {MAX_TASKS} tasks)"
                )));
            }
            runs.push((a, b, node as u32));
        }
    }
    runs.sort_unstable();
    let mut next: u64 = 0;
    let mut missing = Vec::new();
    let mut enc = Encoder::default();
    for (i, &(a, b, node)) in runs.iter().enumerate() {
        let (a, b) = (u64::from(a), u64::from(b));
        if a < next {
            let other = runs[i - 1].2;
            return Err(bad(format!(
                "task {a} appears on node {} and again on node {}",
                other.min(node),
                other.max(node)
            )));
        }
        if a > next {
            idset::push_range(&mut missing, next, a - 1);
        }
        enc.push_run(u64::from(node), b - a + 1);
        next = b + 1;
    }
    if !missing.is_empty() {
        return Err(bad(format!(
            "task ids {} are missing",
            format_ranges(&missing)
        )));
    }
    Ok(enc.finish())
}

/// Writes the raw form: one idset per node, in node order.
pub fn encode(map: &TaskMap) -> String {
    (0..map.nnodes())
        .map(|n| format_ranges(&map.tasks_on(n)))
        .collect::<Vec<_>>()
        .join(";")
}
