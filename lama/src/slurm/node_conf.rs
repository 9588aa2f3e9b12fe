//! Which hardware threads Slurm means by a node's "core `c`".
//!
//! Slurm hands a step its cores as abstract core numbers (`S_STEP_ALLOC_CORES`), and slurmd turns
//! them into CPUs with its own rule (`xcpuinfo_abs_to_mac`): core `c` is the PUs at positions
//! `c × stride + t` (modulo the PU count) of hwloc's logical order, for `t` below the node's
//! threads per core. On a node that `slurm.conf` describes as hwloc sees it, that is hwloc's
//! core `c`, and lama needs nothing from here. It is not on nodes declared otherwise:
//!
//! - `CPUs=` alone (`NodeName=n1 CPUs=16` on 8 cores of 2 threads): Slurm sees 16 one-thread
//!   cores, and its core `c` is the `c`-th hardware thread;
//! - `ThreadsPerCore=1` on SMT hardware: since 23.11 core `c` is the first thread of hwloc's core
//!   `c`; Slurm 22.05 and 23.02 step by the configured threads, so core `c` is the `c`-th thread.
//!
//! slurmd decides from the node's line in `slurm.conf` and the hardware ([`slurmd_cores`], as
//! `slurmd.c` does); this module reads that line ([`node_conf`]) the way Slurm's parser does:
//! `NodeName=DEFAULT` lines, hostlist names, `NodeHostname`, `Include` files, continued lines.

use std::path::{Path, PathBuf};

use crate::idset::parse_list;
use crate::plugin::{cores_to_cpus, StepError};
use crate::slurm::hostlist::each_host;
use crate::topology::{AbstractCores, NodeTopology};

/// The largest `slurm.conf` (or included file) lama reads: sites with 10,000 node lines stay far
/// below.
const MAX_CONF_BYTES: u64 = 64 << 20;

/// How deep `Include` may nest (Slurm has no limit; a loop must end).
const MAX_INCLUDE_DEPTH: u32 = 16;

/// A node's hardware as its `NodeName` line declares it, after Slurm's own inference of what the
/// line leaves out (`read_config.c`, `_parse_nodename`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeConf {
    /// `CPUs=` (or as inferred).
    pub cpus: u32,
    /// Sockets in all (`Sockets=`, or `Boards × SocketsPerBoard`).
    pub sockets: u32,
    /// `CoresPerSocket=`.
    pub cores: u32,
    /// `ThreadsPerCore=`.
    pub threads: u32,
}

/// The hardware as slurmd's hwloc reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hardware {
    /// PUs.
    pub cpus: u32,
    /// Cores in all.
    pub cores: u32,
}

/// How a release numbers hardware threads within an abstract core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numbering {
    /// Slurm 22.05 and 23.02: by the configured threads per core, and no special case for
    /// `CPUs=` alone.
    Configured,
    /// Slurm 23.11 and later: by the hardware's threads per core; a node with `CPUs=` alone is
    /// taken as one-thread cores.
    Hardware,
}

/// Slurm's abstract cores as slurmd sets them up (`slurmd.c`, `_read_config`), or `None` where
/// they are hwloc's cores: the common case, which needs no rule of its own.
/// `overrides` is `SlurmdParameters=config_overrides`.
pub fn slurmd_cores(
    conf: &NodeConf,
    hw: Hardware,
    overrides: bool,
    numbering: Numbering,
) -> Option<AbstractCores> {
    if hw.cores == 0 || hw.cpus == 0 || !hw.cpus.is_multiple_of(hw.cores) {
        return None;
    }
    let hw_threads = hw.cpus / hw.cores;
    let only_cpus =
        conf.sockets == hw.cpus && conf.cpus == hw.cpus && conf.cores == 1 && conf.threads == 1;
    let (threads, stride, cores) = if numbering == Numbering::Hardware && only_cpus {
        (1, 1, hw.cpus)
    } else if !overrides && hw.cpus < conf.cpus {
        (hw_threads, hw_threads, hw.cores)
    } else {
        let stride = match numbering {
            Numbering::Configured => conf.threads,
            Numbering::Hardware => hw_threads,
        };
        (
            conf.threads,
            stride,
            conf.sockets.saturating_mul(conf.cores),
        )
    };
    let own = AbstractCores {
        threads,
        stride,
        cores,
    };
    let hwloc = AbstractCores {
        threads: hw_threads,
        stride: hw_threads,
        cores: hw.cores,
    };
    (own != hwloc).then_some(own)
}

/// The CPUs of the cores Slurm gave a step on a node (`S_STEP_ALLOC_CORES`): by Slurm's own rule
/// where `map` says the node's cores are not hwloc's ([`slurmd_cores`]), else as
/// [`crate::plugin::cores_to_cpus`] counts them. `threads_per_core` (`--threads-per-core`,
/// `--hint=nomultithread`) keeps each core's first threads.
pub fn step_cpus(
    topo: &NodeTopology,
    cores: &str,
    map: Option<&AbstractCores>,
    threads_per_core: Option<u32>,
) -> Result<Vec<u32>, StepError> {
    let Some(map) = map else {
        return cores_to_cpus(topo, cores, threads_per_core);
    };
    let ids = parse_list(cores)
        .map_err(|e| StepError::Cpus(format!("Slurm's core list '{cores}' cannot be read: {e}")))?;
    let pus = topo.pus();
    let keep = threads_per_core.map_or(map.threads, |n| n.clamp(1, map.threads));
    let limited = AbstractCores {
        threads: keep,
        ..*map
    };
    let mut out = Vec::with_capacity(ids.len() * keep as usize);
    for &k in &ids {
        let at = limited.positions(k, pus.len() as u32).ok_or_else(|| {
            StepError::Cpus(format!(
                "Slurm gave the step core {k}, but slurm.conf gives this node {} cores (cores {cores})",
                map.cores
            ))
        })?;
        out.extend(at.map(|p| pus[p as usize]));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// What `slurm.conf` declares for a node, and whether `SlurmdParameters` has `config_overrides`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declared {
    /// The node's line, or `None` when no line names it (a dynamic node, say).
    pub node: Option<NodeConf>,
    /// `SlurmdParameters=config_overrides`.
    pub overrides: bool,
}

/// Reads `conf` (and the files it includes) for `node`: a `NodeName` that lists it, else a
/// `NodeHostname` that does. The error is a sentence naming the file.
pub fn node_conf(conf: &Path, node: &str) -> Result<Declared, String> {
    let dir = conf.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut p = Parser {
        node,
        dir,
        defaults: Vec::new(),
        found: None,
        overrides: false,
    };
    p.file(conf, 0)?;
    Ok(Declared {
        node: p.found,
        overrides: p.overrides,
    })
}

struct Parser<'a> {
    node: &'a str,
    dir: PathBuf,
    /// `NodeName=DEFAULT`'s keys (lower case) and values, later lines' first.
    defaults: Vec<(String, String)>,
    found: Option<NodeConf>,
    overrides: bool,
}

impl Parser<'_> {
    fn file(&mut self, path: &Path, depth: u32) -> Result<(), String> {
        if depth > MAX_INCLUDE_DEPTH {
            return Err(format!(
                "{}: Include nests more than {MAX_INCLUDE_DEPTH} deep",
                path.display()
            ));
        }
        let text = crate::limits::read_text(path, MAX_CONF_BYTES)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut line = String::new();
        for raw in text.lines() {
            let raw = strip_comment(raw);
            // A line ending in a backslash goes on in the next one.
            if let Some(head) = raw.strip_suffix('\\') {
                line.push_str(head);
                continue;
            }
            line.push_str(raw);
            let whole = std::mem::take(&mut line);
            self.line(whole.trim(), path, depth)?;
        }
        self.line(line.trim(), path, depth)
    }

    fn line(&mut self, line: &str, path: &Path, depth: u32) -> Result<(), String> {
        if line.is_empty() {
            return Ok(());
        }
        let (word, rest) = line.split_at(line.find(char::is_whitespace).unwrap_or(line.len()));
        if word.eq_ignore_ascii_case("include") {
            let name = rest.split_whitespace().next().unwrap_or_default();
            if name.contains('*') || name.contains('%') {
                return Err(format!(
                    "{}: lama does not follow 'Include {name}' (a pattern)",
                    path.display()
                ));
            }
            let target = if name.starts_with('/') {
                PathBuf::from(name)
            } else {
                self.dir.join(name)
            };
            return self.file(&target, depth + 1);
        }
        let pairs = pairs(line);
        let Some((key, value)) = pairs.first() else {
            return Ok(());
        };
        if key == "slurmdparameters" {
            self.overrides = value
                .split(',')
                .any(|p| p.trim().eq_ignore_ascii_case("config_overrides"));
            return Ok(());
        }
        if key != "nodename" {
            return Ok(());
        }
        if value.eq_ignore_ascii_case("DEFAULT") {
            // Newer defaults first; older ones stay for keys the new line leaves out.
            let mut merged: Vec<(String, String)> = pairs[1..].to_vec();
            merged.append(&mut self.defaults);
            self.defaults = merged;
            return Ok(());
        }
        let get = |k: &str| {
            pairs[1..]
                .iter()
                .chain(self.defaults.iter())
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        // Slurm refuses a node named twice; the first line is the one that counts.
        if self.found.is_some() || !self.names(value, get("nodehostname"))? {
            return Ok(());
        }
        let number = |keys: &[&str]| -> Result<Option<u32>, String> {
            for k in keys {
                let own = pairs[1..].iter().find(|(key, _)| key == k);
                if let Some((_, v)) = own {
                    return parsed(k, v, path).map(Some);
                }
            }
            for k in keys {
                if let Some((_, v)) = self.defaults.iter().find(|(key, _)| key == k) {
                    return parsed(k, v, path).map(Some);
                }
            }
            Ok(None)
        };
        let cpus = number(&["cpus", "procs"])?;
        let boards = number(&["boards"])?.unwrap_or(1).max(1);
        let sockets = number(&["sockets"])?;
        let per_board = number(&["socketsperboard"])?;
        let cores = number(&["corespersocket"])?.unwrap_or(1).max(1);
        let threads = number(&["threadspercore"])?.unwrap_or(1).max(1);
        self.found = Some(infer(cpus, boards, sockets, per_board, cores, threads));
        Ok(())
    }

    /// Whether the line's `NodeName` (else its `NodeHostname`) lists this node.
    fn names(&self, names: &str, hostnames: Option<&str>) -> Result<bool, String> {
        let mut found = false;
        for list in std::iter::once(names).chain(hostnames) {
            each_host(list, |h| {
                found = h == self.node;
                !found
            })
            .map_err(|e| format!("NodeName={names}: {e}"))?;
            if found {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

fn parsed(key: &str, value: &str, path: &Path) -> Result<u32, String> {
    value.trim_matches('"').parse::<u32>().map_err(|_| {
        format!(
            "{}: a node's {key} is '{value}', not a number",
            path.display()
        )
    })
}

/// Slurm's inference of what a node line leaves out (`_parse_nodename`).
fn infer(
    cpus: Option<u32>,
    boards: u32,
    sockets: Option<u32>,
    per_board: Option<u32>,
    cores: u32,
    threads: u32,
) -> NodeConf {
    let per_core = cores.saturating_mul(threads);
    let sockets = match (per_board, sockets) {
        (Some(pb), _) => boards.saturating_mul(pb.max(1)),
        (None, Some(s)) => s.max(1),
        (None, None) => match cpus {
            Some(c) if c / per_core > 0 && c % per_core == 0 => c / per_core,
            _ => boards,
        },
    };
    let full = sockets.saturating_mul(per_core);
    let mut cpus = cpus.unwrap_or(full).max(1);
    if cpus != sockets && cpus != sockets.saturating_mul(cores) && cpus != full {
        cpus = full;
    }
    NodeConf {
        cpus,
        sockets,
        cores,
        threads,
    }
}

/// A line without its comment: `#` starts one, `\#` is a `#`.
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut i = 0;
    while let Some(k) = line[i..].find('#') {
        let at = i + k;
        if at == 0 || bytes[at - 1] != b'\\' {
            return &line[..at];
        }
        i = at + 1;
    }
    line
}

/// The line's `key=value` words, keys in lower case; a value may be in double quotes.
fn pairs(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line.trim_start();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else { break };
        let key = rest[..eq].trim();
        // A word without '=' before this key is not a pair: skip it.
        let key = key.rsplit(char::is_whitespace).next().unwrap_or(key);
        let after = &rest[eq + 1..];
        let (value, next) = if let Some(q) = after.strip_prefix('"') {
            let end = q.find('"').unwrap_or(q.len());
            (&q[..end], q.get(end + 1..).unwrap_or(""))
        } else {
            let end = after.find(char::is_whitespace).unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        out.push((key.to_ascii_lowercase(), value.to_string()));
        rest = next.trim_start();
    }
    out
}

#[cfg(test)]
#[path = "node_conf_tests.rs"]
mod tests;
