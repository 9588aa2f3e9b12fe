//! Binding a task's memory to the NUMA domains of its CPUs (`--lama-mem=local`), with hwloc:
//! which NUMA nodes are local to a set of CPUs is hwloc's answer (`hwloc_cpuset_to_nodeset`),
//! and the binding is `hwloc_set_membind` on the calling process.

use std::path::Path;

use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::memory::binding::{MemoryBindingFlags, MemoryBindingPolicy};
use hwlocality::memory::nodeset::NodeSet;
use hwlocality::Topology;

use super::{hwloc, read_xml};
use crate::topology::TopologyError;

/// A node's NUMA nodes as hwloc sees them, loaded once (in slurmstepd, before the tasks fork)
/// for every task.
pub struct Memory {
    topo: Topology,
    /// False for an XML file: its nodes can be named but not bound.
    machine: bool,
}

impl Memory {
    /// This machine (`None`), or the node described by an XML file.
    pub fn load(xml: Option<&Path>) -> Result<Memory, TopologyError> {
        let topo = match xml {
            Some(p) => hwloc(&p.display().to_string(), Some(&read_xml(p)?), true, false)?,
            None => hwloc("this machine", None, false, false)?,
        };
        Ok(Memory {
            topo,
            machine: xml.is_none(),
        })
    }

    fn nodeset(&self, cpus: &[u32]) -> NodeSet {
        let mut set = CpuSet::new();
        for &c in cpus.iter().filter(|&&c| c <= i32::MAX as u32) {
            set.set(c as usize);
        }
        NodeSet::from_cpuset(&self.topo, &set)
    }

    /// The OS indexes of the NUMA nodes local to `cpus`, ascending.
    pub fn nodes(&self, cpus: &[u32]) -> Vec<u32> {
        self.nodeset(cpus)
            .iter_set()
            .map(|i| usize::from(i) as u32)
            .collect()
    }

    /// Binds the calling process's memory (it must be single-threaded, as a task is before it
    /// runs the user's program) to the NUMA nodes local to `cpus`; returns their OS indexes.
    /// For an XML file, only names them.
    pub fn bind(&self, cpus: &[u32]) -> Result<Vec<u32>, String> {
        let set = self.nodeset(cpus);
        let nodes: Vec<u32> = set.iter_set().map(|i| usize::from(i) as u32).collect();
        if nodes.is_empty() {
            return Err(format!(
                "hwloc finds no NUMA node local to cpus {}",
                crate::idset::format_list(cpus)
            ));
        }
        if self.machine {
            self.topo
                .bind_memory(
                    &set,
                    MemoryBindingPolicy::Bind,
                    MemoryBindingFlags::ASSUME_SINGLE_THREAD | MemoryBindingFlags::STRICT,
                )
                .map_err(|e| {
                    format!(
                        "hwloc cannot bind memory to NUMA nodes {}: {e}",
                        crate::idset::format_list(&nodes)
                    )
                })?;
        }
        Ok(nodes)
    }
}
