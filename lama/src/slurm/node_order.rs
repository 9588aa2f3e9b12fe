//! The order a block step's nodes take their tasks in, when it is not node order.
//!
//! From Slurm 26.05 on, `select/cons_tres` ranks a job's nodes by the cluster's network topology
//! (`topology/tree`'s leaf switches, `topology/block`'s blocks, `topology/flat`'s
//! `alpha_step_rank`, …) and a block step numbers its tasks node after node in that rank order,
//! not in node-index order (`_task_layout_topo` in `slurm_step_layout.c`;
//! `SelectTypeParameters=CR_NO_DIST_TOPO_BLOCK` turns it off). No node can tell that order from
//! what it is given: the ranks live in the controller. srun holds the step's whole layout, so
//! lama in srun reads it once per step and passes the order to every node in
//! [`STEP_ORDER_VAR`], which the tasks keep (for `lama taskmap --from-slurm`). Each node still
//! checks the map against the tasks Slurm starts there.
//!
//! The value names the step it was written for, then node indexes in task order, runs of
//! consecutive indexes written `a-b`: `4096.0:2-3,0-1` for nodes 2 and 3 (in that order) before
//! nodes 0 and 1 in step 4096.0. The tasks keep it, so a step started from a task by an srun that
//! does not load lama inherits it: the step id tells it apart, and it is ignored there.

use super::hostlist::LayoutError;
use crate::taskmap::{MapBuilder, TaskMap};

/// Set by lama in srun for a block step whose nodes take their tasks in an order other than
/// node order (and removed for any other step); read by lama on every node.
pub const STEP_ORDER_VAR: &str = "LAMA_STEP_ORDER";

fn bad(msg: impl Into<String>) -> LayoutError {
    LayoutError(msg.into())
}

/// The node order of a layout that gives every node one run of consecutive task ids, the runs
/// following each other from task 0 (a block layout, in whatever order); `None` for any other
/// layout (cyclic, plane, an arbitrary host file that interleaves nodes). `tids[i]` are the task
/// ids of node `i`, as Slurm's step layout holds them.
pub fn block_order<T: AsRef<[u32]>>(tids: &[T]) -> Option<Vec<u32>> {
    let mut firsts: Vec<(u32, u32)> = Vec::with_capacity(tids.len());
    for (i, t) in tids.iter().enumerate() {
        let t = t.as_ref();
        let first = *t.first()?;
        // Each node's ids consecutive.
        if t.iter().zip(first..).any(|(&a, b)| a != b) {
            return None;
        }
        firsts.push((first, u32::try_from(i).ok()?));
    }
    firsts.sort_unstable();
    let mut next: u64 = 0;
    for &(first, node) in &firsts {
        if u64::from(first) != next {
            return None;
        }
        next += tids[node as usize].as_ref().len() as u64;
    }
    Some(firsts.into_iter().map(|(_, n)| n).collect())
}

/// Whether `order` is plain node order (then nothing needs passing).
pub fn is_node_order(order: &[u32]) -> bool {
    order.iter().zip(0u32..).all(|(&a, b)| a == b)
}

/// [`STEP_ORDER_VAR`]'s value for `order`.
pub fn encode_order(order: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < order.len() {
        let start = order[i];
        let mut j = i;
        while j + 1 < order.len() && order[j + 1] == order[j].wrapping_add(1) {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if j == i {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{}", order[j]));
        }
        i = j + 1;
    }
    out
}

/// [`STEP_ORDER_VAR`]'s value for `order` in step `job.step`.
pub fn step_value(job: u32, step: u32, order: &[u32]) -> String {
    format!("{job}.{step}:{}", encode_order(order))
}

/// The order part of [`STEP_ORDER_VAR`]'s `value` when it was written for step `step`
/// (`JOB.STEP`), `Ok(None)` when it was written for another step (an outer step's, inherited).
pub fn order_of_step<'a>(
    value: &'a str,
    step: Option<&str>,
) -> Result<Option<&'a str>, LayoutError> {
    let Some((written, order)) = value.trim().split_once(':') else {
        return Err(bad(format!(
            "{STEP_ORDER_VAR}='{}' names no step (JOB.STEP:ORDER)",
            value.escape_debug()
        )));
    };
    Ok((Some(written) == step).then_some(order))
}

/// Reads the order part of [`STEP_ORDER_VAR`]'s value for a step of `nodes` nodes: every node
/// exactly once.
pub fn decode_order(text: &str, nodes: usize) -> Result<Vec<u32>, LayoutError> {
    let what = || format!("{STEP_ORDER_VAR}='{}'", text.escape_debug());
    let mut seen = vec![false; nodes];
    let mut out = Vec::with_capacity(nodes);
    for part in text.trim().split(',') {
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| bad(format!("{}: '{s}' is not a node index", what())))
        };
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if b < a {
            return Err(bad(format!("{}: the range {part} runs backwards", what())));
        }
        for n in a..=b {
            match seen.get_mut(n as usize) {
                Some(s) if !*s => *s = true,
                Some(_) => return Err(bad(format!("{}: node {n} twice", what()))),
                None => {
                    return Err(bad(format!(
                        "{}: node {n}, the step has {nodes} nodes",
                        what()
                    )))
                }
            }
            out.push(n);
        }
    }
    if out.len() != nodes {
        return Err(bad(format!(
            "{}: {} nodes, the step has {nodes}",
            what(),
            out.len()
        )));
    }
    Ok(out)
}

/// The task map of a block step whose nodes take their tasks in `order` (`counts[i]` tasks on
/// node `i`); `None` when it would have more than `max_blocks` blocks.
pub fn ordered_block_map(counts: &[u32], order: &[u32], max_blocks: usize) -> Option<TaskMap> {
    let mut b = MapBuilder::default();
    for &n in order {
        let c = counts.get(n as usize).copied().unwrap_or(0);
        b.run(u64::from(n), u64::from(c));
        if b.blocks() > max_blocks.saturating_add(1) {
            return None;
        }
    }
    let map = b.finish();
    (map.blocks().len() <= max_blocks).then_some(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_in_switch_order() {
        // n3,n4 (indexes 2,3) first, then n1,n2: two tasks each.
        let tids: Vec<Vec<u32>> = vec![vec![4, 5], vec![6, 7], vec![0, 1], vec![2, 3]];
        let order = block_order(&tids).expect("a block layout");
        assert_eq!(order, vec![2, 3, 0, 1]);
        assert!(!is_node_order(&order));
        assert_eq!(encode_order(&order), "2-3,0-1");
        assert_eq!(decode_order("2-3,0-1", 4).unwrap(), order);
        let map = ordered_block_map(&[2, 2, 2, 2], &order, usize::MAX).unwrap();
        for (t, node) in map.assignment().iter().enumerate() {
            assert!(tids[*node as usize].contains(&(t as u32)), "task {t}");
        }
    }

    #[test]
    fn the_value_names_its_step() {
        let v = step_value(4096, 0, &[2, 3, 0, 1]);
        assert_eq!(v, "4096.0:2-3,0-1");
        assert_eq!(order_of_step(&v, Some("4096.0")).unwrap(), Some("2-3,0-1"));
        // An outer step's, inherited by a step whose srun did not load lama.
        assert_eq!(order_of_step(&v, Some("4096.1")).unwrap(), None);
        assert_eq!(order_of_step(&v, None).unwrap(), None);
        assert!(order_of_step("2-3,0-1", Some("4096.0")).is_err());
    }

    #[test]
    fn interleaved_layouts_have_no_block_order() {
        // -N2 -n4 -m cyclic.
        assert_eq!(block_order(&[vec![0, 2], vec![1, 3]]), None);
        // A gap and a node without tasks.
        assert_eq!(block_order(&[vec![0], vec![2]]), None);
        assert_eq!(block_order(&[vec![0], vec![]]), None);
    }

    #[test]
    fn node_order_is_recognised() {
        // -N3 -n6, Slurm's block layout: 3, 1 and 2 tasks.
        let tids = [vec![0, 1, 2], vec![3], vec![4, 5]];
        let order = block_order(&tids).unwrap();
        assert!(is_node_order(&order));
    }

    #[test]
    fn bad_orders_are_refused_with_the_value() {
        for (text, nodes) in [
            ("0-2", 2),
            ("0,0", 2),
            ("1", 2),
            ("1-0", 2),
            ("x", 1),
            ("", 1),
        ] {
            let e = decode_order(text, nodes).unwrap_err().to_string();
            assert!(e.contains(STEP_ORDER_VAR), "{text}: {e}");
        }
    }

    #[test]
    fn long_maps_are_bounded() {
        let order: Vec<u32> = (0..100).rev().collect();
        let counts = vec![1; 100];
        assert!(ordered_block_map(&counts, &order, 10).is_none());
        assert_eq!(
            ordered_block_map(&counts, &order, 100)
                .unwrap()
                .blocks()
                .len(),
            100
        );
    }
}
