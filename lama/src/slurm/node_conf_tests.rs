use super::*;

fn conf(text: &str) -> (tempdir::Dir, PathBuf) {
    let d = tempdir::Dir::new();
    let p = d.0.join("slurm.conf");
    std::fs::write(&p, text).unwrap();
    (d, p)
}

mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let p = std::env::temp_dir().join(format!(
                "lama-node-conf-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn node(cpus: u32, sockets: u32, cores: u32, threads: u32) -> Option<NodeConf> {
    Some(NodeConf {
        cpus,
        sockets,
        cores,
        threads,
    })
}

#[test]
fn reads_the_line_that_lists_the_node() {
    let (_d, p) = conf(
        "ClusterName=x\n\
         # NodeName=n2 CPUs=99\n\
         NodeName=n1 Sockets=2 CoresPerSocket=8 ThreadsPerCore=2\n\
         NodeName=n[2-4,9] cpus=16 RealMemory=1000 # the small ones\n",
    );
    let got = node_conf(&p, "n3").unwrap();
    // CPUs alone: Sockets = CPUs / (1 core x 1 thread).
    assert_eq!(got.node, node(16, 16, 1, 1));
    assert!(!got.overrides);
    assert_eq!(node_conf(&p, "n1").unwrap().node, node(32, 2, 8, 2));
    assert_eq!(node_conf(&p, "n5").unwrap().node, None);
}

#[test]
fn defaults_hostnames_continuations_and_quotes() {
    let (_d, p) = conf(
        "NodeName=DEFAULT CoresPerSocket=4 ThreadsPerCore=2\n\
         NodeName=DEFAULT Sockets=2\n\
         NODENAME=c[1-2] NodeHostname=h[1-2] \\\n  Feature=\"a b\" ThreadsPerCore=1\n\
         SlurmdParameters=l3cache_as_socket,config_overrides\n",
    );
    let got = node_conf(&p, "h2").unwrap();
    // Sockets from the second DEFAULT, CoresPerSocket from the first, ThreadsPerCore its own.
    assert_eq!(got.node, node(8, 2, 4, 1));
    assert!(got.overrides);
}

#[test]
fn follows_includes_relative_to_slurm_conf() {
    let (d, p) = conf("Include nodes.conf\nPartitionName=all Nodes=ALL\n");
    std::fs::write(
        d.0.join("nodes.conf"),
        "NodeName=n1 Boards=2 SocketsPerBoard=2 CoresPerSocket=2\n",
    )
    .unwrap();
    // Sockets = Boards x SocketsPerBoard.
    assert_eq!(node_conf(&p, "n1").unwrap().node, node(8, 4, 2, 1));
    let (_e, q) = conf("Include nodes/*.conf\n");
    assert!(node_conf(&q, "n1").unwrap_err().contains("pattern"));
}

#[test]
fn a_bad_number_or_file_is_an_error() {
    let (_d, p) = conf("NodeName=n1 CPUs=lots\n");
    assert!(node_conf(&p, "n1").unwrap_err().contains("'lots'"));
    assert!(node_conf(Path::new("/nonexistent/slurm.conf"), "n1").is_err());
}

#[test]
fn cpus_that_match_nothing_are_reset() {
    // 12 CPUs on 2 x 4 x 2: neither sockets, nor cores, nor threads; Slurm resets them to 16.
    assert_eq!(
        infer(Some(12), 1, Some(2), None, 4, 2),
        NodeConf {
            cpus: 16,
            sockets: 2,
            cores: 4,
            threads: 2
        }
    );
}

// 16 cores of 2 hardware threads, as slurmd's hwloc reads them.
const SMT: Hardware = Hardware {
    cpus: 32,
    cores: 16,
};

fn cores(threads: u32, stride: u32, cores: u32) -> Option<AbstractCores> {
    Some(AbstractCores {
        threads,
        stride,
        cores,
    })
}

#[test]
fn a_node_declared_as_it_is_needs_no_rule() {
    let c = node(32, 2, 8, 2).unwrap();
    for n in [Numbering::Configured, Numbering::Hardware] {
        assert_eq!(slurmd_cores(&c, SMT, false, n), None);
    }
}

#[test]
fn cpus_alone_makes_every_thread_a_core() {
    let c = node(32, 32, 1, 1).unwrap();
    // 23.11+: the "only CPUs= was configured" case, threads = actual_threads = 1.
    assert_eq!(
        slurmd_cores(&c, SMT, false, Numbering::Hardware),
        cores(1, 1, 32)
    );
    // 22.05: the configured values, abstract id = core x 1 thread.
    assert_eq!(
        slurmd_cores(&c, SMT, false, Numbering::Configured),
        cores(1, 1, 32)
    );
}

#[test]
fn one_thread_per_core_on_smt_hardware() {
    let c = node(16, 2, 8, 1).unwrap();
    // 23.11+: abstract id = core x actual_threads: each core's first thread.
    assert_eq!(
        slurmd_cores(&c, SMT, true, Numbering::Hardware),
        cores(1, 2, 16)
    );
    // 22.05: abstract id = core x configured threads (1): the c-th thread.
    assert_eq!(
        slurmd_cores(&c, SMT, true, Numbering::Configured),
        cores(1, 1, 16)
    );
    // CPUs=16 alone on the same machine is the same declaration.
    let alone = node(16, 16, 1, 1).unwrap();
    assert_eq!(
        slurmd_cores(&alone, SMT, false, Numbering::Hardware),
        cores(1, 2, 16)
    );
}

#[test]
fn more_cpus_declared_than_found() {
    let c = node(64, 2, 16, 2).unwrap();
    // Without config_overrides slurmd takes the hardware's: hwloc's cores.
    assert_eq!(slurmd_cores(&c, SMT, false, Numbering::Hardware), None);
    // With it, the configuration's.
    assert_eq!(
        slurmd_cores(&c, SMT, true, Numbering::Hardware),
        cores(2, 2, 32)
    );
}

#[test]
fn positions_wrap_as_slurm_does() {
    let c = AbstractCores {
        threads: 2,
        stride: 2,
        cores: 32,
    };
    assert_eq!(c.positions(3, 32).unwrap().collect::<Vec<_>>(), [6, 7]);
    // Past the PUs Slurm takes the position modulo their count.
    assert_eq!(c.positions(17, 32).unwrap().collect::<Vec<_>>(), [2, 3]);
    assert!(c.positions(32, 32).is_none());
}

#[test]
fn step_cpus_by_slurms_rule() {
    // 2 cores of 2 threads, OS numbering 0,2 / 1,3 (hwloc's logical order: 0 2 1 3).
    let span = |start, end| crate::topology::Span { start, end };
    let mut levels: [Vec<crate::topology::Span>; 9] = Default::default();
    levels[crate::level::Level::ALL
        .iter()
        .position(|&l| l == crate::level::Level::Core)
        .unwrap()] = vec![span(0, 2), span(2, 4)];
    let t = NodeTopology::from_parts("n1", vec![0, 2, 1, 3], levels);
    let pus = t.pus().to_vec();
    let alone = cores(1, 1, 4);
    // CPUs=4 alone: Slurm's cores 1 and 2 are the second and third threads in logical order.
    assert_eq!(step_cpus(&t, "1-2", alone.as_ref(), None).unwrap(), {
        let mut v = vec![pus[1], pus[2]];
        v.sort();
        v
    });
    // Without a rule, hwloc's core 1 is its two threads.
    assert_eq!(step_cpus(&t, "1", None, None).unwrap(), {
        let mut v = vec![pus[2], pus[3]];
        v.sort();
        v
    });
    // --threads-per-core=1 on ThreadsPerCore=2 declared with config_overrides over 4 cores.
    let over = cores(2, 2, 4);
    assert_eq!(
        step_cpus(&t, "3", over.as_ref(), Some(1)).unwrap(),
        vec![pus[2]]
    );
    assert!(step_cpus(&t, "4", alone.as_ref(), None)
        .unwrap_err()
        .to_string()
        .contains("slurm.conf gives this node 4 cores"));
}
