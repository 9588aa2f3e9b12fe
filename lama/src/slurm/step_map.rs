//! A step's task map without one entry per task: what every node's slurmstepd computes before
//! the step's tasks start, in time and memory that do not grow with the task count for regular
//! layouts.
//!
//! - block, cyclic and plane: from Slurm's counts, round by round; identical rounds are taken
//!   together, so a step of a million tasks on thousands of nodes costs a few thousand steps;
//! - arbitrary: the host file is read line by line (from disk, a buffer at a time) and each line
//!   is looked up among the step's hosts once per run of equal lines, so a host file of a
//!   million lines is never held in memory.
//!
//! [`crate::slurm::layout`] is the plain per-task definition these must agree with.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{BufRead, Read};

use super::distribution::Distribution;
use super::hostlist::{hostfile_line, LayoutError};
use crate::limits::MAX_TASKS;
use crate::taskmap::{MapBuilder, TaskMap};

fn bad(msg: impl Into<String>) -> LayoutError {
    LayoutError(msg.into())
}

/// The map of a block, cyclic or plane step from its tasks per node (`None` for arbitrary).
pub fn counts_map(counts: &[u32], dist: &Distribution) -> Option<TaskMap> {
    counts_map_within(counts, dist, usize::MAX).map(Option::unwrap_or_default)
}

/// Node visits [`counts_map_within`] may spend on a bounded map: Slurm's own layouts give nodes
/// one or two different counts (a few passes); only a hand-made list of many different counts
/// needs more, and its map would be too long to export anyway.
pub const MAX_COUNTS_WORK: u64 = 1 << 24;

/// [`counts_map`], or `Some(None)` when the map would have more than `max_blocks` blocks or cost
/// more than [`MAX_COUNTS_WORK`] node visits (no bound when `max_blocks` is `usize::MAX`).
pub fn counts_map_within(
    counts: &[u32],
    dist: &Distribution,
    max_blocks: usize,
) -> Option<Option<TaskMap>> {
    let p = match dist {
        Distribution::Block => {
            let mut b = MapBuilder::default();
            for (i, &c) in counts.iter().enumerate() {
                b.run(i as u64, u64::from(c));
            }
            return Some(Some(b.finish()));
        }
        Distribution::Cyclic => 1,
        Distribution::Plane(p) => u64::from(*p).max(1),
        Distribution::Arbitrary(_) => return None,
    };
    let bounded = max_blocks != usize::MAX;
    let mut work: u64 = 0;
    let mut left: Vec<u64> = counts.iter().map(|&c| u64::from(c)).collect();
    let mut b = MapBuilder::default();
    // While every node still in the round has p or more left, rounds repeat unchanged: they are
    // taken together. Each pass ends at least one node's tasks, or a set of identical rounds.
    while let Some(min) = left.iter().filter(|&&l| l > 0).min().copied() {
        work += left.len() as u64;
        if bounded && (work > MAX_COUNTS_WORK || b.blocks() > max_blocks.saturating_add(1)) {
            return Some(None);
        }
        let rounds = if min >= p { min / p } else { 1 };
        let stretches = round_stretches(&left, p);
        for _ in 0..rounds {
            for &(start, count, take) in &stretches {
                b.stretch(start, count, take);
            }
            if bounded && b.blocks() > max_blocks.saturating_add(1) {
                return Some(None);
            }
        }
        for l in left.iter_mut() {
            *l -= (*l).min(p) * rounds;
        }
        // Nodes with nothing left are dropped from the ends, where they gather first.
        while left.last() == Some(&0) {
            left.pop();
        }
    }
    let map = b.finish();
    Some((!bounded || map.blocks().len() <= max_blocks).then_some(map))
}

/// The stretches of one round: (first node, nodes, tasks each), nodes with none left skipped.
fn round_stretches(left: &[u64], p: u64) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < left.len() {
        let take = left[i].min(p);
        let start = i;
        while i < left.len() && left[i].min(p) == take {
            i += 1;
        }
        if take > 0 {
            out.push((start as u64, (i - start) as u64, take));
        }
    }
    out
}

/// FNV-1a: host names are short, and the default hasher costs more than the rest of a line.
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// Bytes of a host file read for a step whatever its size (comments, blank lines).
pub const HOSTFILE_SLACK_BYTES: u64 = 1 << 20;

/// Bytes of a host file read for each of the step's tasks: a host name of at most 255 bytes,
/// its `*N` and a separator.
pub const HOSTFILE_BYTES_PER_TASK: u64 = 300;

/// The most bytes of a host file read for a step of `tasks` tasks.
pub fn hostfile_bytes(tasks: u64) -> u64 {
    HOSTFILE_SLACK_BYTES.saturating_add(tasks.saturating_mul(HOSTFILE_BYTES_PER_TASK))
}

/// Where an arbitrary step's host file comes from.
pub enum HostFile<'a> {
    /// Its text.
    Text(&'a str),
    /// Its path, read a buffer at a time (a regular file of at most `max` bytes).
    Path(&'a str, u64),
}

/// The map of an arbitrary step: task `t` runs on the host of the host file's `t`-th task
/// (lines past the step's tasks are not read). `hosts` are the step's nodes in order, `counts`
/// their tasks, which the host file must agree with.
pub fn arbitrary_map(
    counts: &[u32],
    hosts: &[String],
    file: HostFile<'_>,
) -> Result<TaskMap, LayoutError> {
    arbitrary_map_within(counts, hosts, file, usize::MAX).map(Option::unwrap_or_default)
}

/// [`arbitrary_map`], or `None` as soon as the map has more than `max_blocks` blocks: reading
/// stops there (a map that cannot be exported is not worth a million lines). The host file's
/// lines up to that point are checked as usual.
pub fn arbitrary_map_within(
    counts: &[u32],
    hosts: &[String],
    file: HostFile<'_>,
    max_blocks: usize,
) -> Result<Option<TaskMap>, LayoutError> {
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    let index: HashMap<&str, u32, BuildHasherDefault<Fnv>> = hosts
        .iter()
        .enumerate()
        .rev()
        .map(|(i, h)| (h.as_str(), i as u32))
        .collect();
    let mut seen = vec![0u64; counts.len()];
    let mut b = MapBuilder::default();
    let mut tasks: u64 = 0;
    // The last host looked up: consecutive lines usually name the same one.
    let mut last: Option<(String, u32)> = None;
    let mut line_no = 0usize;
    let mut visit = |line: &str| -> Result<bool, LayoutError> {
        line_no += 1;
        let mut err = None;
        hostfile_line(line, line_no, MAX_TASKS, tasks as usize, |h, times| {
            let node = match &last {
                Some((name, n)) if name == h => *n,
                _ => match index.get(h) {
                    Some(&n) => {
                        last = Some((h.to_string(), n));
                        n
                    }
                    None => {
                        err = Some(bad(format!(
                            "host file line for task {tasks}: host '{}' is not in the step's node list",
                            crate::quote::cut(h)
                        )));
                        return false;
                    }
                },
            };
            // Slurm takes the first tasks of a `host*N` that runs past the step.
            let times = (times as u64).min(total - tasks);
            b.run(u64::from(node), times);
            seen[node as usize] += times;
            tasks += times;
            // Past the step's last task nothing more is read, not even the rest of the line.
            tasks < total && b.blocks() <= max_blocks.saturating_add(1)
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        // The last block may still merge into the one before it: one more is allowed for.
        Ok(tasks < total && b.blocks() <= max_blocks.saturating_add(1))
    };
    match file {
        HostFile::Text(text) => {
            for line in text.lines() {
                if !visit(line)? {
                    break;
                }
            }
        }
        HostFile::Path(path, max) => {
            // What a host file of the step's tasks needs, not a byte more: a line costs memory
            // however few tasks it names.
            let f = crate::limits::open_regular(std::path::Path::new(path), max)
                .map_err(|e| bad(format!("cannot read host file {path}: {e}")))?;
            let max = max.min(hostfile_bytes(total));
            let mut r = std::io::BufReader::with_capacity(64 << 10, f.take(max + 1));
            let mut line = String::new();
            let mut read: u64 = 0;
            loop {
                line.clear();
                let n = r
                    .read_line(&mut line)
                    .map_err(|e| bad(format!("cannot read host file {path}: {e}")))?;
                if n == 0 {
                    break;
                }
                read += n as u64;
                if read > max {
                    let (slack, per_task) = (HOSTFILE_SLACK_BYTES, HOSTFILE_BYTES_PER_TASK);
                    return Err(bad(format!("host file {path}: more than {max} bytes before the step's {total} tasks were named (lama reads {slack} plus {per_task} bytes per task)")));
                }
                if !visit(line.trim_end_matches(['\n', '\r']))? {
                    break;
                }
            }
        }
    }
    if b.blocks() > max_blocks.saturating_add(1) {
        return Ok(None);
    }
    if tasks < total {
        return Err(bad(format!(
            "host file lists {tasks} hosts, the step has {total} tasks"
        )));
    }
    if let Some(i) = (0..counts.len()).find(|&i| seen[i] != u64::from(counts[i])) {
        return Err(bad(format!(
            "host file gives node {i} ({}) {} tasks, Slurm's tasks per node say {}",
            hosts[i], seen[i], counts[i]
        )));
    }
    Ok(Some(b.finish()))
}
