//! Device choice on the largest I/O-bearing machine here (SGI UV, 384 PUs, 24 NUMA nodes) and on
//! the DGX-2 (16 GPUs): loading the XML with its devices, and choosing for every task.

use std::path::PathBuf;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use lama::locality::{choose, Locality};

fn path(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}/../tests/topologies/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

/// A task on each CPU of the machine (its first place).
fn one_task_per_cpu(loc: &Locality) -> Vec<Vec<u32>> {
    let all = loc.place(0).map(|p| p.cpus).unwrap_or_default();
    all.iter().map(|&c| vec![c]).collect()
}

fn locality(c: &mut Criterion) {
    let uv = path("192em64t-12gr2n8c2t.xml");
    c.bench_function("load UV XML with devices", |b| {
        b.iter(|| Locality::from_xml_file(black_box(&uv)).expect("load"))
    });
    let loc = Locality::from_xml_file(&uv).expect("load");
    let tasks = one_task_per_cpu(&loc);
    c.bench_function("UV 384 tasks, 1 NIC each", |b| {
        b.iter(|| choose(&loc, black_box(&tasks), 1, 0, None, None).expect("choose"))
    });
    let dgx = Locality::from_xml_file(&path("nvidiaDGX2.xml")).expect("load");
    let tasks = one_task_per_cpu(&dgx);
    c.bench_function("DGX-2 4 tasks, 4 GPUs each", |b| {
        b.iter(|| choose(&dgx, black_box(&tasks), 0, 4, None, None).expect("choose"))
    });
}

criterion_group!(benches, locality);
criterion_main!(benches);
