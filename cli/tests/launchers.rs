//! `lama plan --format rankfile|hydra` end to end, on synthetic nodes whose placements follow
//! from the contract by hand: "pack:2 core:4 pu:2" numbers PU `p` of core `c` of package `s` as
//! OS index `8s + 2c + p`.

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
    let o = plan("csbnh", "rankfile");
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
    let o = lama(&["plan", "--from-slurm", "--np", "2"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("inside salloc or sbatch"));
}
