//! The plugin's per-node work on the 384-PU SGI UV, once per round, for instruction counting:
//! `valgrind --tool=callgrind target/release/examples/node_path [nics|plain] [ROUNDS]`. Counts
//! do not drift with the machine's speed as times do (see BENCHMARKS.md).

#[path = "../benches/common/uv.rs"]
mod uv;

use std::path::Path;

use lama::cache;
use lama::locality::Locality;
use lama::plugin::{NodeDevices, TaskBinding};
use uv::Uv;

fn main() {
    let mut args = std::env::args().skip(1);
    let nics = args.next().is_none_or(|a| a == "nics");
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let uv = Uv::new("node-path");
    let sum: usize = (0..rounds).map(|_| round(&uv, nics)).sum();
    println!("{sum}");
}

// Each phase out of line, so that a profile shows what each costs.
#[inline(never)]
fn round(uv: &Uv, nics: bool) -> usize {
    let n = read(&uv.file, nics);
    let tasks = place(uv, &n);
    let mut sum = tasks.len();
    if let Some(loc) = &n.locality {
        let chosen = choose(loc, &tasks);
        sum += (0..tasks.len())
            .map(|i| env(&chosen, loc, i))
            .sum::<usize>();
    }
    sum
}

#[inline(never)]
fn read(file: &Path, nics: bool) -> cache::Node {
    cache::read(file, nics, cache::Writer::Root).expect("read")
}

#[inline(never)]
fn place(uv: &Uv, n: &cache::Node) -> Vec<TaskBinding> {
    uv.place(n)
}

#[inline(never)]
fn choose(loc: &Locality, tasks: &[TaskBinding]) -> NodeDevices {
    Uv::choose(loc, tasks)
}

#[inline(never)]
fn env(chosen: &NodeDevices, loc: &Locality, i: usize) -> usize {
    chosen.env(loc, i).len()
}
