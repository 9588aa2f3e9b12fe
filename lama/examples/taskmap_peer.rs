//! The lama side of `contrib/taskmap-vs-flux.sh`: times `lama::taskmap` on the same maps and
//! operations as `contrib/bench/flux_taskmap.c` (flux-core's libtaskmap) and prints the same
//! lines, `SHAPE OP MEDIAN_MS CHECK`, so that the script can put them side by side and check
//! that both computed the same results.
//!
//! Usage: `cargo run --release --example taskmap_peer -- NODES PPN RUNS`

use std::hint::black_box;
use std::time::Instant;

use lama::taskmap::{rfc34, TaskMap};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Runs `f` `runs` times; the median time in ms and the last result.
fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut ms = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let t0 = Instant::now();
        let out = black_box(f());
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
        last = Some(out);
    }
    match last {
        Some(out) => (median(ms), out),
        None => (0.0, f()),
    }
}

fn run(shape: &str, node: &[u32], nnodes: u64, runs: usize) -> Result<(), String> {
    let (ms, map) = time(runs, || TaskMap::encode(black_box(node)));
    println!("{shape} build {ms:.4} {}", map.total_tasks());
    let (ms, text) = time(runs, || map.to_string());
    println!("{shape} encode {ms:.4} {text}");
    let (ms, decoded) = time(runs, || rfc34::decode(black_box(&text)));
    let decoded = decoded.map_err(|e| e.to_string())?;
    println!("{shape} decode {ms:.4} {}", decoded.total_tasks());
    let ntasks = node.len() as u64;
    let (ms, sum) = time(runs, || {
        (0..ntasks)
            .map(|t| map.node_of(black_box(t)).unwrap_or(u64::MAX))
            .fold(0u64, u64::wrapping_add)
    });
    println!("{shape} nodeid {ms:.4} {sum}");
    let (ms, sum) = time(runs, || {
        (0..nnodes)
            .map(|n| {
                let ids = map.tasks_on(black_box(n));
                let count: u64 = ids.iter().map(|(a, b)| b - a + 1).sum();
                count + ids.first().map_or(0, |r| r.0)
            })
            .fold(0u64, u64::wrapping_add)
    });
    println!("{shape} taskids {ms:.4} {sum}");
    Ok(())
}

fn main() {
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let &[nnodes, ppn, runs] = args.as_slice() else {
        eprintln!("usage: taskmap_peer NODES PPN RUNS (positive integers)");
        std::process::exit(2);
    };
    if nnodes == 0 || ppn == 0 || runs == 0 {
        eprintln!("taskmap_peer: NODES, PPN and RUNS must be positive");
        std::process::exit(2);
    }
    let ntasks = nnodes * ppn;
    let block: Vec<u32> = (0..ntasks).map(|t| t / ppn).collect();
    let cyclic: Vec<u32> = (0..ntasks).map(|t| t % nnodes).collect();
    let uneven: Vec<u32> = (0..nnodes)
        .flat_map(|n| std::iter::repeat_n(n, (1 + n % (2 * ppn - 1)) as usize))
        .collect();
    for (shape, node) in [("block", &block), ("cyclic", &cyclic), ("uneven", &uneven)] {
        if let Err(e) = run(shape, node, u64::from(nnodes), runs as usize) {
            eprintln!("taskmap_peer: {e}");
            std::process::exit(1);
        }
    }
}
