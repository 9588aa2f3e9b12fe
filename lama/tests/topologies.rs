//! The engine on the real-machine hwloc XML files in `tests/topologies/`.
//! Core and PU counts below are the table in `tests/topologies/README.md` (hwloc's own counts).

use std::path::PathBuf;

use lama::spec::{Expert, Request};
use lama::{plan, Level, NodeTopology};

pub fn topo(file: &str) -> NodeTopology {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/topologies")
        .join(file);
    NodeTopology::from_xml_file(&p).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// (file, cores, PUs) from the README's table.
pub const FILES: [(&str, usize, usize); 18] = [
    ("20em64t-hybrid-1p6c2t+2ca4co1t.fsroot.xml", 14, 20),
    ("32em64t-2n8c2t-pci-normalio.xml", 16, 32),
    ("40intel64-2g2n4c+pci.fsroot.xml", 40, 40),
    ("16amd64-4distances.xml", 16, 16),
    ("64amd64-4s2n4ca2co.fsroot.xml", 64, 64),
    ("AMD-19h-Zen4-2xEpyc-9654.cpuid.xml", 192, 384),
    ("64intel64-fakeKNL-SNC4-hybrid.xml", 16, 64),
    ("Intel-KnightsLanding-XeonPhi-7210.cpuid.xml", 64, 256),
    ("memorysidecaches.xml", 40, 80),
    ("256ppc-8n8s4t.fsroot.xml", 64, 256),
    ("power8gpudistances.xml", 8, 16),
    ("128arm-2pa2n8cluster4co.fsroot.xml", 128, 128),
    ("nvidia-dgx-gb10.fsroot.xml", 20, 20),
    ("nvidiaDGX2.xml", 4, 4),
    ("32intel64-2p8co2t+8ve.fsroot.xml", 16, 32),
    ("96em64t-4n4d3ca2co-pci.xml", 96, 96),
    ("192em64t-12gr2n8c2t.xml", 192, 384),
    ("20s390-2g6s4c.fsroot.xml", 20, 20),
];

fn req(map: &str, bind: &str, mppr: Option<&str>, np: Option<usize>) -> Request {
    let e = Expert {
        map: Some(map),
        bind: Some(bind),
        mppr,
        order: None,
    };
    Request::expert(&e, np, false).expect("valid request")
}

#[test]
fn every_file_loads_with_readme_counts() {
    for (file, cores, pus) in FILES {
        let t = topo(file);
        assert_eq!(t.objects(Level::Core).len(), cores, "{file} cores");
        assert_eq!(t.num_pus(), pus, "{file} PUs");
    }
}

#[test]
fn one_process_per_core_binds_every_core_once() {
    for (file, cores, _) in FILES {
        let t = topo(file);
        let p = plan(&[&t], &req("csbnh", "1c", Some("1:c"), Some(cores)))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let mut spans: Vec<_> = p.placements().iter().map(|x| x.span).collect();
        spans.sort();
        let mut want = t.objects(Level::Core).to_vec();
        want.sort();
        assert_eq!(spans, want, "{file}: every core exactly once");
        // One more does not fit under 1:c.
        let err = plan(&[&t], &req("csbnh", "1c", Some("1:c"), Some(cores + 1))).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("placing {cores} of {}", cores + 1)),
            "{file}: {err}"
        );
    }
}

#[test]
fn default_map_places_on_every_file() {
    // The default map names every level; missing levels (no L3 on KNL, no L2 on POWER8) collapse.
    for (file, _, pus) in FILES {
        let t = topo(file);
        let p = plan(
            &[&t],
            &Request::expert(&Expert::default(), None, false).expect("defaults"),
        )
        .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(
            p.len(),
            pus,
            "{file}: one sweep of the default map visits every PU once"
        );
    }
}

/// NUMA nodes inside a package: map by NUMA node, bind to NUMA node, one per NUMA node.
#[test]
fn numa_inside_package_maps() {
    // (file, default-memory NUMA nodes, packages), counted in the files by hand: the KNL's 4
    // DRAM nodes (not its MCDRAM), the Optane machine's 4 DRAM nodes (not its 2 PMem nodes),
    // the tiers machine's DRAM 0 and 1 and the HBM node 2 of CPUs without DRAM (not its HBM
    // node 4 nor its 3 PMem nodes), the POWER9's 2 DRAM nodes (not its 6 GPU-memory nodes).
    for (file, numas, packages) in [
        ("64intel64-fakeKNL-SNC4-hybrid.xml", 4, 1),
        ("128arm-2pa2n8cluster4co.fsroot.xml", 4, 2),
        ("64amd64-4s2n4ca2co.fsroot.xml", 8, 4),
        ("fakememinitiators-1np2c+1npp+gi.fsroot.xml", 4, 2),
        ("fakeheteromemtiers.fsroot.xml", 3, 1),
        ("nvidiagpunumanodes-kept.fsroot.xml", 2, 2),
    ] {
        let t = topo(file);
        assert_eq!(t.objects(Level::Numa).len(), numas, "{file}");
        assert_eq!(t.objects(Level::Socket).len(), packages, "{file}");
        let p = plan(&[&t], &req("Nsbnch", "1N", Some("1:N"), Some(numas)))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let mut spans: Vec<_> = p.placements().iter().map(|x| x.span).collect();
        spans.sort();
        assert_eq!(spans, t.objects(Level::Numa), "{file}: each NUMA node once");
        // s outside N: sockets change fastest, so consecutive ranks alternate packages when there are several.
        let p = plan(&[&t], &req("sNbnch", "1c", None, Some(2 * packages)))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let sock_of = |r: usize| {
            let s = p.placements()[r].span;
            t.objects(Level::Socket)
                .iter()
                .position(|k| k.contains(&s))
                .expect("inside a socket")
        };
        let socks: Vec<usize> = (0..2 * packages).map(sock_of).collect();
        let want: Vec<usize> = (0..2 * packages).map(|r| r % packages).collect();
        assert_eq!(socks, want, "{file}");
        // 2 cores per NUMA node first, then the next NUMA node: windows stay inside the NUMA node.
        let p = plan(&[&t], &req("cNsbnh", "2c", Some("1:c"), None))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        for x in p.placements() {
            assert!(
                t.objects(Level::Numa).iter().any(|n| n.contains(&x.span)),
                "{file}: window crosses a NUMA node"
            );
        }
    }
}

#[test]
fn boards_are_the_uv_blades() {
    let t = topo("192em64t-12gr2n8c2t.xml");
    assert_eq!(t.objects(Level::Board).len(), 12);
    // One process per blade, bound to the blade: b changes fastest.
    let p = plan(&[&t], &req("bsnch", "1b", Some("1:b"), Some(12))).expect("placement");
    let mut spans: Vec<_> = p.placements().iter().map(|x| x.span).collect();
    spans.sort();
    assert_eq!(spans, t.objects(Level::Board));
    // Map by board, bind to core: ranks 0..11 land on blades 0..11 in order.
    let p = plan(&[&t], &req("bsnch", "1c", None, Some(24))).expect("placement");
    for r in 0..24 {
        let s = p.placements()[r].span;
        let blade = t
            .objects(Level::Board)
            .iter()
            .position(|b| b.contains(&s))
            .expect("on a blade");
        assert_eq!(blade, r % 12, "rank {r}");
    }
}

#[test]
fn machines_without_groups_have_one_board() {
    for file in [
        "32em64t-2n8c2t-pci-normalio.xml",
        "128arm-2pa2n8cluster4co.fsroot.xml",
    ] {
        assert_eq!(topo(file).objects(Level::Board).len(), 1, "{file}");
    }
    // s390: drawers (2) contain books; the outermost group is the drawer.
    assert_eq!(
        topo("20s390-2g6s4c.fsroot.xml").objects(Level::Board).len(),
        2
    );
    assert_eq!(
        topo("96em64t-4n4d3ca2co-pci.xml")
            .objects(Level::Board)
            .len(),
        4
    );
}

#[test]
fn knl_mcdram_and_dram_are_one_numa_object() {
    // 8 NUMA nodes in hwloc (4 DRAM + 4 MCDRAM), 4 distinct cpusets.
    assert_eq!(
        topo("64intel64-fakeKNL-SNC4-hybrid.xml")
            .objects(Level::Numa)
            .len(),
        4
    );
}

#[test]
fn binding_level_absent_everywhere_is_named() {
    // POWER8 has no L2 objects in this file.
    let t = topo("power8gpudistances.xml");
    assert!(!t.has(Level::L2));
    let err = plan(&[&t], &req("cL2sbnh", "1L2", None, Some(1))).unwrap_err();
    assert_eq!(err.kind(), "no-resources");
    assert!(err.to_string().contains("'L2'"), "{err}");
    // Mapping over the missing level still works: it collapses.
    let p = plan(&[&t], &req("cL2sbnh", "1c", Some("1:c"), None)).expect("placement");
    assert_eq!(p.len(), 8);
}

#[test]
fn restriction_counts_positions_on_what_remains() {
    let t = topo("32em64t-2n8c2t-pci-normalio.xml");
    // Keep the first thread of every core of package 0 only.
    let first_threads: Vec<u32> = t
        .objects(Level::Core)
        .iter()
        .filter(|c| c.start < (t.num_pus() / 2) as u32)
        .map(|c| t.pus()[c.start as usize])
        .collect();
    let r = t.restrict(&first_threads).expect("restrict");
    assert_eq!(r.num_pus(), 8);
    assert_eq!(r.objects(Level::Socket).len(), 1);
    assert_eq!(r.objects(Level::Core).len(), 8);
    let p = plan(&[&r], &req("csbnh", "2h", None, None)).expect("placement");
    // Cores reduced to one thread do not fence a 2h window: 4 windows of 2 threads.
    assert_eq!(p.len(), 4);
    for x in 0..p.len() {
        let cpus = p.cpus(x, &[&r]);
        assert_eq!(cpus.len(), 2);
        assert!(cpus.iter().all(|c| first_threads.contains(c)));
    }
}
