//! Slurm step layouts: hostlist expressions, `SLURM_STEP_TASKS_PER_NODE` strings, distributions,
//! and which global task runs on which node, as Slurm lays them out.
//!
//! Slurm has already computed how many tasks each node gets; given those counts, its block layout
//! numbers tasks node by node, cyclic deals one task per node per round, plane deals blocks of
//! `plane_size` per node per round (both skipping nodes that are full), and arbitrary follows the
//! host file line by line. (For cyclic, this equals Slurm's own layout unless a node was
//! overcommitted beyond its CPUs, where Slurm's cycle counts CPUs rather than tasks.)

use thiserror::Error;

use crate::limits::{MAX_NODES, MAX_TASKS};
use crate::step_map::{
    arbitrary_map, arbitrary_map_within, counts_map, counts_map_within, HostFile,
};
use crate::taskmap::TaskMap;

/// A Slurm value that cannot be read, or does not fit the step.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct LayoutError(pub String);

fn bad(msg: impl Into<String>) -> LayoutError {
    LayoutError(msg.into())
}

/// Splits at commas that are not inside brackets; brackets must pair up and not nest.
fn split_top(s: &str) -> Result<Vec<&str>, LayoutError> {
    let mut out = Vec::new();
    let (mut inside, mut start) = (false, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' if inside => return Err(bad(format!("hostlist '{s}': '[' inside brackets"))),
            ']' if !inside => return Err(bad(format!("hostlist '{s}': ']' without '['"))),
            '[' | ']' => inside = !inside,
            ',' if !inside => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if inside {
        return Err(bad(format!("hostlist '{s}': '[' without ']'")));
    }
    out.push(&s[start..]);
    Ok(out)
}

/// How many decimal digits `v` takes.
fn digits(v: u64) -> usize {
    v.checked_ilog10().map_or(1, |d| d as usize + 1)
}

fn too_many_hosts(expr: &str, limit: usize) -> LayoutError {
    bad(format!(
        "hostlist '{expr}' names more than {limit} hosts, the most lama reads"
    ))
}

/// One piece of a hostlist part: literal text, or a bracket's ranges `(first, last, width)`.
enum Piece<'a> {
    Text(&'a str),
    Ranges(Vec<(u64, u64, usize)>),
}

/// Splits one part (`a[1-2]b[3-4]`) into pieces, and counts the names it expands to.
fn pieces<'a>(expr: &str, part: &'a str) -> Result<(Vec<Piece<'a>>, usize), LayoutError> {
    let mut out = Vec::new();
    let mut count: usize = 1;
    let mut shortest: usize = 0;
    let mut rest = part;
    while !rest.is_empty() {
        let Some(open) = rest.find('[') else {
            out.push(Piece::Text(rest));
            break;
        };
        out.push(Piece::Text(&rest[..open]));
        let close = rest[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or_else(|| bad(format!("hostlist '{expr}': '[' without ']'")))?;
        let mut ranges = Vec::new();
        let mut names: usize = 0;
        for r in rest[open + 1..close].split(',') {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            let (a, b) = (a.trim(), b.trim());
            let number = |x: &str| {
                x.parse::<u64>()
                    .map_err(|_| bad(format!("hostlist '{expr}': bad range '{r}'")))
            };
            let (lo, hi) = (number(a)?, number(b)?);
            if hi < lo {
                return Err(bad(format!(
                    "hostlist '{expr}': bad range '{r}' (the first number must not exceed the second)"
                )));
            }
            names = names.saturating_add(
                usize::try_from(hi - lo)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1),
            );
            ranges.push((lo, hi, a.len()));
        }
        count = count.saturating_mul(names);
        // The shortest number a bracket writes: its narrowest zero-padded first number.
        shortest += ranges
            .iter()
            .map(|&(lo, _, w)| w.max(digits(lo)))
            .min()
            .unwrap_or(0);
        out.push(Piece::Ranges(ranges));
        rest = &rest[close + 1..];
    }
    shortest += out
        .iter()
        .map(|p| match p {
            Piece::Text(t) => t.len(),
            Piece::Ranges(_) => 0,
        })
        .sum::<usize>();
    if shortest > MAX_HOST_NAME_BYTES {
        return Err(bad(format!(
            "hostlist '{}': its names are longer than {MAX_HOST_NAME_BYTES} bytes",
            crate::quote::cut(expr)
        )));
    }
    Ok((out, count))
}

/// Expands a hostlist expression such as `n[1-3,7]`, `c[001-128]`, `a[1-2]b[3-4],login`.
///
/// The names are counted before any is made: more than [`MAX_TASKS`] in all is refused.
pub fn expand_hostlist(expr: &str) -> Result<Vec<String>, LayoutError> {
    expand_hostlist_within(expr, MAX_TASKS)
}

/// [`expand_hostlist`] with a lower limit than [`MAX_TASKS`] on the number of names.
pub fn expand_hostlist_within(expr: &str, limit: usize) -> Result<Vec<String>, LayoutError> {
    let limit = limit.min(MAX_TASKS);
    let mut total: usize = 0;
    for part in split_top(expr.trim())? {
        let part = part.trim();
        if !part.is_empty() {
            total = total.saturating_add(pieces(expr, part)?.1);
            if total > limit {
                return Err(too_many_hosts(expr, limit));
            }
        }
    }
    let mut out = Vec::with_capacity(total);
    each_host(expr, |h| {
        out.push(h.to_string());
        true
    })?;
    Ok(out)
}

/// Calls `f` with each name of a hostlist expression in order, one at a time in one buffer, until
/// `f` returns false; returns whether every name was visited.
///
/// Nothing is made ahead of what `f` asks for, so `a[0-16777214]` costs one name when `f` stops
/// at the first; a name longer than [`MAX_HOST_NAME_BYTES`] is refused before any is made.
pub fn each_host(expr: &str, mut f: impl FnMut(&str) -> bool) -> Result<bool, LayoutError> {
    let mut buf = String::new();
    for part in split_top(expr.trim())? {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (p, _) = pieces(expr, part)?;
        if !walk(&p, &mut buf, &mut f) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Checks a hostlist expression's syntax and name lengths without making any name.
fn check_hostlist(expr: &str) -> Result<(), LayoutError> {
    for part in split_top(expr.trim())? {
        pieces(expr, part.trim())?;
    }
    Ok(())
}

/// The longest host name lama accepts (DNS's limit for a name; Linux's own is 64).
pub const MAX_HOST_NAME_BYTES: usize = 255;

/// Appends each name of `pieces` to `buf` in turn (the last bracket varying fastest), calls `f`
/// with it, and restores `buf`. Its depth is the number of pieces, which [`pieces`] bounds.
fn walk(pieces: &[Piece<'_>], buf: &mut String, f: &mut impl FnMut(&str) -> bool) -> bool {
    use std::fmt::Write;
    let Some((first, rest)) = pieces.split_first() else {
        return f(buf);
    };
    let len = buf.len();
    match first {
        Piece::Text(t) => {
            buf.push_str(t);
            let go = walk(rest, buf, f);
            buf.truncate(len);
            go
        }
        Piece::Ranges(ranges) => {
            for &(lo, hi, width) in ranges {
                for v in lo..=hi {
                    // Writing to a String cannot fail.
                    let _ = write!(buf, "{v:0width$}");
                    let go = walk(rest, buf, f);
                    buf.truncate(len);
                    if !go {
                        return false;
                    }
                }
            }
            true
        }
    }
}

/// Expands a counts string such as `2(x3),1` into `[2, 2, 2, 1]`.
pub fn expand_counts(s: &str) -> Result<Vec<u32>, LayoutError> {
    expand_counts_within(s, MAX_NODES)
}

/// [`expand_counts`], refusing a string of more than `max_nodes` nodes before they are made.
pub fn expand_counts_within(s: &str, max_nodes: usize) -> Result<Vec<u32>, LayoutError> {
    let max_nodes = max_nodes.min(MAX_NODES);
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        // The value and the part at fault, quoted cut (a forged string may be long) only when
        // there is something to say: this runs for every step.
        let quoted = || (crate::quote::cut(s), crate::quote::cut(part));
        let at = |what: &str| {
            let (value, part) = quoted();
            bad(format!("counts '{value}': '{part}' {what}"))
        };
        let (n, rep) = match part.split_once("(x") {
            Some((n, r)) => {
                let r = r.strip_suffix(')').ok_or_else(|| {
                    let (value, part) = quoted();
                    bad(format!("counts '{value}': expected N(xM) at '{part}'"))
                })?;
                (n, r)
            }
            None => (part, "1"),
        };
        let n: u32 = n.trim().parse().map_err(|_| at("is not a count"))?;
        let rep: usize = rep
            .trim()
            .parse()
            .ok()
            .filter(|&r| r > 0)
            .ok_or_else(|| at("has a bad repeat"))?;
        if n as usize > MAX_TASKS {
            return Err(bad(format!(
                "counts '{}': {n} is more than {MAX_TASKS} tasks, the most lama places",
                quoted().0
            )));
        }
        if rep > max_nodes - out.len() {
            return Err(bad(format!(
                "counts '{}' covers more than {max_nodes} nodes, the most lama places here",
                quoted().0
            )));
        }
        out.extend(std::iter::repeat_n(n, rep));
    }
    Ok(out)
}

/// How Slurm spreads tasks over nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Consecutive tasks fill a node before the next.
    Block,
    /// One task per node per round.
    Cyclic,
    /// Blocks of this many tasks per node per round.
    Plane(u32),
    /// Task i runs on the host of line i of the host file.
    Arbitrary(Vec<String>),
}

impl Distribution {
    /// Reads a `SLURM_DISTRIBUTION` value. Only the part before the first `:` concerns nodes;
    /// `plane` takes its size from `plane_size` (or `plane=N`), `arbitrary` its hosts from the file
    /// contents given.
    pub fn parse(
        value: &str,
        plane_size: Option<u32>,
        hostfile: Option<&str>,
    ) -> Result<Distribution, LayoutError> {
        let node_part = value.split(':').next().unwrap_or("").trim();
        let node_part = node_part.split(',').next().unwrap_or("").trim();
        let (name, arg) = match node_part.split_once('=') {
            Some((n, a)) => (n, Some(a)),
            None => (node_part, None),
        };
        match name {
            "block" | "" | "*" => Ok(Distribution::Block),
            "cyclic" => Ok(Distribution::Cyclic),
            "plane" => {
                let size = match arg {
                    Some(a) => a.parse().ok(),
                    None => plane_size,
                };
                match size {
                    Some(n) if n >= 1 => Ok(Distribution::Plane(n)),
                    _ => Err(bad("plane distribution needs a plane size of at least 1 (SLURM_DIST_PLANESIZE or plane=N)")),
                }
            }
            "arbitrary" => {
                let text = hostfile.ok_or_else(|| {
                    bad("arbitrary distribution needs a host file (SLURM_HOSTFILE)")
                })?;
                Ok(Distribution::Arbitrary(read_hostfile(text)?))
            }
            other => Err(bad(format!(
                "unknown distribution '{other}' (valid: block, cyclic, plane, arbitrary)"
            ))),
        }
    }
}

/// Reads a Slurm host file: one host per task, hostlist expressions allowed, `host*N` for N tasks,
/// `#` comments and blank lines ignored.
pub fn read_hostfile(text: &str) -> Result<Vec<String>, LayoutError> {
    read_hostfile_within(text, MAX_TASKS)
}

/// [`read_hostfile`] with a lower limit than [`MAX_TASKS`] on the number of tasks.
pub fn read_hostfile_within(text: &str, limit: usize) -> Result<Vec<String>, LayoutError> {
    let limit = limit.min(MAX_TASKS);
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let seen = out.len();
        hostfile_line(line, i + 1, limit, seen, |h, times| {
            out.extend(std::iter::repeat_n(h.to_string(), times));
            true
        })?;
    }
    Ok(out)
}

/// Reads line `line_no` of a host file, after `seen` tasks: calls `f(host, times)` for each of
/// its hosts, in order, until `f` returns false. Refuses a line that brings the file past `limit`
/// tasks. Hosts are made one at a time as `f` asks for them, and an entry for no task (`h*0`)
/// makes none, so a line costs what its tasks need, whatever its ranges say.
pub(crate) fn hostfile_line(
    line: &str,
    line_no: usize,
    limit: usize,
    mut seen: usize,
    mut f: impl FnMut(&str, usize) -> bool,
) -> Result<usize, LayoutError> {
    let line = line.split('#').next().unwrap_or("").trim();
    for entry in line.split_whitespace() {
        let (expr, times) = match entry.rsplit_once('*') {
            Some((h, n)) => (
                h,
                n.parse::<usize>().map_err(|_| {
                    bad(format!(
                        "host file line {line_no}: bad count in '{}'",
                        crate::quote::cut(entry)
                    ))
                })?,
            ),
            None => (entry, 1),
        };
        let past = || {
            bad(format!(
                "host file line {line_no}: '{}' brings the file past {limit} tasks, the most lama reads",
                crate::quote::cut(entry)
            ))
        };
        // Checked before the hostlist is expanded too, so that `h*99999999999` costs nothing.
        if times > limit - seen {
            return Err(past());
        }
        if !expr.is_empty() && !expr.contains(['[', ']', ',']) {
            if expr.len() > MAX_HOST_NAME_BYTES {
                return Err(bad(format!(
                    "host file line {line_no}: the host name '{}' is longer than {MAX_HOST_NAME_BYTES} bytes",
                    crate::quote::cut(expr)
                )));
            }
            // `host*0` names a host for no task: nothing is laid out, as in Slurm.
            seen += times;
            if times > 0 && !f(expr, times) {
                return Ok(seen);
            }
            continue;
        }
        if times == 0 {
            // No task asks for any of its names: only its syntax is checked.
            check_hostlist(expr).map_err(|e| bad(format!("host file line {line_no}: {e}")))?;
            continue;
        }
        let (mut over, mut stopped) = (false, false);
        each_host(expr, |h| {
            if times > limit - seen {
                over = true;
                return false;
            }
            seen += times;
            stopped = !f(h, times);
            !stopped
        })
        .map_err(|e| bad(format!("host file line {line_no}: {e}")))?;
        if over {
            return Err(past());
        }
        if stopped {
            return Ok(seen);
        }
    }
    Ok(seen)
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

/// Reads a host file as the plugin and the CLI do: a regular file of at most
/// [`crate::limits::MAX_HOSTFILE_BYTES`] bytes, opened without blocking.
pub fn read_hostfile_text(path: &str) -> Result<String, String> {
    crate::limits::read_text(
        std::path::Path::new(path),
        crate::limits::MAX_HOSTFILE_BYTES,
    )
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
/// `SLURM_DIST_PLANESIZE`, `SLURM_HOSTFILE`). Empty means not given.
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
        }
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
    /// than `max_blocks` blocks (see [`crate::step_map::arbitrary_map_within`]): what the plugin
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
