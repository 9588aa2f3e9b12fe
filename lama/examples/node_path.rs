//! The plugin's per-node work on the 384-PU SGI UV, once per call, for instruction counting:
//! `valgrind --tool=callgrind target/release/examples/node_path [nics|plain] [ROUNDS]`. Counts
//! do not drift with the machine's speed as times do (see BENCHMARKS.md).

use std::path::{Path, PathBuf};

use lama::cache;
use lama::locality::Locality;
use lama::slurm_step::{choose_devices, cores_to_cpus, place_node, NodeDevices, TaskBinding};
use lama::spec::{Expert, Request};
use lama::NodeTopology;

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "nics".into());
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let xml = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/topologies/192em64t-12gr2n8c2t.xml");
    let (topo, loc) = NodeTopology::from_xml_file_with_devices(&xml, true).expect("UV topology");
    let topo = topo.with_name("n1");
    let dir = std::env::temp_dir().join(format!("lama-node-path-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("topology-n1.json");
    cache::write(&file, &topo, &loc).expect("cache");
    let all = topo.cpus();
    let e = Expert {
        map: Some("csbnh"),
        bind: Some("1c"),
        mppr: None,
        order: None,
    };
    let req = Request::expert(&e, Some(192), false).expect("request");
    let ranks: Vec<u32> = (0..192).collect();
    let nics = what == "nics";
    let mut sum = 0usize;
    for _ in 0..rounds {
        sum += round(&file, &all, &req, &ranks, nics);
    }
    if std::env::var_os("NODE_PATH_KEEP").is_some() {
        eprintln!("{}", file.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!("{sum}");
}

// Each phase out of line, so that a profile shows what each costs.
#[inline(never)]
fn round(file: &Path, all: &[u32], req: &Request, ranks: &[u32], nics: bool) -> usize {
    let n = read(file, nics);
    let tasks = place(&n, all, req, ranks);
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
    cache::read(file, nics).expect("read")
}

#[inline(never)]
fn place(n: &cache::Node, all: &[u32], req: &Request, ranks: &[u32]) -> Vec<TaskBinding> {
    cache::check_fresh(&n.topology, "n1", all).expect("fresh");
    let cpus = cores_to_cpus(&n.topology, "0-191", None).expect("cores");
    place_node(&n.topology, &cpus, req, ranks, false).expect("place")
}

#[inline(never)]
fn choose(loc: &Locality, tasks: &[TaskBinding]) -> NodeDevices {
    choose_devices(loc, tasks, (1, 0), None, |_| None).expect("nics")
}

#[inline(never)]
fn env(chosen: &NodeDevices, loc: &Locality, i: usize) -> usize {
    chosen.env(loc, i).len()
}
