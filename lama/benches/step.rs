//! What every node's slurmstepd computes for a step before its tasks start, at the size of the
//! largest jobs: the step's `TASK_MAP` from Slurm's variables, for 1,000,000 tasks on 4,096 nodes
//! in block, cyclic and plane layouts, and in arbitrary layouts read from a host file of
//! 1,000,000 lines (the file read included). The same calls as the plugin's `user_init`:
//! `StepEnv::taskmap_from_files_within`, then the RFC 34 text. (A map with too many blocks for
//! the environment is not read to the end: the shuffled host file stops early.)

use std::io::Write;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use lama::environ::MAX_TASK_MAP_BLOCKS;
use lama::slurm_layout::StepEnv;
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

criterion_group!(benches, bench);
criterion_main!(benches);
