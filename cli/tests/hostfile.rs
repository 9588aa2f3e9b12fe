//! `lama hostfile` and `lama plan --slurm-hostfile` end to end: the seed examples, Slurm's job and host lists, errors that name the entry.

mod common;

use serde_json::Value;
use std::process::Command;

use common::{lama, lines, scratch, stdout, words, NODE};

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
            1,
            "'+n3': the allocation has 3 node(s), so valid indexes are +n0 to +n2",
        ),
        (
            vec!["--host", "+n0,+e:3"],
            1,
            "asks for 3 empty node(s), but only 2",
        ),
        (
            vec!["--host", "n9"],
            1,
            "host 'n9' is not in the allocation (n1, n2, n3)",
        ),
        (
            vec!["--host", "+n0", "--np", "3"],
            1,
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
