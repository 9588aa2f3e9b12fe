//! The SPANK plugin's own work per node per step, without Slurm: on the largest I/O-bearing
//! machine here (SGI UV, 384 PUs, 24 NUMA nodes, NICs), reading slurmd's topology cache (with
//! and without its devices, or with its NUMA nodes alone), computing TASK_MAP from Slurm's
//! variables, and the whole per-node path as `user_init` runs it for `--lama-map=csbnh
//! --lama-bind=1c` with a task per core.

#[path = "common/uv.rs"]
mod uv;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use lama::cache;
use lama::slurm::StepEnv;
use uv::Uv;

fn node(c: &mut Criterion) {
    let uv = Uv::new("bench-node");
    let file = &uv.file;

    c.bench_function("UV cache read, topology only", |b| {
        b.iter(|| cache::read(black_box(file), false, cache::Writer::Root).expect("read"))
    });
    c.bench_function("UV cache read, with NUMA nodes (--lama-mem=local)", |b| {
        b.iter(|| {
            cache::read(black_box(file), cache::Detail::Numa, cache::Writer::Root).expect("read")
        })
    });
    c.bench_function("UV cache read, with devices", |b| {
        b.iter(|| cache::read(black_box(file), true, cache::Writer::Root).expect("read"))
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

    c.bench_function(
        "UV per node: cache, step CPUs, place 192 tasks csbnh 1c",
        |b| {
            b.iter(|| {
                let n = cache::read(black_box(file), false, cache::Writer::Root).expect("read");
                uv.place(&n)
            })
        },
    );
    // With a NIC per task: what `user_init` does when the step asks for `--lama-nics=1` (each
    // task then writes its own variables in `task_init`, in its own process); then the same
    // with every task's variables, and the choice alone, which a GPU step's every `task_init`
    // makes again with the GPUs Slurm wrote into that task's environment.
    let user_init = || {
        let n = cache::read(black_box(file), true, cache::Writer::Root).expect("read");
        let tasks = uv.place(&n);
        let loc = n.locality.expect("devices");
        let chosen = Uv::choose(&loc, &tasks);
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
    let n = cache::read(file, true, cache::Writer::Root).expect("read");
    let tasks = uv.place(&n);
    let loc = n.locality.expect("devices");
    c.bench_function("UV choosing a NIC for each of 192 placed tasks", |b| {
        b.iter(|| Uv::choose(&loc, black_box(&tasks)))
    });
    let chosen = Uv::choose(&loc, &tasks);
    c.bench_function("UV one task's device variables (its task_init)", |b| {
        b.iter(|| chosen.env(&loc, black_box(100)))
    });
}

criterion_group!(benches, node);
criterion_main!(benches);
