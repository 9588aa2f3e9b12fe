//! The automatic policy's time per node, as a step pays it: `place_auto` on a whole node of
//! each large machine (the DGX-2, the POWER8 with GPUs, the 2x Epyc 9654), its topology and
//! devices read back from the node cache's text as slurmstepd reads them, with the GPUs the
//! step was given. Without `--lama-verbose` (what every step runs) and with it (the verbose
//! summary tries several maps to name the equivalent one; off the launch path otherwise).
//!
//! `cargo run --release -p lama --example policy_time`

use std::path::PathBuf;
use std::time::{Duration, Instant};

use lama::cache::{decode, encode};
use lama::plugin::place_auto;
use lama::policy::gpus_of;
use lama::NodeTopology;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/topologies"));
    println!("| machine | PUs | GPUs | tasks | first call | median of 200 | with --lama-verbose (median) |");
    println!("|---|---|---|---|---|---|---|");
    for name in [
        "nvidiaDGX2.xml",
        "power8gpudistances.xml",
        "AMD-19h-Zen4-2xEpyc-9654.cpuid.xml",
    ] {
        let (t, l) = NodeTopology::from_xml_file_with_devices(&dir.join(name), true)
            .expect("a topology of tests/topologies");
        let text = encode(&t, Some(&l), None, None).expect("encodes");
        let node = decode(&text, name, true).expect("decodes");
        let (topo, loc) = (node.topology, node.locality.expect("devices"));
        let cpus = topo.cpus();
        let gpus = gpus_of(&loc, None);
        // A task per GPU or per NUMA domain, at least 8, at most one per PU.
        let tasks = gpus.len().max(loc.numa().len()).max(8).min(cpus.len());
        let ranks: Vec<u32> = (0..tasks as u32).collect();
        let run = |verbose: bool| {
            let t0 = Instant::now();
            let placed = place_auto(&topo, &cpus, &gpus, &ranks, (1, false), verbose, verbose)
                .expect("places");
            std::hint::black_box(placed);
            t0.elapsed()
        };
        let first = run(false);
        let quiet = median((0..200).map(|_| run(false)).collect());
        let verbose = median((0..200).map(|_| run(true)).collect());
        println!(
            "| {} | {} | {} | {} | {:.3} ms | {:.3} ms | {:.3} ms |",
            name.trim_end_matches(".xml"),
            cpus.len(),
            gpus.len(),
            tasks,
            first.as_secs_f64() * 1e3,
            quiet.as_secs_f64() * 1e3,
            verbose.as_secs_f64() * 1e3
        );
    }
}
