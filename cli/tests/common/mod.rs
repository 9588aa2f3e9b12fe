//! What the end-to-end tests of the `lama` binary share.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `lama` with `args`, without the caller's job variables, and `env` added.
pub fn lama(args: &[&str], env: &[(&str, &str)]) -> Output {
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

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A real machine's XML in tests/topologies.
pub fn topo(name: &str) -> String {
    format!("{}/../tests/topologies/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A synthetic node: PU `p` of core `c` of package `s` is OS index `8s + 2c + p`.
pub const NODE: &str = "pack:2 core:4 pu:2";

/// Arguments for [`NODE`]: `--synthetic NODE` and then `rest`'s words.
pub fn synthetic(rest: &str) -> Vec<&str> {
    ["--synthetic", NODE]
        .into_iter()
        .chain(rest.split_whitespace())
        .collect()
}

/// `lama plan` on [`NODE`]: `plan --synthetic NODE` and then `rest`'s words.
pub fn plan_on_node(rest: &str) -> Vec<&str> {
    ["plan"].into_iter().chain(synthetic(rest)).collect()
}

#[path = "../../../lama/tests/common/scratch.rs"]
mod scratch_folder;

/// A scratch folder `lama-cli-NAME-PID`, removed when dropped.
pub fn scratch(name: &str) -> scratch_folder::Scratch {
    scratch_folder::scratch(&format!("cli-{name}"))
}

pub fn lines(o: &Output) -> Vec<String> {
    stdout(o).lines().map(String::from).collect()
}

pub fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}
