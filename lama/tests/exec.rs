//! `lama exec`'s decisions (issue 67): a rank's place on its node read from the launcher's
//! variables, innermost launcher first; the node's ranks placed alike by every rank; and the
//! srun and PALS scripts of `lama plan`.

use std::collections::HashMap;

use lama::exec::{
    local_rank, place_node_ranks, torchrun_nodes, with_default_policy, ExecNode, Launcher,
    LocalRank, RankError,
};
use lama::plugin::{Options, Settings};
use lama::slurm::launcher::{pals_script, srun_script, RankBinding};
use lama::NodeTopology;
use proptest::prelude::*;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let m: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| m.get(k).cloned()
}

/// Slurm's counts per node at `SLURM_NODEID`, as the `lama` command works them out.
fn slurm_size(get: &impl Fn(&str) -> Option<String>, counts: &str) -> Result<u32, String> {
    let node: usize = get("SLURM_NODEID").unwrap().parse().unwrap();
    let all = lama::slurm::expand_counts(counts).map_err(|e| e.to_string())?;
    all.get(node).copied().ok_or_else(|| "no node".into())
}

fn rank_of(pairs: &[(&str, &str)]) -> Result<LocalRank, RankError> {
    let get = env(pairs);
    let get2 = env(pairs);
    local_rank(get, None, |l, v| match l {
        Launcher::Slurm => slurm_size(&get2, v),
        _ => Ok(3),
    })
}

/// A launcher's variables, and the launcher, rank and size they say.
type Case<'a> = (&'a [(&'a str, &'a str)], Launcher, u32, u32);

#[test]
fn each_launcher_says_rank_and_size() {
    let cases: [Case; 6] = [
        (
            &[
                ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
                ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
            ],
            Launcher::OpenMpi,
            1,
            4,
        ),
        (
            &[("MPI_LOCALRANKID", "2"), ("MPI_LOCALNRANKS", "3")],
            Launcher::Hydra,
            2,
            3,
        ),
        (
            &[("PALS_LOCAL_RANKID", "0"), ("PALS_LOCAL_SIZE", "8")],
            Launcher::Pals,
            0,
            8,
        ),
        (
            &[("LOCAL_RANK", "3"), ("LOCAL_WORLD_SIZE", "4")],
            Launcher::Torchrun,
            3,
            4,
        ),
        (
            &[
                ("FLUX_TASK_LOCAL_ID", "2"),
                ("FLUX_JOB_ID", "f1"),
                ("FLUX_TASK_RANK", "5"),
            ],
            Launcher::Flux,
            2,
            3,
        ),
        (
            &[
                ("SLURM_LOCALID", "0"),
                ("SLURM_STEP_TASKS_PER_NODE", "3(x2),1"),
                ("SLURM_NODEID", "2"),
            ],
            Launcher::Slurm,
            0,
            1,
        ),
    ];
    for (pairs, launcher, rank, size) in cases {
        let got = rank_of(pairs).unwrap();
        assert_eq!(
            (got.launcher, got.rank, got.size),
            (launcher, rank, size),
            "{pairs:?}"
        );
    }
}

#[test]
fn the_innermost_launcher_wins() {
    // torchrun started by srun: its workers inherit the srun task's SLURM_LOCALID.
    let got = rank_of(&[
        ("SLURM_LOCALID", "0"),
        ("SLURM_STEP_TASKS_PER_NODE", "1"),
        ("SLURM_NODEID", "0"),
        ("LOCAL_RANK", "2"),
        ("LOCAL_WORLD_SIZE", "4"),
    ])
    .unwrap();
    assert_eq!((got.launcher, got.rank), (Launcher::Torchrun, 2));
    // mpirun inside a Flux job.
    let got = rank_of(&[
        ("FLUX_TASK_LOCAL_ID", "0"),
        ("FLUX_JOB_ID", "f1"),
        ("FLUX_TASK_RANK", "0"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
    ])
    .unwrap();
    assert_eq!(
        (got.launcher, got.rank, got.size),
        (Launcher::OpenMpi, 1, 2)
    );
}

#[test]
fn refusals_name_the_variable() {
    let e = rank_of(&[]).unwrap_err().to_string();
    for v in [
        "LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "PALS_LOCAL_RANKID",
        "MPI_LOCALRANKID",
        "FLUX_TASK_LOCAL_ID",
        "SLURM_LOCALID",
        "--local-rank",
    ] {
        assert!(e.contains(v), "{e}");
    }
    let e = rank_of(&[("MPI_LOCALRANKID", "0")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("MPI_LOCALNRANKS is not"), "{e}");
    let e = rank_of(&[("PALS_LOCAL_RANKID", "4"), ("PALS_LOCAL_SIZE", "4")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("PALS_LOCAL_RANKID=4") && e.contains("PALS_LOCAL_SIZE"),
        "{e}"
    );
    let e = rank_of(&[("LOCAL_RANK", "x"), ("LOCAL_WORLD_SIZE", "2")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("LOCAL_RANK='x'"), "{e}");
    let given = local_rank(env(&[]), Some((2, 2)), |_, _| Ok(0)).unwrap_err();
    assert!(given.to_string().contains("--local-rank=2"), "{given}");
}

#[test]
fn torchrun_block_map() {
    let local = LocalRank {
        rank: 1,
        size: 2,
        launcher: Launcher::Torchrun,
    };
    let get = env(&[("WORLD_SIZE", "6"), ("GROUP_RANK", "2"), ("RANK", "5")]);
    assert_eq!(torchrun_nodes(get, &local), Some(vec![0, 0, 1, 1, 2, 2]));
    // A rank that is not where blocks would put it: no map.
    let get = env(&[("WORLD_SIZE", "6"), ("GROUP_RANK", "2"), ("RANK", "3")]);
    assert_eq!(torchrun_nodes(get, &local), None);
}

fn binding(node: usize, cpus: &[u32], gpus: &[u32], mems: &[u32]) -> RankBinding {
    RankBinding {
        node,
        cpus: cpus.to_vec(),
        gpus: gpus.to_vec(),
        gpu_env: gpus
            .iter()
            .map(|g| ("CUDA_VISIBLE_DEVICES".to_string(), g.to_string()))
            .collect(),
        mems: mems.to_vec(),
    }
}

fn hosts() -> Vec<String> {
    vec!["a".into(), "b".into()]
}

#[test]
fn srun_lines_for_each_order() {
    let block = [
        binding(0, &[0, 16], &[0], &[0]),
        binding(0, &[1, 17], &[1], &[1]),
        binding(1, &[0, 16], &[0], &[0]),
        binding(1, &[1, 17], &[1], &[1]),
    ];
    let s = srun_script(&block, &hosts()).unwrap();
    // Bits 0 and 16: 0x10001; bits 1 and 17: 0x20002.
    assert!(s.contains("exec srun -N 2 -n 4 --ntasks-per-node=2 --nodelist=a,b -m block --cpu-bind=mask_cpu:0x10001,0x20002 --gpu-bind=map_gpu:0,1 --mem-bind=map_mem:0,1 \"$@\""), "{s}");
    let cyclic = [
        block[0].clone(),
        block[2].clone(),
        block[1].clone(),
        block[3].clone(),
    ];
    assert!(srun_script(&cyclic, &hosts())
        .unwrap()
        .contains("-m cyclic"));
    let odd = [
        block[0].clone(),
        block[2].clone(),
        block[3].clone(),
        block[1].clone(),
    ];
    assert!(srun_script(&odd, &hosts())
        .unwrap()
        .contains("--nodelist=a,b,b,a -m arbitrary"));
    let two_gpus = [
        binding(0, &[0], &[0, 3], &[]),
        binding(0, &[1], &[1, 2], &[]),
    ];
    assert!(srun_script(&two_gpus, &hosts())
        .unwrap()
        .contains("--gpu-bind=mask_gpu:0x9,0x6"));
    let shapes = [binding(0, &[0], &[], &[]), binding(1, &[1], &[], &[])];
    let s = srun_script(&shapes, &hosts()).unwrap();
    assert_eq!(s.matches("\" &\n").count(), 2, "{s}");
    assert!(s.ends_with("wait\n"));
    let mixed = [binding(0, &[0], &[0], &[]), binding(0, &[1], &[], &[])];
    assert!(srun_script(&mixed, &hosts()).is_err());
}

#[test]
fn pals_lines_need_blocks_of_alike_nodes() {
    let block = [
        binding(0, &[0, 1], &[0], &[0]),
        binding(0, &[2, 3], &[1], &[1]),
        binding(1, &[0, 1], &[0], &[0]),
        binding(1, &[2, 3], &[1], &[1]),
    ];
    let s = pals_script(&block, &hosts()).unwrap();
    assert!(
        s.contains(
            "exec mpiexec -n 4 --ppn 2 --hosts a,b --cpu-bind list:0-1:2-3 --mem-bind list:0:1"
        ),
        "{s}"
    );
    assert!(s.contains("case $PALS_LOCAL_RANKID in 0) export CUDA_VISIBLE_DEVICES=0;; 1) export CUDA_VISIBLE_DEVICES=1;; esac"), "{s}");
    let cyclic = [
        block[0].clone(),
        block[2].clone(),
        block[1].clone(),
        block[3].clone(),
    ];
    assert!(pals_script(&cyclic, &hosts())
        .unwrap_err()
        .to_string()
        .contains("--ppn 2"));
}

/// Synthetic machines of one or two packages, one to four cores, one or two threads.
fn machine() -> impl Strategy<Value = (usize, usize, usize)> {
    (1usize..=2, 1usize..=4, 1usize..=2)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Every rank of a node is placed, inside the CPUs the job may use, none sharing a CPU, and
    /// every rank computes the same plan.
    #[test]
    fn node_ranks_placed_once_inside_the_cpus((p, c, t) in machine(), frac in 0.3f64..=1.0, policy in any::<bool>()) {
        let topo = NodeTopology::from_synthetic(&format!("pack:{p} core:{c} pu:{t}")).unwrap();
        let all = topo.cpus();
        // Whole cores of the first PUs in logical order.
        let keep = ((all.len() as f64 * frac) as usize / t).max(1) * t;
        let mut cpus: Vec<u32> = topo.pus().iter().copied().take(keep).collect();
        cpus.sort_unstable();
        let cores = keep / t;
        let mut user = Options::default();
        if !policy {
            user.set("map", Some("csbnh"));
            user.set("bind", Some("1c"));
        }
        let user = with_default_policy(user);
        let node = ExecNode {
            topology: &topo,
            locality: None,
            cpus: &cpus,
            gpus: None,
            cpus_per_rank: None,
            has_omp: false,
            mems_allowed: None,
            weights: None,
        };
        let size = cores;
        let plan = place_node_ranks(&node, &Settings::default(), &user, size, false).unwrap();
        prop_assert_eq!(plan.ranks.len(), size);
        let mut seen = Vec::new();
        for r in &plan.ranks {
            prop_assert!(!r.cpus.is_empty());
            for c in &r.cpus {
                prop_assert!(cpus.binary_search(c).is_ok(), "cpu {} outside {:?}", c, cpus);
                prop_assert!(!seen.contains(c), "cpu {} twice", c);
                seen.push(*c);
            }
        }
        let again = place_node_ranks(&node, &Settings::default(), &user, size, false).unwrap();
        prop_assert_eq!(again.ranks, plan.ranks);
    }
}
