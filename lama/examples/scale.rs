//! Peak-memory probe: `scale NODES` plans one rank per PU on NODES synthetic 128-PU nodes.
//! Run under `/usr/bin/time -v` for several NODES to see memory grow linearly.

use lama::spec::{Expert, Request};
use lama::{plan, NodeTopology};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4096);
    let node = NodeTopology::from_synthetic("pack:2 numa:1 l3:2 core:16 pu:2").expect("synthetic");
    let nodes: Vec<&NodeTopology> = vec![&node; n];
    let e = Expert {
        map: Some("csbnh"),
        bind: Some("1h"),
        mppr: Some("1:h"),
        order: None,
    };
    let r = Request::expert(&e, Some(n * 128), false).expect("valid");
    let p = plan(&nodes, &r).expect("plan");
    println!("{} ranks on {n} nodes", p.len());
}
