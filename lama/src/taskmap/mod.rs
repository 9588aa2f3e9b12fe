//! Task maps: which node each task of a job runs on.
//!
//! [`TaskMap`] holds Flux RFC 34 blocks `[nodeid, nnodes, ppn, repeat]` and the tasks before each
//! block (a task's node is a binary search); no query expands one entry per task. Submodules read
//! and write the RFC 34 JSON, the raw node-ordered idsets and the PMI-1 `(vector,...)` forms.

pub mod pmi;
pub mod raw;
pub mod rfc34;

use std::fmt;

use thiserror::Error;

pub use crate::idset::format_ranges;
use crate::idset::push_range;
use crate::limits::{MAX_NODES, MAX_TASKS};

/// A task map that cannot be read or does not fit.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct TaskMapError(pub String);

pub(crate) fn bad(msg: impl Into<String>) -> TaskMapError {
    TaskMapError(msg.into())
}

/// One RFC 34 map block: `repeat` times, `ppn` consecutive tasks on each of `nnodes` nodes from `nodeid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Block {
    /// First node of the block.
    pub nodeid: u64,
    /// Number of consecutive nodes.
    pub nnodes: u64,
    /// Tasks per node in one pass.
    pub ppn: u64,
    /// Number of passes over the nodes.
    pub repeat: u64,
}

impl Block {
    /// Tasks in the whole block.
    pub fn tasks(&self) -> u64 {
        self.nnodes * self.ppn * self.repeat
    }
}

/// A task map as RFC 34 blocks. An empty map means the mapping is unknown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskMap {
    blocks: Vec<Block>,
    /// Tasks before each block, so that finding a task's block is a binary search.
    starts: Vec<u64>,
}

impl TaskMap {
    /// A map from blocks as given (no recompression). Every field except `nodeid` must be at least
    /// 1, the tasks must not exceed [`MAX_TASKS`] and the nodes [`MAX_NODES`].
    pub fn from_blocks(blocks: Vec<Block>) -> Result<TaskMap, TaskMapError> {
        let mut total: u64 = 0;
        for (i, b) in blocks.iter().enumerate() {
            if b.nnodes == 0 || b.ppn == 0 || b.repeat == 0 {
                return Err(bad(format!(
                    "block {} [{},{},{},{}]: nnodes, ppn and repeat must be at least 1",
                    i + 1,
                    b.nodeid,
                    b.nnodes,
                    b.ppn,
                    b.repeat
                )));
            }
            let shown = format!("[{},{},{},{}]", b.nodeid, b.nnodes, b.ppn, b.repeat);
            if b.nodeid.saturating_add(b.nnodes) > MAX_NODES as u64 {
                return Err(bad(format!(
                    "block {} {shown} reaches beyond node {}: lama reads maps of at most {MAX_NODES} nodes",
                    i + 1,
                    MAX_NODES - 1
                )));
            }
            total = b
                .nnodes
                .saturating_mul(b.ppn)
                .saturating_mul(b.repeat)
                .saturating_add(total);
            if total > MAX_TASKS as u64 {
                return Err(bad(format!(
                    "block {} {shown} brings the map past {MAX_TASKS} tasks, the most lama reads",
                    i + 1
                )));
            }
        }
        Ok(TaskMap::indexed(blocks))
    }

    fn indexed(blocks: Vec<Block>) -> TaskMap {
        let mut total = 0;
        let starts = blocks
            .iter()
            .map(|b| {
                let s = total;
                total += b.tasks();
                s
            })
            .collect();
        TaskMap { blocks, starts }
    }

    /// The canonical map of an assignment: `nodes[task]` is the node of each task.
    pub fn encode(nodes: &[u32]) -> TaskMap {
        // Each task is read once: consecutive tasks on one node form a run.
        let mut b = MapBuilder::default();
        let mut rest = nodes;
        while let Some(&node) = rest.first() {
            let len = rest.iter().position(|&x| x != node).unwrap_or(rest.len());
            rest = &rest[len..];
            b.run(u64::from(node), len as u64);
        }
        b.finish()
    }

    /// The canonical form of this map (what [`TaskMap::encode`] gives for the same assignment).
    pub fn canonical(&self) -> TaskMap {
        let mut enc = Encoder::default();
        for b in &self.blocks {
            for _ in 0..b.repeat {
                enc.push_stretch(b.nodeid, b.nnodes, b.ppn);
            }
        }
        enc.finish()
    }

    /// The blocks.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Whether the mapping is unknown (no blocks).
    pub fn is_unknown(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Total number of tasks.
    pub fn total_tasks(&self) -> u64 {
        match (self.starts.last(), self.blocks.last()) {
            (Some(s), Some(b)) => s + b.tasks(),
            _ => 0,
        }
    }

    /// Number of nodes: one more than the highest node id.
    pub fn nnodes(&self) -> u64 {
        self.blocks
            .iter()
            .map(|b| b.nodeid + b.nnodes)
            .max()
            .unwrap_or(0)
    }

    /// The node of a task, or `None` when the task is beyond the map.
    pub fn node_of(&self, task: u64) -> Option<u64> {
        // Most maps are one block (block or cyclic layouts): no search then.
        let i = match self.starts.len() {
            1 => 0,
            _ => self.starts.partition_point(|&s| s <= task).checked_sub(1)?,
        };
        let (b, base) = (self.blocks[i], self.starts[i]);
        let off = task - base;
        if off >= b.tasks() {
            return None;
        }
        let within = if b.repeat == 1 {
            off
        } else {
            off % (b.nnodes * b.ppn)
        };
        Some(b.nodeid + within / b.ppn)
    }

    /// Number of tasks on a node.
    pub fn ntasks_on(&self, node: u64) -> u64 {
        self.blocks
            .iter()
            .filter(|b| b.nodeid <= node && node < b.nodeid + b.nnodes)
            .map(|b| b.ppn * b.repeat)
            .sum()
    }

    /// The tasks of a node as ascending inclusive ranges (an idset).
    pub fn tasks_on(&self, node: u64) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (b, &base) in self.blocks.iter().zip(&self.starts) {
            if b.nodeid <= node && node < b.nodeid + b.nnodes {
                let stride = b.nnodes * b.ppn;
                let off = (node - b.nodeid) * b.ppn;
                for r in 0..b.repeat {
                    let lo = base + r * stride + off;
                    push_range(&mut out, lo, lo + b.ppn - 1);
                }
            }
        }
        out.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(out.len());
        for (a, b) in out {
            push_range(&mut merged, a, b);
        }
        merged
    }

    /// Checks that the map describes a job of `ntasks` tasks on `nnodes` nodes.
    pub fn check_shape(&self, ntasks: u64, nnodes: u64) -> Result<(), TaskMapError> {
        if self.total_tasks() != ntasks {
            return Err(bad(format!(
                "got {} total tasks, expected {ntasks}",
                self.total_tasks()
            )));
        }
        if self.nnodes() != nnodes {
            return Err(bad(format!(
                "got {} nodes, expected {nnodes}",
                self.nnodes()
            )));
        }
        Ok(())
    }

    /// The node of every task, in task order (materialises one entry per task).
    pub fn assignment(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.total_tasks() as usize);
        for b in &self.blocks {
            for _ in 0..b.repeat {
                for n in b.nodeid..b.nodeid + b.nnodes {
                    out.extend(std::iter::repeat_n(n, b.ppn as usize));
                }
            }
        }
        out
    }
}

impl fmt::Display for TaskMap {
    /// The bare compact RFC 34 array, e.g. `[[0,4,4,1]]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, b) in self.blocks.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "[{},{},{},{}]", b.nodeid, b.nnodes, b.ppn, b.repeat)?;
        }
        f.write_str("]")
    }
}

/// Builds the canonical map of an assignment given as runs of consecutive tasks on one node, in
/// task order, without one entry per task: [`TaskMap::encode`] of the same assignment.
///
/// Consecutive runs on one node are one run; runs of equal length on consecutive nodes form a
/// stretch, which the block builder takes in bulk (a cyclic map is a few stretches).
#[derive(Default)]
pub struct MapBuilder {
    enc: Encoder,
    /// The stretch being gathered: first node, nodes, tasks per node.
    stretch: Option<(u64, u64, u64)>,
    /// The run being gathered, which the next may lengthen: node, tasks.
    run: Option<(u64, u64)>,
}

impl MapBuilder {
    /// `len` consecutive tasks on `node`.
    pub fn run(&mut self, node: u64, len: u64) {
        if len == 0 {
            return;
        }
        match &mut self.run {
            Some((n, l)) if *n == node => *l += len,
            _ => {
                self.flush_run();
                self.run = Some((node, len));
            }
        }
    }

    /// `len` consecutive tasks on each of `count` consecutive nodes from `node`, node after node.
    pub fn stretch(&mut self, node: u64, count: u64, len: u64) {
        if count == 0 || len == 0 {
            return;
        }
        // The first node may lengthen the run before; the last may be lengthened by the next.
        self.run(node, len);
        if count == 1 {
            return;
        }
        self.flush_run();
        if count > 2 {
            self.extend(node + 1, count - 2, len);
        }
        self.run = Some((node + count - 1, len));
    }

    /// Blocks so far (at least as many as the finished map will have, less one).
    pub fn blocks(&self) -> usize {
        self.enc.blocks.len()
    }

    /// The map.
    pub fn finish(mut self) -> TaskMap {
        self.flush_run();
        if let Some((f, c, p)) = self.stretch.take() {
            self.enc.append_stretch(f, c, p);
        }
        self.enc.finish()
    }

    fn flush_run(&mut self) {
        if let Some((n, l)) = self.run.take() {
            self.extend(n, 1, l);
        }
    }

    fn extend(&mut self, node: u64, count: u64, len: u64) {
        match &mut self.stretch {
            Some((f, c, p)) if *p == len && *f + *c == node => *c += count,
            _ => {
                if let Some((f, c, p)) = self.stretch.replace((node, count, len)) {
                    self.enc.append_stretch(f, c, p);
                }
            }
        }
    }
}

/// Builds the canonical block list from runs of consecutive tasks on one node.
///
/// A run extends the last block when it is the next node with the same ppn (and the last block has
/// not repeated yet); a completed block equal in shape to the one before it becomes a repeat.
#[derive(Default)]
struct Encoder {
    blocks: Vec<Block>,
    pending: Option<(u64, u64)>,
}

impl Encoder {
    /// The same as pushing runs of `ppn` tasks on `count` consecutive nodes one by one, in time
    /// independent of `count`.
    fn push_stretch(&mut self, node: u64, count: u64, ppn: u64) {
        if count == 0 {
            return;
        }
        self.push_run(node, ppn);
        if count == 1 {
            return;
        }
        // The first node may have merged with the run before; the last may merge with the next.
        if let Some((n, c)) = self.pending.take() {
            self.append(n, c);
        }
        if count > 2 {
            self.append_stretch(node + 1, count - 2, ppn);
        }
        self.pending = Some((node + count - 1, ppn));
    }

    fn push_run(&mut self, node: u64, count: u64) {
        match &mut self.pending {
            Some((n, c)) if *n == node => *c += count,
            _ => {
                if let Some((n, c)) = self.pending.take() {
                    self.append(n, c);
                }
                self.pending = Some((node, count));
            }
        }
    }

    #[inline]
    fn append(&mut self, node: u64, ppn: u64) {
        match self.blocks.last_mut() {
            Some(last)
                if last.ppn == ppn && last.repeat == 1 && node == last.nodeid + last.nnodes =>
            {
                last.nnodes += 1;
            }
            _ => self.blocks.push(Block {
                nodeid: node,
                nnodes: 1,
                ppn,
                repeat: 1,
            }),
        }
        let k = self.blocks.len();
        if k >= 2 && self.blocks[k - 1].nnodes == self.blocks[k - 2].nnodes {
            let (prev, cur) = (self.blocks[k - 2], self.blocks[k - 1]);
            if cur.repeat == 1
                && prev.nodeid == cur.nodeid
                && prev.nnodes == cur.nnodes
                && prev.ppn == cur.ppn
            {
                self.blocks[k - 2].repeat += 1;
                self.blocks.pop();
            }
        }
    }

    /// The same as appending runs of `ppn` tasks on `count` consecutive nodes one by one.
    fn append_stretch(&mut self, mut node: u64, mut count: u64, ppn: u64) {
        while count > 0 {
            self.append(node, ppn);
            node += 1;
            count -= 1;
            let k = self.blocks.len();
            let last = self.blocks[k - 1];
            if count == 0
                || last.repeat != 1
                || last.ppn != ppn
                || last.nodeid + last.nnodes != node
            {
                continue;
            }
            // Extend in bulk, stopping one short of where the block would equal the one before it
            // (the next single append then turns it into a repeat, as run-by-run appends would).
            let mut room = count;
            if k >= 2 {
                let prev = self.blocks[k - 2];
                if prev.nodeid == last.nodeid && prev.ppn == ppn && prev.nnodes > last.nnodes {
                    room = room.min(prev.nnodes - last.nnodes - 1);
                }
            }
            self.blocks[k - 1].nnodes += room;
            node += room;
            count -= room;
        }
    }

    fn finish(mut self) -> TaskMap {
        if let Some((n, c)) = self.pending.take() {
            self.append(n, c);
        }
        TaskMap::indexed(self.blocks)
    }
}

/// Reads a map in any of the three forms, told apart by their shape: JSON (RFC 34, bare or
/// wrapped), `(vector,...)` (PMI), or anything else (raw).
pub fn parse_any(text: &str) -> Result<TaskMap, TaskMapError> {
    let t = text.trim();
    if t.starts_with('{')
        || (t.starts_with('[') && serde_json::from_str::<serde_json::Value>(t).is_ok())
    {
        rfc34::decode(t)
    } else if t.starts_with('(') {
        pmi::decode(t)
    } else {
        raw::decode(t)
    }
}
