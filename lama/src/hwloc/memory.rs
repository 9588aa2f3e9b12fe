//! hwloc's own answer to which NUMA nodes are local to a set of CPUs
//! (`hwloc_cpuset_to_nodeset`): the reference [`crate::memory`] is checked against
//! (`lama/tests/memory.rs`).

use std::path::Path;

use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::memory::nodeset::NodeSet;
use hwlocality::Topology;

use super::{hwloc, read_xml};
use crate::topology::TopologyError;

/// A node's NUMA nodes as hwloc sees them.
pub struct Memory {
    topo: Topology,
}

impl Memory {
    /// This machine (`None`: only the NUMA nodes this process may use), or the node described
    /// by an XML file.
    pub fn load(xml: Option<&Path>) -> Result<Memory, TopologyError> {
        let topo = match xml {
            Some(p) => hwloc(&p.display().to_string(), Some(&read_xml(p)?), true, false)?,
            None => hwloc("this machine", None, false, false)?,
        };
        Ok(Memory { topo })
    }

    /// The OS indexes of the NUMA nodes local to `cpus`, ascending.
    pub fn nodes(&self, cpus: &[u32]) -> Vec<u32> {
        let mut set = CpuSet::new();
        for &c in cpus.iter().filter(|&&c| c <= i32::MAX as u32) {
            set.set(c as usize);
        }
        NodeSet::from_cpuset(&self.topo, &set)
            .iter_set()
            .map(|i| usize::from(i) as u32)
            .collect()
    }
}
