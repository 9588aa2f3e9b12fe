//! `--lama-mem=local` without hwloc: the NUMA nodes lama computes for a task's CPUs, from the
//! node cache's record of hwloc's NUMA nodes, are the ones hwloc itself names
//! (`hwloc_cpuset_to_nodeset`) on every real machine of `tests/topologies/`, less those that
//! are not default memory; a CPU without allowed default memory of its own (issue 58) gets the
//! node it borrows besides, an allowed one. Stated here as hwloc's objects show it: a node is default memory
//! when no other node whose CPUs meet its own ranks before it: plain memory (subtype `DRAM` or
//! none), then `HBM`/`MCDRAM`, then any other subtype, then `GPUMemory`; within a kind, fewer
//! CPUs first, then the lower OS index.

#![cfg(feature = "hwloc")]

use std::path::{Path, PathBuf};

use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::memory::nodeset::NodeSet;
use hwlocality::object::types::ObjectType;
use hwlocality::topology::builder::BuildFlags;
use hwlocality::Topology;
use lama::cache::{decode, encode};
use lama::memory::local_nodes;
use lama::NodeTopology;
use proptest::prelude::*;

fn machines() -> Vec<PathBuf> {
    let dir = PathBuf::from(format!(
        "{}/../tests/topologies",
        env!("CARGO_MANIFEST_DIR")
    ));
    let mut all: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/topologies")
        .map(|e| e.expect("a folder entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "xml"))
        .collect();
    all.sort();
    assert!(all.len() >= 18, "the real machines' XML files are missing");
    all
}

/// hwloc's Optane machine (`fakememinitiators`: DRAM sub-NUMA clusters, PMem per package).
fn optane() -> PathBuf {
    machines()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("fakememinitiators"))
        .expect("the Optane machine")
}

/// hwloc's own answer for a set of CPUs: `hwloc_cpuset_to_nodeset`, the NUMA nodes whose CPUs
/// meet the set.
struct Hwloc(Topology);

impl Hwloc {
    fn load(path: &Path) -> Hwloc {
        Hwloc::from_text(&std::fs::read_to_string(path).expect("the XML"))
    }

    fn from_text(xml: &str) -> Hwloc {
        let topo = Topology::builder()
            .from_xml(xml)
            .expect("hwloc takes the XML")
            .with_flags(BuildFlags::INCLUDE_DISALLOWED)
            .expect("flags")
            .build()
            .expect("hwloc loads");
        assert!(topo.objects_with_type(ObjectType::NUMANode).count() > 0);
        Hwloc(topo)
    }

    fn nodes(&self, cpus: &[u32]) -> Vec<u32> {
        let mut set = CpuSet::new();
        for &c in cpus {
            set.set(c as usize);
        }
        type Obj = hwlocality::object::TopologyObject;
        let rank = |n: &Obj| {
            let kind = match n.subtype().and_then(|s| s.to_str().ok()) {
                None | Some("DRAM") => 0,
                Some("HBM" | "MCDRAM") => 1,
                Some("GPUMemory") => 3,
                Some(_) => 2,
            };
            let cpus = n.cpuset().map_or(0, |c| c.weight().unwrap_or(0));
            (kind, cpus, n.os_index().unwrap_or(0))
        };
        let all: Vec<&Obj> = self.0.objects_with_type(ObjectType::NUMANode).collect();
        let default = |n: &Obj| {
            let mine = n.cpuset().expect("a NUMA node's CPUs");
            !mine.is_empty()
                && all.iter().all(|o| {
                    std::ptr::eq(*o, n)
                        || !o.cpuset().expect("a NUMA node's CPUs").intersects(mine)
                        || rank(o) > rank(n)
                })
        };
        let allowed = self.0.allowed_nodeset();
        NodeSet::from_cpuset(&self.0, &set)
            .iter_set()
            .filter(|&i| allowed.is_set(i))
            .map(|i| usize::from(i) as u32)
            .filter(|&i| {
                all.iter()
                    .find(|n| n.os_index() == Some(i as usize))
                    .is_some_and(|n| default(n))
            })
            .collect()
    }

    /// The NUMA nodes this process may allocate from (the XML's `allowed_nodeset`).
    fn allowed(&self) -> Vec<u32> {
        self.0
            .allowed_nodeset()
            .iter_set()
            .map(|i| usize::from(i) as u32)
            .collect()
    }

    /// lama's answer `lama` for `cpus`, against hwloc's: the same where every CPU has allowed
    /// default memory of its own; otherwise (a memoryless CPU, or one whose node a cgroup
    /// withholds, which borrows the nearest allowed node) hwloc's nodes and more, all allowed.
    fn check(&self, cpus: &[u32], lama: &[u32]) -> Result<(), String> {
        let own = self.nodes(cpus);
        let all_own = cpus.iter().all(|&c| !self.nodes(&[c]).is_empty());
        let allowed = self.allowed();
        let fine = if all_own {
            lama == own
        } else {
            !lama.is_empty()
                && own.iter().all(|n| lama.contains(n))
                && lama.iter().all(|n| allowed.contains(n))
        };
        match fine {
            true => Ok(()),
            false => Err(format!(
                "cpus {cpus:?}: lama {lama:?}, hwloc {own:?} (allowed {allowed:?})"
            )),
        }
    }
}

/// A machine as a step reads it: hwloc's reading written to the cache's text and read back.
struct Machine {
    name: String,
    pus: Vec<u32>,
    numa: Vec<lama::locality::Numa>,
    hwloc: Hwloc,
}

fn load(path: &Path) -> Machine {
    let (topo, loc) = NodeTopology::from_xml_file_with_devices(path, true).expect("loads");
    let text = encode(&topo, Some(&loc), None, None).expect("encodes");
    let node = decode(&text, "test", true).expect("decodes");
    Machine {
        name: path.file_name().unwrap().to_string_lossy().into_owned(),
        pus: topo.pus().to_vec(),
        numa: node.locality.expect("devices").numa().to_vec(),
        hwloc: Hwloc::load(path),
    }
}

#[test]
fn every_cpu_and_every_neighbouring_pair_as_hwloc_says() {
    for path in machines() {
        let m = load(&path);
        assert!(!m.numa.is_empty(), "{}: no NUMA node", m.name);
        let mut sets: Vec<Vec<u32>> = m.pus.iter().map(|&c| vec![c]).collect();
        sets.extend(m.pus.windows(2).map(|w| w.to_vec()));
        sets.push(m.pus.clone());
        for cpus in sets {
            if let Err(e) = m.hwloc.check(&cpus, &local_nodes(&m.numa, &cpus, None)) {
                panic!("{}: {e}", m.name);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_set_of_cpus_as_hwloc_says(which in 0usize..21, picks in proptest::collection::vec(any::<prop::sample::Index>(), 1..24)) {
        let all = machines();
        let m = load(&all[which % all.len()]);
        let cpus: Vec<u32> = picks.iter().map(|i| m.pus[i.index(m.pus.len())]).collect();
        let checked = m.hwloc.check(&cpus, &local_nodes(&m.numa, &cpus, None));
        prop_assert!(checked.is_ok(), "{}: {:?}", m.name, checked);
    }
}

/// What the cache records of each NUMA node, read back as a step reads it: on hwloc's Optane
/// machine the values its XML carries (gp_index 25, 26, 28, 29 are DRAM nodes 5, 6, 8, 9;
/// 27 and 30 the NVM nodes 7 and 10), and only the DRAM nodes are default memory.
#[test]
fn the_cache_keeps_each_nodes_kind_and_memory_attributes() {
    let path = optane();
    let m = load(&path);
    let by_os = |os: u32| m.numa.iter().find(|n| n.os_index == os).expect("a node");
    use lama::tiers::MemoryKind::{Plain, Slow};
    // (nodes, default, kind, bandwidth, latency, least capacity), as the XML has them.
    let dram = (
        [5, 6, 8, 9].as_slice(),
        true,
        Plain,
        131072,
        26,
        99_000_000_000,
    );
    let pmem = ([7, 10].as_slice(), false, Slow, 78644, 77, 790_000_000_000);
    for (nodes, default, kind, bw, lat, least) in [dram, pmem] {
        for &os in nodes {
            let n = by_os(os);
            assert_eq!((n.default, n.kind), (default, kind), "node {os}");
            assert_eq!((n.bandwidth, n.latency), (Some(bw), Some(lat)), "node {os}");
            assert!(n.capacity > least, "node {os}: {}", n.capacity);
        }
    }
}

/// CXL memory expanders: hwloc's test suite has no dump of one, so hwloc's Optane machine stands
/// in with its PMem nodes relabelled as a CXL host shows them. hwloc 2.10 and later name such a
/// node by its tier (`CXL-DRAM`, with a `CXLDevice` info); hwloc 2.9 gives a CPU-less expander no
/// subtype at all, so it looks like plain memory and only its wider CPU set (the package's 4
/// CPUs against its sub-NUMA clusters' 2) tells it apart. Either way the domains are the four
/// DRAM nodes, no CPU is in two of them, and local memory is DRAM only, as hwloc's objects say.
#[test]
fn cxl_expanders_are_never_domains() {
    let path = optane();
    let xml = std::fs::read_to_string(&path).expect("the XML");
    assert_eq!(xml.matches(r#"subtype="NVM""#).count(), 2, "two PMem nodes");
    let tiered = xml.replace(
        r#"subtype="NVM">"#,
        r#"subtype="CXL-DRAM"><info name="CXLDevice" value="0000:e1:00.0"/>"#,
    );
    for (label, text) in [
        ("CXL-DRAM", tiered),
        ("no subtype", xml.replace(r#" subtype="NVM""#, "")),
    ] {
        let (topo, loc) = NodeTopology::from_xml_text_with_devices(label, &text, true)
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        let domains: Vec<Vec<u32>> = topo
            .objects(lama::Level::Numa)
            .iter()
            .map(|&s| topo.span_cpus(s))
            .collect();
        assert_eq!(domains, [[0, 1], [4, 5], [2, 3], [6, 7]], "{label}");
        let hwloc = Hwloc::from_text(&text);
        let numa = loc.numa();
        for cpus in [vec![0, 1], vec![0, 1, 4, 5], (0..8).collect()] {
            let local = local_nodes(numa, &cpus, None);
            assert_eq!(local, hwloc.nodes(&cpus), "{label}: cpus {cpus:?}");
            assert!(
                local.iter().all(|n| ![7, 10].contains(n)),
                "{label}: the expander counted as local memory: {local:?}"
            );
        }
    }
}
