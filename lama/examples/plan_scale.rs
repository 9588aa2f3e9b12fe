//! What a whole-job plan costs: time and peak heap memory of `lama::plan` for NODES identical
//! nodes of a synthetic shape, one rank per PU, measured with a counting allocator (the
//! topology is built before counting starts, so the figures are the plan's own).
//!
//! Usage: `cargo run --release --example plan_scale -- [NODES] [SYNTHETIC] [MAP] [BIND] [RUNS]`
//! (defaults: 16384, `pack:2 l3:4 core:16 pu:2` (256 PUs), `csbnh`, `1h`, 5). Prints the median
//! time, the peak memory over the runs and the peak per rank.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use lama::spec::{Expert, Request};
use lama::{plan, NodeTopology};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `layout` is the system allocator's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // A moving realloc holds both blocks for a moment; count the larger total.
            let now = LIVE.fetch_add(new_size, Ordering::Relaxed) + new_size;
            PEAK.fetch_max(now, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.into());
    let nodes: usize = arg(0, "16384").parse().unwrap_or(0);
    let shape = arg(1, "pack:2 l3:4 core:16 pu:2");
    let (map, bind) = (arg(2, "csbnh"), arg(3, "1h"));
    let runs: usize = arg(4, "5").parse().unwrap_or(0);
    if nodes == 0 || runs == 0 {
        eprintln!("plan_scale: NODES and RUNS must be positive integers");
        std::process::exit(2);
    }
    let node = match NodeTopology::from_synthetic(&shape) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("plan_scale: {e}");
            std::process::exit(2);
        }
    };
    let np = nodes * node.num_pus();
    let e = Expert {
        map: Some(&map),
        bind: Some(&bind),
        mppr: None,
        order: None,
    };
    let req = match Request::expert(&e, Some(np), false) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("plan_scale: {e}");
            std::process::exit(2);
        }
    };
    let all: Vec<&NodeTopology> = vec![&node; nodes];
    let mut ms = Vec::with_capacity(runs);
    let mut peak = 0;
    for _ in 0..runs {
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let t0 = Instant::now();
        let p = match plan(&all, &req) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("plan_scale: {e}");
                std::process::exit(1);
            }
        };
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
        peak = peak.max(PEAK.load(Ordering::Relaxed) - base);
        assert_eq!(p.len(), np);
        drop(p);
    }
    ms.sort_by(f64::total_cmp);
    println!(
        "{nodes} nodes x {} PUs ({shape}), {np} ranks, map {map}, bind {bind}: median {:.1} ms over {runs} runs; peak heap {:.1} MiB, {:.1} bytes per rank",
        node.num_pus(),
        ms[runs / 2],
        peak as f64 / (1 << 20) as f64,
        peak as f64 / np as f64
    );
}
