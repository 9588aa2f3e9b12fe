//! OpenMP places inside a task's binding. Expected places are worked out from hwloc-calc's view
//! of the real machines (see each test).

use std::path::PathBuf;

use lama::openmp::{plan_threads, ProcBind, ThreadError, Threads};
use lama::NodeTopology;
use proptest::prelude::*;

fn node(name: &str) -> NodeTopology {
    let p = PathBuf::from(format!(
        "{}/../tests/topologies/{name}",
        env!("CARGO_MANIFEST_DIR")
    ));
    NodeTopology::from_xml_file(&p).expect("topology")
}

fn places(
    n: &NodeTopology,
    binding: &[u32],
    t: Threads,
    b: ProcBind,
) -> Result<String, ThreadError> {
    plan_threads(n, 0, binding, t, b).map(|p| p.omp_places())
}

/// `hwloc-calc -I pu package:0` on the 2x8x2 Intel: 0,16,1,17,...,7,23 (core k holds k, k+16).
const INTEL: &str = "32em64t-2n8c2t-pci-normalio.xml";

#[test]
fn auto_is_one_thread_per_core_of_the_binding() {
    let n = node(INTEL);
    let package0: Vec<u32> = (0..8).chain(16..24).collect();
    let p = plan_threads(&n, 0, &package0, Threads::Auto, ProcBind::Spread).unwrap();
    assert_eq!(p.threads(), 8);
    assert_eq!(
        p.omp_places(),
        "{0,16},{1,17},{2,18},{3,19},{4,20},{5,21},{6,22},{7,23}"
    );
    let env = p.env();
    assert_eq!(env[0], ("OMP_NUM_THREADS".into(), "8".into()));
    assert_eq!(env[2], ("OMP_PROC_BIND".into(), "spread".into()));
}

#[test]
fn fewer_threads_than_cores_spread_or_pack() {
    let n = node(INTEL);
    let package0: Vec<u32> = (0..8).chain(16..24).collect();
    // 8 cores, 2 threads: spread takes cores 0 and 4, close cores 0 and 1.
    assert_eq!(
        places(&n, &package0, Threads::Count(2), ProcBind::Spread).unwrap(),
        "{0,16},{4,20}"
    );
    assert_eq!(
        places(&n, &package0, Threads::Count(2), ProcBind::Close).unwrap(),
        "{0,16},{1,17}"
    );
    // 3 of 8: cores 0, 2 (8/3) and 5 (16/3).
    assert_eq!(
        places(&n, &package0, Threads::Count(3), ProcBind::Spread).unwrap(),
        "{0,16},{2,18},{5,21}"
    );
}

#[test]
fn more_threads_than_cores_use_hardware_threads_never_stacked() {
    let n = node(INTEL);
    // Cores 0 and 1 (CPUs 0,1,16,17): 4 threads on 4 hardware threads.
    let two_cores = [0, 1, 16, 17];
    assert_eq!(
        places(&n, &two_cores, Threads::Count(4), ProcBind::Spread).unwrap(),
        "{0},{1},{16},{17}"
    );
    assert_eq!(
        places(&n, &two_cores, Threads::Count(4), ProcBind::Close).unwrap(),
        "{0},{16},{1},{17}"
    );
    // 3 threads: every core's first thread before a second one.
    assert_eq!(
        places(&n, &two_cores, Threads::Count(3), ProcBind::Spread).unwrap(),
        "{0},{1},{16}"
    );
    let e = places(&n, &two_cores, Threads::Count(5), ProcBind::Spread).unwrap_err();
    assert_eq!(
        e.to_string(),
        "5 OpenMP threads per task asked for, but task 0's binding (cpus 0-1,16-17) has 4 hardware thread(s): bind it wider (--lama-bind) or ask for fewer threads"
    );
    // A binding of one hardware thread of each core (--hint=nomultithread) has one-CPU places.
    assert_eq!(
        places(&n, &[0, 1], Threads::Auto, ProcBind::Spread).unwrap(),
        "{0},{1}"
    );
}

#[test]
fn numa_inside_a_socket_gets_equal_shares() {
    // The 4-socket AMD has two NUMA nodes per package: package 0 is CPUs 0-15, its NUMA node 1
    // is 8-15 (hwloc-calc -I pu package:0.numa:1), one hardware thread per core. Two threads
    // spread over the package land one per NUMA node; close keeps them both on NUMA node 0.
    let n = node("64amd64-4s2n4ca2co.fsroot.xml");
    let package0: Vec<u32> = (0..16).collect();
    assert_eq!(
        places(&n, &package0, Threads::Count(2), ProcBind::Spread).unwrap(),
        "{0},{8}"
    );
    assert_eq!(
        places(&n, &package0, Threads::Count(2), ProcBind::Close).unwrap(),
        "{0},{1}"
    );
    assert_eq!(
        places(&n, &package0, Threads::Count(4), ProcBind::Spread).unwrap(),
        "{0},{4},{8},{12}"
    );
}

#[test]
fn values_are_checked_with_the_option_named() {
    assert_eq!(Threads::parse("--lama-threads", "auto"), Ok(Threads::Auto));
    assert_eq!(
        Threads::parse("--lama-threads", " 12 "),
        Ok(Threads::Count(12))
    );
    let e = Threads::parse("--lama-threads", "0")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "invalid --lama-threads '0': at least one thread; valid: auto (one per core of the task's binding) or 1 to 4096"
    );
    assert!(Threads::parse("threads", "many")
        .unwrap_err()
        .to_string()
        .starts_with("invalid threads 'many': not a number of threads"));
    assert!(Threads::parse("t", "5000")
        .unwrap_err()
        .to_string()
        .contains("too many threads"));
    assert_eq!(
        ProcBind::parse("--lama-omp-bind", "CLOSE"),
        Ok(ProcBind::Close)
    );
    assert_eq!(
        ProcBind::parse("--lama-omp-bind", "master")
            .unwrap_err()
            .to_string(),
        "invalid --lama-omp-bind 'master': unknown binding policy; valid: spread or close"
    );
}

proptest! {
    /// Places are disjoint, inside the binding, one per thread; whole cores while threads fit
    /// on cores; and asking for more threads than the binding's hardware threads is an error.
    #[test]
    fn places_are_disjoint_inside_the_binding(
        packages in 1..3usize, cores in 1..5usize, pus in 1..4usize,
        pick in proptest::collection::vec(any::<bool>(), 24),
        n in 1..14u32, close in any::<bool>(),
    ) {
        let t = NodeTopology::from_synthetic(&format!("pack:{packages} core:{cores} pu:{pus}")).unwrap();
        let all = t.pus().to_vec();
        let mut binding: Vec<u32> = all.iter().zip(pick.iter().cycle()).filter(|(_, &k)| k).map(|(&c, _)| c).collect();
        if binding.is_empty() { binding.push(all[0]); }
        binding.sort_unstable();
        let bind = if close { ProcBind::Close } else { ProcBind::Spread };
        match plan_threads(&t, 3, &binding, Threads::Count(n), bind) {
            Ok(p) => {
                prop_assert_eq!(p.threads(), n as usize);
                let mut seen: Vec<u32> = p.places.iter().flatten().copied().collect();
                let total = seen.len();
                seen.sort_unstable();
                seen.dedup();
                prop_assert_eq!(seen.len(), total, "a CPU in two places");
                prop_assert!(seen.iter().all(|c| binding.binary_search(c).is_ok()));
                prop_assert!(p.places.iter().all(|pl| !pl.is_empty()));
            }
            Err(ThreadError::TooMany { pus, .. }) => {
                prop_assert_eq!(pus, binding.len());
                prop_assert!(n as usize > binding.len());
            }
            Err(e) => prop_assert!(false, "unexpected {}", e),
        }
    }
}
