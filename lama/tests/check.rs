//! `lama check`'s judgement on real machines, with observations written by hand: a dual-socket
//! Xeon (NUMA 0: CPUs 0-7 and their hardware threads 16-23; NUMA 1: 8-15 and 24-31) and a POWER8
//! with two GPUs per package (cuda0-1 near CPUs 0-79, cuda2-3 near 80-159). Expected findings
//! are worked out from those layouts.

#![cfg(feature = "hwloc")]

use std::path::PathBuf;

use lama::check::{judge, FindingKind, NodeSeen, TaskSeen, ThreadSeen};
use lama::locality::Locality;

fn xml(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}/../tests/topologies/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

fn node(name: &str, allocated: &[u32], job_gpus: &[u32]) -> NodeSeen {
    let loc = Locality::from_xml_file(&xml(name)).expect("the XML loads");
    NodeSeen {
        host: "n1".into(),
        index: 0,
        allocated: allocated.to_vec(),
        numa: loc.numa().to_vec(),
        locality: Some(loc),
        job_gpus: job_gpus.to_vec(),
    }
}

const XEON: &str = "32em64t-2n8c2t-pci-normalio.xml";

/// A task bound to `cpus` with one busy thread per entry of `ran` (each seen on those CPUs).
fn task(rank: u32, cpus: &[u32], ran: &[&[u32]]) -> TaskSeen {
    TaskSeen {
        host: "n1".into(),
        rank,
        pid: 1000 + rank,
        cpus: cpus.to_vec(),
        threads: ran
            .iter()
            .enumerate()
            .map(|(i, r)| ThreadSeen {
                tid: 1000 + rank * 100 + i as u32,
                cpus: cpus.to_vec(),
                last_cpus: r.to_vec(),
                busy: true,
            })
            .collect(),
        ..Default::default()
    }
}

fn kinds(n: &NodeSeen, tasks: &[TaskSeen]) -> Vec<(FindingKind, Vec<u32>)> {
    judge(std::slice::from_ref(n), tasks)
        .into_iter()
        .map(|f| (f.kind, f.tasks))
        .collect()
}

#[test]
fn a_step_with_a_core_per_task_is_clean() {
    let n = node(XEON, &[0, 1, 16, 17], &[]);
    let tasks = [task(0, &[0, 16], &[&[0]]), task(1, &[1, 17], &[&[17]])];
    assert_eq!(kinds(&n, &tasks), vec![]);
}

#[test]
fn tasks_on_one_cpu_beside_idle_ones_share() {
    // srun --cpu-bind=map_cpu:0,0 on a job of cores 0 and 1.
    let n = node(XEON, &[0, 1, 16, 17], &[]);
    let tasks = [task(0, &[0], &[&[0]]), task(1, &[0], &[&[0]])];
    let found = judge(std::slice::from_ref(&n), &tasks);
    assert_eq!(
        found
            .iter()
            .map(|f| (f.kind, f.tasks.clone()))
            .collect::<Vec<_>>(),
        vec![
            (FindingKind::SharedCpu, vec![0, 1]),
            (FindingKind::IdleCpus, vec![])
        ]
    );
    assert!(
        found[0].message.contains("share CPUs 0"),
        "{}",
        found[0].message
    );
    assert!(found[1].message.contains("1,16-17"), "{}", found[1].message);
}

#[test]
fn threads_on_one_cpu_of_four_are_stacked() {
    // OMP_PROC_BIND=master, one place: four busy threads all on CPU 0 of the task's 0-1,16-17.
    let n = node(XEON, &[0, 1, 16, 17], &[]);
    let one: &[u32] = &[0];
    let t = task(0, &[0, 1, 16, 17], &[one, one, one, one]);
    assert_eq!(
        kinds(&n, std::slice::from_ref(&t)),
        vec![(FindingKind::StackedThreads, vec![0])]
    );
    // The same threads spread over the task's CPUs: nothing to say.
    let spread = task(0, &[0, 1, 16, 17], &[&[0], &[1], &[16], &[17]]);
    assert_eq!(kinds(&n, &[spread]), vec![]);
    // One busy thread is no crowd.
    assert_eq!(kinds(&n, &[task(0, &[0, 1, 16, 17], &[one])]), vec![]);
}

#[test]
fn a_task_over_both_domains_that_one_could_hold_spans() {
    // The job has CPUs 4-7 (NUMA 0) and 8-11 (NUMA 1); a task on 6-9 could sit in either.
    let n = node(XEON, &[4, 5, 6, 7, 8, 9, 10, 11], &[]);
    let tasks = [
        task(0, &[6, 7, 8, 9], &[&[6]]),
        task(1, &[4, 5, 10, 11], &[&[4]]),
    ];
    assert_eq!(kinds(&n, &tasks), vec![(FindingKind::NumaSpan, vec![0, 1])]);
    // Two CPUs on each side only: no domain holds four, so spanning is the only way.
    let n = node(XEON, &[6, 7, 8, 9], &[]);
    assert_eq!(kinds(&n, &[task(0, &[6, 7, 8, 9], &[&[6]])]), vec![]);
}

#[test]
fn memory_on_the_other_domain_is_remote() {
    let n = node(XEON, &[0, 16], &[]);
    let mut t = task(0, &[0, 16], &[&[0]]);
    t.pages = vec![(0, 100), (1, 900)];
    assert_eq!(
        kinds(&n, std::slice::from_ref(&t)),
        vec![(FindingKind::RemoteMemory, vec![0])]
    );
    t.pages = vec![(0, 900), (1, 100)];
    assert_eq!(kinds(&n, std::slice::from_ref(&t)), vec![]);
    // Bound away, before any page is touched.
    t.pages = vec![];
    t.policy = Some(("bind".into(), vec![1]));
    assert_eq!(kinds(&n, &[t]), vec![(FindingKind::RemoteMemory, vec![0])]);
}

#[test]
fn a_binding_off_lamas_plan_is_not_as_planned() {
    let n = node(XEON, &[0, 1, 16, 17], &[]);
    let mut t = task(0, &[0, 16], &[&[0]]);
    t.planned = Some(vec![0, 16]);
    let mut other = task(1, &[1, 17], &[&[1]]);
    other.planned = Some(vec![1, 17]);
    assert_eq!(kinds(&n, &[t.clone(), other.clone()]), vec![]);
    // Rebound after launch (taskset, a runtime): a thread may run outside the plan.
    other.threads[0].cpus = vec![0, 1];
    other.cpus = vec![0, 1, 17];
    let found = kinds(&n, &[t.clone(), other]);
    assert!(
        found.contains(&(FindingKind::NotAsPlanned, vec![1])),
        "{found:?}"
    );
    // TASK_MAP puts rank 0 on node 1, but it runs on node 0.
    t.planned_node = Some(1);
    let found = kinds(&n, &[t]);
    assert!(
        found.contains(&(FindingKind::NotAsPlanned, vec![0])),
        "{found:?}"
    );
}

#[test]
fn a_gpu_of_the_other_package_is_far_when_the_job_has_a_near_one() {
    const P8: &str = "power8gpudistances.xml";
    let all: Vec<u32> = (0..160).collect();
    let mut t = task(0, &[0, 1], &[&[0]]);
    t.gpus = vec![2];
    let n = node(P8, &all, &[0, 1, 2, 3]);
    let found = judge(std::slice::from_ref(&n), std::slice::from_ref(&t));
    let far: Vec<_> = found
        .iter()
        .filter(|f| f.kind == FindingKind::FarGpu)
        .collect();
    assert_eq!(far.len(), 1, "{found:?}");
    assert!(
        far[0].message.contains("GPU 2") && far[0].message.contains("GPU 0-1"),
        "{}",
        far[0].message
    );
    // The job has only the far package's GPUs: the task has the nearest it could.
    let n = node(P8, &all, &[2, 3]);
    assert!(kinds(&n, std::slice::from_ref(&t))
        .iter()
        .all(|(k, _)| *k != FindingKind::FarGpu));
    // Its own package's GPU: nothing to say.
    t.gpus = vec![1];
    let n = node(P8, &all, &[0, 1, 2, 3]);
    assert!(kinds(&n, &[t])
        .iter()
        .all(|(k, _)| *k != FindingKind::FarGpu));
}

#[test]
fn memory_bound_to_the_near_hbm_is_a_tier_not_remote() {
    // The fake KNL (SNC-4, hybrid): CPUs 0-3 have DRAM node 0 and MCDRAM node 7 near them
    // (`lama plan --mem local` and `--mem hbm` on the same XML); DRAM node 1 is another
    // quadrant's.
    let n = node("64intel64-fakeKNL-SNC4-hybrid.xml", &[0, 1, 2, 3], &[]);
    let mut t = task(0, &[0, 1, 2, 3], &[&[0]]);
    t.policy = Some(("bind".into(), vec![7]));
    assert!(kinds(&n, std::slice::from_ref(&t)).is_empty());
    t.policy = Some(("bind".into(), vec![1]));
    assert_eq!(
        kinds(&n, std::slice::from_ref(&t)),
        vec![(FindingKind::RemoteMemory, vec![0])]
    );
}
