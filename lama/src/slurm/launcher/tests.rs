use super::*;

fn hosts(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("n{i}")).collect()
}

fn ranks(places: &[(usize, &[u32])]) -> Vec<RankPlace> {
    places
        .iter()
        .map(|&(node, cpus)| RankPlace {
            node,
            cpus: cpus.to_vec(),
        })
        .collect()
}

#[test]
fn daemons_are_known_by_program_name_only() {
    let none = || None;
    assert_eq!(
        launcher_daemon(b"/usr/bin/orted", none),
        Some("Open MPI's orted")
    );
    assert_eq!(launcher_daemon(b"prted", none), Some("Open MPI's prted"));
    assert_eq!(
        launcher_daemon(b"/usr/bin/hydra_pmi_proxy", none),
        Some("MPICH's hydra_pmi_proxy")
    );
    assert_eq!(
        launcher_daemon(b"/opt/venv/bin/hydra_bstrap_proxy", none),
        Some("Intel MPI's hydra_bstrap_proxy")
    );
    for other in [
        "./a.out",
        "/usr/bin/orted.sh",
        "xorted",
        "bash",
        "pmi_proxy",
        "",
    ] {
        assert_eq!(launcher_daemon(other.as_bytes(), none), None, "{other}");
    }
}

#[test]
fn a_flux_instance_is_known_by_its_command() {
    let second = |a: &'static [u8]| move || Some(a);
    for (argv0, argv1) in [
        (&b"flux"[..], &b"start"[..]),
        (b"/opt/flux/bin/flux", b"broker"),
        (b"/usr/libexec/flux/cmd/flux-broker", b"--setattr=x"),
    ] {
        assert_eq!(launcher_daemon(argv0, second(argv1)), Some(FLUX_BROKER));
    }
    // Other flux commands are jobs like any other (a `flux run` inside an allocation's step).
    assert_eq!(launcher_daemon(b"flux", second(b"run")), None);
    assert_eq!(launcher_daemon(b"flux", || None), None);
    assert!(daemon_note(FLUX_BROKER).contains("spans every CPU"));
}

#[test]
fn job_cores_reads_scontrol_detail_lines() {
    // As Slurm 22.05 prints `scontrol show job -d` (the lines that matter, and one that must
    // not be taken for them).
    let text = "   NodeList=n[1-3] BatchHost=n1\n\
                \x20    Nodes=n[1-2] CPU_IDs=0-3 Mem=0 GRES=\n\
                \x20    Nodes=n3 CPU_IDs=2,3,6-7 Mem=0 GRES=\n";
    let got = job_cores(text, |h| if h == "n3" { 2 } else { 1 }).unwrap();
    assert_eq!(
        got,
        vec![
            ("n1".to_string(), vec![0, 1, 2, 3]),
            ("n2".to_string(), vec![0, 1, 2, 3]),
            ("n3".to_string(), vec![1, 3]),
        ]
    );
    assert!(job_cores("JobId=1 JobState=PENDING\n", |_| 1).is_err());
    let bad = job_cores("Nodes=n1 CPU_IDs=x-y\n", |_| 1).unwrap_err();
    assert!(bad.to_string().contains("CPU_IDs=x-y"), "{bad}");
}

#[test]
fn rankfile_names_hosts_and_physical_cpus() {
    let r = ranks(&[(0, &[0]), (0, &[1, 2, 3, 8]), (1, &[0])]);
    let text = rankfile(&r, &hosts(2), OpenMpi::V4, &[]).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        lines,
        [
            "rank 0=n1 slot=0",
            "rank 1=n1 slot=1-3,8",
            "rank 2=n2 slot=0"
        ]
    );
    assert!(text.contains("rmaps_rank_file_physical 1 --use-hwthread-cpus -n 3"));
    // Ranks 0 and 1 on node 0, rank 2 on node 1: RFC 34's block of one node with two tasks,
    // then one of one.
    assert!(
        text.contains("# TASK_MAP={\"version\":1,\"map\":[[0,1,2,1],[1,1,1,1]]}\n"),
        "{text}"
    );
}

#[test]
fn hydra_block_and_cyclic_layouts() {
    let block = ranks(&[(0, &[0]), (0, &[1]), (1, &[0]), (1, &[1]), (2, &[0])]);
    assert_eq!(
        hydra_args(&block, &hosts(3)).unwrap(),
        "-n 5 -hosts n1:2,n2:2,n3:1 -bind-to user:0,1\n"
    );
    let cyclic = ranks(&[(0, &[0]), (1, &[0]), (2, &[0]), (0, &[1]), (1, &[1])]);
    assert_eq!(
        hydra_args(&cyclic, &hosts(3)).unwrap(),
        "-n 5 -hosts n1:1,n2:1,n3:1 -bind-to user:0,1\n"
    );
    let wide = ranks(&[(0, &[0, 1, 4, 5]), (1, &[0, 1, 4, 5])]);
    assert_eq!(
        hydra_args(&wide, &hosts(2)).unwrap(),
        "-n 2 -hosts n1:1,n2:1 -bind-to user:0+1+4+5\n"
    );
}

#[test]
fn hydra_refuses_what_it_cannot_say() {
    // Rounds: after n1 then n2, Hydra goes back to n1, not on to n3.
    let order = ranks(&[(0, &[0]), (1, &[0]), (0, &[1]), (2, &[0])]);
    let e = hydra_args(&order, &hosts(3)).unwrap_err().to_string();
    assert!(e.contains("rank 3 on n2, not on n3"), "{e}");
    // One binding list for every node.
    let uneven = ranks(&[(0, &[0]), (1, &[1])]);
    let e = hydra_args(&uneven, &hosts(2)).unwrap_err().to_string();
    assert!(e.contains("local rank 0"), "{e}");
    assert!(e.contains("srun"), "{e}");
}

#[test]
fn open_mpi_5_slots_count_the_usable_pus_in_logical_order() {
    // Core c holds OS CPUs c and c+4 (a hyperthreaded Intel numbering): logical order 0,4,1,5,...
    // Node 0's job may use every PU; node 1's only cores 1 and 2.
    let all = vec![0, 4, 1, 5, 2, 6, 3, 7];
    let some = vec![1, 5, 2, 6];
    let r = ranks(&[(0, &[0, 4]), (0, &[1, 5]), (1, &[2, 6]), (1, &[2])]);
    let text = rankfile(&r, &hosts(2), OpenMpi::V5, &[all.clone(), some.clone()]).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        lines,
        [
            "rank 0=n1 slot=0-1",
            "rank 1=n1 slot=2-3",
            "rank 2=n2 slot=2-3",
            "rank 3=n2 slot=2"
        ]
    );
    assert!(text.contains("Open MPI 5.x"), "{text}");
    assert!(text.contains("--map-by rankfile:file=FILE:oversubscribe --use-hwthread-cpus -n 4"));
    // Without a shared CPU, no oversubscription is asked for.
    let alone = rankfile(&r[..3], &hosts(2), OpenMpi::V5, &[all, some.clone()]).unwrap();
    assert!(alone.contains("--map-by rankfile:file=FILE --use-hwthread-cpus -n 3"));
    // A CPU the daemon may not use has no slot number: refused, naming it.
    let e = rankfile(&r, &hosts(2), OpenMpi::V5, &[some.clone(), some]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Open MPI 5 cannot bind rank 0 on n1 to CPU 0: its daemon there may use only CPUs 1-2,5-6"
    );
}

#[test]
fn open_mpi_release_from_mpirun_version() {
    let v = |t| OpenMpi::from_version(t);
    assert_eq!(
        v("mpirun (Open MPI) 5.0.11\n\nReport bugs"),
        Some(OpenMpi::V5)
    );
    assert_eq!(v("mpirun (Open MPI) 4.1.4\n"), Some(OpenMpi::V4));
    assert_eq!(v("HYDRA build details:\n    Version: 4.0.2"), None);
    assert_eq!(v("mpirun (Open MPI) x"), None);
}

#[test]
fn impi_rounds_of_equal_counts() {
    let block = ranks(&[(0, &[0]), (0, &[1]), (1, &[0]), (1, &[1]), (2, &[0])]);
    assert_eq!(
        impi_args(&block, &hosts(3)).unwrap(),
        "-bootstrap slurm -n 5 -hosts n1,n2,n3 -ppn 2 -cpu-bind list:0:1\n"
    );
    let cyclic = ranks(&[(0, &[0, 1]), (1, &[0, 1]), (0, &[2, 3]), (1, &[2, 3])]);
    assert_eq!(
        impi_args(&cyclic, &hosts(2)).unwrap(),
        "-bootstrap slurm -n 4 -hosts n1,n2 -ppn 1 -cpu-bind list:0,1:2,3\n"
    );
    // Hydra can say 2 on n1 then 1 on n2 in rounds; Intel MPI's -ppn cannot.
    let uneven = ranks(&[
        (0, &[0]),
        (0, &[1]),
        (1, &[0]),
        (0, &[2]),
        (0, &[3]),
        (1, &[1]),
    ]);
    assert!(hydra_args(&uneven, &hosts(2)).is_ok());
    let e = impi_args(&uneven, &hosts(2)).unwrap_err().to_string();
    assert!(e.starts_with("Intel MPI's mpiexec cannot express this plan: with -ppn 2, it starts ranks in rounds (2 on n1, 2 on n2), which would put rank 3 on n2, not on n1"), "{e}");
    let apart = ranks(&[(0, &[0]), (1, &[1])]);
    let e = impi_args(&apart, &hosts(2)).unwrap_err().to_string();
    assert!(e.contains("-cpu-bind list: list"), "{e}");
}
