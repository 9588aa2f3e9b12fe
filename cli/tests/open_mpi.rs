//! Issue 74 at the command line: Open MPI's words (`-n`, `-np`), `--threads N` as `:pe=N`, srun's
//! `-c` as the workers under the policy, and GPU tasks kept inside their GPU's package. Expected
//! values are the machines' facts (which CPUs a package or core holds) and the options' numbers,
//! not lama's output; the ranks' CPUs under Open MPI's rules are checked against Open MPI itself
//! by `tests/ompi/differential.sh`.

mod common;

use serde_json::Value;

use common::{lama, stdout, topo};

fn plan(args: &[&str]) -> Value {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    let o = lama(&all, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&stdout(&o)).expect("json")
}

fn ranks(v: &Value) -> Vec<(Vec<u64>, Option<u64>)> {
    v["ranks"]
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
            (cpus, r["threads"].as_u64())
        })
        .collect()
}

#[test]
fn n_and_np_are_np() {
    for flag in ["-n", "-np", "--np"] {
        let v = plan(&[
            "--synthetic",
            "pack:2 core:4 pu:1",
            flag,
            "3",
            "--map-by",
            "core",
        ]);
        assert_eq!(ranks(&v).len(), 3, "{flag}");
    }
}

#[test]
fn threads_without_a_binding_give_each_rank_that_many_cores() {
    // pack:2 core:8 pu:1: 16 cores, CPU k is core k. Four ranks of 4 threads mapped by package.
    let v = plan(&[
        "--synthetic",
        "pack:2 core:8 pu:1",
        "--np",
        "4",
        "--map-by",
        "package",
        "--threads",
        "4",
    ]);
    let r = ranks(&v);
    let mut seen = Vec::new();
    for (cpus, threads) in &r {
        assert_eq!(cpus.len(), 4, "{r:?}: each rank has its 4 cores");
        assert_eq!(*threads, Some(4));
        seen.extend(cpus.iter().copied());
    }
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 16, "{r:?}: no two ranks share a core");
    assert!(v["open_mpi"].as_str().expect("words").contains(":pe=4"));
}

#[test]
fn cpus_per_task_sets_the_workers_under_the_policy() {
    // power8gpudistances: 2 hardware threads per core; -c 4 means 4 workers per task even when
    // the policy gives a task more CPUs than that.
    let v = plan(&[
        "--topology",
        &topo("power8gpudistances.xml"),
        "--policy",
        "auto",
        "--np",
        "2",
        "--step-gpus",
        "0,1",
        "--cpus-per-task",
        "4",
    ]);
    for (cpus, threads) in ranks(&v) {
        assert!(cpus.len() >= 4, "{cpus:?}");
        assert_eq!(threads, Some(4), "{cpus:?}: -c 4 is 4 workers");
    }
}

#[test]
fn gpu_tasks_stay_in_their_gpus_package() {
    // 32em64t-2n8c2t: package 0 holds CPUs 0-7 and 16-23, package 1 CPUs 8-15 and 24-31 (core c
    // is CPUs c and c+16); both GPUs hang off package 1. With 2 and 4 tasks (at least one per
    // package) no task may have CPUs of both packages.
    let package = |c: u64| (c % 16) / 8;
    for np in ["2", "4"] {
        let v = plan(&[
            "--topology",
            &topo("32em64t-2n8c2t-pci-normalio.xml"),
            "--policy",
            "auto",
            "--np",
            np,
        ]);
        for (cpus, _) in ranks(&v) {
            let p = package(cpus[0]);
            assert!(
                cpus.iter().all(|&c| package(c) == p),
                "--np {np}: a task over both packages: {cpus:?}"
            );
        }
    }
}

#[test]
fn mem_local_is_the_nodes_of_each_cpu() {
    // fakeheterocpunuma: CPUs 0-3 are NUMA node 0's, 8-11 node 1's (hwloc-ls: each node above its
    // two cores); CPUs 4-7 have no node of their own. A task with CPUs of node 1 gets node 1, and
    // a task on node 0's CPUs alone gets node 0 alone: a borrowed node is added only for the CPUs
    // without their own.
    let v = plan(&[
        "--topology",
        &topo("fakeheterocpunuma.fsroot.xml"),
        "--policy",
        "auto",
        "--mem",
        "local",
    ]);
    for r in v["ranks"].as_array().expect("ranks") {
        let cpus: Vec<u64> = r["cpus"]
            .as_array()
            .expect("cpus")
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        let mems: Vec<u64> = r["mems"]
            .as_array()
            .expect("mems")
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        if cpus.iter().any(|c| (8..12).contains(c)) {
            assert!(
                mems.contains(&1),
                "cpus {cpus:?}: mems {mems:?} lack node 1"
            );
        }
        if cpus.iter().all(|c| (0..4).contains(c)) {
            assert_eq!(mems, vec![0], "cpus {cpus:?}");
        }
    }
}

#[test]
fn plan_and_exec_have_one_default() {
    // No placement option: lama plan places by the automatic policy, as lama exec does (its
    // `--policy` defaults to auto), and says so.
    let args = ["--synthetic", "pack:2 core:4 pu:1", "--np", "2"];
    let v = plan(&args);
    assert_eq!(v["policy"], "auto");
    assert_eq!(v["policy_by_default"], true);
    let mut all = vec!["plan"];
    all.extend_from_slice(&args);
    let o = lama(&all, &[]);
    assert!(stdout(&o).starts_with("policy auto (the default: no placement option given)"));
    // The same placement: each local rank of `lama exec` with no option is bound where
    // `lama plan` with no option puts it, on this machine.
    let v = plan(&["--this-machine", "--np", "2"]);
    for (r, (cpus, _)) in ranks(&v).iter().enumerate() {
        let rank = r.to_string();
        let o = lama(
            &[
                "exec",
                "--dry-run",
                "--local-rank",
                &rank,
                "--local-size",
                "2",
                "--",
                "true",
            ],
            &[],
        );
        let out = stdout(&o) + &String::from_utf8_lossy(&o.stderr);
        let list: Vec<String> = cpus.iter().map(u64::to_string).collect();
        let bound = out
            .lines()
            .find_map(|l| l.strip_prefix("LAMA_CPUS="))
            .unwrap_or_default()
            .to_string();
        let want = lama::idset::format_list(&cpus.iter().map(|&c| c as u32).collect::<Vec<_>>());
        assert_eq!(
            bound,
            want,
            "rank {r}: lama exec {out}; lama plan {}",
            list.join(",")
        );
    }
}

#[test]
fn restrict_refuses_cpus_the_node_lacks() {
    // pack:2 core:4 pu:1 has CPUs 0-7: CPU 64 is named, not dropped.
    let o = lama(
        &[
            "plan",
            "--synthetic",
            "pack:2 core:4 pu:1",
            "--restrict",
            "0-3,64",
            "--map-by",
            "core",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("has no CPU 64") && e.contains("0-7"), "{e}");
}

#[test]
fn plan_errors_name_plan_options() {
    // The library's message names the plugin's --lama-bind; lama plan's own option is --bind.
    let o = lama(
        &[
            "plan",
            "--synthetic",
            "pack:2 core:4 pu:1",
            "--map",
            "csbnh",
            "--bind",
            "1c",
            "--threads",
            "99",
        ],
        &[],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("(--bind)") && !e.contains("--lama-"), "{e}");
}

#[test]
fn a_bad_xml_names_its_line_and_reason() {
    // An attribute without quotes on line 4: hwloc's parser (libxml2 on Debian) says where.
    let dir = common::scratch("bad-xml");
    let f = dir.join("bad.xml");
    std::fs::write(
        &f,
        "<?xml version=\"1.0\"?>\n<topology>\n<object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\">\n<object type=\"PU\" os_index=\"0\" cpuset=0x1/>\n</object>\n</topology>\n",
    )
    .expect("write");
    let o = lama(
        &[
            "plan",
            "--topology",
            f.to_str().expect("utf-8"),
            "--map-by",
            "core",
        ],
        &[],
    );
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("bad.xml") && e.contains("line 4"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
}

#[test]
fn the_policy_draws_as_svg() {
    // Four ranks of the automatic policy on the 2x8x2 Intel with its two GPUs: a picture with
    // the four ranks in its legend and the GPUs they use.
    let o = lama(
        &[
            "plan",
            "--topology",
            &topo("32em64t-2n8c2t-pci-normalio.xml"),
            "--policy",
            "auto",
            "--np",
            "4",
            "--format",
            "svg",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = stdout(&o);
    assert!(svg.starts_with("<svg"));
    for r in 0..4 {
        assert!(
            svg.contains(&format!("rank {r}")),
            "rank {r} missing from the legend"
        );
    }
    assert!(svg.contains("cuda0"), "the GPU the ranks use is drawn");
}

#[test]
fn text_fits_100_columns_unless_wide() {
    // 192em64t: 24 NUMA domains of 8 cores; four ranks of 48 threads each make lines of ~950
    // columns when whole.
    let args = [
        "plan",
        "--topology",
        &topo("192em64t-12gr2n8c2t.xml"),
        "--np",
        "4",
        "--policy",
        "auto",
    ];
    let out = stdout(&lama(&args, &[]));
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
    assert!(out.contains("… (48 places)"), "{out}");
    let mut wide = args.to_vec();
    wide.push("--wide");
    let out = stdout(&lama(&wide, &[]));
    assert!(out.lines().any(|l| l.chars().count() > 100));
    assert!(out.contains("{46},{47}"), "--wide keeps every place");
}

#[test]
fn every_json_plan_has_the_schema_and_its_rule() {
    let base = ["--synthetic", "pack:2 core:4 pu:1", "--np", "2"];
    for (extra, rule) in [
        (vec!["--map", "csbnh"], "map"),
        (vec!["--map-by", "core"], "open-mpi"),
        (vec!["--policy", "auto"], "policy"),
        (vec![], "policy"),
    ] {
        let mut args = base.to_vec();
        args.extend(extra);
        let v = plan(&args);
        assert_eq!(v["schema"], 1, "{args:?}");
        assert_eq!(v["rule"], rule, "{args:?}");
        assert!(
            v["ranks"][0]["cpus"].is_array() && v["taskmap"].is_object(),
            "{args:?}"
        );
    }
    // An error: the same schema, a kind the reference lists, exit 1 for a refusal.
    let o = lama(
        &[
            "plan",
            "--synthetic",
            "pack:1 core:2 pu:1",
            "--np",
            "9",
            "--map-by",
            "core",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["schema"], 1);
    let kind = v["error"]["kind"].as_str().expect("kind").to_string();
    let reference =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reference.md"))
            .expect("reference");
    assert!(
        reference.contains(&format!("`{kind}`")),
        "{kind} not in the reference"
    );
}
