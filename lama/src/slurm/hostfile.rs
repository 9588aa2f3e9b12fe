//! Host layouts for Slurm's arbitrary distribution: an allocation (hosts with slot counts), layout
//! entries written with relative host indexes (`+n2`, `+e`, `+e:1`) or host names, the `seq` and
//! round-robin mappers that turn them into one host per task, and the `SLURM_HOSTFILE` text
//! `srun -m arbitrary` reads.
//!
//! Entries resolve in the order written. `+n#` is the allocation's node at zero-based index `#`;
//! `+e:#` takes the first `#` nodes that no earlier entry used, `+e` all of them; every entry marks
//! its nodes used, so later `+e` entries get different ones (PRRTE's relative host indexing).

use thiserror::Error;

use super::hostlist::{expand_counts, expand_hostlist_within};
use crate::limits::MAX_NODES;

/// Most tasks a host file may list ([`crate::limits::MAX_TASKS`]).
pub use crate::limits::MAX_TASKS;

/// A host of the allocation and how many tasks it may run without oversubscription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// Host name, as Slurm's node list spells it.
    pub name: String,
    /// Slots (CPUs Slurm allocated, or `slots=N` of an allocation file).
    pub slots: u32,
}

/// The ordered hosts a layout is resolved against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    hosts: Vec<Host>,
}

/// What a layout entry stands for, before resolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A host named outright.
    Host(String),
    /// `+n#`: the allocation's node at this zero-based index.
    Index(usize),
    /// `+e` (`None`: every unused node) or `+e:#` (this many unused nodes).
    Empty(Option<usize>),
}

/// One layout line or `--host` item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The host or relative index.
    pub target: Target,
    /// `slots=N`: use at most N of the node's slots for this entry (round-robin only).
    pub slots: Option<u32>,
    /// Where the entry was written, for messages: `line 3 '+n7'`.
    pub at: String,
}

/// An entry resolved to one node of the allocation (`+e` entries resolve to several).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Index of the node in the allocation.
    pub node: usize,
    /// The entry's `slots=N`, if any.
    pub slots: Option<u32>,
}

/// How tasks are dealt to resolved entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapper {
    /// One task per resolved entry, in order; `slots=` is ignored.
    Seq,
    /// Fill each entry's slots in order, then go round again if oversubscription is allowed.
    RoundRobin,
}

/// A layout that cannot be turned into a host per task; messages name the entry at fault.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum HostfileError {
    /// The allocation could not be read.
    #[error("allocation: {0}")]
    Allocation(String),
    /// A layout entry that does not parse.
    #[error("{at}: {reason}")]
    Malformed {
        /// Where.
        at: String,
        /// What is wrong and what is valid.
        reason: String,
    },
    /// `+n#` past the last node.
    #[error("{at}: the allocation has {nodes} node(s), so valid indexes are +n0 to +n{last}", last = nodes - 1)]
    IndexBeyond {
        /// Where.
        at: String,
        /// Nodes in the allocation.
        nodes: usize,
    },
    /// `+e:#` with fewer unused nodes left.
    #[error("{at}: asks for {requested} empty node(s), but only {remaining} of the allocation's {nodes} node(s) are not used by earlier entries")]
    NotEnoughEmpty {
        /// Where.
        at: String,
        /// Nodes asked for (`+e` asks for at least one).
        requested: usize,
        /// Unused nodes left.
        remaining: usize,
        /// Nodes in the allocation.
        nodes: usize,
    },
    /// A host name the allocation does not have.
    #[error("{at}: host '{host}' is not in the allocation ({hosts})")]
    UnknownHost {
        /// Where.
        at: String,
        /// The name written.
        host: String,
        /// The allocation's hosts, abbreviated.
        hosts: String,
    },
    /// `slots=N` larger than the node's allocated slots.
    #[error("{at}: slots={slots} is more than the {has} slot(s) {host} has in the allocation")]
    SlotsBeyondHost {
        /// Where.
        at: String,
        /// Slots asked for.
        slots: u32,
        /// The host.
        host: String,
        /// Its allocated slots.
        has: u32,
    },
    /// Round-robin ran out of slots.
    #[error("{np} task(s) asked for, but the layout's entries have {slots} slot(s) in all (--oversubscribe goes round the entries again)")]
    NotEnoughSlots {
        /// Tasks asked for.
        np: usize,
        /// Slots the entries give in one round.
        slots: usize,
    },
    /// `seq` has one task per entry.
    #[error("{np} task(s) asked for, but the seq mapper places one task per entry and the layout expands to {entries} entries")]
    NotEnoughEntries {
        /// Tasks asked for.
        np: usize,
        /// Resolved entries.
        entries: usize,
    },
    /// `seq` put more tasks on a host than it has slots.
    #[error("the layout puts {tasks} task(s) on {host}, which has {slots} slot(s) in the allocation (--oversubscribe accepts this)")]
    HostOversubscribed {
        /// The host.
        host: String,
        /// Tasks the layout puts there.
        tasks: usize,
        /// Its allocated slots.
        slots: u32,
    },
    /// Zero or absurdly many tasks.
    #[error("{0}")]
    TaskCount(String),
}

impl HostfileError {
    /// A short machine-readable kind: `invalid-allocation`, `invalid-layout` or `unsatisfiable`.
    pub fn kind(&self) -> &'static str {
        match self {
            HostfileError::Allocation(_) => "invalid-allocation",
            HostfileError::Malformed { .. } => "invalid-layout",
            _ => "unsatisfiable",
        }
    }
}

fn alloc_err(msg: impl Into<String>) -> HostfileError {
    HostfileError::Allocation(msg.into())
}

fn slots_value(v: &str) -> Option<u32> {
    v.parse::<u32>().ok().filter(|&n| n >= 1)
}

impl Allocation {
    /// An allocation of these hosts, in this order. Names must be distinct and slots at least 1.
    pub fn new(hosts: Vec<Host>) -> Result<Allocation, HostfileError> {
        if hosts.is_empty() {
            return Err(alloc_err("no hosts"));
        }
        let mut seen = std::collections::HashSet::new();
        for h in &hosts {
            if h.slots == 0 {
                return Err(alloc_err(format!("host {} has 0 slots", h.name)));
            }
            if !seen.insert(h.name.as_str()) {
                return Err(alloc_err(format!("host {} is listed twice", h.name)));
            }
        }
        Ok(Allocation { hosts })
    }

    /// A Slurm host list (`n[1-3]`) with slots in Slurm's counts form (`4(x2),2`). One count
    /// applies to every host; no counts means one slot per host.
    pub fn from_nodelist(nodelist: &str, slots: Option<&str>) -> Result<Allocation, HostfileError> {
        let names =
            expand_hostlist_within(nodelist, MAX_NODES).map_err(|e| alloc_err(e.to_string()))?;
        let counts = match slots {
            None => vec![1; names.len()],
            Some(s) => {
                let c = expand_counts(s).map_err(|e| alloc_err(e.to_string()))?;
                match c.len() {
                    1 => vec![c[0]; names.len()],
                    n if n == names.len() => c,
                    n => {
                        return Err(alloc_err(format!(
                            "slots '{s}' gives {n} counts for {} hosts (give one count, or one per host)",
                            names.len()
                        )))
                    }
                }
            }
        };
        Allocation::new(
            names
                .into_iter()
                .zip(counts)
                .map(|(name, slots)| Host { name, slots })
                .collect(),
        )
    }

    /// The running Slurm job's allocation, read through `get` (for example `std::env::var`):
    /// `SLURM_JOB_NODELIST` and `SLURM_JOB_CPUS_PER_NODE`.
    pub fn from_slurm(get: impl Fn(&str) -> Option<String>) -> Result<Allocation, HostfileError> {
        let g = |n: &str| get(n).filter(|v| !v.trim().is_empty());
        let nodes = g("SLURM_JOB_NODELIST").ok_or_else(|| {
            alloc_err("not inside a Slurm job (SLURM_JOB_NODELIST is not set); give --allocation FILE or --nodelist HOSTLIST")
        })?;
        let cpus = g("SLURM_JOB_CPUS_PER_NODE")
            .ok_or_else(|| alloc_err("SLURM_JOB_CPUS_PER_NODE is not set"))?;
        Allocation::from_nodelist(&nodes, Some(&cpus))
    }

    /// An allocation file: `host [slots=N]` per line (hostlist expressions allowed, one slot by
    /// default), `#` comments and blank lines ignored.
    pub fn parse_hostfile(text: &str) -> Result<Allocation, HostfileError> {
        Allocation::parse_hostfile_within(text, MAX_NODES)
    }

    /// [`Allocation::parse_hostfile`] with a lower limit than [`MAX_NODES`] on the hosts.
    pub fn parse_hostfile_within(text: &str, limit: usize) -> Result<Allocation, HostfileError> {
        let limit = limit.min(MAX_NODES);
        let mut hosts = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let at = |why: String| alloc_err(format!("line {}: {why}", i + 1));
            let line = line.split('#').next().unwrap_or("").trim();
            let mut words = line.split_whitespace();
            let Some(name) = words.next() else { continue };
            if name.starts_with('+') {
                return Err(at(format!(
                    "'{name}' is a relative index; those belong in the layout, the allocation names hosts"
                )));
            }
            let mut slots = 1;
            for w in words {
                slots = w
                    .strip_prefix("slots=")
                    .and_then(slots_value)
                    .ok_or_else(|| at(format!("'{w}' is not slots=N with N at least 1")))?;
            }
            let names =
                expand_hostlist_within(name, limit - hosts.len()).map_err(|e| at(e.to_string()))?;
            hosts.extend(names.into_iter().map(|name| Host { name, slots }));
        }
        Allocation::new(hosts)
    }

    /// The hosts, in allocation order.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    fn summary(&self) -> String {
        let names: Vec<&str> = self.hosts.iter().map(|h| h.name.as_str()).collect();
        if names.len() <= 8 {
            names.join(", ")
        } else {
            format!(
                "{}, ... {} ({} hosts)",
                names[..4].join(", "),
                names[names.len() - 1],
                names.len()
            )
        }
    }
}

fn parse_entry(text: &str, at: String) -> Result<Entry, HostfileError> {
    let bad = |reason: String| HostfileError::Malformed {
        at: at.clone(),
        reason,
    };
    let mut words = text.split_whitespace();
    let first = words.next().ok_or_else(|| bad("empty entry".into()))?;
    let target = if let Some(rel) = first.strip_prefix('+') {
        let number = |s: &str| s.parse::<usize>().ok();
        match (rel.strip_prefix('n'), rel.strip_prefix('e')) {
            (Some(i), _) => Target::Index(
                number(i)
                    .ok_or_else(|| bad(format!("'{first}': +n needs a node index, e.g. +n0")))?,
            ),
            (_, Some("")) => Target::Empty(None),
            (_, Some(c)) => Target::Empty(Some(
                c.strip_prefix(':')
                    .and_then(number)
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| bad(format!("'{first}': write +e or +e:N with N at least 1")))?,
            )),
            _ => {
                return Err(bad(format!(
                    "'{first}' is not a relative index (valid: +n#, +e, +e:#)"
                )))
            }
        }
    } else if first.contains(':') || first.contains('=') {
        return Err(bad(format!(
            "'{first}' is not a host name (write slots as 'HOST slots=N')"
        )));
    } else {
        Target::Host(first.to_string())
    };
    let mut slots = None;
    for w in words {
        match w.strip_prefix("slots=") {
            Some(v) if slots.is_none() => {
                slots = Some(
                    slots_value(v)
                        .ok_or_else(|| bad(format!("'{w}': slots must be a number of at least 1")))?,
                )
            }
            Some(_) => return Err(bad("slots= given twice".into())),
            None => {
                return Err(bad(format!(
                    "unexpected '{w}' (an entry is a host, +n#, +e or +e:#, optionally followed by slots=N)"
                )))
            }
        }
    }
    Ok(Entry { target, slots, at })
}

/// Parses a layout file: one entry per line, `#` comments and blank lines ignored. Errors give the
/// line number.
pub fn parse_layout(text: &str) -> Result<Vec<Entry>, HostfileError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if !line.is_empty() {
            if out.len() >= MAX_TASKS {
                return Err(HostfileError::TaskCount(format!(
                    "the layout has more than {MAX_TASKS} entries, the most lama reads"
                )));
            }
            out.push(parse_entry(line, format!("line {} '{line}'", i + 1))?);
        }
    }
    Ok(out)
}

/// Parses a `--host` list: entries separated by commas, e.g. `+n2 slots=2,+e:1,dummy4`.
pub fn parse_host_list(list: &str) -> Result<Vec<Entry>, HostfileError> {
    list.split(',')
        .enumerate()
        .map(|(i, item)| {
            let item = item.trim();
            parse_entry(item, format!("--host entry {} '{item}'", i + 1))
        })
        .collect()
}

/// Resolves entries in order against the allocation.
pub fn resolve(entries: &[Entry], alloc: &Allocation) -> Result<Vec<Resolved>, HostfileError> {
    let hosts = &alloc.hosts;
    let mut used = vec![false; hosts.len()];
    let mut out = Vec::new();
    for e in entries {
        let nodes: Vec<usize> = match &e.target {
            Target::Host(name) => {
                vec![hosts.iter().position(|h| &h.name == name).ok_or_else(|| {
                    HostfileError::UnknownHost {
                        at: e.at.clone(),
                        host: name.clone(),
                        hosts: alloc.summary(),
                    }
                })?]
            }
            Target::Index(i) if *i < hosts.len() => vec![*i],
            Target::Index(_) => {
                return Err(HostfileError::IndexBeyond {
                    at: e.at.clone(),
                    nodes: hosts.len(),
                })
            }
            Target::Empty(count) => {
                let empty: Vec<usize> = (0..hosts.len()).filter(|&i| !used[i]).collect();
                let want = count.unwrap_or(empty.len().max(1));
                if want > empty.len() {
                    return Err(HostfileError::NotEnoughEmpty {
                        at: e.at.clone(),
                        requested: want,
                        remaining: empty.len(),
                        nodes: hosts.len(),
                    });
                }
                empty[..want].to_vec()
            }
        };
        for node in nodes {
            if let Some(s) = e.slots.filter(|&s| s > hosts[node].slots) {
                return Err(HostfileError::SlotsBeyondHost {
                    at: e.at.clone(),
                    slots: s,
                    host: hosts[node].name.clone(),
                    has: hosts[node].slots,
                });
            }
            used[node] = true;
            out.push(Resolved {
                node,
                slots: e.slots,
            });
        }
    }
    Ok(out)
}

fn check_np(np: usize) -> Result<usize, HostfileError> {
    match np {
        0 => Err(HostfileError::TaskCount("the layout places no task".into())),
        n if n > MAX_TASKS => Err(HostfileError::TaskCount(format!(
            "{n} tasks is more than the {MAX_TASKS} a host file may list"
        ))),
        n => Ok(n),
    }
}

/// The allocation node of every task, task 0 first.
///
/// `np` defaults to one task per resolved entry (`seq`) or to every slot the entries give in one
/// round (round-robin). Without `oversubscribe`, no host gets more tasks than its slots.
pub fn map(
    alloc: &Allocation,
    entries: &[Entry],
    mapper: Mapper,
    np: Option<usize>,
    oversubscribe: bool,
) -> Result<Vec<usize>, HostfileError> {
    if entries.is_empty() {
        return Err(HostfileError::TaskCount("the layout has no entries".into()));
    }
    let resolved = resolve(entries, alloc)?;
    let hosts = &alloc.hosts;
    match mapper {
        Mapper::Seq => {
            let np = check_np(np.unwrap_or(resolved.len()))?;
            if np > resolved.len() {
                return Err(HostfileError::NotEnoughEntries {
                    np,
                    entries: resolved.len(),
                });
            }
            let out: Vec<usize> = resolved[..np].iter().map(|r| r.node).collect();
            if !oversubscribe {
                let mut count = vec![0usize; hosts.len()];
                out.iter().for_each(|&n| count[n] += 1);
                if let Some((n, &tasks)) = count
                    .iter()
                    .enumerate()
                    .find(|&(n, &c)| c > hosts[n].slots as usize)
                {
                    return Err(HostfileError::HostOversubscribed {
                        host: hosts[n].name.clone(),
                        tasks,
                        slots: hosts[n].slots,
                    });
                }
            }
            Ok(out)
        }
        Mapper::RoundRobin => {
            // First round: each entry takes its slots= (or all the node's) but never more than
            // the node has left; later rounds repeat the entries' quotas, oversubscribing.
            let mut left: Vec<usize> = hosts.iter().map(|h| h.slots as usize).collect();
            let first: Vec<usize> = resolved
                .iter()
                .map(|r| {
                    let quota = r.slots.unwrap_or(hosts[r.node].slots) as usize;
                    let take = quota.min(left[r.node]);
                    left[r.node] -= take;
                    take
                })
                .collect();
            let one_round: usize = first.iter().sum();
            let np = check_np(np.unwrap_or(one_round))?;
            if np > one_round && !oversubscribe {
                return Err(HostfileError::NotEnoughSlots {
                    np,
                    slots: one_round,
                });
            }
            let mut out = Vec::with_capacity(np);
            for (r, &take) in resolved.iter().zip(&first) {
                let k = take.min(np - out.len());
                out.extend(std::iter::repeat_n(r.node, k));
            }
            while out.len() < np {
                for r in &resolved {
                    let quota = r.slots.unwrap_or(hosts[r.node].slots) as usize;
                    let k = quota.min(np - out.len());
                    out.extend(std::iter::repeat_n(r.node, k));
                }
            }
            Ok(out)
        }
    }
}

/// The host name of every task, one per line, task 0 first: the `SLURM_HOSTFILE` format.
///
/// `nodes` are indexes into `hosts` (an allocation's, or a job's node list for a LAMA plan).
pub fn slurm_hostfile(hosts: &[String], nodes: &[u32]) -> Result<String, HostfileError> {
    let mut s = String::new();
    for &n in nodes {
        let name = hosts.get(n as usize).ok_or_else(|| {
            alloc_err(format!(
                "the placement uses node {n} but the job has only {} node(s)",
                hosts.len()
            ))
        })?;
        s.push_str(name);
        s.push('\n');
    }
    Ok(s)
}
