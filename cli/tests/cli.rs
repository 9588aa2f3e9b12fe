//! The `lama` binary end to end: `lama taskmap`, generated manual pages and completions, and inputs that must be errors rather than crashes (the other commands have their own files).

mod common;

use serde_json::Value;

use common::{lama, scratch, stdout, NODE};

#[test]
fn taskmap_converts_and_queries() {
    let t = |args: &[&str]| stdout(&lama(args, &[]));
    assert_eq!(
        t(&["taskmap", "0,4,8,12;1,5,9,13;2,6,10,14;3,7,11,15"]),
        "[[0,4,1,4]]"
    );
    assert_eq!(
        t(&["taskmap", "--to=raw", "[[0,6,1,2],[4,2,1,2]]"]),
        "0,6;1,7;2,8;3,9;4,10,12,14;5,11,13,15"
    );
    assert_eq!(
        t(&[
            "taskmap",
            "--to=pmi",
            "{\"version\":1,\"map\":[[0,6,2,1],[4,2,2,1]]}"
        ]),
        "(vector,(0,6,2),(4,2,2))"
    );
    assert_eq!(
        t(&["taskmap", "(vector,(0,4,1),(0,4,1),(0,4,1),(0,4,1))"]),
        "[[0,4,1,4]]"
    );
    assert_eq!(t(&["taskmap", "--taskids=1", "[[0,4,1,4]]"]), "1,5,9,13");
    assert_eq!(t(&["taskmap", "--ntasks=4", "[[0,4,2,1],[4,2,4,1]]"]), "4");
    assert_eq!(t(&["taskmap", "--nodeid=13", "[[0,6,1,2],[4,2,1,2]]"]), "5");
    assert_eq!(
        t(&["taskmap", "--to=multiline", "[[1,1,1,1],[0,1,1,1]]"]),
        "0: 1\n1: 0"
    );
    assert_eq!(
        t(&[
            "taskmap",
            "--hostname=2",
            "--nodelist=n[1-3]",
            "[[0,3,1,2]]"
        ]),
        "n3"
    );
    assert_eq!(
        t(&["taskmap", "--to=hosts", "--nodelist=n[1-2]", "[[0,2,1,2]]"]),
        "n1: 0,2\nn2: 1,3"
    );
    let o = lama(
        &["taskmap", "--to=raw"],
        &[("TASK_MAP", "{\"version\":1,\"map\":[[0,2,2,1]]}")],
    );
    assert_eq!(stdout(&o), "0-1;2-3");
    for bad in [
        vec!["taskmap", "[[0,1,1]]"],
        vec!["taskmap"],
        vec!["taskmap", "--nodeid=9", "[[0,1,1,1]]"],
        vec!["taskmap", "--to=hosts", "[[0,2,1,1]]"],
    ] {
        let o = lama(&bad, &[]);
        assert!(!o.status.success(), "{bad:?}");
        assert_eq!(
            String::from_utf8_lossy(&o.stderr).lines().count(),
            1,
            "{bad:?}"
        );
    }
}

#[test]
fn taskmap_from_slurm_environment_and_flags() {
    let env = [
        ("SLURM_STEP_TASKS_PER_NODE", "2(x3)"),
        ("SLURM_STEP_NODELIST", "n[1-3]"),
        ("SLURM_DISTRIBUTION", "cyclic:block"),
    ];
    assert_eq!(
        stdout(&lama(&["taskmap", "--from-slurm"], &env)),
        "[[0,3,1,2]]"
    );
    assert_eq!(
        stdout(&lama(&["taskmap", "--from-slurm", "--to=hosts"], &env)),
        "n1: 0,3\nn2: 1,4\nn3: 2,5"
    );
    let o = lama(
        &[
            "taskmap",
            "--from-slurm",
            "--tasks-per-node=2,1,1",
            "--distribution=block",
        ],
        &[],
    );
    assert_eq!(stdout(&o), "[[0,1,2,1],[1,2,1,1]]");
    let dir = std::env::temp_dir().join(format!("lama-hostfile-{}", std::process::id()));
    std::fs::write(&dir, "n2\nn1\nn1\nn3\nn2\n").expect("write hostfile");
    let hf = dir.to_string_lossy().to_string();
    let o = lama(
        &[
            "taskmap",
            "--from-slurm",
            "--tasks-per-node=2(x2),1",
            "--distribution=arbitrary",
            "--nodelist=n[1-3]",
            &format!("--hostfile={hf}"),
            "--to=raw",
        ],
        &[],
    );
    assert_eq!(stdout(&o), "1-2;0,4;3");
    let _ = std::fs::remove_file(&dir);
    let o = lama(&["taskmap", "--from-slurm"], &[]);
    assert!(!o.status.success());
}

#[test]
fn missing_or_broken_topology_files_are_errors_not_crashes() {
    let dir = scratch("topology-files");
    let missing = dir.join("missing.xml");
    let broken = dir.join("broken.xml");
    std::fs::write(&broken, "not xml at all").expect("write");
    for (path, says) in [
        (&missing, "No such file"),
        (&broken, "cannot load topology"),
    ] {
        let o = lama(
            &["plan", "--topology", path.to_str().expect("utf-8 path")],
            &[],
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn generate_writes_manual_pages_and_completions_from_the_code() {
    let dir = scratch("generate");
    let o = lama(&["generate", dir.to_str().expect("path")], &[]);
    assert!(o.status.success(), "{o:?}");
    for f in [
        "man1/lama.1",
        "man1/lama-plan.1",
        "man1/lama-taskmap.1",
        "man1/lama-hostfile.1",
        "man8/lama-spank.8",
        "completions/lama.bash",
        "completions/_lama",
    ] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        assert!(text.len() > 200, "{f} is missing or nearly empty");
    }
    // Every option of `lama plan` is in its page, every plugin option and plugstack.conf
    // argument in lama-spank(8) (roff escapes each '-').
    let plan = std::fs::read_to_string(dir.join("man1/lama-plan.1")).expect("page");
    for opt in [
        "synthetic",
        "threads",
        "omp\\-bind",
        "slurm\\-hostfile",
        "device\\-weights",
    ] {
        assert!(
            plan.contains(&format!("\\-\\-{opt}")),
            "lama-plan.1 lacks --{opt}"
        );
    }
    let spank = std::fs::read_to_string(dir.join("man8/lama-spank.8")).expect("page");
    for o in lama::plugin::OPTIONS {
        let name = o.name.replace('-', "\\-");
        assert!(
            spank.contains(&format!("\\-\\-lama\\-{name}")),
            "lama-spank.8 lacks --lama-{}",
            o.name
        );
    }
    for s in lama::plugin::SETTINGS {
        let key = s.key.replace('-', "\\-");
        assert!(
            spank.contains(&format!(".B {key}=")),
            "lama-spank.8 lacks {}=",
            s.key
        );
    }
    assert!(
        !spank.contains('@'),
        "a placeholder is left in lama-spank.8"
    );
    let bash = std::fs::read_to_string(dir.join("completions/lama.bash")).expect("bash");
    assert!(bash.contains("--topology") && bash.contains("taskmap"));
}

#[test]
fn huge_sizes_are_errors_not_aborts() {
    // Both once aborted with "memory allocation of ... bytes failed".
    for args in [
        ["--np", "999999999999", "--nodes", "999999999999"],
        ["--np", "4294967296", "--nodes", "4294967296"],
        ["--np", "4", "--nodes", "2000000"],
    ] {
        let mut all = vec![
            "plan",
            "--synthetic",
            NODE,
            "--map",
            "csbnh",
            "--format",
            "json",
        ];
        all.extend(args);
        let o = lama(&all, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        let v: Value = serde_json::from_str(&stdout(&o)).expect("json");
        assert_eq!(v["error"]["kind"], "invalid-option", "{args:?}");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("at most"));
    }
}
