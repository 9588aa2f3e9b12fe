//! Whole placement on structured input: a node shape (packages, L3s, cores, threads, with some
//! CPUs taken away), a few nodes, and a request from the expert strings. Checked as the property
//! tests do: exactly np ranks, each on a node of the job, bound to allowed CPUs, MPPR respected.
#![no_main]
use lama::spec::{Expert, Request};
use lama::topology::Span;
use lama::{plan, Level, NodeTopology, PlacementError};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input<'a> {
    packages: u8,
    l3: u8,
    cores: u8,
    threads: u8,
    nodes: u8,
    removed: u64,
    np: Option<u16>,
    oversubscribe: bool,
    map: &'a str,
    bind: Option<&'a str>,
    mppr: Option<&'a str>,
    order: Option<&'a str>,
}

/// A node of `p` packages x `l` L3s x `c` cores x `t` threads, PUs numbered in order.
fn node(p: u32, l: u32, c: u32, t: u32) -> NodeTopology {
    let n = p * l * c * t;
    let spans = |size: u32| -> Vec<Span> {
        (0..n / size)
            .map(|i| Span {
                start: i * size,
                end: (i + 1) * size,
            })
            .collect()
    };
    let mut levels: [Vec<Span>; 9] = Default::default();
    levels[Level::Socket.index()] = spans(l * c * t);
    levels[Level::Numa.index()] = spans(l * c * t);
    levels[Level::L3.index()] = spans(c * t);
    levels[Level::L2.index()] = spans(t);
    levels[Level::L1.index()] = spans(t);
    levels[Level::Core.index()] = spans(t);
    NodeTopology::from_parts("fuzz", (0..n).collect(), levels)
}

fuzz_target!(|i: Input| {
    let dim = |x: u8, max: u8| u32::from(x % max) + 1;
    // Up to 48 hardware threads and 3 nodes: shapes matter more than sizes, and small ones keep
    // the search fast.
    let whole = node(
        dim(i.packages, 3),
        dim(i.l3, 2),
        dim(i.cores, 4),
        dim(i.threads, 2),
    );
    let keep: Vec<u32> = whole
        .cpus()
        .into_iter()
        .filter(|&c| c == 0 || i.removed >> (c % 64) & 1 == 0)
        .collect();
    let model = whole.restrict(&keep).expect("CPU 0 is kept");
    let nodes: Vec<&NodeTopology> = (0..dim(i.nodes, 3)).map(|_| &model).collect();
    let opts = Expert {
        map: Some(i.map),
        bind: i.bind,
        mppr: i.mppr,
        order: i.order,
    };
    let np = i.np.map(|n| usize::from(n % 256) + 1);
    let Ok(req) = Request::expert(&opts, np, i.oversubscribe) else {
        return;
    };
    let p = match plan(&nodes, &req) {
        Ok(p) => p,
        Err(e @ (PlacementError::NoResources { .. } | PlacementError::Oversubscribed { .. })) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    if let Some(np) = np {
        assert_eq!(p.len(), np);
    }
    assert!(!p.is_empty());
    let mut per_object = std::collections::HashMap::new();
    for (r, x) in p.placements().iter().enumerate() {
        assert!((x.node as usize) < nodes.len());
        let cpus = p.cpus(r, &nodes);
        assert!(!cpus.is_empty() && cpus.iter().all(|c| keep.binary_search(c).is_ok()));
        if i.oversubscribe {
            continue;
        }
        for lim in &req.mppr {
            for (k, o) in model.objects(lim.level).iter().enumerate() {
                if o.start < x.span.end && x.span.start < o.end {
                    let c = per_object.entry((x.node, lim.level, k)).or_insert(0u32);
                    *c += 1;
                    assert!(*c <= lim.count, "MPPR {lim} exceeded");
                }
            }
        }
    }
});
