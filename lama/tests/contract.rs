//! The contract's worked examples and the seed's example, on real hwloc synthetic topologies.
//! Expected values are copied from `lama-semantics.md`, not from this code's output.

use lama::spec::{Expert, Request, Simple};
use lama::{plan, NodeTopology, PlacementError};

fn node() -> NodeTopology {
    NodeTopology::from_synthetic("pack:2 core:4 pu:2").expect("synthetic topology")
}

/// Renders a plan as the contract writes it: `rank@node:PUs`.
fn render(nodes: &[&NodeTopology], req: &Request) -> Result<String, PlacementError> {
    let p = plan(nodes, req)?;
    Ok((0..p.len())
        .map(|r| {
            let cpus = lama::idset::format_list(&p.cpus(r, nodes));
            format!("{r}@{}:{cpus}", p.placements()[r].node)
        })
        .collect::<Vec<_>>()
        .join(" "))
}

fn expert(map: &str, bind: &str, mppr: Option<&str>, order: &str, np: usize) -> Request {
    let e = Expert {
        map: Some(map),
        bind: Some(bind),
        mppr,
        order: Some(order),
    };
    Request::expert(&e, Some(np), false).expect("valid request")
}

#[test]
fn worked_examples_two_nodes() {
    let n = node();
    let nodes = [&n, &n];
    let cases = [
        (
            "csbnh",
            "1c",
            None,
            8,
            "0@0:0-1 1@0:2-3 2@0:4-5 3@0:6-7 4@0:8-9 5@0:10-11 6@0:12-13 7@0:14-15",
        ),
        (
            "sbnch",
            "1c",
            None,
            8,
            "0@0:0-1 1@0:8-9 2@1:0-1 3@1:8-9 4@0:2-3 5@0:10-11 6@1:2-3 7@1:10-11",
        ),
        (
            "nsbch",
            "1c",
            None,
            8,
            "0@0:0-1 1@1:0-1 2@0:8-9 3@1:8-9 4@0:2-3 5@1:2-3 6@0:10-11 7@1:10-11",
        ),
        ("csbnh", "2c", None, 4, "0@0:0-3 1@0:4-7 2@0:8-11 3@0:12-15"),
        (
            "csbnh",
            "1c",
            Some("2:s"),
            8,
            "0@0:0-1 1@0:2-3 2@0:8-9 3@0:10-11 4@1:0-1 5@1:2-3 6@1:8-9 7@1:10-11",
        ),
    ];
    for (map, bind, mppr, np, want) in cases {
        let got = render(&nodes, &expert(map, bind, mppr, "n", np)).expect("placement");
        assert_eq!(got, want, "map {map} bind {bind} mppr {mppr:?}");
    }
}

#[test]
fn worked_example_oversubscribed() {
    let n = node();
    let err = render(&[&n, &n], &expert("csbnh", "1c", None, "n", 33)).unwrap_err();
    match err {
        PlacementError::Oversubscribed {
            placed, requested, ..
        } => {
            assert_eq!((placed, requested), (32, 33));
        }
        other => panic!("expected oversubscribed, got {other}"),
    }
    assert!(err_text(&n).contains("oversubscribed after placing 32 of 33"));
}

fn err_text(n: &NodeTopology) -> String {
    render(&[n, n], &expert("csbnh", "1c", None, "n", 33))
        .unwrap_err()
        .to_string()
}

/// Ranks of `--map-by socket --bind-to core --np 8` on two 4-core sockets, per socket, with the
/// given `--rank-by`.
fn socket_ranks(rank_by: Option<&str>) -> (Vec<usize>, Vec<usize>) {
    let n = NodeTopology::from_synthetic("pack:2 core:4 pu:1").expect("synthetic");
    let simple = Simple {
        map_by: Some("socket"),
        bind_to: Some("core"),
        rank_by,
    };
    let req = Request::simple(&simple, Some(8), false).expect("valid");
    let p = plan(&[&n], &req).expect("placement");
    let rank_on_cpu = |cpu: u32| {
        (0..8)
            .find(|&r| p.cpus(r, &[&n]) == vec![cpu])
            .expect("bound")
    };
    (
        (0..4).map(rank_on_cpu).collect(),
        (4..8).map(rank_on_cpu).collect(),
    )
}

#[test]
fn seed_example_map_by_socket_bind_to_core() {
    // The seed's picture (ranks alternate sockets) is Open MPI 5's --rank-by span; its default
    // ranking for a mapping by object is fill: every rank of socket 0, then socket 1.
    assert_eq!(
        socket_ranks(Some("span")),
        (vec![0, 2, 4, 6], vec![1, 3, 5, 7])
    );
    assert_eq!(socket_ranks(None), (vec![0, 1, 2, 3], vec![4, 5, 6, 7]));
}

#[test]
fn heterogeneous_nodes_skip_missing_coordinates() {
    let big = node();
    let small = NodeTopology::from_synthetic("pack:1 core:2 pu:2").expect("synthetic");
    let nodes = [&big, &small];
    // Worked by hand: socket 1 and cores 2-3 do not exist on node 1.
    let want =
        "0@0:0-1 1@0:8-9 2@1:0-1 3@0:2-3 4@0:10-11 5@1:2-3 6@0:4-5 7@0:12-13 8@0:6-7 9@0:14-15";
    assert_eq!(
        render(&nodes, &expert("sbnch", "1c", Some("1:c"), "n", 10)).expect("plan"),
        want
    );
    let err = render(&nodes, &expert("sbnch", "1c", Some("1:c"), "n", 11)).unwrap_err();
    assert!(err.to_string().contains("placing 10 of 11"), "{err}");
    assert!(err.to_string().contains("'1:c'"), "{err}");
}

#[test]
fn sequential_order_follows_hardware_within_each_node() {
    let n = node();
    let nodes = [&n, &n];
    // sbnch natural gives 0@0:0-1 1@0:8-9 2@1:0-1 ...; sequential renumbers node by node, by PU.
    let want = "0@0:0-1 1@0:2-3 2@0:8-9 3@0:10-11 4@1:0-1 5@1:2-3 6@1:8-9 7@1:10-11";
    assert_eq!(
        render(&nodes, &expert("sbnch", "1c", None, "s", 8)).expect("plan"),
        want
    );
}

#[test]
fn windows_never_overlap_and_never_cross_sockets() {
    // The original gave 0-5, 6-11, 8-13 for 3c on 2x4 cores; windows stay inside a socket here.
    let n = NodeTopology::from_synthetic("pack:2 core:4 pu:1").expect("synthetic");
    let want = "0@0:0-2 1@0:4-6";
    assert_eq!(
        render(&[&n], &expert("csbnh", "3c", Some("1:c"), "n", 2)).expect("plan"),
        want
    );
    let err = render(&[&n], &expert("csbnh", "3c", Some("1:c"), "n", 3)).unwrap_err();
    assert!(err.to_string().contains("placing 2 of 3"), "{err}");
    // A width no socket holds: no resources, saying why.
    let err = render(&[&n], &expert("csbnh", "5c", None, "n", 1)).unwrap_err();
    assert_eq!(err.kind(), "no-resources");
    assert!(err.to_string().contains("width 5"), "{err}");
}

#[test]
fn oversubscribe_sweeps_again_ignoring_mppr() {
    let n = NodeTopology::from_synthetic("pack:1 core:2 pu:1").expect("synthetic");
    let e = Expert {
        map: Some("csbnh"),
        bind: Some("1c"),
        mppr: Some("1:c"),
        order: None,
    };
    let req = Request::expert(&e, Some(5), true).expect("valid");
    let p = plan(&[&n], &req).expect("oversubscribed plan");
    let cpus: Vec<Vec<u32>> = (0..5).map(|r| p.cpus(r, &[&n])).collect();
    assert_eq!(cpus, vec![vec![0], vec![1], vec![0], vec![1], vec![0]]);
}

#[test]
fn mppr_counts_a_process_once_per_object() {
    // 2c inside one socket counts once against 1:s, so one such process fits per socket.
    let n = NodeTopology::from_synthetic("pack:2 core:4 pu:1").expect("synthetic");
    let want = "0@0:0-1 1@0:4-5";
    assert_eq!(
        render(&[&n], &expert("csbnh", "2c", Some("1:s"), "n", 2)).expect("plan"),
        want
    );
}

#[test]
fn nodes_that_nest_levels_differently_are_named() {
    // NUMA inside the package on node 0; packages inside NUMA nodes on node 1.
    let a = NodeTopology::from_synthetic("pack:2 numa:2 core:2 pu:1").expect("synthetic");
    let b = NodeTopology::from_synthetic("numa:2 pack:2 core:2 pu:1").expect("synthetic");
    let err = render(&[&a, &b], &expert("sNbnch", "1c", None, "n", 1)).unwrap_err();
    assert_eq!(err.kind(), "no-resources");
    let m = err.to_string();
    assert!(m.contains("nodes 0") && m.contains("and 1"), "{m}");
    assert!(m.contains("NUMA node") && m.contains("socket"), "{m}");
    // Each node alone is fine, and so is a map that leaves one of the two levels out.
    assert!(render(&[&a], &expert("sNbnch", "1c", None, "n", 1)).is_ok());
    assert!(render(&[&b], &expert("sNbnch", "1c", None, "n", 1)).is_ok());
    assert!(render(&[&a, &b], &expert("sbnch", "1c", None, "n", 1)).is_ok());
}
