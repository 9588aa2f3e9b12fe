//! What every node's slurmstepd computes for a step before its tasks start, at the size of the
//! largest jobs: the step's `TASK_MAP` from Slurm's variables, for 1,000,000 tasks on 4,096 nodes
//! in block, cyclic and plane layouts, and in arbitrary layouts read from a host file of
//! 1,000,000 lines (the file read included). The same calls as the plugin's `user_init`:
//! `StepEnv::taskmap_from_files_within`, then the RFC 34 text. (A map with too many blocks for
//! the environment is not read to the end: the shuffled host file stops early.) Then the hostile
//! steps of issue 37: what a short host file or tasks-per-node string costs (`hostile`).

use std::io::Write;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use lama::environ::MAX_TASK_MAP_BLOCKS;
use lama::slurm::StepEnv;
use lama::taskmap::rfc34;

const NODES: u32 = 4096;
const TASKS: u32 = 1_000_000;

/// The step's variables: `TASKS` over `NODES` as Slurm counts them (244 or 245 per node).
fn step(distribution: &str, hostfile: Option<&str>) -> StepEnv {
    let (q, r) = (TASKS / NODES, TASKS % NODES);
    StepEnv {
        tasks_per_node: Some(format!("{}(x{r}),{q}(x{})", q + 1, NODES - r)),
        nodelist: Some(format!("n[1-{NODES}]")),
        distribution: Some(distribution.into()),
        plane_size: distribution.strip_prefix("plane=").map(str::to_string),
        hostfile: hostfile.map(str::to_string),
        node_order: None,
        step_id: None,
    }
}

/// The map's text, as the plugin computes it on each node (empty when it has too many blocks
/// to be exported, and reading stopped there).
fn taskmap(env: &StepEnv) -> String {
    match env
        .taskmap_from_files_within(MAX_TASK_MAP_BLOCKS)
        .expect("a valid step")
    {
        Some(m) => rfc34::encode_wrapped(&m),
        None => String::new(),
    }
}

/// A host file of the step's tasks: each node's tasks together, the nodes in the order `order`
/// gives (`None`: each line on a pseudo-random node, the worst case for the map).
fn hostfile(path: &std::path::Path, order: Option<&[u32]>) {
    let (q, r) = (TASKS / NODES, TASKS % NODES);
    let count = |n: u32| if n < r { q + 1 } else { q };
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("host file"));
    match order {
        Some(order) => {
            for &n in order {
                for _ in 0..count(n) {
                    writeln!(f, "n{}", n + 1).expect("write");
                }
            }
        }
        None => {
            // Deal every node's tasks, then shuffle the lines (a fixed xorshift sequence).
            let mut lines: Vec<u32> = (0..NODES)
                .flat_map(|n| (0..count(n)).map(move |_| n))
                .collect();
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            for i in (1..lines.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                lines.swap(i, (x % (i as u64 + 1)) as usize);
            }
            for n in lines {
                writeln!(f, "n{}", n + 1).expect("write");
            }
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("step TASK_MAP, 1,000,000 tasks on 4,096 nodes");
    g.sample_size(20);
    for d in ["block", "cyclic", "plane=16"] {
        let env = step(d, None);
        assert!(taskmap(&env).len() < 100);
        g.bench_function(d, |b| b.iter(|| taskmap(black_box(&env))));
    }
    let dir = std::env::temp_dir().join(format!("lama-bench-step-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    // Nodes in reverse order (a user's own node order), then every line on another node.
    let reversed: Vec<u32> = (0..NODES).rev().collect();
    for (name, order) in [
        ("arbitrary, nodes reordered", Some(&reversed[..])),
        ("arbitrary, every line shuffled", None),
    ] {
        let path = dir.join(name.replace([' ', ','], "_"));
        hostfile(&path, order);
        let env = step("arbitrary", path.to_str());
        let text = taskmap(&env);
        let whole = rfc34::encode_wrapped(&env.taskmap_from_files().expect("a valid step"));
        eprintln!(
            "{name}: TASK_MAP of {} bytes (exported: {})",
            whole.len(),
            !text.is_empty()
        );
        g.bench_function(name, |b| b.iter(|| taskmap(black_box(&env))));
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a hostile step costs its slurmstepd: the host files and the tasks-per-node string of
/// issue 37, read as `user_init` reads them (tests/slurm/hostile.sh checks the memory on the
/// sandbox; this is their time). Each ends in a map or a refusal, which is printed once.
fn hostile(c: &mut Criterion) {
    let mut g = c.benchmark_group("hostile steps, as user_init reads them");
    g.sample_size(20);
    let dir = std::env::temp_dir().join(format!("lama-bench-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let one = |file: &str| StepEnv {
        tasks_per_node: Some("1".into()),
        nodelist: Some("n1".into()),
        distribution: Some("arbitrary".into()),
        plane_size: None,
        hostfile: Some(file.into()),
        node_order: None,
        step_id: None,
    };
    let cases = [
        ("20-byte host file", "n1 a[0-16777214]\n".to_string()),
        (
            "219-byte host file",
            format!("n1 {}[0-16777214]\n", "a".repeat(200)),
        ),
        (
            "300-byte host name",
            format!("{}[0-16777214]\n", "b".repeat(300)),
        ),
        ("2 MB of comment", format!("#{}\nn1\n", "c".repeat(2 << 20))),
    ];
    for (name, text) in cases {
        let path = dir.join(name.replace(' ', "_"));
        std::fs::write(&path, text).expect("host file");
        let env = one(path.to_str().expect("a UTF-8 path"));
        let outcome = env.taskmap_from_files_within(MAX_TASK_MAP_BLOCKS);
        eprintln!(
            "{name}: {:?}",
            outcome
                .as_ref()
                .map(|m| m.as_ref().map(rfc34::encode_wrapped))
        );
        g.bench_function(name, |b| {
            b.iter(|| black_box(&env).taskmap_from_files_within(MAX_TASK_MAP_BLOCKS))
        });
    }
    // 5,200 nodes of 1 to 5,200 tasks each, dealt cyclically: 24.6 s before the work bound.
    let counts = (1..=5200).map(|c: u32| c.to_string()).collect::<Vec<_>>();
    let env = StepEnv {
        tasks_per_node: Some(counts.join(",")),
        nodelist: None,
        distribution: Some("cyclic".into()),
        plane_size: None,
        hostfile: None,
        node_order: None,
        step_id: None,
    };
    eprintln!(
        "25 KB tasks per node, cyclic: exported: {:?}",
        env.taskmap_from_files_within(MAX_TASK_MAP_BLOCKS)
            .map(|m| m.is_some())
    );
    g.bench_function("25 KB tasks per node, cyclic", |b| {
        b.iter(|| black_box(&env).taskmap_from_files_within(MAX_TASK_MAP_BLOCKS))
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench, hostile);
criterion_main!(benches);
