//! A node's hardware as LAMA sees it, read from hwloc and then kept as plain data.
//!
//! hwloc numbers PUs depth-first, so every object covers a contiguous run of PUs in logical order.
//! A [`NodeTopology`] keeps the usable PUs in that order and, per level, each object as a [`Span`]
//! of positions in that list. Restricting to allowed CPUs drops PUs and renumbers the spans, so
//! positions, windows and picture are all counted on what remains, as the contract requires.

use std::path::Path;

use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::{BuildFlags, TypeFilter};
use hwlocality::Topology;
use thiserror::Error;

use crate::idset;
use crate::level::Level;
use crate::locality::Locality;

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
        NodeTopology {
            name: name.to_string(),
            pus,
            levels,
        }
    }

    /// Loads an hwloc XML file (I/O objects kept, for device locality).
    pub fn from_xml_file(path: &Path) -> Result<NodeTopology, TopologyError> {
        let name = path.display().to_string();
        let topo = hwloc(&name, Some(&read_xml(path)?), false, true)?;
        NodeTopology::convert(&topo, &name, true)
    }

    /// [`NodeTopology::from_xml_file`] (with every CPU the file lists, allowed or not, when
    /// `whole`) and the file's devices, from one hwloc load.
    pub fn from_xml_file_with_devices(
        path: &Path,
        whole: bool,
    ) -> Result<(NodeTopology, Locality), TopologyError> {
        let name = path.display().to_string();
        let topo = hwloc(&name, Some(&read_xml(path)?), true, true)?;
        Ok((
            NodeTopology::convert(&topo, &name, !whole)?,
            Locality::from_hwloc(&topo),
        ))
    }

    /// [`NodeTopology::this_machine`] (or [`NodeTopology::this_machine_whole`] when `whole`), the
    /// CPUs this process may use, and the machine's devices, from one probe.
    pub fn this_machine_with_devices(
        whole: bool,
    ) -> Result<(NodeTopology, Vec<u32>, Locality), TopologyError> {
        let topo = hwloc("this machine", None, true, true)?;
        let node = NodeTopology::convert(&topo, "this machine", !whole)?;
        Ok((node, allowed_cpus(&topo), Locality::from_hwloc(&topo)))
    }

    /// Builds a topology from an hwloc synthetic description such as `pack:2 core:4 pu:2`.
    pub fn from_synthetic(desc: &str) -> Result<NodeTopology, TopologyError> {
        let topo = load_err(desc, || {
            Topology::builder()
                .from_synthetic(desc)
                .map_err(|e| e.to_string())?
                .build()
                .map_err(|e| e.to_string())
        })?;
        NodeTopology::from_hwloc(&topo, desc)
    }

    /// Loads the machine this runs on, restricted to the CPUs this process may use.
    pub fn this_machine() -> Result<NodeTopology, TopologyError> {
        let topo = hwloc("this machine", None, false, false)?;
        NodeTopology::from_hwloc(&topo, "this machine")
    }

    /// Loads the whole machine, including CPUs this process may not use (Slurm numbers cores
    /// over the whole node), and returns it with the CPUs this process may use (OS indexes,
    /// ascending).
    pub fn this_machine_whole() -> Result<(NodeTopology, Vec<u32>), TopologyError> {
        let topo = hwloc("this machine", None, true, false)?;
        let node = NodeTopology::convert(&topo, "this machine", false)?;
        Ok((node, allowed_cpus(&topo)))
    }

    /// Converts a loaded hwloc topology, keeping only PUs that are both present and allowed.
    pub fn from_hwloc(topo: &Topology, name: &str) -> Result<NodeTopology, TopologyError> {
        NodeTopology::convert(topo, name, true)
    }

    fn convert(
        topo: &Topology,
        name: &str,
        allowed_only: bool,
    ) -> Result<NodeTopology, TopologyError> {
        let allowed = if allowed_only {
            topo.allowed_cpuset()
        } else {
            topo.cpuset()
        };
        let mut pus = Vec::new();
        let mut compact: Vec<u32> = Vec::new();
        for pu in topo.objects_with_type(ObjectType::PU) {
            let Some(os) = pu.os_index() else { continue };
            if !allowed.is_set(os) {
                continue;
            }
            if compact.len() <= os {
                compact.resize(os + 1, u32::MAX);
            }
            compact[os] = pus.len() as u32;
            pus.push(os as u32);
        }
        let span_of =
            |obj: &TopologyObject, what: &'static str| -> Result<Option<Span>, TopologyError> {
                let Some(set) = obj.cpuset() else {
                    return Ok(None);
                };
                let (mut lo, mut hi, mut count) = (u32::MAX, 0u32, 0u32);
                for idx in set.iter_set() {
                    let os = usize::from(idx);
                    match compact.get(os) {
                        Some(&c) if c != u32::MAX => {
                            lo = lo.min(c);
                            hi = hi.max(c);
                            count += 1;
                        }
                        _ => {}
                    }
                }
                if count == 0 {
                    return Ok(None);
                }
                if hi - lo + 1 != count {
                    return Err(TopologyError::NotContiguous(name.to_string(), what));
                }
                Ok(Some(Span {
                    start: lo,
                    end: hi + 1,
                }))
            };
        let mut levels: [Vec<Span>; 9] = Default::default();
        let typed = [
            (Level::Numa, ObjectType::NUMANode, "NUMA node"),
            (Level::Socket, ObjectType::Package, "package"),
            (Level::L3, ObjectType::L3Cache, "L3 cache"),
            (Level::L2, ObjectType::L2Cache, "L2 cache"),
            (Level::L1, ObjectType::L1Cache, "L1 cache"),
            (Level::Core, ObjectType::Core, "core"),
            (Level::Hwthread, ObjectType::PU, "PU"),
        ];
        for (level, ty, what) in typed {
            for obj in topo.objects_with_type(ty) {
                if let Some(s) = span_of(obj, what)? {
                    levels[level.index()].push(s);
                }
            }
        }
        // Boards: the outermost Group above each package; the machine when any package has none.
        let mut boards = Vec::new();
        let mut every_package_grouped = true;
        for pkg in topo.objects_with_type(ObjectType::Package) {
            match pkg
                .ancestors()
                .filter(|a| a.object_type() == ObjectType::Group)
                .last()
            {
                Some(g) => {
                    if let Some(s) = span_of(g, "group")? {
                        boards.push(s);
                    }
                }
                None => every_package_grouped = false,
            }
        }
        if every_package_grouped {
            levels[Level::Board.index()] = boards;
        }
        Ok(NodeTopology::from_parts(name, pus, levels))
    }

    /// Keeps only the CPUs (OS indexes) in `allowed`; objects left without a CPU disappear.
    pub fn restrict(&self, allowed: &[u32]) -> Result<NodeTopology, TopologyError> {
        let keep: Vec<bool> = self
            .pus
            .iter()
            .map(|p| allowed.binary_search(p).is_ok())
            .collect();
        if keep.iter().all(|&k| k) {
            return Ok(self.clone());
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
        Ok(NodeTopology::from_parts(&self.name, pus, levels))
    }

    /// Parses an hwloc cpulist (`0-3,8-11`) and restricts to it.
    pub fn restrict_to_list(&self, cpulist: &str) -> Result<NodeTopology, TopologyError> {
        let allowed = idset::parse_list(cpulist)?;
        self.restrict(&allowed)
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

/// Reads a node with hwloc: XML text, or this machine when `xml` is `None`. `whole` keeps the
/// CPUs this process may not use (Slurm numbers cores over the whole node); `io` keeps the I/O
/// devices (device locality reads them; hwloc drops them otherwise, even from XML).
pub(crate) fn hwloc(
    name: &str,
    xml: Option<&str>,
    whole: bool,
    io: bool,
) -> Result<Topology, TopologyError> {
    load_err(name, || {
        let mut b = Topology::builder();
        if let Some(xml) = xml {
            b = b.from_xml(xml).map_err(|e| e.to_string())?;
        }
        if whole {
            b = b
                .with_flags(BuildFlags::INCLUDE_DISALLOWED)
                .map_err(|e| e.to_string())?;
        }
        if io {
            b = b
                .with_io_type_filter(TypeFilter::KeepImportant)
                .map_err(|e| e.to_string())?;
        }
        b.build().map_err(|e| e.to_string())
    })
}

/// The CPUs (OS indexes, ascending) this process may use.
fn allowed_cpus(topo: &Topology) -> Vec<u32> {
    topo.allowed_cpuset()
        .iter_set()
        .map(|i| usize::from(i) as u32)
        .collect()
}

/// Reads an XML file ourselves: hwlocality panics when hwloc cannot open a file it is given by
/// path, and the plugin must never panic inside slurmstepd.
pub(crate) fn read_xml(path: &Path) -> Result<String, TopologyError> {
    let err = |reason: String| TopologyError::Load {
        source_name: path.display().to_string(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
    // hwloc takes the length as a C int.
    if meta.len() > i32::MAX as u64 / 2 {
        return Err(err(format!(
            "{} bytes is too large for hwloc XML",
            meta.len()
        )));
    }
    std::fs::read_to_string(path).map_err(|e| err(e.to_string()))
}

fn load_err(
    name: &str,
    f: impl FnOnce() -> Result<Topology, String>,
) -> Result<Topology, TopologyError> {
    f().map_err(|reason| TopologyError::Load {
        source_name: name.to_string(),
        reason,
    })
}
