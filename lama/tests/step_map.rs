//! A step's map computed without one entry per task (`lama::slurm::step_map`, what every node's
//! slurmstepd runs) equals the per-task definition (`slurm::layout::layout`, encoded), for any
//! counts, distribution and host file; and Slurm's inputs are read at the sizes of the largest
//! jobs: tasks per node with many runs, node lists of thousands of hosts, a host file of a
//! million lines read from disk.

use std::io::Write;

use lama::slurm::step_map::{arbitrary_map, HostFile};
use lama::slurm::{layout, step_taskmap, Distribution, StepEnv};
use lama::taskmap::{MapBuilder, TaskMap};
use proptest::prelude::*;

fn per_task(counts: &[u32], d: &Distribution, hosts: &[String]) -> TaskMap {
    TaskMap::encode(&layout(counts, d, hosts).expect("layout"))
}

fn dist() -> impl Strategy<Value = Distribution> {
    prop_oneof![
        Just(Distribution::Block),
        Just(Distribution::Cyclic),
        (1u32..6).prop_map(Distribution::Plane),
    ]
}

proptest! {
    #[test]
    fn counts_maps_equal_the_per_task_layout(counts in prop::collection::vec(0u32..9, 1..40), d in dist()) {
        prop_assert_eq!(step_taskmap(&counts, &d, &[]).expect("map"), per_task(&counts, &d, &[]));
    }

    #[test]
    fn arbitrary_maps_equal_the_per_task_layout(lines in prop::collection::vec(0usize..7, 1..200), extra in 0usize..5) {
        let hosts: Vec<String> = (1..=7).map(|i| format!("n{i}")).collect();
        let mut counts = [0u32; 7];
        for &l in &lines {
            counts[l] += 1;
        }
        // Slurm lists only the step's nodes; lines past the step's tasks are not read.
        let used: Vec<usize> = (0..7).filter(|&i| counts[i] > 0).collect();
        let step_hosts: Vec<String> = used.iter().map(|&i| hosts[i].clone()).collect();
        let step_counts: Vec<u32> = used.iter().map(|&i| counts[i]).collect();
        let mut text: String = lines.iter().map(|&l| format!("{}\n", hosts[l])).collect();
        for _ in 0..extra {
            text.push_str("n1\n");
        }
        let d = Distribution::parse("arbitrary", None, Some(&text)).expect("arbitrary");
        let want = per_task(&step_counts, &d, &step_hosts);
        prop_assert_eq!(arbitrary_map(&step_counts, &step_hosts, HostFile::Text(&text)).expect("map"), want);
    }

    #[test]
    fn the_builder_equals_encoding_each_task(runs in prop::collection::vec((0u64..6, 1u64..4, 1u64..4), 0..60)) {
        // Each item: `len` tasks on each of `count` nodes from `node`.
        let mut b = MapBuilder::default();
        let mut tasks = Vec::new();
        for &(node, count, len) in &runs {
            b.stretch(node, count, len);
            for n in node..node + count {
                tasks.extend(std::iter::repeat_n(n as u32, len as usize));
            }
        }
        prop_assert_eq!(b.finish(), TaskMap::encode(&tasks));
    }
}

#[test]
fn host_file_grammar_in_the_streamed_reader() {
    let hosts: Vec<String> = ["a1", "a2", "b"].iter().map(|s| s.to_string()).collect();
    // Comments, blanks, several entries on a line, host*N, hostlist expressions.
    let text = "# the step\n\na[1-2] b*2   # two entries\na2*2\n\nb\n";
    let map = arbitrary_map(&[1, 3, 3], &hosts, HostFile::Text(text)).expect("map");
    assert_eq!(map.assignment(), [0, 1, 2, 2, 1, 1, 2]);
    // A host*N past the step's tasks counts up to the step's tasks, as Slurm reads it.
    let map = arbitrary_map(&[1, 1, 2], &hosts, HostFile::Text("a1 a2 b*5\n")).expect("map");
    assert_eq!(map.assignment(), [0, 1, 2, 2]);
    // Found by fuzzing: `host*0` gives no task, so its host need not be the step's.
    let map = arbitrary_map(&[1, 0, 0], &hosts, HostFile::Text("n[0-72]*0 a1\n")).expect("map");
    assert_eq!(map.assignment(), [0]);
    let e = arbitrary_map(&[1, 1, 1], &hosts, HostFile::Text("a1\nc\nb\n")).unwrap_err();
    assert!(
        e.to_string()
            .contains("host 'c' is not in the step's node list"),
        "{e}"
    );
    let e = arbitrary_map(&[1, 1, 1], &hosts, HostFile::Text("a1\na2\n")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "host file lists 2 hosts, the step has 3 tasks"
    );
    let e = arbitrary_map(&[1, 1, 1], &hosts, HostFile::Text("a1\na1\nb\n")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "host file gives node 0 (a1) 2 tasks, Slurm's tasks per node say 1"
    );
}

/// 1,000,000 lines over 4,096 hosts: each node's tasks in runs of 3, nodes in a scrambled order.
#[test]
fn a_host_file_of_a_million_lines_is_read_from_disk() {
    let nodes = 4096usize;
    let per_node = 1_000_000 / nodes; // 244
    let tasks = nodes * per_node;
    let dir = std::env::temp_dir().join(format!("lama-step-map-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let path = dir.join("hosts");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("file"));
    let mut node_of = Vec::with_capacity(tasks);
    let mut left = vec![per_node; nodes];
    let mut k = 0usize;
    while node_of.len() < tasks {
        k = (k + 2_654_435_761) % nodes;
        let n = (0..nodes)
            .map(|i| (k + i) % nodes)
            .find(|&n| left[n] > 0)
            .expect("a node with tasks left");
        let run = left[n].min(3);
        for _ in 0..run {
            writeln!(f, "node{:04}", n + 1).expect("write");
            node_of.push(n as u64);
        }
        left[n] -= run;
    }
    drop(f);
    let lines = std::fs::read_to_string(&path)
        .expect("read")
        .lines()
        .count();
    assert_eq!(lines, tasks);
    let env = StepEnv {
        tasks_per_node: Some(format!("{per_node}(x{nodes})")),
        nodelist: Some(format!("node[0001-{nodes:04}]")),
        distribution: Some("arbitrary".into()),
        plane_size: None,
        hostfile: Some(path.to_string_lossy().into_owned()),
        node_order: None,
        step_id: None,
    };
    let map = env.taskmap_from_files().expect("map");
    assert_eq!(map.total_tasks(), tasks as u64);
    // Every task's node from the map equals the line written for it.
    for (t, &n) in node_of.iter().enumerate() {
        assert_eq!(map.node_of(t as u64), Some(n), "task {t}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tasks_per_node_with_many_runs_and_thousands_of_hosts() {
    // 4,096 nodes whose counts change every node: 4,096 runs in SLURM_STEP_TASKS_PER_NODE.
    let counts: Vec<u32> = (0..4096u32).map(|i| 1 + i % 7).collect();
    let text: Vec<String> = counts.iter().map(|c| c.to_string()).collect();
    for d in ["block", "cyclic", "plane=3"] {
        let env = StepEnv {
            tasks_per_node: Some(text.join(",")),
            nodelist: Some("rack[01-64]n[001-064]".into()),
            distribution: Some(d.into()),
            plane_size: None,
            hostfile: None,
            node_order: None,
            step_id: None,
        };
        let map = env.taskmap_from_files().expect("map");
        let dist = Distribution::parse(d, None, None).expect(d);
        assert_eq!(map, per_task(&counts, &dist, &[]), "{d}");
        assert_eq!(
            map.total_tasks(),
            counts.iter().map(|&c| c as u64).sum::<u64>()
        );
    }
}

/// `lines` host file lines over n1..n10, each on another node than the line before and not the
/// next one (a block per line), and the tasks per node they give.
fn interleaved(lines: usize) -> (Vec<u32>, String) {
    let node = |t: usize| (t * 3) % 10;
    let mut counts = vec![0u32; 10];
    let text = (0..lines)
        .map(|t| {
            counts[node(t)] += 1;
            format!("n{}\n", node(t) + 1)
        })
        .collect();
    (counts, text)
}

#[test]
fn a_map_too_long_to_export_is_not_read_to_the_end() {
    use lama::environ::{variable_fits, Withheld, MAX_TASK_MAP_BLOCKS};
    use lama::slurm::step_map::arbitrary_map_within;
    let hosts: Vec<String> = (1..=10).map(|i| format!("n{i}")).collect();
    let within = |lines: usize| {
        let (counts, text) = interleaved(lines);
        let full = arbitrary_map(&counts, &hosts, HostFile::Text(&text)).expect("map");
        let cut = arbitrary_map_within(&counts, &hosts, HostFile::Text(&text), MAX_TASK_MAP_BLOCKS)
            .expect("read");
        (full, cut)
    };
    // One block more than the most that fits: the whole map would not fit in TASK_MAP.
    let (full, _) = within(MAX_TASK_MAP_BLOCKS + 1);
    let text = lama::taskmap::rfc34::encode_wrapped(&full);
    assert!(
        !variable_fits("TASK_MAP", &text),
        "{} bytes fit",
        text.len()
    );
    // A few more: whatever comes back does not fit either (the builder holds up to two blocks
    // back, so reading stops a little past the line).
    let (full, cut) = within(MAX_TASK_MAP_BLOCKS + 2);
    assert_eq!(full.blocks().len(), MAX_TASK_MAP_BLOCKS + 2);
    if let Some(m) = cut {
        assert!(!variable_fits(
            "TASK_MAP",
            &lama::taskmap::rfc34::encode_wrapped(&m)
        ));
    }
    // Far more: reading stops.
    assert!(within(MAX_TASK_MAP_BLOCKS + 4).1.is_none());
    assert!(within(20_000).1.is_none());
    // Just under: a map of MAX_TASK_MAP_BLOCKS blocks is computed whole.
    let (full, cut) = within(MAX_TASK_MAP_BLOCKS);
    assert_eq!(cut.as_ref(), Some(&full));
    assert_eq!(full.blocks().len(), MAX_TASK_MAP_BLOCKS);
    let msg = Withheld::MapTooLong {
        blocks: MAX_TASK_MAP_BLOCKS,
    }
    .to_string();
    assert!(msg.contains("lama taskmap --from-slurm"), "{msg}");
}

/// A block step laid out in topology order as Slurm 26.05's `_task_layout_topo` numbers it:
/// nodes in `order`, each taking its `counts` tasks in turn. Returns each node's task ids.
fn topo_tids(counts: &[u32], order: &[u32]) -> Vec<Vec<u32>> {
    let mut tids = vec![Vec::new(); counts.len()];
    let mut next = 0;
    for &n in order {
        for _ in 0..counts[n as usize] {
            tids[n as usize].push(next);
            next += 1;
        }
    }
    tids
}

proptest! {
    #[test]
    fn topology_orders_round_trip_to_slurms_layout(
        (counts, order) in prop::collection::vec(1u32..5, 1..30)
            .prop_flat_map(|c| { let n = c.len() as u32; (Just(c), Just((0..n).collect::<Vec<u32>>()).prop_shuffle()) })
    ) {
        use lama::slurm::node_order::{block_order, decode_order, encode_order, ordered_block_map};
        let tids = topo_tids(&counts, &order);
        prop_assert_eq!(block_order(&tids), Some(order.clone()));
        let text = encode_order(&order);
        prop_assert_eq!(decode_order(&text, counts.len()).expect("decodes"), order.clone());
        let value = lama::slurm::node_order::step_value(7, 0, &order);
        let mut per_task = vec![0u32; counts.iter().sum::<u32>() as usize];
        for (n, ids) in tids.iter().enumerate() {
            for &t in ids { per_task[t as usize] = n as u32; }
        }
        let want = TaskMap::encode(&per_task);
        prop_assert_eq!(ordered_block_map(&counts, &order, usize::MAX).expect("map"), want.clone());
        // What each node computes from the step's variables and the order srun passed.
        let tpn = counts.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let env = StepEnv { tasks_per_node: Some(tpn), node_order: Some(value), step_id: Some("7.0".into()), ..StepEnv::default() };
        prop_assert_eq!(env.taskmap_from_files().expect("map"), want);
        // Another step's order (an outer step's, inherited) is not this step's.
        let other = StepEnv { step_id: Some("7.1".into()), ..env };
        prop_assert_eq!(other.taskmap_from_files().expect("map"), step_taskmap(&counts, &Distribution::Block, &[]).expect("map"));
    }
}
