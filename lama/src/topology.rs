//! A node's hardware as LAMA sees it, as plain data (read from hwloc by [`crate::hwloc`], or from
//! the node's cache by [`crate::cache`]).
//!
//! hwloc numbers PUs depth-first, so every object covers a contiguous run of PUs in logical order.
//! A [`NodeTopology`] keeps the usable PUs in that order and, per level, each object as a [`Span`]
//! of positions in that list. Restricting to allowed CPUs drops PUs and renumbers the spans, so
//! positions, windows and picture are all counted on what remains, as the contract requires.

use std::borrow::Cow;

use thiserror::Error;

use crate::idset;
use crate::level::Level;

/// A contiguous run of usable PUs, `start..end` in the node's PU order.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Span {
    /// First PU position.
    pub start: u32,
    /// One past the last PU position.
    pub end: u32,
}

impl Span {
    /// Whether `other` lies inside this span.
    pub fn contains(&self, other: &Span) -> bool {
        self.start <= other.start && other.end <= self.end
    }
    /// Number of PUs in the span.
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }
    /// Whether the span is empty (never true for a stored object).
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// Why a topology could not be loaded or used.
#[derive(Debug, Error)]
pub enum TopologyError {
    /// hwloc could not read the description.
    #[error("cannot load topology {source_name}: {reason}")]
    Load {
        /// The file, synthetic description or "this machine".
        source_name: String,
        /// hwloc's reason.
        reason: String,
    },
    /// An hwloc object whose CPUs are not contiguous in hwloc's logical order.
    #[error("topology {0}: a {1} does not cover a contiguous range of hardware threads; this topology is not supported")]
    NotContiguous(String, &'static str),
    /// Restriction left no CPU.
    #[error(
        "topology {name}: none of the allowed CPUs {allowed} exists here (this node has {have})"
    )]
    EmptyRestriction {
        /// Node name.
        name: String,
        /// The allowed list.
        allowed: String,
        /// What the node has.
        have: String,
    },
    /// A malformed cpulist.
    #[error(transparent)]
    Idset(#[from] idset::IdsetError),
}

/// One node's usable hardware, as spans per level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeTopology {
    name: String,
    /// OS index of each usable PU, in hwloc logical order.
    pus: Vec<u32>,
    /// Objects of each level (indexed by [`Level::index`]), sorted; empty when the node lacks it.
    levels: [Vec<Span>; 9],
    /// hwloc gave the machine no Core objects (s390 guests, some fake machines): each hardware
    /// thread stands for a core, as the automatic policy has always counted them.
    threads_as_cores: bool,
}

impl NodeTopology {
    /// Builds a node from explicit data: PU OS indexes in logical order and the spans of each level.
    /// Spans are sorted and deduplicated; `n` and `h` are filled in when left empty.
    pub fn from_parts(name: &str, pus: Vec<u32>, mut levels: [Vec<Span>; 9]) -> NodeTopology {
        let n = pus.len() as u32;
        for spans in levels.iter_mut() {
            spans.retain(|s| !s.is_empty() && s.end <= n);
            spans.sort();
            spans.dedup();
            // The objects of a level never share a CPU (a binding would list it twice): a span
            // that overlaps one kept before it is dropped, as `crate::tiers` drops a PMem node
            // attached above the DRAM nodes of its CPUs.
            let mut end = 0;
            spans.retain(|s| {
                let keep = s.start >= end;
                if keep {
                    end = s.end;
                }
                keep
            });
        }
        levels[Level::Node.index()] = vec![Span { start: 0, end: n }];
        if levels[Level::Hwthread.index()].is_empty() {
            levels[Level::Hwthread.index()] = (0..n)
                .map(|i| Span {
                    start: i,
                    end: i + 1,
                })
                .collect();
        }
        if levels[Level::Board.index()].is_empty() {
            levels[Level::Board.index()] = vec![Span { start: 0, end: n }];
        }
        let threads_as_cores = levels[Level::Core.index()].is_empty();
        if threads_as_cores {
            levels[Level::Core.index()] = levels[Level::Hwthread.index()].clone();
        }
        // Hardware threads outside every package (a firmware that gave packages conflicting
        // ids: hwloc's 40intel64-4n10c+pci-conflicts) make a package of their own, so that
        // sockets still nest over cores.
        let sockets = &mut levels[Level::Socket.index()];
        if !sockets.is_empty() {
            let mut gaps = Vec::new();
            let mut at = 0;
            for s in sockets
                .iter()
                .chain(std::iter::once(&Span { start: n, end: n }))
            {
                if s.start > at {
                    gaps.push(Span {
                        start: at,
                        end: s.start,
                    });
                }
                at = at.max(s.end);
            }
            sockets.extend(gaps);
            sockets.sort();
        }
        NodeTopology {
            name: name.to_string(),
            pus,
            levels,
            threads_as_cores,
        }
    }

    /// Keeps only the CPUs (OS indexes) in `allowed`; objects left without a CPU disappear.
    pub fn restrict(&self, allowed: &[u32]) -> Result<NodeTopology, TopologyError> {
        self.restricted(allowed).map(Cow::into_owned)
    }

    /// [`NodeTopology::restrict`], borrowing the node itself when `allowed` keeps all of it (a
    /// step given the whole node need not copy it).
    pub fn restricted(&self, allowed: &[u32]) -> Result<Cow<'_, NodeTopology>, TopologyError> {
        // A table by CPU number, sized by the node's own CPUs (`allowed` may name any number):
        // every step restricts its node to the step's CPUs.
        let len = self.pus.iter().max().map_or(0, |&m| m as usize + 1);
        let ok = idset::table(allowed, len);
        let keep: Vec<bool> = self.pus.iter().map(|&p| idset::in_table(&ok, p)).collect();
        if keep.iter().all(|&k| k) {
            return Ok(Cow::Borrowed(self));
        }
        // before[i] = number of kept PUs before position i: maps old spans to new ones.
        let mut before = Vec::with_capacity(keep.len() + 1);
        let mut acc = 0u32;
        for &k in &keep {
            before.push(acc);
            acc += k as u32;
        }
        before.push(acc);
        if acc == 0 {
            return Err(TopologyError::EmptyRestriction {
                name: self.name.clone(),
                allowed: idset::format_list(allowed),
                have: idset::format_list(&self.cpus()),
            });
        }
        let pus = self
            .pus
            .iter()
            .zip(&keep)
            .filter(|(_, &k)| k)
            .map(|(&p, _)| p)
            .collect();
        let mut levels: [Vec<Span>; 9] = Default::default();
        for (i, spans) in self.levels.iter().enumerate() {
            levels[i] = spans
                .iter()
                .map(|s| Span {
                    start: before[s.start as usize],
                    end: before[s.end as usize],
                })
                .filter(|s| !s.is_empty())
                .collect();
        }
        let mut node = NodeTopology::from_parts(&self.name, pus, levels);
        node.threads_as_cores = self.threads_as_cores;
        Ok(Cow::Owned(node))
    }

    /// Parses an hwloc cpulist (`0-3,8-11`) and restricts to it.
    pub fn restrict_to_list(&self, cpulist: &str) -> Result<NodeTopology, TopologyError> {
        let allowed = idset::parse_list(cpulist)?;
        self.restrict(&allowed)
    }

    /// Whether hwloc gave the machine no Core objects: its cores are its hardware threads.
    pub fn threads_as_cores(&self) -> bool {
        self.threads_as_cores
    }

    /// The node's name (file, synthetic description or host).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Renames the node.
    pub fn with_name(mut self, name: &str) -> NodeTopology {
        self.name = name.to_string();
        self
    }

    /// Number of usable PUs.
    pub fn num_pus(&self) -> usize {
        self.pus.len()
    }

    /// OS indexes of the usable PUs, in logical order.
    pub fn pus(&self) -> &[u32] {
        &self.pus
    }

    /// The usable PUs as a table by OS index ([`idset::table`]).
    pub fn cpu_table(&self) -> Vec<bool> {
        idset::table_of(&self.pus)
    }

    /// OS indexes of the usable PUs, ascending.
    pub fn cpus(&self) -> Vec<u32> {
        let mut v = self.pus.clone();
        v.sort_unstable();
        v
    }

    /// The objects of a level (sorted spans); empty when the node has no such object.
    pub fn objects(&self, level: Level) -> &[Span] {
        &self.levels[level.index()]
    }

    /// Whether the node has objects of this level.
    pub fn has(&self, level: Level) -> bool {
        !self.levels[level.index()].is_empty()
    }

    /// OS indexes of the PUs of a span, ascending.
    pub fn span_cpus(&self, span: Span) -> Vec<u32> {
        let mut v = self.pus[span.start as usize..span.end as usize].to_vec();
        v.sort_unstable();
        v
    }

    /// A picture of the node with `bound` (PU positions in `start..end`) marked `B`:
    /// one bracket per socket, cores separated by `/`, one character per hardware thread.
    pub fn picture(&self, bound: Span) -> String {
        self.draw(|q| {
            if bound.start <= q && q < bound.end {
                'B'
            } else {
                '.'
            }
        })
    }

    /// A picture like [`NodeTopology::picture`] from CPU lists (OS indexes): `B` for `bound`,
    /// `.` for the rest of `allowed`, `-` for CPUs outside `allowed` (another step's, say).
    pub fn picture_cpus(&self, bound: &[u32], allowed: &[u32]) -> String {
        self.draw(|q| {
            let os = self.pus[q as usize];
            if bound.binary_search(&os).is_ok() {
                'B'
            } else if allowed.binary_search(&os).is_ok() {
                '.'
            } else {
                '-'
            }
        })
    }

    fn draw(&self, mark: impl Fn(u32) -> char) -> String {
        let whole = [Span {
            start: 0,
            end: self.pus.len() as u32,
        }];
        let sockets = if self.has(Level::Socket) {
            self.objects(Level::Socket)
        } else {
            &whole[..]
        };
        let cores = self.objects(Level::Core);
        let mut out = String::new();
        for sock in sockets {
            out.push('[');
            let mut p = sock.start;
            let mut first = true;
            while p < sock.end {
                let core_end = match cores.binary_search_by(|c| {
                    if c.end <= p {
                        std::cmp::Ordering::Less
                    } else if c.start > p {
                        std::cmp::Ordering::Greater
                    } else {
                        std::cmp::Ordering::Equal
                    }
                }) {
                    Ok(i) => cores[i].end.min(sock.end),
                    Err(_) => p + 1,
                };
                if !first {
                    out.push('/');
                }
                first = false;
                for q in p..core_end {
                    out.push(mark(q));
                }
                p = core_end;
            }
            out.push(']');
        }
        out
    }
}

/// A resource manager's numbering of a node's cores where it is not hwloc's (Slurm's, on a node
/// `slurm.conf` declares otherwise: `lama::slurm::node_conf`): core `c` is the PUs at logical
/// positions `(c × stride + t) mod PUs`, `t < threads`, for `c < cores`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbstractCores {
    /// Threads of each core a step is given.
    pub threads: u32,
    /// Positions from one core's first thread to the next one's.
    pub stride: u32,
    /// Abstract cores of the node.
    pub cores: u32,
}

impl AbstractCores {
    /// The logical PU positions of abstract core `core`, or `None` past the node's cores.
    pub fn positions(&self, core: u32, pus: u32) -> Option<impl Iterator<Item = u32>> {
        if core >= self.cores || pus == 0 {
            return None;
        }
        let first = u64::from(core) * u64::from(self.stride);
        let pus = u64::from(pus);
        Some((0..u64::from(self.threads)).map(move |t| ((first + t) % pus) as u32))
    }
}
