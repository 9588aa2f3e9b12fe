//! `lama exec` as a rank runs it: refusals in one line with exit status 2, and the node's ranks
//! of one launch (here, children of this test process) checked against each other through their
//! claims in `/dev/shm`.

use std::process::{Command, Stdio};
use std::time::Duration;

fn lama() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lama"));
    // No launcher's variables from whatever runs the tests.
    for v in [
        "LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "PALS_LOCAL_RANKID",
        "MPI_LOCALRANKID",
        "FLUX_TASK_LOCAL_ID",
        "SLURM_LOCALID",
    ] {
        c.env_remove(v);
    }
    c
}

fn refused(args: &[&str], env: &[(&str, &str)], wanted: &str) {
    let out = lama()
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("lama runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with("lama exec: ") && err.contains(wanted),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "the command must not run");
}

#[test]
fn refusals_are_one_line_and_exit_2() {
    refused(&["exec", "--", "echo", "ran"], &[], "none of LOCAL_RANK");
    refused(
        &["exec", "--", "echo", "ran"],
        &[("LOCAL_RANK", "0")],
        "LOCAL_WORLD_SIZE is not",
    );
    refused(
        &["exec", "--", "echo", "ran"],
        &[("MPI_LOCALRANKID", "3"), ("MPI_LOCALNRANKS", "2")],
        "MPI_LOCALRANKID=3 is not below",
    );
    refused(
        &[
            "exec",
            "--local-rank",
            "0",
            "--local-size",
            "1",
            "--map",
            "zz",
            "--",
            "echo",
            "ran",
        ],
        &[],
        "invalid --map 'zz'",
    );
}

#[test]
fn a_command_that_cannot_run() {
    let out = lama()
        .args(["exec", "--off", "--", "/nonexistent/program"])
        .output()
        .expect("lama runs");
    assert_eq!(out.status.code(), Some(127));
}

/// This test's claims in the rendezvous folder (this process is the ranks' parent).
fn claimed_by(pid: u32) -> bool {
    let uid = effective_uid();
    // Where lama exec keeps them: /dev/shm, else the temporary folder.
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    std::fs::read_dir(base.join(format!("lama-exec-{uid}")))
        .map(|d| {
            d.flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .ends_with(&format!("-{pid}"))
            })
        })
        .unwrap_or(false)
}

/// The effective user id, from /proc (no libc in this test).
fn effective_uid() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("0")
        .to_string()
}

#[test]
fn ranks_of_one_launch_must_agree() {
    // Rank 0 of 2 runs on (its claim lives as long as its process).
    let mut first = lama()
        .args([
            "exec",
            "--local-rank",
            "0",
            "--local-size",
            "2",
            "--cpus-per-rank",
            "1",
            "--",
            "sleep",
            "30",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("lama runs");
    let mut waited = 0;
    while !claimed_by(first.id()) && waited < 600 {
        std::thread::sleep(Duration::from_millis(50));
        waited += 1;
    }
    assert!(claimed_by(first.id()), "rank 0 never claimed its place");
    refused(
        &[
            "exec",
            "--local-rank",
            "1",
            "--local-size",
            "3",
            "--",
            "echo",
            "ran",
        ],
        &[],
        "disagree on how many ranks this node runs",
    );
    refused(
        &[
            "exec",
            "--local-rank",
            "0",
            "--local-size",
            "2",
            "--",
            "echo",
            "ran",
        ],
        &[],
        "local rank 0 is claimed by two ranks",
    );
    let _ = first.kill();
    let _ = first.wait();
    // Its process gone, its claim is too: the same rank may start again.
    let out = lama()
        .args([
            "exec",
            "--local-rank",
            "0",
            "--local-size",
            "2",
            "--dry-run",
            "--",
            "true",
        ])
        .output()
        .expect("lama runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
