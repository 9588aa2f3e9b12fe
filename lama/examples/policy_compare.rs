//! The automatic policy beside what users pick instead, on every real machine of
//! `tests/topologies/`, counted in what matters for a node's tasks:
//! tasks whose CPUs span NUMA domains although their cores would fit in one (a task bigger than
//! a domain must span), tasks whose GPU sits on another package than their CPUs, cores shared
//! by two tasks, and cores no task uses.
//!
//! - **auto**: `--lama-policy=auto` with every GPU of the node (as `lama plan --policy auto`).
//! - **Slurm**: what `srun -n K -c C --cpu-bind=cores` binds under task/affinity with Slurm's
//!   default distribution (`block:cyclic`): tasks go round robin over the sockets, each taking
//!   the next C whole cores of its socket, C being the node's cores over K (what a careful user
//!   asks for). Slurm gives every task all the step's GPUs; the application then picks the
//!   usual `local_rank % GPUs`.
//! - **hand**: the map a user writes by hand, `--lama-map=csbnh --lama-bind=Cc --lama-gpus=1`
//!   (C as above; each task's nearest GPU). LAMA refuses to bind C cores that do not lie
//!   in one object of the level above (a socket, a NUMA domain): the table says "refused", and
//!   the user would have to write another map.
//!
//! Usage: `cargo run --release -p lama --example policy_compare` prints the Markdown table of
//! BENCHMARKS.md.

use std::path::PathBuf;

use lama::level::Level;
use lama::locality::{choose, Kind, Locality};
use lama::policy::{auto, domains, gpus_of};
use lama::spec::{Expert, Request};
use lama::{plan, NodeTopology};

/// One placement: each task's CPUs and its (first) GPU.
type Placed = Vec<(Vec<u32>, Option<usize>)>;

/// The four counts of a placement.
fn counts(node: &NodeTopology, loc: &Locality, placed: &Placed) -> [usize; 4] {
    let spans = |level: Level| -> Vec<Vec<u32>> {
        let l = if node.has(level) { level } else { Level::Node };
        node.objects(l).iter().map(|&s| node.span_cpus(s)).collect()
    };
    let numa = spans(Level::Numa);
    let sockets = spans(Level::Socket);
    let of = |sets: &[Vec<u32>], c: u32| sets.iter().position(|s| s.contains(&c));
    let cores: Vec<Vec<u32>> = domains(node).into_iter().flatten().collect();
    let widest = domains(node).iter().map(Vec::len).max().unwrap_or(1);
    let mut span = 0;
    let mut far = 0;
    for (cpus, gpu) in placed {
        let mut d: Vec<Option<usize>> = cpus.iter().map(|&c| of(&numa, c)).collect();
        d.sort_unstable();
        d.dedup();
        let own = cores
            .iter()
            .filter(|k| k.iter().any(|c| cpus.contains(c)))
            .count();
        span += usize::from(d.len() > 1 && own <= widest);
        if let Some(g) = gpu {
            let near = loc
                .devices()
                .get(*g)
                .and_then(|d| loc.place(d.place))
                .map(|p| p.cpus.to_vec())
                .unwrap_or_default();
            let gpu_socket: Vec<Option<usize>> = near.iter().map(|&c| of(&sockets, c)).collect();
            if !cpus.iter().any(|&c| gpu_socket.contains(&of(&sockets, c))) {
                far += 1;
            }
        }
    }
    let users = |core: &Vec<u32>| {
        placed
            .iter()
            .filter(|(cpus, _)| cpus.iter().any(|c| core.contains(c)))
            .count()
    };
    let shared = cores.iter().filter(|c| users(c) > 1).count();
    let idle = cores.iter().filter(|c| users(c) == 0).count();
    [span, far, shared, idle]
}

/// Slurm's `block:cyclic` with `-c C --cpu-bind=cores`.
fn slurm(node: &NodeTopology, gpus: &[usize], k: usize) -> Option<Placed> {
    let level = if node.has(Level::Socket) {
        Level::Socket
    } else {
        Level::Node
    };
    let core_level = if node.has(Level::Core) {
        Level::Core
    } else {
        Level::Hwthread
    };
    let sockets: Vec<Vec<Vec<u32>>> = node
        .objects(level)
        .iter()
        .map(|s| {
            node.objects(core_level)
                .iter()
                .filter(|c| s.contains(c))
                .map(|&c| node.span_cpus(c))
                .collect()
        })
        .collect();
    let total: usize = sockets.iter().map(Vec::len).sum();
    let c = (total / k).max(1);
    let mut next = vec![0usize; sockets.len()];
    let mut out = Vec::new();
    let mut s = 0;
    for t in 0..k {
        // From the next socket round robin, on one socket if it has C cores left, else
        // spilling over to the following sockets (as task/affinity does when it must).
        let start = (0..sockets.len())
            .map(|i| (s + i) % sockets.len())
            .find(|&x| next[x] + c <= sockets[x].len())
            .unwrap_or(s);
        let mut cpus = Vec::new();
        let mut need = c;
        for i in 0..sockets.len() {
            let x = (start + i) % sockets.len();
            while need > 0 && next[x] < sockets[x].len() {
                cpus.extend_from_slice(&sockets[x][next[x]]);
                next[x] += 1;
                need -= 1;
            }
        }
        if need > 0 {
            return None;
        }
        s = (start + 1) % sockets.len();
        let gpu = (!gpus.is_empty()).then(|| gpus[t % gpus.len()]);
        out.push((cpus, gpu));
    }
    Some(out)
}

/// The hand map: `--lama-map=csbnh --lama-bind=Cc --lama-gpus=1`.
fn hand(node: &NodeTopology, loc: &Locality, gpus: bool, k: usize) -> Option<Placed> {
    let cores = domains(node).iter().map(Vec::len).sum::<usize>();
    let bind = format!("{}c", (cores / k).max(1));
    let req = Request::expert(
        &Expert {
            map: Some("csbnh"),
            bind: Some(&bind),
            mppr: None,
            order: None,
        },
        Some(k),
        false,
    )
    .ok()?;
    let p = plan(&[node], &req).ok()?;
    let cpus: Vec<Vec<u32>> = (0..k).map(|r| p.cpus(r, &[node])).collect();
    let picks = choose(loc, &cpus, 0, usize::from(gpus), None, None).ok()?;
    Some(
        cpus.into_iter()
            .zip(picks)
            .map(|(c, d)| (c, d.gpus.first().copied()))
            .collect(),
    )
}

fn show(c: Option<[usize; 4]>) -> String {
    match c {
        Some([a, b, s, i]) => format!("{a} / {b} / {s} / {i}"),
        None => "refused".into(),
    }
}

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/topologies");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "xml"));
    files.sort();
    println!("| machine | tasks | auto | Slurm `--cpu-bind=cores` | hand map |");
    println!("|---|---|---|---|---|");
    let mut totals = [[0usize; 4]; 3];
    for f in files {
        let Ok((node, loc)) = NodeTopology::from_xml_file_with_devices(&f, true) else {
            eprintln!("cannot read {}", f.display());
            continue;
        };
        let name = f
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let policy_gpus = gpus_of(&loc, None);
        let gpus = loc.candidates(Kind::Gpu, None);
        let cores = domains(&node).iter().map(Vec::len).sum::<usize>();
        for k in [2, 3, 4, 8] {
            if k > cores {
                continue;
            }
            let a = auto(&node, &policy_gpus, k, 1, false).ok().map(|t| {
                let p: Placed = t
                    .into_iter()
                    .map(|t| (t.cpus, t.gpus.first().copied()))
                    .collect();
                counts(&node, &loc, &p)
            });
            let s = slurm(&node, &gpus, k).map(|p| counts(&node, &loc, &p));
            let h = hand(&node, &loc, !gpus.is_empty(), k).map(|p| counts(&node, &loc, &p));
            for (i, c) in [a, s, h].iter().enumerate() {
                for (j, v) in c.unwrap_or_default().iter().enumerate() {
                    totals[i][j] += v;
                }
            }
            println!("| {name} | {k} | {} | {} | {} |", show(a), show(s), show(h));
        }
    }
    println!(
        "| **all** | | **{}** | **{}** | **{}** |",
        show(Some(totals[0])),
        show(Some(totals[1])),
        show(Some(totals[2]))
    );
}
