//! Nearest NICs and GPUs on the real machines with I/O in tests/topologies. Ranks are placed by
//! LAMA; each expected choice is worked out from where hwloc puts the devices (see each test).

use std::path::PathBuf;

use lama::locality::{
    allowed_gpus, assign, choose, may_name_gpus, task_env, Device, Kind, Locality, Numa, Place,
    Vendor, Weights, GPU_VARIABLES, HOP,
};
use lama::spec::{Expert, Request};
use lama::{plan, NodeTopology};
use proptest::prelude::*;

fn path(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}/../tests/topologies/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

/// CPUs (OS indexes) of each rank of a one-node LAMA plan.
fn ranks(xml: &str, map: &str, bind: &str, np: usize) -> Vec<Vec<u32>> {
    let node = NodeTopology::from_xml_file(&path(xml)).expect("topology");
    let req = Request::expert(
        &Expert {
            map: Some(map),
            bind: Some(bind),
            mppr: None,
            order: None,
        },
        Some(np),
        false,
    )
    .expect("request");
    let p = plan(&[&node], &req).expect("plan");
    (0..np).map(|r| p.cpus(r, &[&node])).collect()
}

fn names(loc: &Locality, picks: &[usize]) -> Vec<String> {
    picks
        .iter()
        .map(|&d| loc.devices()[d].name.clone())
        .collect()
}

/// Per rank: (NICs, GPUs) by name.
fn choices(
    xml: &str,
    tasks: &[Vec<u32>],
    nics: usize,
    gpus: usize,
) -> Vec<(Vec<String>, Vec<String>)> {
    let loc = Locality::from_xml_file(&path(xml)).expect("devices");
    choose(&loc, tasks, nics, gpus, None, None)
        .expect("choose")
        .iter()
        .map(|t| (names(&loc, &t.nics), names(&loc, &t.gpus)))
        .collect()
}

fn gpus_of(c: &[(Vec<String>, Vec<String>)]) -> Vec<String> {
    c.iter().map(|(_, g)| g.join("+")).collect()
}

fn nics_of(c: &[(Vec<String>, Vec<String>)]) -> Vec<String> {
    c.iter().map(|(n, _)| n.join("+")).collect()
}

fn strs(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn intel_with_everything_on_package_1() {
    // hwloc puts eth0, eth1, the ConnectX (mlx5_0 with its IPoIB ib0), the Tesla K40m (cuda0,
    // with DRM card0, which is not a compute device) and an AMD OpenCL device all under
    // Package 1. Ranks alternate packages (map scbnh). Every rank's NIC is mlx5_0: an OpenFabrics
    // device is preferred to plain Ethernet. The two GPUs are equally near to every rank, so they
    // alternate.
    let xml = "32em64t-2n8c2t-pci-normalio.xml";
    let tasks = ranks(xml, "scbnh", "1c", 4);
    let c = choices(xml, &tasks, 1, 1);
    assert_eq!(nics_of(&c), strs("mlx5_0 mlx5_0 mlx5_0 mlx5_0"));
    assert_eq!(gpus_of(&c), strs("cuda0 opencl0d1 cuda0 opencl0d1"));
    // Ranks on package 1 are nearer than ranks on package 0, by two tree edges (package 0 up to
    // the machine and down to package 1) plus the remote NUMA latency (20 vs 10: one more hop).
    let loc = Locality::from_xml_file(&path(xml)).expect("devices");
    let mlx = loc
        .devices()
        .iter()
        .position(|d| d.name == "mlx5_0")
        .expect("mlx5_0");
    let d0 = loc.distances(&tasks[0], None)[mlx];
    let d1 = loc.distances(&tasks[1], None)[mlx];
    assert_eq!(d0 - d1, 2 * HOP + HOP);
    // What the task's environment says.
    let picks = choose(&loc, &tasks[..1], 1, 1, None, None).expect("choose");
    let env = task_env(&loc, &picks[0], true, true, &[], None);
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    assert_eq!(get("LAMA_NICS"), Some("mlx5_0"));
    assert_eq!(get("UCX_NET_DEVICES"), Some("mlx5_0:1"));
    assert_eq!(get("LAMA_GPUS"), Some("cuda0"));
    assert_eq!(get("CUDA_VISIBLE_DEVICES"), Some("0"));
    assert_eq!(get("ROCR_VISIBLE_DEVICES"), None);
}

#[test]
fn power8_two_gpus_per_package() {
    // cuda0 and cuda1 hang off package 0, cuda2 and cuda3 off package 1. With s changing fastest
    // ranks 0 and 2 are on package 0, 1 and 3 on package 1: each takes a GPU of its own package,
    // and the second rank of a package takes the package's other GPU.
    let xml = "power8gpudistances.xml";
    let tasks = ranks(xml, "scbnh", "1c", 4);
    assert_eq!(
        gpus_of(&choices(xml, &tasks, 0, 1)),
        strs("cuda0 cuda2 cuda1 cuda3")
    );
    // Eight ranks, two per core, four per package: each GPU serves exactly two.
    let tasks = ranks(xml, "scbnh", "1h", 8);
    assert_eq!(
        gpus_of(&choices(xml, &tasks, 0, 1)),
        strs("cuda0 cuda2 cuda1 cuda3 cuda0 cuda2 cuda1 cuda3")
    );
    // Asking for more GPUs than the node has is an error that says how many there are.
    let loc = Locality::from_xml_file(&path(xml)).expect("devices");
    let e = choose(&loc, &tasks, 0, 5, None, None).expect_err("5 > 4");
    assert_eq!(
        e.to_string(),
        "5 GPU(s) per task asked for, but this node has 4"
    );
    let e = choose(&loc, &tasks, 1, 0, None, None).expect_err("no NIC");
    assert_eq!(
        e.to_string(),
        "1 NIC(s) per task asked for, but this node has 0"
    );
}

#[test]
fn dgx2_sixteen_gpus_typed_coproc() {
    // This file types the V100s as CoProc "nvml0".."nvml15" (no CUDA names): nvml0-7 are under
    // package 0, nvml8-15 under package 1. Four ranks, two per package, four GPUs each: each
    // package's eight GPUs split between its two ranks.
    let xml = "nvidiaDGX2.xml";
    let tasks = ranks(xml, "csbnh", "1c", 4);
    assert_eq!(
        gpus_of(&choices(xml, &tasks, 0, 4)),
        strs("nvml0+nvml1+nvml2+nvml3 nvml4+nvml5+nvml6+nvml7 nvml8+nvml9+nvml10+nvml11 nvml12+nvml13+nvml14+nvml15")
    );
    let loc = Locality::from_xml_file(&path(xml)).expect("devices");
    let picks = choose(&loc, &tasks[2..3], 0, 2, None, None).expect("choose");
    let env = task_env(&loc, &picks[0], false, true, &[], None);
    assert_eq!(
        env,
        vec![
            ("LAMA_GPUS".to_string(), "nvml8,nvml9".to_string()),
            ("CUDA_VISIBLE_DEVICES".to_string(), "8,9".to_string()),
        ]
    );
    // --lama-gpu-visibility=all: every GPU of the node is visible, the task's own two first
    // (device 0 in the task is still its nearest); LAMA_GPUS still names its own.
    let all: Vec<usize> = (0..loc.devices().len())
        .filter(|&d| loc.devices()[d].kind == lama::locality::Kind::Gpu)
        .collect();
    assert_eq!(all.len(), 16);
    let env = task_env(&loc, &picks[0], false, true, &[], Some(&all));
    assert_eq!(
        env,
        vec![
            ("LAMA_GPUS".to_string(), "nvml8,nvml9".to_string()),
            (
                "CUDA_VISIBLE_DEVICES".to_string(),
                "8,9,0,1,2,3,4,5,6,7,10,11,12,13,14,15".to_string()
            ),
        ]
    );
}

#[test]
fn dell_r910_devices_without_locality() {
    // The R910's PCI host bridges hang off the machine: every device is equally near to every
    // CPU. The NIC is the QLogic InfiniBand qib0 (preferred to eth0-3) for all; the distance is
    // the same from each of the four packages.
    let xml = "40intel64-2g2n4c+pci.fsroot.xml";
    let tasks = ranks(xml, "scbnh", "1c", 4);
    assert_eq!(
        nics_of(&choices(xml, &tasks, 1, 0)),
        strs("qib0 qib0 qib0 qib0")
    );
    let loc = Locality::from_xml_file(&path(xml)).expect("devices");
    let d: Vec<Vec<u64>> = tasks.iter().map(|t| loc.distances(t, None)).collect();
    assert!(d.iter().all(|row| row == &d[0]), "{d:?}");
    // Among the Ethernet ports alone, equally near, ranks go round-robin.
    let eth: Vec<usize> = (0..4).collect();
    assert!(eth
        .iter()
        .all(|&e| loc.devices()[e].name == format!("eth{e}")));
    let picks = assign(&d, &eth, 1);
    assert_eq!(picks, vec![vec![0], vec![1], vec![2], vec![3]]);
}

#[test]
fn vector_engine_host() {
    // All eight NEC SX-Aurora VEs (CoProc subtype VectorEngine, no runtime variable) are under
    // package 0. Sixteen ranks on both packages share them evenly, two per VE, in VE order.
    let xml = "32intel64-2p8co2t+8ve.fsroot.xml";
    let tasks = ranks(xml, "csbnh", "1h", 16);
    let c = choices(xml, &tasks, 0, 1);
    let want: Vec<String> = (0..16).map(|r| format!("ve{}", r % 8)).collect();
    assert_eq!(gpus_of(&c), want);
    // Its InfiniBand cards have no OS device in this dump: the NICs are the two Ethernet ports.
    assert_eq!(
        nics_of(&choices(xml, &tasks[..2], 1, 0)),
        strs("enp96s0f0 enp96s0f1")
    );
    let loc = Locality::from_xml_file(&path(xml)).expect("devices");
    assert!(loc
        .devices()
        .iter()
        .filter(|d| d.kind == Kind::Gpu)
        .all(|d| d.vendor == Vendor::Other));
    let picks = choose(&loc, &tasks[..1], 0, 1, None, None).expect("choose");
    assert_eq!(
        task_env(&loc, &picks[0], false, true, &[], None),
        vec![("LAMA_GPUS".to_string(), "ve0".to_string())]
    );
}

#[test]
fn x3950_nics_in_every_chassis() {
    // Four chassis (Groups), each with one NUMA node, four packages and two Ethernet ports:
    // eth0-1 in chassis 0, eth2-3 in 1, eth4-5 in 2, eth6-7 in 3. Ranks map by package (s
    // fastest, then chassis, as hwloc's board-like Groups are LAMA boards): ranks 0-3 on chassis
    // 0, 4-7 on chassis 1, and so on; each chassis's two ports alternate.
    let xml = "96em64t-4n4d3ca2co-pci.xml";
    let tasks = ranks(xml, "sbcnh", "1c", 16);
    let c = choices(xml, &tasks, 1, 0);
    let want: Vec<String> = (0..16)
        .map(|r| format!("eth{}", 2 * (r / 4) + r % 2))
        .collect();
    assert_eq!(nics_of(&c), want);
    // A port in another chassis costs the trip over the machine (two more edges than up to the
    // own Group and down) plus the NUMA latency 26 vs 10, i.e. 16 more.
    let loc = Locality::from_xml_file(&path(xml)).expect("devices");
    let d = loc.distances(&tasks[0], None);
    assert_eq!(d[2] - d[0], 2 * HOP + 16);
}

#[test]
fn sgi_uv_numa_latency_breaks_tree_ties() {
    // Ethernet ports hang off package 0 (eth0-1, blade 0) and package 4 (eth2-5, blade 2). From
    // package 8 (blade 4) both are the same number of tree edges away; the NUMA latency from node
    // 8 is 65 to node 0 and 65 to node 4 (a tie); from node 16 it is 65 and 79 (eth0 nearer by
    // 14, that is 10 x (79 - 65) / 10), from node 20 79 and 65 (eth2 nearer by as much).
    let xml = "192em64t-12gr2n8c2t.xml";
    let loc = Locality::from_xml_file(&path(xml)).expect("devices");
    let node = NodeTopology::from_xml_file(&path(xml)).expect("topology");
    let pkg = |k: usize| node.span_cpus(node.objects(lama::Level::Socket)[k]);
    let eth = |n: &str| loc.devices().iter().position(|d| d.name == n).expect("eth");
    let (e0, e2) = (eth("eth0"), eth("eth2"));
    let from8 = loc.distances(&pkg(8), None);
    assert_eq!(from8[e0], from8[e2]);
    let from16 = loc.distances(&pkg(16), None);
    assert_eq!(from16[e2] - from16[e0], 14);
    let from20 = loc.distances(&pkg(20), None);
    assert_eq!(from20[e0] - from20[e2], 14);
    let tasks = [pkg(8), pkg(16), pkg(20)];
    let eth = [e0, e2];
    let dist: Vec<Vec<u64>> = tasks.iter().map(|t| loc.distances(t, None)).collect();
    assert_eq!(assign(&dist, &eth, 1), vec![vec![e0], vec![e0], vec![e2]]);
    // The only OpenFabrics device, mlx4_0 on package 6, is every rank's NIC.
    let tasks = vec![pkg(0), pkg(6), pkg(23)];
    assert_eq!(
        nics_of(&choices(xml, &tasks, 1, 0)),
        strs("mlx4_0 mlx4_0 mlx4_0")
    );
}

#[test]
fn admin_weights_override_locality() {
    // A policy in the seed's notation on the POWER8, against the hardware: socket 0 prefers cuda3,
    // socket 1 prefers cuda0 (named by its NVML name). Without weights ranks would take their own
    // package's GPUs. A named device is reached only through its lines: from a rank bound to core
    // 0 of socket 0, cuda3 costs the 2 edges up to the package (core, L3, package) plus 1, cuda0
    // the same 2 edges plus 6.
    let xml = "power8gpudistances.xml";
    let loc = Locality::from_xml_file(&path(xml)).expect("devices");
    let tasks = ranks(xml, "scbnh", "1c", 2);
    let file = "# policy\nSocket 0 (Core*) ----1---> cuda3\n              |------4---> cuda2\n   |---5---> cuda1\n |---6---> cuda0\n\nSocket 1 ---1--> nvml0\n|--2--> cuda1\n|--7--> cuda2\n|--8--> cuda3\n";
    let plain = choose(&loc, &tasks, 0, 1, None, None).expect("choose");
    assert_eq!(names(&loc, &plain[0].gpus), strs("cuda0"));
    assert_eq!(names(&loc, &plain[1].gpus), strs("cuda2"));
    let w = Weights::parse(file, &loc).expect("weights");
    let picks = choose(&loc, &tasks, 0, 1, None, Some(&w)).expect("choose");
    assert_eq!(
        loc.distances(&tasks[0], Some(&w)),
        vec![2 * HOP + 6, 2 * HOP + 5, 2 * HOP + 4, 2 * HOP + 1]
    );
    assert_eq!(names(&loc, &picks[0].gpus), strs("cuda3"));
    assert_eq!(names(&loc, &picks[1].gpus), strs("cuda0"));
    for (text, line, msg) in [
        (
            "Socket 0 ----1---> cuda9\n",
            1,
            "no device 'cuda9' on this node (devices: cuda0, cuda1, cuda2, cuda3)",
        ),
        (
            "\nSocket 2 ----1---> cuda0\n",
            2,
            "no Package 2 (this node has 2)",
        ),
        ("Board 0 ----1---> cuda0\n", 1, "unknown object 'Board'"),
        (
            "Socket 0 ---x---> cuda0\n",
            1,
            "is not OBJECT ----WEIGHT---> DEVICE",
        ),
        ("Socket 0 cuda0\n", 1, "is not OBJECT ----WEIGHT---> DEVICE"),
        ("  |---1---> cuda0\n", 1, "no line above names one"),
        ("Socket ----1---> cuda0\n", 1, "'Socket' needs an index"),
        (
            "NUMANode 3 --1--> cuda0\n",
            1,
            "no NUMANode 3 (this node has 2)",
        ),
        ("Sockét 0 ----1---> cuda0\n", 1, "unknown object 'Sockét'"),
        ("Socket 0 ×---1---> cuda0\n", 1, "unexpected '×'"),
        ("Socket 0 ----99999999999---> cuda0\n", 1, "too large"),
    ] {
        let e = Weights::parse(text, &loc).expect_err(text);
        assert_eq!(e.line, line, "{text}");
        assert!(e.to_string().contains(msg), "{text}: {e}");
    }
}

#[test]
fn gpus_the_job_was_given() {
    let xml = "power8gpudistances.xml";
    let loc = Locality::from_xml_file(&path(xml)).expect("devices");
    let tasks = ranks(xml, "scbnh", "1c", 2);
    // Slurm gave GPUs 1 and 3 and numbers them 0 and 1 for the job (SLURM_STEP_GPUS has the
    // hardware indexes): rank 0 (package 0) gets cuda1, written as Slurm's 0.
    let env = |k: &str| match k {
        "CUDA_VISIBLE_DEVICES" => Some("0,1".to_string()),
        "SLURM_STEP_GPUS" => Some("1,3".to_string()),
        _ => None,
    };
    let given = allowed_gpus(&loc, env).expect("env").expect("restricted");
    let (allowed, entries) = (given.devices, given.entries);
    assert_eq!(names(&loc, &allowed), strs("cuda1 cuda3"));
    let picks = choose(&loc, &tasks, 0, 1, Some(&allowed), None).expect("choose");
    assert_eq!(names(&loc, &picks[0].gpus), strs("cuda1"));
    assert_eq!(names(&loc, &picks[1].gpus), strs("cuda3"));
    let e = task_env(&loc, &picks[1], false, true, &entries, None);
    assert!(
        e.contains(&("CUDA_VISIBLE_DEVICES".to_string(), "1".to_string())),
        "{e:?}"
    );
    let e = choose(&loc, &tasks, 0, 3, Some(&allowed), None).expect_err("3 > 2");
    assert_eq!(
        e.to_string(),
        "3 GPU(s) per task asked for, but the job was given 2 of this node's 4"
    );
    // Without Slurm's list the entries are hardware indexes; UUIDs cannot be placed.
    let given = allowed_gpus(&loc, |k| {
        (k == "CUDA_VISIBLE_DEVICES").then(|| "2".to_string())
    })
    .expect("env")
    .expect("restricted");
    assert_eq!(names(&loc, &given.devices), strs("cuda2"));
    assert!(allowed_gpus(&loc, |k| (k == "CUDA_VISIBLE_DEVICES")
        .then(|| "GPU-1a2b".to_string()))
    .is_err());
    assert_eq!(allowed_gpus(&loc, |_| None).expect("env"), None);
    // Slurm binds GPUs per task (26.05 and 22.05 spellings): lama does not choose; no binding
    // (gres/gpu:none) is fine.
    for bind in ["gres/gpu:per_task:1", "gpu:map_gpu:1,0", "gres/gpu:closest"] {
        let e = allowed_gpus(&loc, |k| match k {
            "SLURMD_TRES_BIND" => Some(bind.to_string()),
            "CUDA_VISIBLE_DEVICES" | "SLURM_STEP_GPUS" => Some("0".to_string()),
            _ => None,
        })
        .expect_err("per-task binding");
        assert!(e.to_string().contains("binds GPUs task by task"), "{e}");
    }
    let given = allowed_gpus(&loc, |k| match k {
        "SLURMD_TRES_BIND" => Some("gres/gpu:none".to_string()),
        "CUDA_VISIBLE_DEVICES" => Some("0,1".to_string()),
        "SLURM_STEP_GPUS" => Some("1,2".to_string()),
        _ => None,
    })
    .expect("env")
    .expect("restricted");
    assert_eq!(names(&loc, &given.devices), strs("cuda1 cuda2"));
    // --gpus-per-task (26.05 and 22.05 markers), even with --gpu-bind=none: no choice.
    for (k, v) in [
        ("SLURM_TRES_PER_TASK", "cpu=2,gres/gpu=1"),
        ("SLURM_GPUS_PER_TASK", "1"),
    ] {
        let e = allowed_gpus(&loc, |q| match q {
            _ if q == k => Some(v.to_string()),
            "SLURMD_TRES_BIND" => Some("gres/gpu:none".to_string()),
            "CUDA_VISIBLE_DEVICES" | "SLURM_STEP_GPUS" => Some("1".to_string()),
            _ => None,
        })
        .expect_err("per-task GPUs");
        assert!(
            e.to_string()
                .contains("(--gpus-per-task or --ntasks-per-gpu)"),
            "{e}"
        );
    }
    // Slurm says it gave 2 GPUs but not which (--gpu-bind=none): no guess.
    let e = allowed_gpus(&loc, |k| {
        (k == "SLURM_GPUS_ON_NODE").then(|| "2".to_string())
    })
    .expect_err("unknown GPUs");
    assert!(e.to_string().contains("gave the step 2 GPU(s)"), "{e}");
    assert_eq!(
        allowed_gpus(&loc, |k| (k == "SLURM_GPUS_ON_NODE")
            .then(|| "0".to_string()))
        .expect("env"),
        None
    );
}

prop_compose! {
    /// A machine of 1-3 packages of 1-4 cores of 1-2 PUs, with 1-6 devices on random places.
    fn machine()(packages in 1..4usize, cores in 1..5usize, pus in 1..3usize,
                 devs in proptest::collection::vec(any::<prop::sample::Index>(), 1..7)) -> Locality {
        let mut places = vec![Place { parent: None, kind: "Machine".into(), index: 0, cpus: (0..(packages * cores * pus) as u32).collect() }];
        let mut cpu = 0u32;
        for p in 0..packages {
            let pkg = places.len();
            let span = (cores * pus) as u32;
            places.push(Place { parent: Some(0), kind: "Package".into(), index: p, cpus: (cpu..cpu + span).collect() });
            for c in 0..cores {
                let core = places.len();
                places.push(Place { parent: Some(pkg), kind: "Core".into(), index: p * cores + c, cpus: (cpu..cpu + pus as u32).collect() });
                for _ in 0..pus {
                    places.push(Place { parent: Some(core), kind: "PU".into(), index: cpu as usize, cpus: vec![cpu] });
                    cpu += 1;
                }
            }
        }
        let n = places.len();
        let devices = devs.iter().enumerate().map(|(i, at)| Device {
            name: format!("gpu{i}"), names: vec![format!("gpu{i}")], kind: Kind::Gpu, vendor: Vendor::Nvidia,
            index: Some(i as u32), ucx: None, pci: None, place: at.index(n), fabric: false, uuid: None, mig: false,
        }).collect();
        let numa = (0..packages).map(|p| Numa { os_index: p as u32, cpus: places[1 + p * (1 + cores * (1 + pus))].cpus.clone(), kind: lama::tiers::MemoryKind::Plain, default: true, capacity: 0, bandwidth: None, latency: None, borrowed: Vec::new() }).collect();
        Locality::new(places, numa, None, devices)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// With as many tasks as devices (or fewer), no device serves two tasks while another device
    /// as near for one of those tasks serves none; every task gets distinct devices.
    #[test]
    fn even_spreading(loc in machine(), picks in proptest::collection::vec(any::<prop::sample::Index>(), 1..7), per_task in 1..3usize) {
        // Each task is bound to a random place: the machine, a package, a core or a PU.
        let tasks: Vec<Vec<u32>> = picks.iter().map(|i| loc.places().nth(i.index(loc.place_count())).map(|p| p.cpus.to_vec()).unwrap_or_default()).collect();
        let ndev = loc.devices().len();
        prop_assume!(per_task <= ndev);
        let dist: Vec<Vec<u64>> = tasks.iter().map(|t| loc.distances(t, None)).collect();
        let all: Vec<usize> = (0..ndev).collect();
        let got = assign(&dist, &all, per_task);
        let mut load = vec![0usize; ndev];
        for mine in &got {
            prop_assert_eq!(mine.len(), per_task);
            let mut u = mine.clone(); u.sort_unstable(); u.dedup();
            prop_assert_eq!(u.len(), per_task);
            mine.iter().for_each(|&d| load[d] += 1);
        }
        for (t, mine) in got.iter().enumerate() {
            for &d in mine {
                if load[d] >= 2 {
                    for e in 0..ndev {
                        prop_assert!(!(load[e] == 0 && dist[t][e] <= dist[t][d] && !mine.contains(&e)),
                            "task {} shares device {} (d={}) while {} (d={}) is idle", t, d, dist[t][d], e, dist[t][e]);
                    }
                }
            }
        }
        // Each task's first device is as near as any device that is left idle.
        for (t, mine) in got.iter().enumerate() {
            for e in (0..ndev).filter(|&e| load[e] == 0) {
                prop_assert!(dist[t][mine[0]] <= dist[t][e]);
            }
        }
    }
}

proptest! {
    /// A weights file is admin input read inside slurmstepd: any text gives weights or a
    /// line-numbered error, never a panic.
    #[test]
    fn weights_never_panic(lines in proptest::collection::vec("[ -~×é|>()#0-9a-zA-Z-]{0,40}", 0..6)) {
        let loc = Locality::from_xml_file(&path("power8gpudistances.xml")).expect("devices");
        if let Err(e) = Weights::parse(&lines.join("\n"), &loc) {
            prop_assert!(e.line >= 1 && e.line <= lines.len());
        }
    }
}

proptest! {
    /// The plugin skips the node's devices when `may_name_gpus` says a step's variables name no
    /// GPU: `allowed_gpus` must then find none and refuse nothing, on any machine, whatever else
    /// (Slurm's GPU lists, `-c` in `SLURM_TRES_PER_TASK`, a binding without GPUs) is set.
    #[test]
    fn no_gpu_variables_no_devices_read(
        loc in machine(),
        set in proptest::collection::vec((0..GPU_VARIABLES.len() + 3, prop::sample::select(vec![
            "", "0", "1", "0,1", "2", "cpu=2", "cpu:4", "gres/gpu:1", "gpu:1", "gres/gpu:none",
            "gres/gpu:closest", "gpu:map_gpu:1,0", "none", " ", "GPU-1a2b",
        ])), 0..5),
    ) {
        let names: Vec<&str> = GPU_VARIABLES
            .iter()
            .copied()
            .chain(["SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_CPUS_PER_TASK"])
            .collect();
        let env: Vec<(&str, &str)> = set.iter().map(|&(k, v)| (names[k], v)).collect();
        let get = |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
        if !may_name_gpus(get) {
            prop_assert_eq!(allowed_gpus(&loc, get).ok(), Some(None), "{:?}", env);
        }
    }
}
