//! `lama plan` end to end: JSON and text, errors and exit codes, node order, restriction, devices, OpenMP places, pictures. Expected placements are the contract's worked examples.

mod common;

use serde_json::Value;

use common::{lama, plan_on_node, scratch, stdout, synthetic, topo, words, NODE};

#[test]
fn plan_json_matches_the_contract() {
    let (o, v) = plan_json(&synthetic("--nodes 2 --map sbnch --bind 1c --np 8"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: Vec<(u64, u64, Vec<u64>)> = v["ranks"]
        .as_array()
        .expect("ranks")
        .iter()
        .map(|r| {
            let cpus = r["cpus"]
                .as_array()
                .expect("cpus")
                .iter()
                .map(|c| c.as_u64().expect("cpu"))
                .collect();
            (
                r["rank"].as_u64().expect("rank"),
                r["node"].as_u64().expect("node"),
                cpus,
            )
        })
        .collect();
    // 0@0:0-1 1@0:8-9 2@1:0-1 3@1:8-9 4@0:2-3 5@0:10-11 6@1:2-3 7@1:10-11
    let want = vec![
        (0, 0, vec![0, 1]),
        (1, 0, vec![8, 9]),
        (2, 1, vec![0, 1]),
        (3, 1, vec![8, 9]),
        (4, 0, vec![2, 3]),
        (5, 0, vec![10, 11]),
        (6, 1, vec![2, 3]),
        (7, 1, vec![10, 11]),
    ];
    assert_eq!(got, want);
    // Ranks 0,1 on node 0, 2,3 on node 1, twice: [[0,2,2,2]].
    assert_eq!(
        v["taskmap"],
        serde_json::json!({"version": 1, "map": [[0, 2, 2, 2]]})
    );
}

/// `lama plan ARGS --format json`, and its JSON (an error object when it fails).
fn plan_json(args: &[&str]) -> (std::process::Output, Value) {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    let o = lama(&all, &[]);
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json");
    (o, v)
}

#[test]
fn plan_errors_have_kinds_and_exit_codes() {
    let (o, v) = plan_json(&synthetic("--nodes 2 --map csbnh --bind 1c --np 33"));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(v["error"]["kind"], "oversubscribed");
    assert_eq!(v["error"]["placed"], 32);
    assert_eq!(v["error"]["requested"], 33);
    assert!(String::from_utf8_lossy(&o.stderr).contains("oversubscribed after placing 32 of 33"));

    let (o, v) = plan_json(&synthetic("--map csscbnh --bind 1c"));
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(v["error"]["kind"], "invalid-option");
    assert!(v["error"]["message"]
        .as_str()
        .expect("msg")
        .contains("duplicate mapping levels at position 2 and 3"));

    let (o, v) = plan_json(&synthetic("--map csbnh --bind 9c"));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(v["error"]["kind"], "no-resources");

    let o = lama(&plan_on_node("--map csbnh --map-by core"), &[]);
    assert_eq!(o.status.code(), Some(2));
    let (o, v) = plan_json(&synthetic("--no-such-flag"));
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(v["error"]["kind"], "invalid-option");
}

#[test]
fn plan_keeps_node_order_and_checks_node_count() {
    let small = "pack:1 core:2 pu:1";
    let xml = topo("power8gpudistances.xml");
    let (o, v) = plan_json(&[
        "--synthetic",
        NODE,
        "--topology",
        &xml,
        "--synthetic",
        small,
        "--map",
        "nbsch",
        "--bind",
        "1c",
        "--np",
        "3",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let names: Vec<&str> = v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n.as_str().expect("name"))
        .collect();
    assert_eq!(names, vec![NODE, xml.as_str(), small]);
    let nodes: Vec<u64> = v["ranks"]
        .as_array()
        .expect("ranks")
        .iter()
        .map(|r| r["node"].as_u64().expect("node"))
        .collect();
    assert_eq!(nodes, vec![0, 1, 2]);
    let o = lama(
        &[
            "plan",
            "--synthetic",
            NODE,
            "--synthetic",
            small,
            "--nodes",
            "3",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn plan_text_draws_the_node() {
    let o = lama(&plan_on_node("--map csbnh --bind 2c --np 1"), &[]);
    let s = stdout(&o);
    assert!(s.contains("[BB/BB/../..][../../../..]"), "{s}");
    assert!(s.contains("cpus 0-3"), "{s}");
    assert!(
        s.contains("TASK_MAP={\"version\":1,\"map\":[[0,1,1,1]]}"),
        "{s}"
    );
}

#[test]
fn plan_restrict_and_simple_level() {
    let (o, v) = plan_json(&synthetic(
        "--restrict 4-11 --map-by ppr:1:core --bind-to core",
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cpus: Vec<Value> = v["ranks"]
        .as_array()
        .expect("ranks")
        .iter()
        .map(|r| r["cpus"].clone())
        .collect();
    // Four allowed cores (PUs 4-11), one rank each.
    assert_eq!(
        cpus,
        vec![
            serde_json::json!([4, 5]),
            serde_json::json!([6, 7]),
            serde_json::json!([8, 9]),
            serde_json::json!([10, 11])
        ]
    );
    let o = lama(&plan_on_node("--restrict 64-70"), &[]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn plan_shows_each_ranks_devices() {
    // POWER8: cuda0-1 under package 0, cuda2-3 under package 1; scbnh alternates packages.
    let xml = topo("power8gpudistances.xml");
    let args = [
        "plan",
        "--topology",
        &xml,
        "--map",
        "scbnh",
        "--bind",
        "1c",
        "--np",
        "4",
        "--gpus",
        "1",
    ];
    let o = lama(&args, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let gpus: Vec<String> = stdout(&o)
        .lines()
        .filter(|l| l.starts_with("  rank"))
        .map(|l| l.split_whitespace().last().unwrap_or("").to_string())
        .collect();
    assert_eq!(gpus, words("cuda0 cuda2 cuda1 cuda3"));
    let mut json = args.to_vec();
    json.extend(["--format", "json"]);
    let v: Value = serde_json::from_str(&stdout(&lama(&json, &[]))).expect("json");
    assert_eq!(v["ranks"][1]["gpus"], serde_json::json!(["cuda2"]));
    assert_eq!(v["ranks"][1]["nics"], serde_json::json!([]));
    // The 2-socket Intel: the ConnectX is every rank's NIC.
    let intel = topo("32em64t-2n8c2t-pci-normalio.xml");
    let (_, v) = plan_json(&[
        "--topology",
        &intel,
        "--np",
        "2",
        "--map",
        "scbnh",
        "--bind",
        "1c",
        "--nics",
        "1",
    ]);
    assert_eq!(v["ranks"][0]["nics"], serde_json::json!(["mlx5_0"]));
    assert_eq!(v["ranks"][1]["nics"], serde_json::json!(["mlx5_0"]));
    // Errors: too many, synthetic nodes, a bad weights file.
    let o = lama(&["plan", "--topology", &xml, "--gpus", "5"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("5 GPU(s) per task asked for, but this node has 4"));
    let o = lama(&plan_on_node("--nics 1"), &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("is synthetic and has no devices"));
}

#[test]
fn plan_shows_each_ranks_openmp_places() {
    // pack:2 core:4 pu:2 binds rank 0 to socket 0 (cores 0-3: CPUs 0-7, core k = 2k, 2k+1);
    // two threads spread over 4 cores take cores 0 and 2.
    let args = [
        "plan",
        "--synthetic",
        NODE,
        "--map",
        "sbnch",
        "--bind",
        "1s",
        "--np",
        "2",
        "--threads",
        "2",
    ];
    let o = lama(&args, &[]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&o);
    assert!(
        text.contains("cpus 0-7  threads 2 spread places {0,1},{4,5}"),
        "{text}"
    );
    let mut json_args = args.to_vec();
    json_args.extend(["--omp-bind", "close", "--format", "json"]);
    let v: Value = serde_json::from_str(&stdout(&lama(&json_args, &[]))).expect("json");
    assert_eq!(
        v["ranks"][1]["places"],
        serde_json::json!([[8, 9], [10, 11]])
    );
    assert_eq!(v["ranks"][1]["threads"], 2);
    assert_eq!(v["ranks"][1]["omp_proc_bind"], "close");
    // Nine threads on a socket of eight hardware threads: never stacked.
    let (o, v) = plan_json(&synthetic("--map sbnch --bind 1s --np 1 --threads 9"));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(v["error"]["kind"], "threads");
    assert_eq!(
        lama(&["plan", "--threads", "zero"], &[]).status.code(),
        Some(2)
    );
}

#[test]
fn plan_draws_each_node_shape_as_svg() {
    let dir = scratch("svg");
    let out = dir.join("plan.svg");
    // Two nodes of one shape and one of another: two drawings, every PU drawn once per
    // drawing, one legend swatch per rank of the drawn nodes.
    let o = lama(
        &[
            "plan",
            "--synthetic",
            NODE,
            "--synthetic",
            NODE,
            "--synthetic",
            "pack:1 core:2 pu:1",
            "--map",
            "nsbch",
            "--bind",
            "1c",
            "--np",
            "6",
            "--format",
            "svg",
            "--output",
            out.to_str().expect("path"),
        ],
        &[],
    );
    assert!(o.status.success(), "{o:?}");
    assert!(stdout(&o).is_empty());
    let svg = std::fs::read_to_string(&out).expect("svg written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("class=\"title\">node ").count(), 2, "{svg}");
    assert!(svg.contains("node 0 (pack:2 core:4 pu:2): 3 rank(s); 1 more node(s) of this shape"));
    // 16 PUs in the first drawing, 2 in the second.
    assert_eq!(svg.matches("<title>PU ").count(), 18);
    // nsbch puts ranks 0 and 3 on node 0, 2 and 5 on node 2 (the drawn ones).
    for r in [0, 3, 2, 5] {
        assert!(
            svg.contains(&format!("rank {r}: cpus")),
            "legend lacks rank {r}"
        );
    }
    assert!(
        !svg.contains("rank 1: cpus"),
        "rank 1 is on node 1, not drawn"
    );
}
