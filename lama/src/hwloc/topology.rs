//! hwloc topologies converted into [`NodeTopology`]: XML files, synthetic descriptions, this machine.

use std::path::Path;

use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::Topology;

use super::{allowed_cpus, hwloc, load_err, read_xml};
use crate::level::Level;
use crate::limits::check_synthetic;
use crate::locality::Locality;
use crate::topology::{NodeTopology, Span, TopologyError};

impl NodeTopology {
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

    /// [`NodeTopology::from_xml_file_with_devices`] from XML text (the Flux shell's copy of its
    /// node), named `name` in messages.
    pub fn from_xml_text_with_devices(
        name: &str,
        xml: &str,
        whole: bool,
    ) -> Result<(NodeTopology, Locality), TopologyError> {
        let topo = hwloc(name, Some(xml), true, true)?;
        Ok((
            NodeTopology::convert(&topo, name, !whole)?,
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
        let mut loc = Locality::from_hwloc(&topo);
        crate::locality::driver::mark_mig_here(&mut loc);
        Ok((node, allowed_cpus(&topo), loc))
    }

    /// Builds a topology from an hwloc synthetic description such as `pack:2 core:4 pu:2`.
    pub fn from_synthetic(desc: &str) -> Result<NodeTopology, TopologyError> {
        check_synthetic(desc).map_err(|reason| TopologyError::Load {
            source_name: desc.to_string(),
            reason,
        })?;
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
        // The domains are the default memory only: a PMem, HBM or GPU-memory node repeats the
        // CPUs of the DRAM nodes beside it (crate::tiers).
        let kept = |os: u32| matches!(compact.get(os as usize), Some(&c) if c != u32::MAX);
        // A CPU without allowed memory of its own joins the domain of the memory it borrows:
        // beside that node's own CPUs when next to them in logical order, else as a domain of
        // its own (spans are contiguous).
        for n in super::numa_nodes(topo, kept) {
            if !n.default {
                continue;
            }
            let own = span_of(n.obj, "NUMA node")?;
            let mut positions: Vec<u32> = n.borrowed.iter().map(|&c| compact[c as usize]).collect();
            positions.extend(own.iter().flat_map(|s| s.start..s.end));
            positions.sort_unstable();
            for run in positions.chunk_by(|a, b| b - a == 1) {
                levels[Level::Numa.index()].push(Span {
                    start: run[0],
                    end: run[run.len() - 1] + 1,
                });
            }
        }
        let typed = [
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
}
