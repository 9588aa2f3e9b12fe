//! Irregular machines (issue 58): on every machine of tests/topologies, as hwloc loads it for
//! this process (allowed CPUs and NUMA nodes only) and whole, every CPU lies in exactly one of
//! the policy's domains, the policy uses every core when asked for as many tasks as cores (and
//! its one task of `--np 1` all of them), and memory bound `local` names only NUMA nodes the
//! file allows. The allowed sets are read from the XML's own attributes, not through lama.

use std::path::{Path, PathBuf};

use lama::level::Level;
use lama::memory::local_nodes;
use lama::policy::{auto, domains, gpus_of, PolicyGpu};
use lama::NodeTopology;

/// Every machine of tests/topologies, and of hwloc 2.12's own test suite
/// (tests/topologies/hwloc-2.12, made by contrib/hwloc-suite.sh).
fn xmls() -> Vec<PathBuf> {
    let top = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/topologies");
    let mut v: Vec<PathBuf> = [top.clone(), top.join("hwloc-2.12")]
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).expect("topologies"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    v.sort();
    assert!(
        v.len() > 100,
        "hwloc's test machines are missing: {}",
        v.len()
    );
    v
}

/// The set bits of an hwloc bitmap attribute (`0x0000f06f`, or 32-bit words joined by commas,
/// most significant first, an empty word for a zero one; `0xf...f,` prefixes for infinite sets
/// do not occur in these files).
fn bits(mask: &str) -> Vec<u32> {
    let words: Vec<u64> = mask
        .split(',')
        .map(|w| match w.trim().trim_start_matches("0x") {
            "" => 0,
            hex => u64::from_str_radix(hex, 16).expect("hex"),
        })
        .collect();
    let mut out = Vec::new();
    for (i, w) in words.iter().rev().enumerate() {
        for b in 0..32 {
            if w >> b & 1 == 1 {
                out.push(i as u32 * 32 + b);
            }
        }
    }
    out
}

/// An attribute of the XML's root object (the Machine), when it has it.
fn machine_attr(xml: &str, name: &str) -> Option<Vec<u32>> {
    let line = xml.lines().find(|l| l.contains("type=\"Machine\""))?;
    let key = format!(" {name}=\"");
    let at = line.find(&key)? + key.len();
    let end = line[at..].find('"')? + at;
    Some(bits(&line[at..end]))
}

/// The OS indexes of every NUMA node the file lists.
fn numa_in_file(xml: &str) -> Vec<u32> {
    xml.lines()
        .filter(|l| l.contains("type=\"NUMANode\""))
        .filter_map(|l| {
            let at = l.find(" os_index=\"")? + 11;
            l[at..].split('"').next()?.parse().ok()
        })
        .collect()
}

fn check(path: &Path, whole: bool) {
    let name = format!("{} (whole: {whole})", path.display());
    let xml = std::fs::read_to_string(path).expect("xml");
    let (node, loc) = NodeTopology::from_xml_file_with_devices(path, whole).expect(&name);
    let mut cpus = node.cpus();
    cpus.sort_unstable();
    if !whole {
        if let Some(allowed) = machine_attr(&xml, "allowed_cpuset") {
            assert!(
                cpus.iter().all(|c| allowed.contains(c)),
                "{name}: a CPU the file does not allow"
            );
        }
    }
    // Every CPU in exactly one domain.
    let doms = domains(&node);
    let mut in_domains: Vec<u32> = doms.iter().flatten().flatten().copied().collect();
    let n = in_domains.len();
    in_domains.sort_unstable();
    in_domains.dedup();
    assert_eq!(in_domains.len(), n, "{name}: a CPU in two domains");
    assert_eq!(in_domains, cpus, "{name}: CPUs outside every domain");
    if node.has(Level::Numa) {
        let mut numa: Vec<u32> = node
            .objects(Level::Numa)
            .iter()
            .flat_map(|&s| node.span_cpus(s))
            .collect();
        numa.sort_unstable();
        assert_eq!(numa, cpus, "{name}: CPUs outside every NUMA domain");
    }
    let cores: usize = doms.iter().map(Vec::len).sum();
    let core_of = |c: u32| {
        doms.iter()
            .flatten()
            .position(|core| core.contains(&c))
            .expect("a CPU of a core")
    };
    let packages: Vec<Vec<u32>> = node
        .objects(Level::Socket)
        .iter()
        .map(|&s| node.span_cpus(s))
        .collect();
    // Without GPUs, and with every GPU of the machine as the step's (issue 65: GPU nodes too).
    let gpus = gpus_of(&loc, None);
    let runs: &[&[PolicyGpu]] = if gpus.is_empty() {
        &[&[]]
    } else {
        &[&[], &gpus]
    };
    for &with in runs {
        let name = format!("{name} ({} GPUs)", with.len());
        // As many tasks as cores: each core is one task's.
        let placed = auto(&node, with, cores, 1, false).expect(&name);
        let mut used: Vec<usize> = placed
            .iter()
            .map(|t| {
                let mut k: Vec<usize> = t.cpus.iter().map(|&c| core_of(c)).collect();
                k.dedup();
                assert_eq!(k.len(), 1, "{name}: a task of {cores} over several cores");
                k[0]
            })
            .collect();
        used.sort_unstable();
        assert_eq!(
            used,
            (0..cores).collect::<Vec<_>>(),
            "{name}: np = cores leaves a core idle"
        );
        // One task, and as many tasks as GPUs: every core is some task's, none shared.
        for tasks in [1, with.len().clamp(1, cores)] {
            let placed = auto(&node, with, tasks, 1, false).expect(&name);
            let mut covered: Vec<usize> = placed
                .iter()
                .flat_map(|t| {
                    let mut k: Vec<usize> = t.cpus.iter().map(|&c| core_of(c)).collect();
                    k.sort_unstable();
                    k.dedup();
                    k
                })
                .collect();
            let n = covered.len();
            covered.sort_unstable();
            covered.dedup();
            assert_eq!(covered.len(), n, "{name}: --np {tasks}: tasks share a core");
            // Issue 74: with a task for every package, a GPU job leaves idle only the cores of
            // packages without a step GPU; every core of the others is used.
            let expected = if !with.is_empty() && tasks >= packages.len().max(1) {
                let gpu_pkgs: Vec<&Vec<u32>> = packages
                    .iter()
                    .filter(|p| with.iter().any(|g| g.cpus.iter().any(|c| p.contains(c))))
                    .collect();
                (0..cores)
                    .filter(|&k| {
                        gpu_pkgs.iter().any(|p| {
                            doms.iter()
                                .flatten()
                                .nth(k)
                                .is_some_and(|core| p.contains(&core[0]))
                        })
                    })
                    .count()
            } else {
                cores
            };
            assert_eq!(n, expected, "{name}: --np {tasks} leaves cores idle");
        }
        // Issue 74: with GPUs and at least as many tasks as packages, no task spans two
        // packages, so a task placed for a GPU stays in that GPU's package.
        if !with.is_empty() && packages.len() > 1 {
            for tasks in [packages.len(), with.len().max(packages.len()), cores] {
                let placed = auto(&node, with, tasks.min(cores), 1, false).expect(&name);
                for (i, t) in placed.iter().enumerate() {
                    let spans = packages
                        .iter()
                        .filter(|p| t.cpus.iter().any(|c| p.contains(c)))
                        .count();
                    assert!(
                        spans <= 1,
                        "{name}: --np {tasks}: task {i} on cpus {:?} spans {spans} packages",
                        t.cpus
                    );
                }
            }
        }
        // Each task has a GPU near it: one of its own domains' where they have any.
        if !with.is_empty() {
            for tasks in [1, with.len(), 2 * with.len(), cores] {
                let placed = auto(&node, with, tasks.min(cores), 1, false).expect(&name);
                for (i, t) in placed.iter().enumerate() {
                    assert!(
                        !t.gpus.is_empty(),
                        "{name}: --np {tasks}: task {i} has no GPU"
                    );
                    let near: Vec<usize> = with
                        .iter()
                        .filter(|g| t.cpus.iter().any(|c| g.cpus.binary_search(c).is_ok()))
                        .map(|g| g.device)
                        .collect();
                    assert!(
                        near.is_empty() || t.gpus.iter().all(|g| near.contains(g)),
                        "{name}: --np {tasks}: task {i} has GPUs {:?}, its own are {near:?}",
                        t.gpus
                    );
                }
            }
        }
    }
    // Memory: only allowed nodes, and some for every task of a machine with NUMA nodes.
    // A file without NUMA nodes (hwloc's v1 format can omit them) gets node 0 from hwloc.
    let all_nodes = match numa_in_file(&xml) {
        none if none.is_empty() => vec![0],
        some => some,
    };
    let allowed = machine_attr(&xml, "allowed_nodeset").unwrap_or(all_nodes.clone());
    for tasks in [1, 2.min(cores), doms.len(), cores] {
        let placed = auto(&node, &[], tasks, 1, false).expect(&name);
        for t in &placed {
            let mems = local_nodes(loc.numa(), &t.cpus, None);
            assert!(
                mems.iter().all(|m| allowed.contains(m)),
                "{name}: {tasks} tasks: memory {mems:?} outside the allowed nodes {allowed:?}"
            );
            assert!(
                !mems.is_empty(),
                "{name}: {tasks} tasks: no memory for cpus {:?}",
                t.cpus
            );
        }
    }
}

#[test]
fn every_cpu_in_one_domain_and_its_memory_allowed() {
    // Every machine is checked; the failures are listed together.
    let mut failed = Vec::new();
    for path in xmls() {
        for whole in [false, true] {
            let run = std::panic::catch_unwind(|| check(&path, whole));
            if let Err(e) = run {
                let why = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failed.push(why);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The three machines of the issue, as the issue saw them (before, "lama plan --policy auto"
/// used 6 of 12 cores, refused 2 tasks on 2 CPUs, and used 4 of 10 CPUs).
#[test]
fn the_memoryless_machines_of_the_issue() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/topologies");
    for (file, cpus) in [
        ("fakeheterocpunuma.fsroot.xml", 24),
        ("4fake-4gr1nu1pu.fsroot.xml", 2),
        ("16amd64-8n2c-cpusets.fsroot.xml", 10),
    ] {
        let node = NodeTopology::from_xml_file(&dir.join(file)).expect(file);
        assert_eq!(node.cpus().len(), cpus, "{file}");
        let one = auto(&node, &[], 1, 1, false).expect(file);
        let cores: usize = domains(&node).iter().map(Vec::len).sum();
        assert_eq!(one[0].cpus.len(), cores, "{file}: --np 1");
        assert!(auto(&node, &[], 2, 1, false).is_ok(), "{file}: --np 2");
    }
}

/// Issue 58, part 5: on every machine, maps by socket, NUMA domain and core, bound to a core,
/// place one task per core: hardware threads outside every package make a package of their
/// own, and a machine without Core objects counts each hardware thread as a core.
#[test]
fn every_machine_maps_by_socket_numa_and_core() {
    use lama::spec::{Expert, Request};
    let mut failed = Vec::new();
    for path in xmls() {
        let node = NodeTopology::from_xml_file(&path).expect("loads");
        let cores = node.objects(Level::Core).len();
        for map in ["csbnh", "scbnh", "Ncsbnh", "cNsbnh"] {
            let req = Request::expert(
                &Expert {
                    map: Some(map),
                    bind: Some("1c"),
                    mppr: None,
                    order: None,
                },
                Some(cores),
                false,
            )
            .expect("a request");
            match lama::plan(&[&node], &req) {
                Ok(p) => {
                    let mut all: Vec<u32> = (0..cores).flat_map(|r| p.cpus(r, &[&node])).collect();
                    let n = all.len();
                    all.sort_unstable();
                    all.dedup();
                    if all.len() != n || n < cores {
                        failed.push(format!("{}: {map}: cores shared or missed", path.display()));
                    }
                }
                Err(e) => failed.push(format!("{}: {map}: {e}", path.display())),
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
