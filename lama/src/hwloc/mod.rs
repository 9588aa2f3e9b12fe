//! Everything read from hwloc, and the only module that links it: a node's [`NodeTopology`]
//! ([`topology`]) and its places, NUMA distances and devices as a [`Locality`] ([`devices`]).
//!
//! [`NodeTopology`]: crate::topology::NodeTopology
//! [`Locality`]: crate::locality::Locality

pub mod devices;
pub mod topology;

use std::path::Path;

use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::{BuildFlags, TypeFilter};
use hwlocality::Topology;

use crate::tiers::{default_nodes, MemoryKind, NodeMemory};
use crate::topology::TopologyError;

/// A NUMA node as placement sees it ([`numa_nodes`]).
pub(crate) struct NumaFound<'t> {
    /// hwloc's object.
    pub obj: &'t TopologyObject,
    /// Its CPUs (OS indexes, ascending) among those kept.
    pub cpus: Vec<u32>,
    /// Its kind of memory.
    pub kind: MemoryKind,
    /// Whether it is default memory, a domain ([`crate::tiers`]).
    pub default: bool,
    /// The kept CPUs (ascending) that have no allowed default memory of their own and use
    /// this node's ([`crate::locality::nearest_memory`]).
    pub borrowed: Vec<u32>,
}

/// The node's NUMA nodes that this process may allocate from (hwloc's allowed nodeset: a
/// cgroup's `cpuset.mems`), in hwloc's logical order, each with its CPUs among those `keep`
/// accepts, its kind of memory, whether it is default memory, and the kept CPUs that borrow it:
/// every kept CPU lies in exactly one default node's CPUs or borrowed CPUs, as long as any
/// allowed default node exists.
pub(crate) fn numa_nodes(topo: &Topology, keep: impl Fn(u32) -> bool) -> Vec<NumaFound<'_>> {
    let allowed = topo.allowed_nodeset();
    // A node this process may not allocate from is nobody's memory (hwloc leaves it out of a
    // restricted load; a whole one keeps it).
    let objs: Vec<&TopologyObject> = topo
        .objects_with_type(ObjectType::NUMANode)
        .filter(|n| n.os_index().is_some_and(|i| allowed.is_set(i)))
        .collect();
    let ids = |set: Option<hwlocality::bitmap::BitmapRef<'_, hwlocality::cpu::cpuset::CpuSet>>| {
        set.map(|s| {
            s.iter_set()
                .map(|i| usize::from(i) as u32)
                .collect::<Vec<u32>>()
        })
        .unwrap_or_default()
    };
    let found: Vec<(Vec<u32>, Vec<u32>, MemoryKind)> = objs
        .iter()
        .map(|n| {
            let cpus = ids(n.cpuset()).into_iter().filter(|&c| keep(c)).collect();
            let subtype = n.subtype().and_then(|s| s.to_str().ok());
            (cpus, ids(n.complete_cpuset()), MemoryKind::of(subtype))
        })
        .collect();
    // Which memory is its CPUs' default is a property of the machine: judged on every CPU of
    // each node (a DRAM node whose CPUs a cgroup withholds is still DRAM, and may lend).
    let weighed: Vec<NodeMemory<'_>> = objs
        .iter()
        .zip(&found)
        .map(|(n, (_, complete, kind))| NodeMemory {
            os_index: os_of(n),
            cpus: complete,
            kind: *kind,
        })
        .collect();
    let default = default_nodes(&weighed);
    let mut nodes: Vec<NumaFound<'_>> = objs
        .into_iter()
        .zip(found)
        .zip(default)
        .map(|((obj, (cpus, _, kind)), default)| NumaFound {
            obj,
            cpus,
            kind,
            default,
            borrowed: Vec::new(),
        })
        .collect();
    lend_memory(topo, &mut nodes, keep);
    nodes
}

/// Gives each kept CPU that no allowed default node holds to the allowed default node nearest
/// it: of its nearest ancestor's that has any, the nearest to its own (disallowed) nodes in
/// hwloc's NUMA latencies, then the lowest OS index.
fn lend_memory(topo: &Topology, nodes: &mut [NumaFound<'_>], keep: impl Fn(u32) -> bool) {
    let lenders: Vec<u32> = nodes
        .iter()
        .filter(|n| n.default)
        .map(|n| os_of(n.obj))
        .collect();
    if lenders.is_empty() {
        return;
    }
    let mut covered: Vec<u32> = nodes
        .iter()
        .filter(|n| n.default)
        .flat_map(|n| n.cpus.iter().copied())
        .collect();
    covered.sort_unstable();
    let latency = latencies(topo);
    let distance = |a: u32, b: u32| {
        let (ids, values) = latency.as_ref()?;
        let i = ids.iter().position(|&x| x == a)?;
        let j = ids.iter().position(|&x| x == b)?;
        values.get(i * ids.len() + j).copied()
    };
    for pu in topo.objects_with_type(ObjectType::PU) {
        let Some(cpu) = pu.os_index().map(|i| i as u32) else {
            continue;
        };
        if !keep(cpu) || covered.binary_search(&cpu).is_ok() {
            continue;
        }
        let own: Vec<u32> = pu
            .nodeset()
            .map(|s| s.iter_set().map(|i| usize::from(i) as u32).collect())
            .unwrap_or_default();
        let near = pu
            .ancestors()
            .find_map(|a| {
                let set = a.nodeset()?;
                let near: Vec<u32> = lenders
                    .iter()
                    .copied()
                    .filter(|&l| set.is_set(l as usize))
                    .collect();
                (!near.is_empty()).then_some(near)
            })
            .unwrap_or_else(|| lenders.clone());
        if let Some(chosen) = crate::locality::nearest_memory(&near, &own, distance) {
            if let Some(n) = nodes.iter_mut().find(|n| os_of(n.obj) == chosen) {
                n.borrowed.push(cpu);
            }
        }
    }
    for n in nodes.iter_mut() {
        n.borrowed.sort_unstable();
    }
}

/// hwloc's `NUMALatency` matrix: the nodes' OS indexes and the values row by row.
fn latencies(topo: &Topology) -> Option<(Vec<u32>, Vec<u64>)> {
    let m = topo
        .distances_with_name("NUMALatency")
        .ok()?
        .into_iter()
        .next()?;
    let ids: Option<Vec<u32>> = m.objects().map(|o| o.map(os_of)).collect();
    Some((ids?, m.distances().to_vec()))
}

/// A NUMA node's OS index.
fn os_of(n: &TopologyObject) -> u32 {
    n.os_index().unwrap_or(0) as u32
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
    crate::limits::read_text(path, crate::limits::MAX_XML_BYTES).map_err(err)
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
