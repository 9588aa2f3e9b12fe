//! `lama plan --format rankfile-ompi4|rankfile-ompi5|hydra|impi` end to end, on nodes whose
//! placements follow from the contract by hand: "pack:2 core:4 pu:2" numbers PU `p` of core `c`
//! of package `s` as OS index `8s + 2c + p`; the shared 2x8x2 Intel XML numbers the two PUs of
//! core `c` as OS `c` and `c + 16`.

use std::process::{Command, Output};

fn lama(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lama"))
        .args(args)
        .env_remove("SLURM_JOB_NODELIST")
        .env_remove("SLURM_JOB_ID")
        .output()
        .expect("run lama")
}

fn plan(map: &str, format: &str) -> Output {
    lama(&[
        "plan",
        "--synthetic",
        "pack:2 core:4 pu:2",
        "--nodes",
        "2",
        "--nodelist",
        "n[1-2]",
        "--np",
        "4",
        "--map",
        map,
        "--bind",
        "1c",
        "--format",
        format,
    ])
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn rankfile_lines_are_the_plan() {
    // csbnh: cores first, so the four ranks take package 0's four cores on node 0.
    let o = plan("csbnh", "rankfile-ompi4");
    assert!(o.status.success(), "{o:?}");
    let lines: Vec<String> = text(&o)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    assert_eq!(
        lines,
        [
            "rank 0=n1 slot=0-1",
            "rank 1=n1 slot=2-3",
            "rank 2=n1 slot=4-5",
            "rank 3=n1 slot=6-7"
        ]
    );
}

/// The rank lines of a plan of `np` ranks with `map` and `bind` on the shared 2x8x2 Intel XML,
/// two nodes, in `format`.
fn intel_lines(np: &str, map: &str, bind: &str, format: &str, restrict: Option<&str>) -> Output {
    let xml = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/topologies/32em64t-2n8c2t-pci-normalio.xml"
    );
    let mut args = vec![
        "plan",
        "--topology",
        xml,
        "--nodes",
        "2",
        "--nodelist",
        "n[1-2]",
        "--np",
        np,
        "--map",
        map,
        "--bind",
        bind,
        "--format",
        format,
    ];
    if let Some(r) = restrict {
        args.extend(["--restrict", r]);
    }
    lama(&args)
}

fn rank_lines(o: &Output) -> Vec<String> {
    text(o)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn open_mpi_5_rankfile_counts_hardware_threads_in_logical_order() {
    // Core c holds OS CPUs c and c+16, so the logical order is 0,16,1,17,...: core 1 is
    // logical PUs 2-3 where Open MPI 4 reads OS CPUs 1,17.
    let o = intel_lines("2", "csbnh", "1c", "rankfile-ompi5", None);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(rank_lines(&o), ["rank 0=n1 slot=0-1", "rank 1=n1 slot=2-3"]);
    assert!(text(&o).contains("# mpirun --map-by rankfile:file=FILE --use-hwthread-cpus -n 2"));
    let o = intel_lines("2", "csbnh", "1c", "rankfile-ompi4", None);
    assert_eq!(
        rank_lines(&o),
        ["rank 0=n1 slot=0,16", "rank 1=n1 slot=1,17"]
    );
    // Restricted to cores 2 and 3, the daemon counts only their four PUs.
    let o = intel_lines("2", "csbnh", "1c", "rankfile-ompi5", Some("2,3,18,19"));
    assert_eq!(rank_lines(&o), ["rank 0=n1 slot=0-1", "rank 1=n1 slot=2-3"]);
    // Two ranks on one core share it: Open MPI 5 must be told to oversubscribe.
    let o = intel_lines("2", "hcsbn", "1c", "rankfile-ompi5", None);
    assert_eq!(rank_lines(&o), ["rank 0=n1 slot=0-1", "rank 1=n1 slot=0-1"]);
    assert!(text(&o).contains("--map-by rankfile:file=FILE:oversubscribe "));
}

#[test]
fn rankfile_without_an_open_mpi_says_which_to_name() {
    let o = Command::new(env!("CARGO_BIN_EXE_lama"))
        .args([
            "plan",
            "--synthetic",
            "pack:1 core:2 pu:1",
            "--nodelist",
            "n1",
            "--format",
            "rankfile",
        ])
        .env("PATH", "/nonexistent")
        .output()
        .expect("run lama");
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("`mpirun --version` cannot run"), "{e}");
    assert!(
        e.contains("give --format rankfile-ompi4 or --format rankfile-ompi5"),
        "{e}"
    );
}

#[test]
fn impi_arguments_are_the_plan() {
    let o = plan("csbnh", "impi");
    assert_eq!(
        text(&o),
        "-bootstrap slurm -n 4 -hosts n1 -ppn 4 -cpu-bind list:0,1:2,3:4,5:6,7\n"
    );
    let o = plan("nbsch", "impi");
    assert_eq!(
        text(&o),
        "-bootstrap slurm -n 4 -hosts n1,n2 -ppn 1 -cpu-bind list:0,1:8,9\n"
    );
}

#[test]
fn hydra_arguments_are_the_plan() {
    let o = plan("csbnh", "hydra");
    assert_eq!(text(&o), "-n 4 -hosts n1:4 -bind-to user:0+1,2+3,4+5,6+7\n");
    // nbsch: nodes first, then packages: n1 and n2 take core 0 of package 0, then of package 1.
    let o = plan("nbsch", "hydra");
    assert_eq!(text(&o), "-n 4 -hosts n1:1,n2:1 -bind-to user:0+1,8+9\n");
}

#[test]
fn launcher_formats_need_host_names() {
    let o = lama(&[
        "plan",
        "--synthetic",
        "pack:2 core:4 pu:2",
        "--np",
        "2",
        "--format",
        "rankfile",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("need the job's host names"));
    // Outside a job there is no one to ask: 3, lama's convention.
    let o = lama(&["plan", "--from-slurm", "--np", "2"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("inside salloc or sbatch"));
}
