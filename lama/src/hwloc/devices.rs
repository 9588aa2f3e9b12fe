//! Reading a node's places, NUMA latencies and devices from hwloc (the only hwloc code here).

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use hwlocality::bitmap::BitmapCow;
use hwlocality::memory::attribute::Initiator;
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::{OSDeviceType, ObjectType};
use hwlocality::object::TopologyObject;
use hwlocality::Topology;

use super::{hwloc, read_xml};
use crate::locality::{Device, Kind, Locality, LocalityError, Numa, Place, Vendor};
use crate::topology::TopologyError;

fn cpus_of(obj: &TopologyObject) -> Vec<u32> {
    obj.cpuset()
        .map(|s| s.iter_set().map(|i| usize::from(i) as u32).collect())
        .unwrap_or_default()
}

fn kind_name(t: ObjectType) -> String {
    match t {
        ObjectType::L1Cache => "L1".into(),
        ObjectType::L2Cache => "L2".into(),
        ObjectType::L3Cache => "L3".into(),
        other => other.to_string(),
    }
}

fn text(s: Option<&std::ffi::CStr>) -> String {
    s.map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What an OS device is: `None` for storage, DMA, memory, and DRM display nodes (`card0`,
/// `renderD128`: the compute GPU behind them has its own CUDA/RSMI/Level Zero/OpenCL device).
fn classify(
    ty: OSDeviceType,
    subtype: &str,
    name: &str,
    pci_vendor: Option<u16>,
) -> Option<(Kind, Vendor)> {
    match ty {
        OSDeviceType::Network | OSDeviceType::OpenFabrics => Some((Kind::Nic, Vendor::Other)),
        OSDeviceType::GPU | OSDeviceType::CoProcessor => {
            if name.starts_with("card")
                || name.starts_with("renderD")
                || name.starts_with("controlD")
            {
                return None;
            }
            let by_name = |n: &str| {
                if n.starts_with("cuda")
                    || n.starts_with("nvml")
                    || subtype == "CUDA"
                    || subtype == "NVML"
                {
                    Vendor::Nvidia
                } else if n.starts_with("rsmi") || subtype == "RSMI" {
                    Vendor::Amd
                } else if n.starts_with("ze") || subtype == "LevelZero" {
                    Vendor::Intel
                } else {
                    Vendor::Other
                }
            };
            let vendor = match pci_vendor {
                Some(0x10de) => Vendor::Nvidia,
                Some(0x1002) => Vendor::Amd,
                Some(0x8086) => Vendor::Intel,
                _ => by_name(name),
            };
            Some((Kind::Gpu, vendor))
        }
        _ => None,
    }
}

/// Preference for the name a device is shown and exported by.
fn name_rank(kind: Kind, ty: OSDeviceType, name: &str) -> u32 {
    match kind {
        Kind::Nic => u32::from(ty != OSDeviceType::OpenFabrics),
        Kind::Gpu => ["cuda", "rsmi", "ze", "nvml", "ve", "opencl"]
            .iter()
            .position(|p| name.starts_with(p))
            .unwrap_or(9) as u32,
    }
}

fn trailing_number(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.parse().ok()
}

impl Locality {
    /// Loads an hwloc XML file with its I/O devices.
    pub fn from_xml_file(path: &Path) -> Result<Locality, LocalityError> {
        let name = path.display().to_string();
        let topo = hwloc(&name, Some(&read_xml(path)?), true, true)?;
        Ok(Locality::from_hwloc(&topo))
    }

    /// Probes this machine with its I/O devices, and which of its NVIDIA GPUs the driver has
    /// split into MIG instances.
    pub fn this_machine() -> Result<Locality, LocalityError> {
        let mut loc = Locality::from_hwloc(&hwloc("this machine", None, true, true)?);
        crate::locality::driver::mark_mig_here(&mut loc);
        Ok(loc)
    }

    /// Reads places, NUMA nodes, the `NUMALatency` matrix and devices from a loaded topology.
    pub fn from_hwloc(topo: &Topology) -> Locality {
        let (places, ids) = places_of(topo);
        let (numa, latency) = numa_of(topo);
        let mut devices: Vec<Device> = os_devices(topo, &ids)
            .into_iter()
            .map(Found::device)
            .collect();
        number_gpus(&mut devices);
        Locality::new(places, numa, latency, devices)
    }
}

/// Breadth first: each depth's places in logical order, after their parents (the node cache
/// describes such a list as a few runs of alike places); with each object's place by its
/// persistent index.
fn places_of(topo: &Topology) -> (Vec<Place>, HashMap<u64, usize>) {
    let mut places = Vec::new();
    let mut ids = HashMap::new();
    let mut queue = VecDeque::from([(topo.root_object(), None)]);
    while let Some((obj, parent)) = queue.pop_front() {
        let me = places.len();
        ids.insert(obj.global_persistent_index(), me);
        places.push(Place {
            parent,
            kind: kind_name(obj.object_type()),
            index: obj.logical_index(),
            cpus: cpus_of(obj),
        });
        queue.extend(obj.normal_children().map(|c| (c, Some(me))));
    }
    (places, ids)
}

/// The NUMA nodes, and their `NUMALatency` matrix in the same order when hwloc has one that
/// covers them all.
fn numa_of(topo: &Topology) -> (Vec<Numa>, Option<Vec<Vec<u64>>>) {
    let nodes = super::numa_nodes(topo, |_| true);
    let numa_objs: Vec<&TopologyObject> = nodes.iter().map(|n| n.obj).collect();
    let numa: Vec<Numa> = nodes
        .into_iter()
        .map(|f| {
            let n = f.obj;
            let (bandwidth, latency) = (attr(topo, "Bandwidth", n), attr(topo, "Latency", n));
            Numa {
                os_index: n.os_index().unwrap_or(0) as u32,
                cpus: f.cpus,
                kind: f.kind,
                default: f.default,
                capacity: n.total_memory(),
                bandwidth,
                latency,
                borrowed: f.borrowed,
            }
        })
        .collect();
    let latency = topo
        .distances_with_name("NUMALatency")
        .ok()
        .and_then(|all| all.into_iter().next())
        .and_then(|m| {
            let order: Vec<Option<usize>> = m
                .objects()
                .map(|o| o.and_then(|o| numa_objs.iter().position(|n| std::ptr::eq(*n, o))))
                .collect();
            let k = m.num_objects();
            let mut mat = vec![vec![0u64; numa.len()]; numa.len()];
            let mut seen = 0;
            for (i, oi) in order.iter().enumerate() {
                for (j, oj) in order.iter().enumerate() {
                    if let (Some(a), Some(b)) = (oi, oj) {
                        mat[*a][*b] = m.distances()[i * k + j];
                        seen += 1;
                    }
                }
            }
            (seen == numa.len() * numa.len()).then_some(mat)
        });
    (numa, latency)
}

/// The memory attribute `name` (hwloc's `Bandwidth`, `Latency`) of NUMA node `n` seen from
/// its own CPUs (its initiators'), when hwloc has it (HMAT, or an XML that carries it).
fn attr(topo: &Topology, name: &str, n: &TopologyObject) -> Option<u64> {
    let set = n.cpuset().filter(|s| !s.is_empty())?;
    let attr = topo.memory_attribute_named(name).ok().flatten()?;
    let from = Initiator::CpuSet(BitmapCow::Borrowed(set));
    attr.value(Some(from), n).ok().flatten().filter(|&v| v > 0)
}

/// One device as found: the OS devices of one PCI function (or one OS device without one).
struct Found {
    key: String,
    kind: Kind,
    vendor: Vendor,
    names: Vec<(u32, String)>,
    ports: Vec<u32>,
    fabric: bool,
    pci: Option<String>,
    place: usize,
    uuid: Option<String>,
}

/// A GPU's UUID from its OS device's infos: NVML's (`GPU-...`), or an AMD GPU's unique id unless
/// it is blank (all zeros, as flux-core's dumps have them).
fn uuid_of(dev: &TopologyObject) -> Option<String> {
    dev.infos().iter().find_map(|i| {
        let n = i.name().to_string_lossy();
        let v = i.value().to_string_lossy().trim().to_string();
        let known = n == "NVIDIAUUID" || n == "AMDUUID" || n == "LevelZeroUUID";
        (known
            && !v.is_empty()
            && v.trim_start_matches("GPU-")
                .chars()
                .any(|c| c != '0' && c != '-'))
        .then_some(v)
    })
}

/// The compute and network devices, one per PCI function (or per OS device without one), in
/// hwloc's order; `ids` places each at its first non-I/O ancestor.
fn os_devices(topo: &Topology, ids: &HashMap<u64, usize>) -> Vec<Found> {
    let mut found: Vec<Found> = Vec::new();
    for dev in topo.os_devices() {
        let Some(ObjectAttributes::OSDevice(attr)) = dev.attributes() else {
            continue;
        };
        let ty = attr.device_type();
        let name = text(dev.name());
        let pci = dev.parent().and_then(|p| match p.attributes() {
            Some(ObjectAttributes::PCIDevice(a)) => Some((
                format!(
                    "{:04x}:{:02x}:{:02x}.{:x}",
                    a.domain(),
                    a.bus_id(),
                    a.bus_device(),
                    a.function()
                ),
                a.vendor_id(),
            )),
            _ => None,
        });
        let Some((kind, vendor)) =
            classify(ty, &text(dev.subtype()), &name, pci.as_ref().map(|p| p.1))
        else {
            continue;
        };
        let place = dev
            .first_non_io_ancestor()
            .and_then(|a| ids.get(&a.global_persistent_index()).copied())
            .unwrap_or(0);
        let mut key = pci.as_ref().map_or_else(|| name.clone(), |p| p.0.clone());
        // A GPU partitioned by its driver (an AMD MI300's TPX or CPX mode, several rsmiN under
        // one PCI function) is as many GPUs as its runtime enumerates: a second runtime-numbered
        // name of the same family under one function is a device of its own.
        if let Some(family) = runtime_family(kind, &name) {
            let taken = found.iter().any(|f| {
                f.key == key
                    && f.kind == kind
                    && f.names
                        .iter()
                        .any(|(_, n)| runtime_family(kind, n) == Some(family))
            });
            if taken {
                key = format!("{key}/{name}");
            }
        }
        let ports = active_ports(dev);
        let rank = name_rank(kind, ty, &name);
        let fabric = ty == OSDeviceType::OpenFabrics;
        let uuid = uuid_of(dev);
        match found.iter_mut().find(|f| f.key == key && f.kind == kind) {
            Some(f) => {
                f.names.push((rank, name));
                f.ports.extend(ports);
                f.fabric |= fabric;
                if f.uuid.is_none() {
                    f.uuid = uuid;
                }
            }
            None => found.push(Found {
                key,
                kind,
                vendor,
                names: vec![(rank, name)],
                ports,
                fabric,
                pci: pci.map(|p| p.0),
                place,
                uuid,
            }),
        }
    }
    found
}

/// The runtime that numbers a GPU's OS device name (`cuda3`, `rsmi7`, `ze0`), if one does.
fn runtime_family(kind: Kind, name: &str) -> Option<&'static str> {
    if kind != Kind::Gpu {
        return None;
    }
    ["cuda", "rsmi", "ze"]
        .into_iter()
        .find(|&p| trailing_number(name, p).is_some())
}

/// The ports of an OpenFabrics device that are up (state 4, ACTIVE): an inactive port is no
/// use to a task.
fn active_ports(dev: &TopologyObject) -> Vec<u32> {
    dev.infos()
        .iter()
        .filter_map(|i| {
            let n = i.name().to_string_lossy();
            let v = i.value().to_string_lossy();
            let port = n
                .strip_prefix("Port")?
                .strip_suffix("State")?
                .parse()
                .ok()?;
            (v == "4").then_some(port)
        })
        .collect()
}

impl Found {
    /// The device under its preferred name, with its UCX name (NICs) and runtime index (GPUs).
    fn device(mut self) -> Device {
        self.names.sort();
        let name = self.names[0].1.clone();
        let ucx = (self.kind == Kind::Nic).then(|| {
            if self.fabric {
                let port = self.ports.iter().min().copied().unwrap_or(1);
                format!("{name}:{port}")
            } else {
                name.clone()
            }
        });
        let index = self.names.iter().find_map(|(_, n)| {
            trailing_number(n, "cuda")
                .or_else(|| trailing_number(n, "rsmi"))
                .or_else(|| trailing_number(n, "ve"))
        });
        let nvml = self
            .names
            .iter()
            .find_map(|(_, n)| trailing_number(n, "nvml"));
        Device {
            names: self.names.into_iter().map(|(_, n)| n).collect(),
            name,
            kind: self.kind,
            vendor: self.vendor,
            index: if self.kind == Kind::Gpu {
                index.or(nvml)
            } else {
                None
            },
            ucx,
            pci: self.pci,
            place: self.place,
            fabric: self.fabric,
            uuid: (self.kind == Kind::Gpu).then_some(self.uuid).flatten(),
            mig: false,
        }
    }
}

/// GPUs without a runtime-numbered name get their rank among the vendor's GPUs in PCI order,
/// which is how the runtimes enumerate (CUDA with `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
fn number_gpus(devices: &mut [Device]) {
    for vendor in [Vendor::Nvidia, Vendor::Amd, Vendor::Intel, Vendor::Other] {
        let mut same: Vec<usize> = (0..devices.len())
            .filter(|&d| devices[d].kind == Kind::Gpu && devices[d].vendor == vendor)
            .collect();
        same.sort_by(|&a, &b| devices[a].pci.cmp(&devices[b].pci));
        let taken: Vec<u32> = same.iter().filter_map(|&d| devices[d].index).collect();
        let mut free = (0u32..).filter(|i| !taken.contains(i));
        for d in same {
            if devices[d].index.is_none() {
                devices[d].index = free.next();
            }
        }
    }
}

impl From<TopologyError> for LocalityError {
    fn from(e: TopologyError) -> LocalityError {
        match e {
            TopologyError::Load {
                source_name,
                reason,
            } => LocalityError::Load {
                source_name,
                reason,
            },
            other => LocalityError::Load {
                source_name: "the topology".into(),
                reason: other.to_string(),
            },
        }
    }
}
