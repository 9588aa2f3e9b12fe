//! Partitioned GPUs (issue 65, part 2) on LLNL Tuolumne's real dump (flux-core's
//! `t/hwloc-data/tuo.TPX.xml`): 4 MI300A APUs in TPX mode, each PCI device carrying three
//! partitions that ROCm enumerates as GPUs 0-11 (hwloc's `rsmi0`-`rsmi11`). Each partition is a
//! GPU for placement, at its APU's locality, numbered as ROCm numbers it in
//! `ROCR_VISIBLE_DEVICES`; the same through slurmd's cache. Expected values come from the XML's
//! own text (which rsmi objects hang under which PCI device, and that device's package).

use std::path::PathBuf;

use lama::cache::{decode, encode, Detail};
use lama::locality::{Kind, Locality};
use lama::plugin::{auto_devices, TaskBinding};
use lama::policy::{auto, gpus_of};
use lama::NodeTopology;

fn tuolumne() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/topologies/flux-core-tuolumne-mi300a-tpx.xml")
}

/// From the XML's text: each `rsmiN` with the bus id of the PCI device it hangs under.
fn rsmi_under_pci() -> Vec<(u32, String)> {
    let xml = std::fs::read_to_string(tuolumne()).expect("xml");
    let mut out = Vec::new();
    let mut bus = String::new();
    for line in xml.lines() {
        if line.contains("type=\"PCIDev\"") {
            let at = line.find("pci_busid=\"").expect("a bus id") + 11;
            bus = line[at..at + 12].to_string();
        }
        if let Some(at) = line.find("name=\"rsmi") {
            let n: String = line[at + 10..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            out.push((n.parse().expect("a number"), bus.clone()));
        }
    }
    out
}

fn load() -> (NodeTopology, Locality) {
    NodeTopology::from_xml_file_with_devices(&tuolumne(), true).expect("Tuolumne")
}

/// Each task's ROCm GPU numbers, as the plugin writes them (`ROCR_VISIBLE_DEVICES`).
fn rocr(loc: &Locality, node: &NodeTopology, np: usize) -> Vec<(Vec<u32>, String)> {
    let gpus = gpus_of(loc, None);
    let placed = auto(node, &gpus, np, 1, false).expect("placed");
    let tasks: Vec<TaskBinding> = placed
        .iter()
        .enumerate()
        .map(|(r, t)| TaskBinding {
            rank: r as u32,
            cpus: t.cpus.clone(),
            picture: None,
        })
        .collect();
    let per: Vec<Vec<usize>> = placed.iter().map(|t| t.gpus.clone()).collect();
    let d = auto_devices(loc, &tasks, &per, 0, None, None).expect("devices");
    (0..np)
        .map(|i| {
            let env = d.env(loc, i);
            let v = env
                .iter()
                .find(|(k, _)| k == "ROCR_VISIBLE_DEVICES")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            (placed[i].cpus.clone(), v)
        })
        .collect()
}

#[test]
fn every_partition_is_a_gpu_at_its_apu() {
    let (_, loc) = load();
    let want = rsmi_under_pci();
    assert_eq!(want.len(), 12, "the dump's 12 partitions");
    let gpus: Vec<_> = loc
        .devices()
        .iter()
        .filter(|d| d.kind == Kind::Gpu)
        .collect();
    assert_eq!(gpus.len(), 12, "one GPU per partition");
    for (n, bus) in &want {
        let d = gpus
            .iter()
            .find(|d| d.name == format!("rsmi{n}"))
            .expect("each partition");
        assert_eq!(d.index, Some(*n), "rsmi{n}: ROCm's number");
        assert_eq!(d.pci.as_deref(), Some(bus.as_str()), "rsmi{n}: its device");
        // Its locality is its device's: the same place as the device's other partitions.
        let first = gpus
            .iter()
            .find(|g| g.pci.as_deref() == Some(bus.as_str()))
            .expect("a partition of the device");
        assert_eq!(d.place, first.place, "rsmi{n}: its device's locality");
    }
}

#[test]
fn twelve_ranks_twelve_partitions_twenty_four_two_each() {
    let (node, loc) = load();
    let bus_of: std::collections::HashMap<u32, String> = rsmi_under_pci().into_iter().collect();
    let gpus = gpus_of(&loc, None);
    let near = |n: u32, cpus: &[u32]| {
        let g = gpus
            .iter()
            .find(|g| loc.devices()[g.device].index == Some(n))
            .expect("a GPU");
        cpus.iter().all(|c| g.cpus.binary_search(c).is_ok())
    };
    let twelve = rocr(&loc, &node, 12);
    let mut seen: Vec<u32> = Vec::new();
    for (cpus, v) in &twelve {
        let n: u32 = v.parse().expect("one GPU each");
        assert!(near(n, cpus), "GPU {n} is not beside cpus {cpus:?}");
        seen.push(n);
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..12).collect::<Vec<_>>(), "12 distinct partitions");
    let pairs = rocr(&loc, &node, 24);
    for (i, pair) in pairs.chunks(2).enumerate() {
        assert_eq!(pair[0].1, pair[1].1, "ranks {} and {}", 2 * i, 2 * i + 1);
        let n: u32 = pair[0].1.parse().expect("one GPU");
        assert!(near(n, &pair[0].0) && near(n, &pair[1].0));
    }
    let mut per: Vec<&String> = pairs.iter().map(|p| &p.1).collect();
    per.dedup();
    assert_eq!(
        per.len(),
        12,
        "every partition, two neighbouring ranks each"
    );
    // Four ranks: each takes its APU's three partitions, all of one device.
    for (cpus, v) in rocr(&loc, &node, 4) {
        let ns: Vec<u32> = v.split(',').map(|x| x.parse().expect("a number")).collect();
        assert_eq!(ns.len(), 3, "{v}");
        assert!(ns
            .iter()
            .all(|&n| bus_of[&n] == bus_of[&ns[0]] && near(n, &cpus)));
    }
}

#[test]
fn the_cache_keeps_the_partitions() {
    let (node, loc) = load();
    let text = encode(&node, Some(&loc), None, None).expect("encode");
    let back = decode(&text, "cache", Detail::Devices).expect("decode");
    let got = back.locality.expect("devices");
    let a: Vec<_> = loc
        .devices()
        .iter()
        .map(|d| (&d.name, d.index, &d.pci, d.place))
        .collect();
    let b: Vec<_> = got
        .devices()
        .iter()
        .map(|d| (&d.name, d.index, &d.pci, d.place))
        .collect();
    assert_eq!(a, b);
}
