//! Task map speed: encoding 1M tasks and querying the node of each.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use lama::taskmap::TaskMap;

fn taskmap(c: &mut Criterion) {
    let (nodes, ppn) = (4096u32, 256u32);
    let block: Vec<u32> = (0..nodes * ppn).map(|t| t / ppn).collect();
    let cyclic: Vec<u32> = (0..nodes * ppn).map(|t| t % nodes).collect();
    assert_eq!(TaskMap::encode(&block).to_string(), "[[0,4096,256,1]]");
    assert_eq!(TaskMap::encode(&cyclic).to_string(), "[[0,4096,1,256]]");
    c.bench_function("encode 1M tasks block", |b| {
        b.iter(|| TaskMap::encode(black_box(&block)))
    });
    c.bench_function("encode 1M tasks cyclic", |b| {
        b.iter(|| TaskMap::encode(black_box(&cyclic)))
    });
    let map = TaskMap::encode(&cyclic);
    c.bench_function("1M node_of queries on the cyclic map", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for t in 0..(nodes * ppn) as u64 {
                acc = acc.wrapping_add(map.node_of(black_box(t)).unwrap_or(0));
            }
            acc
        })
    });
}

criterion_group!(benches, taskmap);
criterion_main!(benches);
