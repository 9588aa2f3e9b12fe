//! Every size a user, a file or Slurm supplies is refused past its documented limit with a message
//! naming the limit, quickly and without reserving memory for it.

use std::path::Path;

use lama::limits::{self, MAX_NODES, MAX_SYNTHETIC_PUS, MAX_TASKS};
use lama::slurm::{expand_counts, expand_hostlist, read_hostfile};
use lama::taskmap::{parse_any, pmi, raw, rfc34};
use lama::NodeTopology;

fn names_limit(msg: &str, limit: impl ToString) {
    assert!(
        msg.contains(&limit.to_string()),
        "'{msg}' does not name {}",
        limit.to_string()
    );
}

#[test]
fn hostlists_stop_at_the_task_limit_over_all_parts() {
    let e = expand_hostlist("n[0-99999999999]").unwrap_err().to_string();
    names_limit(&e, MAX_TASKS);
    // Each part is small; together they pass the limit.
    let parts: Vec<String> = (0..20).map(|i| format!("p{i}x[0-999999]")).collect();
    let e = expand_hostlist(&parts.join(",")).unwrap_err().to_string();
    names_limit(&e, MAX_TASKS);
    let e = expand_hostlist("a[0-9999]b[0-9999]")
        .unwrap_err()
        .to_string();
    names_limit(&e, MAX_TASKS);
    assert_eq!(expand_hostlist("n[1-3]").unwrap(), ["n1", "n2", "n3"]);
}

#[test]
fn counts_stop_at_the_node_and_task_limits() {
    let e = expand_counts("1(x99999999999)").unwrap_err().to_string();
    names_limit(&e, MAX_NODES);
    let e = expand_counts("1(x1048577)").unwrap_err().to_string();
    names_limit(&e, MAX_NODES);
    let e = expand_counts("1(x1000000),1(x1000000)")
        .unwrap_err()
        .to_string();
    names_limit(&e, MAX_NODES);
    let e = expand_counts("4000000000").unwrap_err().to_string();
    names_limit(&e, MAX_TASKS);
    assert_eq!(expand_counts("2(x2),1").unwrap(), [2, 2, 1]);
}

#[test]
fn host_files_stop_at_the_task_limit() {
    let e = read_hostfile("n1*99999999999\n").unwrap_err().to_string();
    names_limit(&e, MAX_TASKS);
    let e = read_hostfile("n1*10000000\nn2*10000000\n")
        .unwrap_err()
        .to_string();
    names_limit(&e, MAX_TASKS);
    assert_eq!(read_hostfile("n1*2\n").unwrap(), ["n1", "n1"]);
}

#[test]
fn task_maps_stop_at_the_task_and_node_limits() {
    for text in [
        "[[0,1,1,18446744073709551615]]",
        "[[0,1,1,16777217]]",
        "[[0,4096,4096,2]]",
    ] {
        let e = rfc34::decode(text).unwrap_err().to_string();
        names_limit(&e, MAX_TASKS);
    }
    let e = rfc34::decode("[[1048575,2,1,1]]").unwrap_err().to_string();
    names_limit(&e, MAX_NODES);
    let e = pmi::decode("(vector,(0,18446744073709551615,1))")
        .unwrap_err()
        .to_string();
    names_limit(&e, MAX_NODES);
    let e = raw::decode("0-4294967295").unwrap_err().to_string();
    names_limit(&e, MAX_TASKS);
    // The largest map within the limits is read without expanding it.
    let m = rfc34::decode("[[0,1048576,16,1]]").unwrap();
    assert_eq!(m.total_tasks(), MAX_TASKS as u64);
    assert_eq!(parse_any("[[0,2,1,1]]").unwrap().nnodes(), 2);
}

#[test]
fn synthetic_descriptions_stop_at_the_pu_limit() {
    for desc in [
        "pack:1000 core:1000 pu:1000",
        "pack:64 core:256 pu:4",
        "pack:99999999999999999999",
    ] {
        let e = NodeTopology::from_synthetic(desc).unwrap_err().to_string();
        assert!(
            e.contains(&MAX_SYNTHETIC_PUS.to_string()) || e.contains("is not a synthetic level"),
            "{desc}: {e}"
        );
    }
    let e = NodeTopology::from_synthetic("pack:two core:4")
        .unwrap_err()
        .to_string();
    assert!(e.contains("'pack:two' is not a synthetic level"), "{e}");
    let t = NodeTopology::from_synthetic("pack:2 [numa] core:4 pu:2").unwrap();
    assert_eq!(t.num_pus(), 16);
    let t = NodeTopology::from_synthetic("pack:2 core:4(indexes=0,1,2,3) pu:1").unwrap();
    assert_eq!(t.num_pus(), 8);
}

#[test]
fn files_are_read_only_when_regular_and_small_enough() {
    let dir = std::env::temp_dir().join(format!("lama-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Nobody writes to the FIFO: a blocking open would hang here.
    let e = limits::read_text(&fifo, 100).unwrap_err();
    assert_eq!(e, "not a regular file");
    let e = limits::read_text(&dir, 100).unwrap_err();
    assert_eq!(e, "not a regular file");
    let big = dir.join("big");
    std::fs::write(&big, "x".repeat(101)).unwrap();
    let e = limits::read_text(&big, 100).unwrap_err();
    assert!(e.contains("101 bytes") && e.contains("100 bytes"), "{e}");
    assert_eq!(limits::read_text(&big, 101).unwrap().len(), 101);
    let e = limits::read_text(Path::new("/nonexistent/lama"), 100).unwrap_err();
    assert!(e.contains("No such file"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Inputs the fuzzer found (fuzz/artifacts), kept as regression tests.
#[test]
fn fuzzer_findings() {
    // A ']' before any '[' made the comma part of a host name.
    let e = expand_hostlist("aZ1-2]b[3-4],login")
        .unwrap_err()
        .to_string();
    assert!(e.contains("']' without '['"), "{e}");
    let e = expand_hostlist("a[1-[2]]").unwrap_err().to_string();
    assert!(e.contains("'[' inside brackets"), "{e}");
    // 5.5M names on one host file line: refused at a lower limit, once that many are made.
    let e = lama::slurm::read_hostfile_within("~\u{1}\u{14}[1-5555560]*1#\nn0", 1000)
        .unwrap_err()
        .to_string();
    assert!(e.contains("past 1000 tasks"), "{e}");
    // `h*0` names a plain host for no task in the streamed map as in the collected list (the
    // fuzzer's first finding once names were made one at a time).
    let text = "\u{1}*0\n=3 ncmo\n";
    let hosts = lama::slurm::read_hostfile(text).unwrap();
    assert_eq!(hosts, ["=3", "ncmo"]);
    let map = lama::slurm::step_map::arbitrary_map(
        &[1, 1],
        &hosts,
        lama::slurm::step_map::HostFile::Text(text),
    );
    assert_eq!(map.unwrap().total_tasks(), 2);
    // The control characters of the entry are escaped in the message.
    assert!(e.contains("~\\u{1}\\u{14}[1-5555560]*1"), "{e}");
}

/// A plane size the user exported must not break the task map of a block step (found by
/// tests/slurm/faults.sh).
#[test]
fn a_user_plane_size_is_ignored_outside_plane_steps() {
    let env = lama::slurm::StepEnv {
        tasks_per_node: Some("2(x2)".into()),
        distribution: Some("block".into()),
        plane_size: Some("x".into()),
        ..Default::default()
    };
    let map = env.taskmap(|_| Err("not read".into())).unwrap();
    assert_eq!(map.to_string(), "[[0,2,2,1]]");
}
