//! `lama plan --mem MODE`: each rank's NUMA nodes and memory policy, on the machines with
//! memory tiers. Expected nodes are read by hand from the XML files: on hwloc's Optane machine
//! the DRAM node of the clusters with CPUs 0-1, 4-5, 2-3, 6-7 is 5, 6, 8, 9, and the PMem nodes
//! 7 and 10 are nobody's local memory; on the KNL in SNC4 hybrid mode, quadrant k's DRAM is node
//! k and its MCDRAM node 7, 4, 5, 6.

mod common;

use serde_json::Value;

use common::{lama, stdout, topo};

const OPTANE: &str = "fakememinitiators-1np2c+1npp+gi.fsroot.xml";
const KNL: &str = "64intel64-fakeKNL-SNC4-hybrid.xml";

/// Each rank's (mems, mempolicy) from the JSON plan.
fn mems(args: &[&str]) -> Vec<(Vec<u64>, String)> {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let o = lama(&all, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    v["ranks"]
        .as_array()
        .expect("ranks")
        .iter()
        .map(|r| {
            let m = r["mems"].as_array().expect("mems");
            (
                m.iter().map(|n| n.as_u64().expect("a node")).collect(),
                r["mempolicy"].as_str().expect("mempolicy").to_string(),
            )
        })
        .collect()
}

fn each(nodes: &[&[u64]], policy: &str) -> Vec<(Vec<u64>, String)> {
    nodes
        .iter()
        .map(|n| (n.to_vec(), policy.to_string()))
        .collect()
}

#[test]
fn pmem_is_never_local_memory() {
    let t = topo(OPTANE);
    let base = ["plan", "--topology", &t, "--policy", "auto", "--np", "4"];
    let with = |mode: &str| {
        let mut a = base.to_vec();
        a.extend(["--mem", mode]);
        mems(&a)
    };
    assert_eq!(with("local"), each(&[&[5], &[6], &[8], &[9]], "bind"));
    assert_eq!(
        with("interleave"),
        each(&[&[5], &[6], &[8], &[9]], "interleave")
    );
    // Two ranks, each over a package's two clusters: both of its DRAM nodes, pages spread.
    let two = mems(&[
        "plan",
        "--topology",
        &t,
        "--policy",
        "auto",
        "--np",
        "2",
        "--mem",
        "interleave",
    ]);
    assert_eq!(two, each(&[&[5, 6], &[8, 9]], "interleave"));
    // The same through an expert map.
    let mapped = mems(&[
        "plan",
        "--topology",
        &t,
        "--map-by",
        "numa",
        "--bind-to",
        "numa",
        "--np",
        "4",
        "--mem",
        "local",
    ]);
    assert_eq!(mapped, each(&[&[5], &[6], &[8], &[9]], "bind"));
}

#[test]
fn hbm_on_the_knl_is_each_quadrants_mcdram() {
    let t = topo(KNL);
    let with = |mode: &str| {
        mems(&[
            "plan",
            "--topology",
            &t,
            "--policy",
            "auto",
            "--np",
            "4",
            "--mem",
            mode,
        ])
    };
    assert_eq!(with("local"), each(&[&[0], &[1], &[2], &[3]], "bind"));
    assert_eq!(with("hbm"), each(&[&[7], &[4], &[5], &[6]], "bind"));
    assert_eq!(
        with("prefer-hbm"),
        each(&[&[7], &[4], &[5], &[6]], "preferred-many")
    );
}

#[test]
fn hbm_where_there_is_none_is_refused_naming_the_rank_and_node() {
    let t = topo(OPTANE);
    let o = lama(
        &[
            "plan",
            "--topology",
            &t,
            "--policy",
            "auto",
            "--np",
            "4",
            "--mem",
            "hbm",
        ],
        &[],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--mem: rank 0 on node 0"), "{err}");
    assert!(
        err.contains(
            "no memory faster than the default memory (NUMA nodes 5) is local to cpus 0-1"
        ),
        "{err}"
    );
    let o = lama(
        &["plan", "--topology", &t, "--np", "2", "--mem", "fast"],
        &[],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("local, hbm, prefer-hbm, interleave"));
}

#[test]
fn the_text_form_shows_nodes_and_policy() {
    let t = topo(KNL);
    let o = lama(
        &[
            "plan",
            "--topology",
            &t,
            "--policy",
            "auto",
            "--np",
            "4",
            "--mem",
            "prefer-hbm",
        ],
        &[],
    );
    let text = stdout(&o);
    let tails: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("rank "))
        .map(|l| l.rsplit("  ").next().unwrap_or_default())
        .collect();
    assert_eq!(
        tails,
        vec![
            "mems 7 preferred-many",
            "mems 4 preferred-many",
            "mems 5 preferred-many",
            "mems 6 preferred-many"
        ]
    );
}

/// hwloc's `fakeheteromemtiers` (a qemu guest with DAX memory): CPUs 0-1 have DRAM node 0 and
/// PMem node 8; CPUs 2-3 DRAM node 1, HBM node 4 and PMem node 6; CPUs 4-5 only HBM node 2 and
/// PMem node 9, so HBM is their default memory.
#[test]
fn dram_then_hbm_then_pmem_on_a_machine_of_every_tier() {
    let t = topo("fakeheteromemtiers.fsroot.xml");
    let with = |mode: &str| {
        mems(&[
            "plan",
            "--topology",
            &t,
            "--policy",
            "auto",
            "--np",
            "3",
            "--mem",
            mode,
        ])
    };
    assert_eq!(with("local"), each(&[&[0], &[1], &[2]], "bind"));
    let o = lama(
        &[
            "plan",
            "--topology",
            &t,
            "--policy",
            "auto",
            "--np",
            "3",
            "--mem",
            "hbm",
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("rank 0 on node 0"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Ranks on CPUs 2-3 and 4-5 only: their HBM.
    let hbm = mems(&[
        "plan",
        "--topology",
        &t,
        "--policy",
        "auto",
        "--np",
        "2",
        "--restrict",
        "2-5",
        "--mem",
        "hbm",
    ]);
    assert_eq!(hbm, each(&[&[4], &[2]], "bind"));
}

/// hwloc's `nvidiagpunumanodes` with the GPU memory kept (POWER9 with V100s): each package's
/// DRAM node (0 and 8) and three GPU-memory nodes (253-255, 250-252) on the same CPUs. The GPU
/// memory is never a domain nor local memory, nor a faster tier.
#[test]
fn gpu_memory_is_never_local() {
    let t = topo("nvidiagpunumanodes-kept.fsroot.xml");
    let local = mems(&[
        "plan",
        "--topology",
        &t,
        "--policy",
        "auto",
        "--np",
        "2",
        "--mem",
        "local",
    ]);
    assert_eq!(local, each(&[&[0], &[8]], "bind"));
    let o = lama(
        &[
            "plan",
            "--topology",
            &t,
            "--policy",
            "auto",
            "--np",
            "2",
            "--mem",
            "hbm",
        ],
        &[],
    );
    assert!(!o.status.success());
}
