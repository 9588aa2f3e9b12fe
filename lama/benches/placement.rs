//! Placement speed: one big real node, and large homogeneous jobs up to 4M ranks.

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion};
use lama::spec::{Expert, Request};
use lama::{plan, NodeTopology};

fn req(map: &str, bind: &str, mppr: Option<&str>, np: usize) -> Request {
    let e = Expert {
        map: Some(map),
        bind: Some(bind),
        mppr,
        order: None,
    };
    Request::expert(&e, Some(np), false).expect("valid request")
}

fn placement(c: &mut Criterion) {
    let zen4 = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/topologies/AMD-19h-Zen4-2xEpyc-9654.cpuid.xml");
    let zen4 = NodeTopology::from_xml_file(&zen4).expect("zen4 topology");
    let r = req("csbnh", "1h", None, 384);
    c.bench_function("zen4 1 node 384 ranks csbnh 1h", |b| {
        b.iter(|| plan(&[&zen4], &r).expect("plan"))
    });
    let r = req("cL1L2L3sNbnh", "1c", Some("1:c"), 192);
    c.bench_function("zen4 1 node 192 ranks default map 1c 1:c", |b| {
        b.iter(|| plan(&[&zen4], &r).expect("plan"))
    });

    let node = NodeTopology::from_synthetic("pack:2 numa:1 l3:2 core:16 pu:2").expect("synthetic");
    let nodes: Vec<&NodeTopology> = vec![&node; 4096];
    let mut g = c.benchmark_group("4096 nodes x 128 PUs");
    g.sample_size(10);
    let r = req("csbnh", "1h", None, 524_288);
    g.bench_function("524288 ranks csbnh 1h", |b| {
        b.iter(|| plan(&nodes, &r).expect("plan"))
    });
    let r = req("nsbch", "1h", None, 524_288);
    g.bench_function("524288 ranks nsbch 1h", |b| {
        b.iter(|| plan(&nodes, &r).expect("plan"))
    });
    g.finish();

    // The whole-job goal: 16,384 nodes of 256 PUs, a rank per PU (4M ranks). Memory per rank is
    // measured by examples/plan_scale.rs.
    let node = NodeTopology::from_synthetic("pack:2 l3:4 core:16 pu:2").expect("synthetic");
    let nodes: Vec<&NodeTopology> = vec![&node; 16_384];
    let mut g = c.benchmark_group("16384 nodes x 256 PUs");
    g.sample_size(10);
    let r = req("csbnh", "1h", None, 16_384 * 256);
    g.bench_function("4194304 ranks csbnh 1h", |b| {
        b.iter(|| plan(&nodes, &r).expect("plan"))
    });
    g.finish();
}

criterion_group!(benches, placement);
criterion_main!(benches);
