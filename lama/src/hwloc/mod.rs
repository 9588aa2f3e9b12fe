//! Everything read from hwloc, and the only module that links it: a node's [`NodeTopology`]
//! ([`topology`]) and its places, NUMA distances and devices as a [`Locality`] ([`devices`]).
//!
//! [`NodeTopology`]: crate::topology::NodeTopology
//! [`Locality`]: crate::locality::Locality

pub mod devices;
pub mod topology;

use std::path::Path;

use hwlocality::topology::builder::{BuildFlags, TypeFilter};
use hwlocality::Topology;

use crate::topology::TopologyError;

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
