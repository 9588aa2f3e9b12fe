//! The `lama` binary end to end. Expected placements are the contract's worked examples.

use std::process::{Command, Output};

use serde_json::Value;

fn lama(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lama"));
    c.args(args)
        .env_remove("TASK_MAP")
        .env_remove("SLURM_JOB_NODELIST")
        .env_remove("SLURM_JOB_CPUS_PER_NODE");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run lama")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn topo(name: &str) -> String {
    format!("{}/../tests/topologies/{name}", env!("CARGO_MANIFEST_DIR"))
}

const NODE: &str = "pack:2 core:4 pu:2";

#[test]
fn plan_json_matches_the_contract() {
    let o = lama(
        &[
            "plan",
            "--synthetic",
            NODE,
            "--nodes",
            "2",
            "--map",
            "sbnch",
            "--bind",
            "1c",
            "--np",
            "8",
            "--format",
            "json",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("one JSON object");
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

#[test]
fn plan_errors_have_kinds_and_exit_codes() {
    let o = lama(
        &[
            "plan",
            "--synthetic",
            NODE,
            "--nodes",
            "2",
            "--map",
            "csbnh",
            "--bind",
            "1c",
            "--np",
            "33",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json error");
    assert_eq!(v["error"]["kind"], "oversubscribed");
    assert_eq!(v["error"]["placed"], 32);
    assert_eq!(v["error"]["requested"], 33);
    assert!(String::from_utf8_lossy(&o.stderr).contains("oversubscribed after placing 32 of 33"));

    let o = lama(
        &[
            "plan",
            "--synthetic",
            NODE,
            "--map",
            "csscbnh",
            "--bind",
            "1c",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json error");
    assert_eq!(v["error"]["kind"], "invalid-option");
    assert!(v["error"]["message"]
        .as_str()
        .expect("msg")
        .contains("duplicate mapping levels at position 2 and 3"));

    let o = lama(
        &[
            "plan",
            "--synthetic",
            NODE,
            "--map",
            "csbnh",
            "--bind",
            "9c",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json error");
    assert_eq!(v["error"]["kind"], "no-resources");

    let o = lama(
        &[
            "plan",
            "--synthetic",
            NODE,
            "--map",
            "csbnh",
            "--map-by",
            "core",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    let o = lama(
        &[
            "plan",
            "--synthetic",
            NODE,
            "--no-such-flag",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json error for a clap error too");
    assert_eq!(v["error"]["kind"], "invalid-option");
}

#[test]
fn plan_keeps_node_order_and_checks_node_count() {
    let small = "pack:1 core:2 pu:1";
    let xml = topo("power8gpudistances.xml");
    let o = lama(
        &[
            "plan",
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
            "--format",
            "json",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json");
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
    let o = lama(
        &[
            "plan",
            "--synthetic",
            NODE,
            "--map",
            "csbnh",
            "--bind",
            "2c",
            "--np",
            "1",
        ],
        &[],
    );
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
    let o = lama(
        &[
            "plan",
            "--synthetic",
            NODE,
            "--restrict",
            "4-11",
            "--map-by",
            "ppr:1:core",
            "--bind-to",
            "core",
            "--format",
            "json",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json");
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
    let o = lama(&["plan", "--synthetic", NODE, "--restrict", "64-70"], &[]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn taskmap_converts_and_queries() {
    let t = |args: &[&str]| stdout(&lama(args, &[]));
    assert_eq!(
        t(&["taskmap", "0,4,8,12;1,5,9,13;2,6,10,14;3,7,11,15"]),
        "[[0,4,1,4]]"
    );
    assert_eq!(
        t(&["taskmap", "--to=raw", "[[0,6,1,2],[4,2,1,2]]"]),
        "0,6;1,7;2,8;3,9;4,10,12,14;5,11,13,15"
    );
    assert_eq!(
        t(&[
            "taskmap",
            "--to=pmi",
            "{\"version\":1,\"map\":[[0,6,2,1],[4,2,2,1]]}"
        ]),
        "(vector,(0,6,2),(4,2,2))"
    );
    assert_eq!(
        t(&["taskmap", "(vector,(0,4,1),(0,4,1),(0,4,1),(0,4,1))"]),
        "[[0,4,1,4]]"
    );
    assert_eq!(t(&["taskmap", "--taskids=1", "[[0,4,1,4]]"]), "1,5,9,13");
    assert_eq!(t(&["taskmap", "--ntasks=4", "[[0,4,2,1],[4,2,4,1]]"]), "4");
    assert_eq!(t(&["taskmap", "--nodeid=13", "[[0,6,1,2],[4,2,1,2]]"]), "5");
    assert_eq!(
        t(&["taskmap", "--to=multiline", "[[1,1,1,1],[0,1,1,1]]"]),
        "0: 1\n1: 0"
    );
    assert_eq!(
        t(&[
            "taskmap",
            "--hostname=2",
            "--nodelist=n[1-3]",
            "[[0,3,1,2]]"
        ]),
        "n3"
    );
    assert_eq!(
        t(&["taskmap", "--to=hosts", "--nodelist=n[1-2]", "[[0,2,1,2]]"]),
        "n1: 0,2\nn2: 1,3"
    );
    let o = lama(
        &["taskmap", "--to=raw"],
        &[("TASK_MAP", "{\"version\":1,\"map\":[[0,2,2,1]]}")],
    );
    assert_eq!(stdout(&o), "0-1;2-3");
    for bad in [
        vec!["taskmap", "[[0,1,1]]"],
        vec!["taskmap"],
        vec!["taskmap", "--nodeid=9", "[[0,1,1,1]]"],
        vec!["taskmap", "--to=hosts", "[[0,2,1,1]]"],
    ] {
        let o = lama(&bad, &[]);
        assert!(!o.status.success(), "{bad:?}");
        assert_eq!(
            String::from_utf8_lossy(&o.stderr).lines().count(),
            1,
            "{bad:?}"
        );
    }
}

#[test]
fn taskmap_from_slurm_environment_and_flags() {
    let env = [
        ("SLURM_STEP_TASKS_PER_NODE", "2(x3)"),
        ("SLURM_STEP_NODELIST", "n[1-3]"),
        ("SLURM_DISTRIBUTION", "cyclic:block"),
    ];
    assert_eq!(
        stdout(&lama(&["taskmap", "--from-slurm"], &env)),
        "[[0,3,1,2]]"
    );
    assert_eq!(
        stdout(&lama(&["taskmap", "--from-slurm", "--to=hosts"], &env)),
        "n1: 0,3\nn2: 1,4\nn3: 2,5"
    );
    let o = lama(
        &[
            "taskmap",
            "--from-slurm",
            "--tasks-per-node=2,1,1",
            "--distribution=block",
        ],
        &[],
    );
    assert_eq!(stdout(&o), "[[0,1,2,1],[1,2,1,1]]");
    let dir = std::env::temp_dir().join(format!("lama-hostfile-{}", std::process::id()));
    std::fs::write(&dir, "n2\nn1\nn1\nn3\nn2\n").expect("write hostfile");
    let hf = dir.to_string_lossy().to_string();
    let o = lama(
        &[
            "taskmap",
            "--from-slurm",
            "--tasks-per-node=2(x2),1",
            "--distribution=arbitrary",
            "--nodelist=n[1-3]",
            &format!("--hostfile={hf}"),
            "--to=raw",
        ],
        &[],
    );
    assert_eq!(stdout(&o), "1-2;0,4;3");
    let _ = std::fs::remove_file(&dir);
    let o = lama(&["taskmap", "--from-slurm"], &[]);
    assert!(!o.status.success());
}

#[test]
fn missing_or_broken_topology_files_are_errors_not_crashes() {
    let dir = std::env::temp_dir().join(format!("lama-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let missing = dir.join("missing.xml");
    let broken = dir.join("broken.xml");
    std::fs::write(&broken, "not xml at all").expect("write");
    for (path, says) in [
        (&missing, "No such file"),
        (&broken, "cannot load topology"),
    ] {
        let o = lama(
            &["plan", "--topology", path.to_str().expect("utf-8 path")],
            &[],
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lama-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn lines(o: &Output) -> Vec<String> {
    stdout(o).lines().map(String::from).collect()
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn hostfile_reproduces_the_seed_examples() {
    let dir = scratch("seed");
    let alloc = dir.join("dummyhosts");
    let layout = dir.join("mylayout");
    std::fs::write(
        &alloc,
        "dummy1 slots=4\ndummy2 slots=4\ndummy3 slots=4\ndummy4 slots=4\ndummy5 slots=4\n",
    )
    .expect("write");
    std::fs::write(&layout, "+n2 slots=2\n+e:1\ndummy4 slots=1\n+n2\n+e\n").expect("write");
    let (a, l) = (
        alloc.to_str().expect("path"),
        layout.to_str().expect("path"),
    );
    let seq = lama(&["hostfile", "--mapper", "seq", "--allocation", a, l], &[]);
    assert!(
        seq.status.success(),
        "{}",
        String::from_utf8_lossy(&seq.stderr)
    );
    assert_eq!(
        lines(&seq),
        words("dummy3 dummy1 dummy4 dummy3 dummy2 dummy5")
    );
    // Round-robin (the default), as JSON: 0-1 dummy3, 2-5 dummy1, 6 dummy4, 7-8 dummy3,
    // 9-12 dummy2, 13-16 dummy5.
    let rr = lama(&["hostfile", "--allocation", a, l, "--format", "json"], &[]);
    assert!(
        rr.status.success(),
        "{}",
        String::from_utf8_lossy(&rr.stderr)
    );
    let v: Value = serde_json::from_str(&stdout(&rr)).expect("json");
    let want = words("dummy3 dummy3 dummy1 dummy1 dummy1 dummy1 dummy4 dummy3 dummy3 dummy2 dummy2 dummy2 dummy2 dummy5 dummy5 dummy5 dummy5");
    assert_eq!(v, serde_json::json!({ "hosts": want }));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn hostfile_reads_the_slurm_job_and_host_lists() {
    let job = [
        ("SLURM_JOB_NODELIST", "n[1-3]"),
        ("SLURM_JOB_CPUS_PER_NODE", "2(x2),1"),
    ];
    let o = lama(&["hostfile", "--host", "+n2,+e:1,n2 slots=1"], &job);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // n3 (its 1 slot), n1 (the first unused node, 2 slots), n2 (slots=1).
    assert_eq!(lines(&o), words("n3 n1 n1 n2"));
    // The layout from stdin, against a node list.
    let mut c = Command::new(env!("CARGO_BIN_EXE_lama"));
    c.args([
        "hostfile",
        "--nodelist",
        "a,b",
        "--slots",
        "2",
        "--mapper",
        "seq",
        "-",
    ])
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), b"+n1\n+e\n+n1\n")
        .expect("write stdin");
    let o = child.wait_with_output().expect("wait");
    assert_eq!(lines(&o), words("b a b"));
}

#[test]
fn hostfile_errors_name_the_entry_and_exit_non_zero() {
    let job = [
        ("SLURM_JOB_NODELIST", "n[1-3]"),
        ("SLURM_JOB_CPUS_PER_NODE", "2(x3)"),
    ];
    let dir = scratch("errors");
    let bad = dir.join("layout");
    std::fs::write(&bad, "# fine\n+n0\n+n1 slot=2\n").expect("write");
    let cases: [(Vec<&str>, i32, &str); 7] = [
        (
            vec!["--host", "+n3"],
            3,
            "'+n3': the allocation has 3 node(s), so valid indexes are +n0 to +n2",
        ),
        (
            vec!["--host", "+n0,+e:3"],
            3,
            "asks for 3 empty node(s), but only 2",
        ),
        (
            vec!["--host", "n9"],
            3,
            "host 'n9' is not in the allocation (n1, n2, n3)",
        ),
        (
            vec!["--host", "+n0", "--np", "3"],
            3,
            "3 task(s) asked for, but the layout's entries have 2 slot(s)",
        ),
        (
            vec![bad.to_str().expect("path")],
            2,
            "layout line 3 '+n1 slot=2': unexpected 'slot=2'",
        ),
        (
            vec!["--host", "+n0", "--nodelist", "a,b", "--slots", "1,2,3"],
            2,
            "3 counts for 2 hosts",
        ),
        (
            vec!["--host", "+n0", "--np", "0"],
            2,
            "--np must be at least 1",
        ),
    ];
    for (args, code, msg) in cases {
        let mut all = vec!["hostfile"];
        all.extend(&args);
        let o = lama(&all, &job);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
        assert!(stdout(&o).is_empty(), "{args:?}");
    }
    let o = lama(&["hostfile", "--host", "+n0"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not inside a Slurm job"));
    let o = lama(&["hostfile", "--host", "+e,+e", "--format", "json"], &job);
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json error");
    assert_eq!(v["error"]["kind"], "unsatisfiable");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn plan_writes_the_slurm_hostfile_of_its_ranks() {
    let dir = scratch("plan-hosts");
    let hosts = dir.join("hosts");
    let h = hosts.to_str().expect("path");
    // sbnch with at most 2 per socket on 3 two-socket nodes: s changes fastest, then n (b is one
    // board), so ranks go 2 per node round the nodes, twice (12 ranks).
    let base = [
        "plan",
        "--synthetic",
        NODE,
        "--bind",
        "1c",
        "--slurm-hostfile",
        h,
    ];
    let mut args = base.to_vec();
    args.extend(["--map", "sbnch", "--mppr", "2:s"]);
    let o = lama(&args, &[("SLURM_JOB_NODELIST", "n[1-3]")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&hosts).expect("hostfile written");
    assert_eq!(words(&text), words("n1 n1 n2 n2 n3 n3 n1 n1 n2 n2 n3 n3"));
    // --nodelist outside a job; --nodes picks the first hosts.
    let mut a2 = base.to_vec();
    a2.extend([
        "--nodelist",
        "c[7-9]",
        "--nodes",
        "2",
        "--map",
        "nbsch",
        "--mppr",
        "1:s",
    ]);
    let o = lama(&a2, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        words(&std::fs::read_to_string(&hosts).expect("hostfile")),
        words("c7 c8 c7 c8")
    );
    let mut a3 = args.to_vec();
    a3.extend(["--nodes", "4"]);
    let o = lama(&a3, &[("SLURM_JOB_NODELIST", "n[1-3]")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("the plan has 4 nodes but the job's node list has 3"));
    let o = lama(&args, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("run inside a Slurm job or give --nodelist")
    );
    std::fs::remove_dir_all(&dir).ok();
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
    let o = lama(
        &[
            "plan",
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
            "--format",
            "json",
        ],
        &[],
    );
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["ranks"][0]["nics"], serde_json::json!(["mlx5_0"]));
    assert_eq!(v["ranks"][1]["nics"], serde_json::json!(["mlx5_0"]));
    // Errors: too many, synthetic nodes, a bad weights file.
    let o = lama(&["plan", "--topology", &xml, "--gpus", "5"], &[]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("5 GPU(s) per task asked for, but this node has 4"));
    let o = lama(&["plan", "--synthetic", NODE, "--nics", "1"], &[]);
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
    let o = lama(
        &[
            "plan",
            "--synthetic",
            NODE,
            "--map",
            "sbnch",
            "--bind",
            "1s",
            "--np",
            "1",
            "--threads",
            "9",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["error"]["kind"], "threads");
    assert_eq!(
        lama(&["plan", "--threads", "zero"], &[]).status.code(),
        Some(2)
    );
}

#[test]
fn generate_writes_manual_pages_and_completions_from_the_code() {
    let dir = scratch("generate");
    let o = lama(&["generate", dir.to_str().expect("path")], &[]);
    assert!(o.status.success(), "{o:?}");
    for f in [
        "man1/lama.1",
        "man1/lama-plan.1",
        "man1/lama-taskmap.1",
        "man1/lama-hostfile.1",
        "man8/lama-spank.8",
        "completions/lama.bash",
        "completions/_lama",
    ] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        assert!(text.len() > 200, "{f} is missing or nearly empty");
    }
    // Every option of `lama plan` is in its page, every plugin option and plugstack.conf
    // argument in lama-spank(8) (roff escapes each '-').
    let plan = std::fs::read_to_string(dir.join("man1/lama-plan.1")).expect("page");
    for opt in [
        "synthetic",
        "threads",
        "omp\\-bind",
        "slurm\\-hostfile",
        "device\\-weights",
    ] {
        assert!(
            plan.contains(&format!("\\-\\-{opt}")),
            "lama-plan.1 lacks --{opt}"
        );
    }
    let spank = std::fs::read_to_string(dir.join("man8/lama-spank.8")).expect("page");
    for o in lama::slurm_step::OPTIONS {
        let name = o.name.replace('-', "\\-");
        assert!(
            spank.contains(&format!("\\-\\-lama\\-{name}")),
            "lama-spank.8 lacks --lama-{}",
            o.name
        );
    }
    for s in lama::slurm_step::SETTINGS {
        let key = s.key.replace('-', "\\-");
        assert!(
            spank.contains(&format!(".B {key}=")),
            "lama-spank.8 lacks {}=",
            s.key
        );
    }
    assert!(
        !spank.contains('@'),
        "a placeholder is left in lama-spank.8"
    );
    let bash = std::fs::read_to_string(dir.join("completions/lama.bash")).expect("bash");
    assert!(bash.contains("--topology") && bash.contains("taskmap"));
}

#[test]
fn plan_draws_each_node_shape_as_svg() {
    let out = scratch("svg").join("plan.svg");
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

#[test]
fn huge_sizes_are_errors_not_aborts() {
    // Both once aborted with "memory allocation of ... bytes failed".
    for args in [
        ["--np", "999999999999", "--nodes", "999999999999"],
        ["--np", "4294967296", "--nodes", "4294967296"],
        ["--np", "4", "--nodes", "2000000"],
    ] {
        let mut all = vec![
            "plan",
            "--synthetic",
            NODE,
            "--map",
            "csbnh",
            "--format",
            "json",
        ];
        all.extend(args);
        let o = lama(&all, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        let v: Value = serde_json::from_str(&stdout(&o)).expect("json");
        assert_eq!(v["error"]["kind"], "invalid-option", "{args:?}");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("at most"));
    }
}
