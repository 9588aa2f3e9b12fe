//! The SPANK plugin's own work per node per step, without Slurm: on the largest I/O-bearing
//! machine here (SGI UV, 384 PUs, 24 NUMA nodes, NICs), reading slurmd's topology cache (with
//! and without its devices), computing TASK_MAP from Slurm's variables, and the whole per-node
//! path as `user_init` runs it for `--lama-map=csbnh --lama-bind=1c` with a task per core.

use std::path::PathBuf;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use lama::cache;
use lama::slurm_layout::StepEnv;
use lama::slurm_step::{choose_devices, cores_to_cpus, place_node};
use lama::spec::{Expert, Request};
use lama::NodeTopology;

fn node(c: &mut Criterion) {
    let xml = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/topologies/192em64t-12gr2n8c2t.xml");
    let (topo, loc) = NodeTopology::from_xml_file_with_devices(&xml, true).expect("UV topology");
    let topo = topo.with_name("n1");
    let dir = std::env::temp_dir().join(format!("lama-bench-node-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("topology-n1.json");
    cache::write(&file, &topo, &loc).expect("cache");
    let all = topo.cpus();

    c.bench_function("UV cache read, topology only", |b| {
        b.iter(|| cache::read(black_box(&file), false).expect("read"))
    });
    c.bench_function("UV cache read, with devices", |b| {
        b.iter(|| cache::read(black_box(&file), true).expect("read"))
    });

    let vars = [
        ("SLURM_STEP_TASKS_PER_NODE", "192(x3)"),
        ("SLURM_STEP_NODELIST", "n[1-3]"),
        ("SLURM_DISTRIBUTION", "block"),
    ];
    let get = |k: &str| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    };
    c.bench_function(
        "TASK_MAP of 3 nodes x 192 tasks from Slurm's variables",
        |b| {
            b.iter(|| {
                StepEnv::from_lookup(get)
                    .taskmap(|_| Err("no host file".into()))
                    .expect("map")
            })
        },
    );

    let e = Expert {
        map: Some("csbnh"),
        bind: Some("1c"),
        mppr: None,
        order: None,
    };
    let req = Request::expert(&e, Some(192), false).expect("request");
    let ranks: Vec<u32> = (0..192).collect();
    c.bench_function(
        "UV per node: cache, step CPUs, place 192 tasks csbnh 1c",
        |b| {
            b.iter(|| {
                let n = cache::read(black_box(&file), false).expect("read");
                cache::check_fresh(&n.topology, "n1", &all).expect("fresh");
                let cpus = cores_to_cpus(&n.topology, "0-191", None).expect("cores");
                place_node(&n.topology, &cpus, &req, &ranks, false).expect("place")
            })
        },
    );
    // With a NIC per task: what `user_init` does when the step asks for `--lama-nics=1` (each
    // task then writes its own variables in `task_init`, in its own process); then the same
    // with every task's variables, and the choice alone, which a GPU step's every `task_init`
    // makes again with the GPUs Slurm wrote into that task's environment.
    let user_init = || {
        let n = cache::read(black_box(&file), true).expect("read");
        cache::check_fresh(&n.topology, "n1", &all).expect("fresh");
        let cpus = cores_to_cpus(&n.topology, "0-191", None).expect("cores");
        let tasks = place_node(&n.topology, &cpus, &req, &ranks, false).expect("place");
        let loc = n.locality.expect("devices");
        let chosen = choose_devices(&loc, &tasks, (1, 0), None, |_| None).expect("nics");
        (loc, tasks, chosen)
    };
    c.bench_function(
        "UV user_init with NICs: cache and devices, place 192 tasks, a NIC each",
        |b| b.iter(user_init),
    );
    c.bench_function(
        "UV per node with NICs: cache and devices, place 192 tasks, a NIC each",
        |b| {
            b.iter(|| {
                let (loc, tasks, chosen) = user_init();
                (0..tasks.len())
                    .map(|i| chosen.env(&loc, i))
                    .collect::<Vec<_>>()
            })
        },
    );
    let n = cache::read(&file, true).expect("read");
    let cpus = cores_to_cpus(&n.topology, "0-191", None).expect("cores");
    let tasks = place_node(&n.topology, &cpus, &req, &ranks, false).expect("place");
    let loc = n.locality.expect("devices");
    c.bench_function("UV choosing a NIC for each of 192 placed tasks", |b| {
        b.iter(|| choose_devices(&loc, black_box(&tasks), (1, 0), None, |_| None).expect("nics"))
    });
    let chosen = choose_devices(&loc, &tasks, (1, 0), None, |_| None).expect("nics");
    c.bench_function("UV one task's device variables (its task_init)", |b| {
        b.iter(|| chosen.env(&loc, black_box(100)))
    });
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, node);
criterion_main!(benches);
