//! Property tests: placement invariants on random real hwloc (synthetic) topologies, and task map
//! round trips on random assignments.

use std::collections::HashMap;

use lama::spec::{Binding, DefaultNp, Limit, Order, Request};
use lama::taskmap::{pmi, raw, rfc34, TaskMap};
use lama::{plan, Level, NodeTopology, PlacementError};
use proptest::prelude::*;

fn topology(desc: &str) -> NodeTopology {
    NodeTopology::from_synthetic(desc).expect("synthetic topology")
}

prop_compose! {
    fn synthetic()(pack in 1..3usize, l3 in 1..3usize, core in 1..5usize, pu in 1..3usize) -> String {
        format!("pack:{pack} l3:{l3} core:{core} pu:{pu}")
    }
}

prop_compose! {
    /// A valid request: a map that contains n, h and the binding level, in random order.
    fn request()(
        extra in proptest::sample::subsequence(vec![Level::Board, Level::Numa, Level::Socket, Level::L3, Level::L2, Level::L1, Level::Core], 0..=7),
        bind_pick in 0..9usize,
        width in prop_oneof![3 => Just(1u32), 1 => 2..4u32],
        mppr in proptest::collection::vec((1..3u32, 0..9usize), 0..3),
        order_s in any::<bool>(),
        shuffle in any::<u64>(),
    ) -> Request {
        let mut map = vec![Level::Node, Level::Hwthread];
        map.extend(extra);
        let bind_level = Level::ALL[bind_pick];
        if !map.contains(&bind_level) { map.push(bind_level); }
        // Deterministic shuffle from the seed.
        let mut s = shuffle;
        for i in (1..map.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            map.swap(i, (s >> 33) as usize % (i + 1));
        }
        let width = if bind_level == Level::Node { 1 } else { width };
        let mut limits: Vec<Limit> = Vec::new();
        for (count, l) in mppr {
            let level = Level::ALL[l];
            if !limits.iter().any(|x| x.level == level) { limits.push(Limit { count, level }); }
        }
        Request {
            map,
            bind: Binding { width, level: bind_level },
            mppr: limits,
            order: if order_s { Order::Sequential } else { Order::Natural },
            oversubscribe: false,
            np: None,
            default_np: DefaultNp::Sweep,
            open_mpi: None,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn placement_invariants(
        descs in proptest::collection::vec(synthetic(), 1..4),
        req in request(),
        restrict_mask in any::<u64>(),
        extra in 0..6usize,
    ) {
        let models: Vec<NodeTopology> = descs.iter().map(|d| {
            let t = topology(d);
            // Random restriction, keeping at least one CPU.
            let keep: Vec<u32> = t.cpus().into_iter().enumerate()
                .filter(|(i, _)| restrict_mask >> (i % 64) & 1 == 1 || *i == 0)
                .map(|(_, c)| c).collect();
            t.restrict(&keep).expect("restrict")
        }).collect();
        let nodes: Vec<&NodeTopology> = models.iter().collect();
        let sweep = match plan(&nodes, &req) {
            Ok(p) => p,
            Err(PlacementError::NoResources { .. }) => return Ok(()),
            Err(e) => return Err(TestCaseError::fail(format!("default np failed: {e}"))),
        };
        prop_assert!(!sweep.is_empty());
        // Bindings inside the allowed CPUs, never empty; MPPR never exceeded in one sweep.
        let mut counts: HashMap<(u32, Level, usize), u32> = HashMap::new();
        for (r, x) in sweep.placements().iter().enumerate() {
            let cpus = sweep.cpus(r, &nodes);
            prop_assert!(!cpus.is_empty());
            let allowed = nodes[x.node as usize].cpus();
            prop_assert!(cpus.iter().all(|c| allowed.binary_search(c).is_ok()));
            for lim in &req.mppr {
                for (k, o) in nodes[x.node as usize].objects(lim.level).iter().enumerate() {
                    if o.start < x.span.end && x.span.start < o.end {
                        let c = counts.entry((x.node, lim.level, k)).or_insert(0);
                        *c += 1;
                        prop_assert!(*c <= lim.count, "limit {} exceeded", lim);
                    }
                }
            }
        }
        // Exactly np ranks, each placed once; asking for more than a sweep fails unless oversubscribing.
        let np = sweep.len() + extra;
        let mut r2 = req.clone();
        r2.np = Some(np);
        match plan(&nodes, &r2) {
            Ok(p) => { prop_assert_eq!(extra, 0); prop_assert_eq!(p.len(), np); }
            Err(PlacementError::Oversubscribed { placed, requested, .. }) => {
                prop_assert!(extra > 0);
                prop_assert_eq!((placed, requested), (sweep.len(), np));
            }
            Err(e) => return Err(TestCaseError::fail(e.to_string())),
        }
        r2.oversubscribe = true;
        let p = plan(&nodes, &r2).expect("oversubscribed plan places everything");
        prop_assert_eq!(p.len(), np);
        // Natural and sequential orders are permutations of each other.
        let mut other = req.clone();
        other.order = if req.order == Order::Natural { Order::Sequential } else { Order::Natural };
        let q = plan(&nodes, &other).expect("same request, other order");
        let key = |p: &lama::Plan| {
            let mut v: Vec<(u32, u32, u32, u32)> = p.placements().iter().map(|x| (x.node, x.span.start, x.span.end, x.pu)).collect();
            v.sort();
            v
        };
        prop_assert_eq!(key(&sweep), key(&q));
    }

    #[test]
    fn taskmap_round_trips(nodes in proptest::collection::vec(0..6u32, 0..60)) {
        let m = TaskMap::encode(&nodes);
        let back: Vec<u32> = m.assignment().iter().map(|&n| n as u32).collect();
        prop_assert_eq!(&back, &nodes);
        // RFC 34 text, wrapped JSON, PMI all decode to the same map.
        prop_assert_eq!(rfc34::decode(&m.to_string()).expect("rfc34"), m.clone());
        prop_assert_eq!(rfc34::decode(&rfc34::encode_wrapped(&m)).expect("wrapped"), m.clone());
        prop_assert_eq!(pmi::decode(&pmi::encode(&m)).expect("pmi"), m.clone());
        prop_assert_eq!(m.canonical(), m.clone());
        // Raw needs every node present; it round-trips whenever that holds.
        let mut present = vec![false; m.nnodes() as usize];
        for &n in &nodes { present[n as usize] = true; }
        let r = raw::encode(&m);
        if present.iter().all(|&p| p) {
            prop_assert_eq!(raw::decode(&r).expect("raw"), m.clone());
        }
        // Queries agree with the assignment.
        prop_assert_eq!(m.total_tasks(), nodes.len() as u64);
        for (t, &n) in nodes.iter().enumerate() {
            prop_assert_eq!(m.node_of(t as u64), Some(n as u64));
        }
        for n in 0..m.nnodes() {
            let want: Vec<u64> = nodes.iter().enumerate().filter(|(_, &x)| x as u64 == n).map(|(t, _)| t as u64).collect();
            let got: Vec<u64> = m.tasks_on(n).iter().flat_map(|&(a, b)| a..=b).collect();
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(m.ntasks_on(n), want.len() as u64);
        }
    }
}

proptest! {
    /// The bulk encoder and the run-by-run canonicaliser agree, on shapes rich in stretches.
    #[test]
    fn encode_matches_run_by_run(nnodes in 1..6u32, ppn in 1..4usize, reps in 1..4usize, tail in proptest::collection::vec(0..6u32, 0..12)) {
        let mut nodes: Vec<u32> = Vec::new();
        for _ in 0..reps {
            for n in 0..nnodes {
                nodes.extend(std::iter::repeat_n(n, ppn));
            }
        }
        nodes.extend(tail);
        let m = TaskMap::encode(&nodes);
        let per_run: Vec<lama::taskmap::Block> = nodes.iter().map(|&n| lama::taskmap::Block { nodeid: n as u64, nnodes: 1, ppn: 1, repeat: 1 }).collect();
        let slow = TaskMap::from_blocks(per_run).expect("blocks").canonical();
        prop_assert_eq!(m.assignment().iter().map(|&x| x as u32).collect::<Vec<_>>(), nodes);
        prop_assert_eq!(m, slow);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// One node under Slurm: every rank Slurm put there is placed exactly once, in ascending
    /// order, and bound only to CPUs of the step.
    #[test]
    fn node_placement_stays_on_step_cpus(
        desc in synthetic(),
        req in request(),
        step_mask in any::<u64>(),
        ranks in proptest::collection::btree_set(0..10_000u32, 1..12),
    ) {
        let t = topology(&desc);
        let step: Vec<u32> = t.cpus().into_iter().enumerate()
            .filter(|(i, _)| step_mask >> (i % 64) & 1 == 1 || *i == 0)
            .map(|(_, c)| c).collect();
        let mut shuffled: Vec<u32> = ranks.iter().copied().collect();
        shuffled.reverse();
        let mut r = req.clone();
        r.oversubscribe = true;
        match lama::plugin::place_node(&t, &step, &r, &shuffled, false) {
            Ok(tasks) => {
                let got: Vec<u32> = tasks.iter().map(|b| b.rank).collect();
                prop_assert_eq!(got, ranks.iter().copied().collect::<Vec<_>>());
                for b in &tasks {
                    prop_assert!(!b.cpus.is_empty());
                    prop_assert!(b.cpus.iter().all(|c| step.contains(c)), "{:?} outside {:?}", b.cpus, step);
                }
            }
            // A binding level the restricted node lacks entirely is the only acceptable failure.
            Err(lama::plugin::StepError::Placement(PlacementError::NoResources { .. })) => {}
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}

proptest! {
    /// Canonicalising blocks (stretch by stretch) gives what encoding their task-by-task
    /// assignment gives.
    #[test]
    fn canonical_matches_encoding_the_assignment(
        blocks in proptest::collection::vec((0..5u64, 1..4u64, 1..3u64, 1..3u64), 1..6),
    ) {
        let blocks: Vec<lama::taskmap::Block> = blocks.into_iter()
            .map(|(nodeid, nnodes, ppn, repeat)| lama::taskmap::Block { nodeid, nnodes, ppn, repeat })
            .collect();
        let m = TaskMap::from_blocks(blocks).expect("blocks");
        let nodes: Vec<u32> = m.assignment().iter().map(|&x| x as u32).collect();
        prop_assert_eq!(m.canonical(), TaskMap::encode(&nodes));
    }
}
