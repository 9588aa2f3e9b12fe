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

/// `lama plan --topology FILE --policy auto --np NP --mem MODE` and `extra` options.
fn auto_mem(file: &str, np: &str, mode: &str, extra: &[&str]) -> std::process::Output {
    let t = topo(file);
    let mut args = vec![
        "plan",
        "--topology",
        &t,
        "--policy",
        "auto",
        "--np",
        np,
        "--mem",
        mode,
    ];
    args.extend(extra);
    lama(&args, &[])
}

/// Each rank's (mems, mempolicy) from a JSON plan's output.
fn mems_of(o: &std::process::Output) -> Vec<(Vec<u64>, String)> {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&stdout(o)).expect("JSON");
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

/// Each rank's (mems, mempolicy) under the policy.
fn mems(file: &str, np: &str, mode: &str, extra: &[&str]) -> Vec<(Vec<u64>, String)> {
    let mut extra = extra.to_vec();
    extra.extend(["--format", "json"]);
    mems_of(&auto_mem(file, np, mode, &extra))
}

fn each(nodes: &[&[u64]], policy: &str) -> Vec<(Vec<u64>, String)> {
    nodes
        .iter()
        .map(|n| (n.to_vec(), policy.to_string()))
        .collect()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn pmem_is_never_local_memory() {
    let four = each(&[&[5], &[6], &[8], &[9]], "bind");
    assert_eq!(mems(OPTANE, "4", "local", &[]), four);
    assert_eq!(
        mems(OPTANE, "4", "interleave", &[]),
        each(&[&[5], &[6], &[8], &[9]], "interleave")
    );
    // Two ranks, each over a package's two clusters: both of its DRAM nodes, pages spread.
    assert_eq!(
        mems(OPTANE, "2", "interleave", &[]),
        each(&[&[5, 6], &[8, 9]], "interleave")
    );
    // The same through an expert map.
    let t = topo(OPTANE);
    let mapped = lama(
        &[
            "plan",
            "--topology",
            &t,
            "--map-by",
            "numa",
            "--bind-to",
            "numa",
            "--np",
            "4",
        ]
        .into_iter()
        .chain(["--mem", "local", "--format", "json"])
        .collect::<Vec<_>>(),
        &[],
    );
    assert_eq!(mems_of(&mapped), four);
}

#[test]
fn hbm_on_the_knl_is_each_quadrants_mcdram() {
    assert_eq!(
        mems(KNL, "4", "local", &[]),
        each(&[&[0], &[1], &[2], &[3]], "bind")
    );
    let mcdram: &[&[u64]] = &[&[7], &[4], &[5], &[6]];
    assert_eq!(mems(KNL, "4", "hbm", &[]), each(mcdram, "bind"));
    assert_eq!(
        mems(KNL, "4", "prefer-hbm", &[]),
        each(mcdram, "preferred-many")
    );
}

#[test]
fn hbm_where_there_is_none_is_refused_naming_the_rank_and_node() {
    let o = auto_mem(OPTANE, "4", "hbm", &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("--mem: rank 0 on node 0"), "{err}");
    let why = "no memory faster than the default memory (NUMA nodes 5) is local to cpus 0-1";
    assert!(err.contains(why), "{err}");
    let o = auto_mem(OPTANE, "2", "fast", &[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("local, hbm, prefer-hbm, interleave"));
}

#[test]
fn the_text_form_shows_nodes_and_policy() {
    let text = stdout(&auto_mem(KNL, "4", "prefer-hbm", &[]));
    let tails: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("rank "))
        .map(|l| l.rsplit("  ").next().unwrap_or_default())
        .collect();
    let want: Vec<String> = [7, 4, 5, 6]
        .iter()
        .map(|n| format!("mems {n} preferred-many"))
        .collect();
    assert_eq!(tails, want);
}

/// hwloc's `fakeheteromemtiers` (a qemu guest with DAX memory): CPUs 0-1 have DRAM node 0 and
/// PMem node 8; CPUs 2-3 DRAM node 1, HBM node 4 and PMem node 6; CPUs 4-5 only HBM node 2 and
/// PMem node 9, so HBM is their default memory.
#[test]
fn dram_then_hbm_then_pmem_on_a_machine_of_every_tier() {
    const TIERS: &str = "fakeheteromemtiers.fsroot.xml";
    assert_eq!(
        mems(TIERS, "3", "local", &[]),
        each(&[&[0], &[1], &[2]], "bind")
    );
    let o = auto_mem(TIERS, "3", "hbm", &[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("rank 0 on node 0"), "{}", stderr(&o));
    // Ranks on CPUs 2-3 and 4-5 only: their HBM.
    let hbm = mems(TIERS, "2", "hbm", &["--restrict", "2-5"]);
    assert_eq!(hbm, each(&[&[4], &[2]], "bind"));
}

/// hwloc's `nvidiagpunumanodes` with the GPU memory kept (POWER9 with V100s): each package's
/// DRAM node (0 and 8) and three GPU-memory nodes (253-255, 250-252) on the same CPUs. The GPU
/// memory is never a domain nor local memory, nor a faster tier.
#[test]
fn gpu_memory_is_never_local() {
    const P9: &str = "nvidiagpunumanodes-kept.fsroot.xml";
    assert_eq!(mems(P9, "2", "local", &[]), each(&[&[0], &[8]], "bind"));
    assert!(!auto_mem(P9, "2", "hbm", &[]).status.success());
}
