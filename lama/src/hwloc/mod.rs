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

/// The node's NUMA nodes in hwloc's logical order, each with its CPUs (OS indexes, ascending,
/// those `keep` accepts), its kind of memory, and whether it is default memory, a domain
/// ([`crate::tiers`]).
pub(crate) fn numa_nodes(
    topo: &Topology,
    keep: impl Fn(u32) -> bool,
) -> Vec<(&TopologyObject, Vec<u32>, MemoryKind, bool)> {
    let objs: Vec<&TopologyObject> = topo.objects_with_type(ObjectType::NUMANode).collect();
    let found: Vec<(Vec<u32>, MemoryKind)> = objs
        .iter()
        .map(|n| {
            let cpus = n
                .cpuset()
                .map(|s| {
                    s.iter_set()
                        .map(|i| usize::from(i) as u32)
                        .filter(|&c| keep(c))
                        .collect()
                })
                .unwrap_or_default();
            let subtype = n.subtype().and_then(|s| s.to_str().ok());
            (cpus, MemoryKind::of(subtype))
        })
        .collect();
    let weighed: Vec<NodeMemory<'_>> = objs
        .iter()
        .zip(&found)
        .map(|(n, (cpus, kind))| NodeMemory {
            os_index: n.os_index().unwrap_or(0) as u32,
            cpus,
            kind: *kind,
        })
        .collect();
    let default = default_nodes(&weighed);
    objs.into_iter()
        .zip(found)
        .zip(default)
        .map(|((n, (cpus, kind)), d)| (n, cpus, kind, d))
        .collect()
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
