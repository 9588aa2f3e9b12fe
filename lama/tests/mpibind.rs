//! Against mpibind's own test suite (issue 58): for each of mpibind's default cases (greedy,
//! GPU-optimised, SMT 0) on LLNL's Corona and Lassen, as `tests/topologies/mpibind-expected.txt`
//! records mpibind's answers, the automatic policy places the same tasks on the same cores
//! with the same GPUs, or better by these rules, each stated where it is checked:
//! - CPUs: each task covers the same cores as mpibind's, on hardware threads mpibind gave it
//!   (lama binds one hardware thread per core unless workers need more; mpibind every one);
//! - GPUs: a task mpibind gives GPUs gets the same ones; a task mpibind gives none gets some all
//!   the same (its nearest domain's, shared in blocks; or, when no task is near a GPU, the
//!   step's far ones), since a task of a GPU step without a GPU is left idle.
//!
//! docs/policy.md's table "Against mpibind's test suite" lists where the two differ.

use std::path::PathBuf;

use lama::idset::parse_list;
use lama::level::Level;
use lama::locality::Locality;
use lama::policy::{auto, domains, gpus_of};
use lama::NodeTopology;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/topologies")
}

struct Case {
    xml: String,
    case: String,
    tasks: usize,
    threads: usize,
    restriction: String,
    cpus: Vec<Vec<u32>>,
    gpus: Vec<Vec<usize>>,
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(dir().join("mpibind-expected.txt")).expect("answers");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('|').map(str::trim).collect();
            assert_eq!(f.len(), 7, "{l}");
            let lists = |s: &str| -> Vec<Vec<u32>> {
                s.split(';')
                    .map(|t| parse_list(t.trim()).expect("a cpulist"))
                    .collect()
            };
            Case {
                xml: f[0].into(),
                case: f[1].into(),
                tasks: f[2].parse().expect("tasks"),
                threads: f[3].parse().expect("threads"),
                restriction: f[4].into(),
                cpus: lists(f[5]),
                gpus: lists(f[6])
                    .into_iter()
                    .map(|g| g.into_iter().map(|i| i as usize).collect())
                    .collect(),
            }
        })
        .collect()
}

/// The cores (as each core's CPUs) that `cpus` touch.
fn cores_of(node: &NodeTopology, cpus: &[u32]) -> Vec<Vec<u32>> {
    let mut out: Vec<Vec<u32>> = node
        .objects(Level::Core)
        .iter()
        .map(|&s| node.span_cpus(s))
        .filter(|core| core.iter().any(|c| cpus.contains(c)))
        .collect();
    out.sort();
    out
}

#[test]
fn every_default_case_is_mpibinds_or_better() {
    let all = cases();
    assert_eq!(all.len(), 14, "mpibind's 7 default cases on each machine");
    for c in all {
        let name = format!("{} case {}", c.xml, c.case);
        let (whole, loc) =
            NodeTopology::from_xml_file_with_devices(&dir().join(&c.xml), false).expect(&name);
        let node = match c.restriction.split_once(':') {
            None => whole.clone(),
            Some(("cpus", list)) => whole.restrict_to_list(list).expect(&name),
            Some(("numa", n)) => {
                let os: u32 = n.parse().expect("a NUMA node");
                let numa = loc.numa().iter().find(|x| x.os_index == os).expect(&name);
                whole.restrict(&numa.cpus).expect(&name)
            }
            Some(other) => panic!("{name}: restriction {other:?}"),
        };
        // mpibind numbers the GPUs in the order lama lists them (device order).
        let gpus = gpus_of(&loc, None);
        let placed = auto(&node, &gpus, c.tasks, c.threads.max(1), false).expect(&name);
        assert_eq!(placed.len(), c.cpus.len(), "{name}: tasks");
        let theirs: Vec<Vec<Vec<u32>>> = c.cpus.iter().map(|x| cores_of(&node, x)).collect();
        let mut all_theirs: Vec<&Vec<u32>> = theirs.iter().flatten().collect();
        let claimed = all_theirs.len();
        all_theirs.sort();
        all_theirs.dedup();
        let cores = node.objects(Level::Core).len();
        if all_theirs.len() < claimed && all_theirs.len() < cores {
            // mpibind stacks tasks on a core (its GPU domains only, while other cores idle):
            // lama gives every task cores of its own, and uses every core.
            let mine: Vec<Vec<Vec<u32>>> =
                placed.iter().map(|t| cores_of(&node, &t.cpus)).collect();
            let mut all: Vec<&Vec<u32>> = mine.iter().flatten().collect();
            let n = all.len();
            all.sort();
            all.dedup();
            assert_eq!(all.len(), n, "{name}: two tasks share a core");
            assert_eq!(n, cores, "{name}: a core idle");
            for (i, t) in placed.iter().enumerate() {
                assert!(!t.gpus.is_empty(), "{name}: task {i} has no GPU");
            }
            continue;
        }
        for (i, t) in placed.iter().enumerate() {
            // CPUs: at least mpibind's cores, on hardware threads mpibind gave the task there;
            // more only from cores mpibind left idle (lama leaves no core idle).
            let mine = cores_of(&node, &t.cpus);
            for core in &theirs[i] {
                assert!(
                    mine.contains(core),
                    "{name}: task {i} lacks mpibind's core {core:?}"
                );
            }
            for core in &mine {
                assert!(
                    theirs[i].contains(core) || !all_theirs.contains(&core),
                    "{name}: task {i} has core {core:?}, another task's under mpibind"
                );
            }
            assert!(
                t.cpus
                    .iter()
                    .filter(|x| theirs[i].iter().any(|core| core.contains(x)))
                    .all(|x| c.cpus[i].contains(x)),
                "{name}: task {i}: cpus {:?}, mpibind's {:?}",
                t.cpus,
                c.cpus[i]
            );
            // GPUs: mpibind's, or some where mpibind gives none.
            let mine: Vec<usize> = t
                .gpus
                .iter()
                .map(|d| gpus.iter().position(|g| g.device == *d).expect("a GPU"))
                .collect();
            let mut sorted = mine.clone();
            sorted.sort_unstable();
            if c.gpus[i].is_empty() {
                assert!(!mine.is_empty(), "{name}: task {i} has no GPU");
            } else {
                assert_eq!(sorted, c.gpus[i], "{name}: task {i}: GPUs");
            }
        }
    }
}

/// mpibind's cases include both machines' every core; lama's domains there are mpibind's NUMA
/// domains, GPU domains first.
#[test]
fn the_machines_are_as_mpibind_sees_them() {
    for (xml, doms, gpu_doms) in [
        ("mpibind-epyc-corona.xml", 8, 4),
        ("mpibind-coral-lassen.xml", 2, 2),
    ] {
        let (node, loc): (NodeTopology, Locality) =
            NodeTopology::from_xml_file_with_devices(&dir().join(xml), false).expect(xml);
        assert_eq!(domains(&node).len(), doms, "{xml}");
        let with_gpus = domains(&node)
            .iter()
            .filter(|d| {
                gpus_of(&loc, None)
                    .iter()
                    .any(|g| d.iter().flatten().any(|c| g.cpus.contains(c)))
            })
            .count();
        assert_eq!(with_gpus, gpu_doms, "{xml}");
    }
}
