//! The automatic policy's invariants on every real machine of tests/topologies (work in
//! progress on this branch: issue 29).

use std::path::PathBuf;

use lama::locality::{Kind, Locality};
use lama::policy::{auto, domains, PolicyGpu};
use lama::NodeTopology;

fn xmls() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/topologies");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("topologies")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    v.sort();
    v
}

/// The whole machine (some files allow only a few CPUs) and its GPUs.
fn load(path: &std::path::Path) -> (NodeTopology, Vec<PolicyGpu>) {
    let (node, loc) = NodeTopology::from_xml_file_with_devices(path, true).expect("topology");
    (node, gpus_of(&loc))
}

fn gpus_of(loc: &Locality) -> Vec<PolicyGpu> {
    let mut out = Vec::new();
    for (i, d) in loc.devices().iter().enumerate() {
        if d.kind == Kind::Gpu {
            let mut cpus = loc
                .place(d.place)
                .map(|p| p.cpus.to_vec())
                .unwrap_or_default();
            cpus.sort_unstable();
            out.push(PolicyGpu { device: i, cpus });
        }
    }
    out
}

#[test]
fn invariants_on_every_machine() {
    for path in xmls() {
        let (node, gpus) = load(&path);
        let doms = domains(&node);
        let cores: usize = doms.iter().map(Vec::len).sum();
        let pus: usize = doms.iter().flatten().map(Vec::len).sum();
        for with_gpus in [false, true] {
            let g: &[PolicyGpu] = if with_gpus { &gpus } else { &[] };
            for tasks in 1..=(2 * doms.len()).min(pus) {
                let name = format!("{} tasks={tasks} gpus={}", path.display(), g.len());
                let placed = auto(&node, g, tasks, 1, false).expect(&name);
                assert_eq!(placed.len(), tasks, "{name}");
                let mut all: Vec<u32> = placed.iter().flat_map(|t| t.cpus.clone()).collect();
                let n = all.len();
                all.sort_unstable();
                all.dedup();
                assert_eq!(all.len(), n, "{name}: CPUs shared between tasks");
                for t in &placed {
                    assert!(!t.cpus.is_empty(), "{name}: a task without CPUs");
                    if tasks >= doms.len() {
                        assert_eq!(t.domains.len(), 1, "{name}: a task spans domains");
                        let d = &doms[t.domains[0]];
                        assert!(
                            t.cpus.iter().all(|c| d.iter().flatten().any(|x| x == c)),
                            "{name}: a task outside its domain"
                        );
                    }
                    // No second hardware thread of a core while cores are free.
                    if tasks <= cores {
                        let mut seen: Vec<usize> = t
                            .cpus
                            .iter()
                            .map(|c| {
                                doms.iter()
                                    .flatten()
                                    .position(|core| core.contains(c))
                                    .expect("a known CPU")
                            })
                            .collect();
                        let k = seen.len();
                        seen.dedup();
                        assert_eq!(seen.len(), k, "{name}: two hardware threads of one core");
                    }
                    assert!(
                        t.gpus.iter().all(|d| g.iter().any(|x| x.device == *d)),
                        "{name}: a GPU that is not the step's"
                    );
                }
                if !g.is_empty() {
                    let counts: Vec<usize> = placed.iter().map(|t| t.gpus.len()).collect();
                    let (lo, hi) = (counts.iter().min(), counts.iter().max());
                    assert!(
                        hi.zip(lo).is_some_and(|(h, l)| h - l <= 1),
                        "{name}: GPUs {counts:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn same_answer_every_time() {
    let path = xmls()
        .into_iter()
        .find(|p| p.ends_with("nvidiaDGX2.xml"))
        .expect("DGX-2");
    let (node, gpus) = load(&path);
    // The file's CPU side is trimmed to 4 PUs: 4 tasks fill it (8 would stack tasks).
    let a = auto(&node, &gpus, 4, 1, false).expect("place");
    let b = auto(&node, &gpus, 4, 1, false).expect("place");
    assert_eq!(a, b);
    for t in &a {
        eprintln!(
            "cpus {:?} gpus {:?} domains {:?}",
            t.cpus, t.gpus, t.domains
        );
    }
}
