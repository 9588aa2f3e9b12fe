//! The plugin's decisions without Slurm: plugstack.conf settings, option merging, Slurm's core
//! numbers, one node's placement and the task-map check. Expected values are worked by hand.

use lama::locality::Locality;
use lama::plugin::{
    cores_to_cpus, node_devices, place_node, Apply, InitFailure, Options, Settings, StepError,
};
use lama::slurm::{check_node, check_step_map, check_task, cpu_bind_env, MapCheck, StepEnv};
use lama::taskmap::TaskMap;
use lama::{Level, NodeTopology};

fn user(pairs: &[(&str, Option<&str>)]) -> Options {
    let mut o = Options::default();
    for (k, v) in pairs {
        assert!(o.set(k, *v), "{k} is an option");
    }
    o
}

fn err_text(r: Result<impl std::fmt::Debug, StepError>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn settings_defaults_and_keys() {
    let s = Settings::parse::<&str>(&[]).unwrap();
    assert_eq!(s.apply, Apply::Requested);
    assert!(s.taskmap);
    assert!(!s.verbose);
    assert_eq!(s.topology, None);

    let s = Settings::parse(&[
        "apply=always",
        "taskmap=no",
        "verbose=yes",
        "map=nbsch",
        "bind=1c",
        "oversubscribe=yes",
        "topology=/x.xml",
    ])
    .unwrap();
    assert_eq!(s.apply, Apply::Always);
    assert!(!s.taskmap && s.verbose && s.defaults.oversubscribe);
    assert_eq!(s.defaults.map.as_deref(), Some("nbsch"));
    assert_eq!(s.topology.as_deref(), Some(std::path::Path::new("/x.xml")));
}

#[test]
fn settings_errors_name_the_argument_and_what_is_valid() {
    let e = err_text(Settings::parse(&["colour=blue"]));
    assert!(e.contains("plugstack.conf") && e.contains("'colour'") && e.contains("apply"));
    let e = err_text(Settings::parse(&["apply=sometimes"]));
    assert!(e.contains("apply=sometimes") && e.contains("requested") && e.contains("always"));
    let e = err_text(Settings::parse(&["taskmap=maybe"]));
    assert!(e.contains("taskmap=maybe") && e.contains("yes or no"));
    let e = err_text(Settings::parse(&["verbose"]));
    assert!(e.contains("'verbose' is not key=value"));
    // Flags are not defaults an admin can set.
    assert!(err_text(Settings::parse(&["off=yes"])).contains("unknown argument 'off'"));
    let e = err_text(Settings::parse(&["map=csbnh", "map-by=core"]));
    assert!(e.contains("map") && e.contains("map-by"));
    let e = err_text(Settings::parse(&["bind=1q"]));
    assert!(e.contains("bind '1q'"), "{e}");
}

#[test]
fn init_failure_is_read_even_when_the_other_arguments_are_broken() {
    assert_eq!(
        Settings::parse::<&str>(&[]).unwrap().init_failure,
        InitFailure::Node
    );
    let s = Settings::parse(&["init-failure=job"]).unwrap();
    assert_eq!(s.init_failure, InitFailure::Job);
    let e = err_text(Settings::parse(&["init-failure=requeue"]));
    assert!(
        e.contains("init-failure=requeue") && e.contains("node") && e.contains("job"),
        "{e}"
    );
    // The line that fails to parse still says how its failure is to be taken.
    let broken = ["init-failure=job", "polcy=auto"];
    assert!(Settings::parse(&broken).is_err());
    assert_eq!(Settings::init_failure_of(&broken), InitFailure::Job);
    assert_eq!(
        Settings::init_failure_of(&["polcy=auto"]),
        InitFailure::Node
    );
    // A bad value of its own leaves Slurm's default.
    assert_eq!(
        Settings::init_failure_of(&["init-failure=maybe"]),
        InitFailure::Node
    );
    assert_eq!(
        Settings::init_failure_of(&["init-failure=node", "init-failure=job"]),
        InitFailure::Job
    );
}

#[test]
fn when_placement_applies() {
    let requested = Settings::default();
    assert_eq!(requested.request(&Options::default(), Some(4)), Ok(None));
    assert!(requested
        .request(&user(&[("verbose", None)]), Some(4))
        .unwrap()
        .is_some());
    let always = Settings::parse(&["apply=always", "bind=1c"]).unwrap();
    let r = always
        .request(&Options::default(), Some(4))
        .unwrap()
        .unwrap();
    assert_eq!(r.bind.level, Level::Core);
    assert_eq!(r.np, Some(4));
    assert_eq!(
        always.request(&user(&[("off", None), ("bind", Some("1s"))]), Some(4)),
        Ok(None)
    );
}

#[test]
fn user_options_merge_over_defaults_of_the_same_kind() {
    let s = Settings::parse(&["map=nbsch", "bind=1c", "mppr=1:c"]).unwrap();
    let r = s
        .request(&user(&[("bind", Some("1s"))]), Some(2))
        .unwrap()
        .unwrap();
    assert_eq!(
        r.map,
        vec![
            Level::Node,
            Level::Board,
            Level::Socket,
            Level::Core,
            Level::Hwthread
        ]
    );
    assert_eq!(r.bind.level, Level::Socket);
    assert_eq!(r.mppr.len(), 1);

    // Simple options replace expert defaults entirely: the default map's mppr is gone.
    let r = s
        .request(&user(&[("map-by", Some("socket"))]), Some(2))
        .unwrap()
        .unwrap();
    assert!(r.mppr.is_empty());
    assert_eq!(r.map[0], Level::Socket);
}

#[test]
fn option_errors_name_the_option_value_and_source() {
    let s = Settings::default();
    let e = err_text(s.request(&user(&[("map", Some("csbnhx"))]), None));
    assert!(e.starts_with("invalid --lama-map 'csbnhx'"), "{e}");
    assert!(e.contains("valid:"));
    let e = err_text(s.request(
        &user(&[("map", Some("csbnh")), ("bind-to", Some("core"))]),
        None,
    ));
    assert!(
        e.contains("--lama-map cannot be combined with --lama-bind-to"),
        "{e}"
    );
    let e = err_text(s.request(&user(&[("order", Some("q"))]), None));
    assert!(e.contains("--lama-order 'q'"), "{e}");

    // The user's map lacks the admin's binding level: the message says where the binding came from.
    let s = Settings::parse(&["bind=1L2"]).unwrap();
    let e = err_text(s.request(&user(&[("map", Some("csbnh"))]), None));
    assert!(e.contains("--lama-map 'csbnh'"), "{e}");
    assert!(e.contains("defaults from plugstack.conf: bind=1L2"), "{e}");
}

#[test]
fn slurm_cores_are_logical_cores_of_the_whole_node() {
    // pack:2 core:2 pu:2: core k holds OS PUs 2k and 2k+1.
    let t = NodeTopology::from_synthetic("pack:2 core:2 pu:2").unwrap();
    assert_eq!(cores_to_cpus(&t, "1,3", None).unwrap(), vec![2, 3, 6, 7]);
    assert_eq!(
        cores_to_cpus(&t, "0-3", None).unwrap(),
        (0..8).collect::<Vec<_>>()
    );
    let e = err_text(cores_to_cpus(&t, "4", None));
    assert!(e.contains("core 4") && e.contains("4 cores"), "{e}");
    assert!(err_text(cores_to_cpus(&t, "x", None)).contains("'x'"));
    // --hint=nomultithread: the first hardware thread of each core; more threads than the core
    // has keep them all.
    assert_eq!(cores_to_cpus(&t, "1,3", Some(1)).unwrap(), vec![2, 6]);
    assert_eq!(cores_to_cpus(&t, "1,3", Some(4)).unwrap(), vec![2, 3, 6, 7]);
    // On the 2x8x2 Intel XML, OS indexes of a core's threads are k and k+16.
    let x = NodeTopology::from_xml_file(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/topologies/32em64t-2n8c2t-pci-normalio.xml"
    )))
    .unwrap();
    assert_eq!(cores_to_cpus(&x, "0,8", None).unwrap(), vec![0, 8, 16, 24]);
    assert_eq!(cores_to_cpus(&x, "0,8", Some(1)).unwrap(), vec![0, 8]);
}

#[test]
fn one_node_places_its_ranks_in_global_order_on_the_step_cpus() {
    // Two sockets of four single-thread cores; the step has CPUs 2-5.
    let t = NodeTopology::from_synthetic("pack:2 core:4 pu:1").unwrap();
    let req = Settings::default()
        .request(
            &user(&[("map", Some("csbnh")), ("bind", Some("1c"))]),
            Some(3),
        )
        .unwrap()
        .unwrap();
    let got = place_node(&t, &[2, 3, 4, 5], &req, &[7, 3, 5], true).unwrap();
    let ranks: Vec<u32> = got.iter().map(|b| b.rank).collect();
    assert_eq!(ranks, vec![3, 5, 7]);
    assert_eq!(got[0].cpus, vec![2]);
    assert_eq!(got[1].cpus, vec![3]);
    assert_eq!(got[2].cpus, vec![4]);
    assert_eq!(got[0].picture.as_deref(), Some("[-/-/B/.][././-/-]"));
    assert_eq!(got[2].picture.as_deref(), Some("[-/-/./.][B/./-/-]"));

    // Five tasks on four CPUs without oversubscription: the step fails.
    let e = err_text(place_node(&t, &[2, 3, 4, 5], &req, &[0, 1, 2, 3, 4], false));
    assert!(e.contains("oversubscribed"), "{e}");
}

#[test]
fn task_map_is_checked_against_slurms_ranks() {
    let env = StepEnv {
        tasks_per_node: Some("2(x2),1".into()),
        distribution: Some("cyclic".into()),
        ..StepEnv::default()
    };
    let map = env.taskmap(|_| unreachable!()).unwrap();
    // Cyclic over 2,2,1: node 0 has 0 and 3, node 1 has 1 and 4, node 2 has 2.
    assert!(check_node(&map, 0, &[3, 0]).is_ok());
    assert!(check_node(&map, 2, &[2]).is_ok());
    let e = err_text(check_node(&map, 1, &[1, 2]));
    assert!(
        e.contains("puts tasks 1,4 on node 1") && e.contains("runs 1-2"),
        "{e}"
    );
}

#[test]
fn device_counts_from_options_and_defaults() {
    let s = Settings::parse(&["gpus=1", "weights=/etc/slurm/lama-weights"]).expect("settings");
    assert_eq!(
        s.weights.as_deref(),
        Some(std::path::Path::new("/etc/slurm/lama-weights"))
    );
    assert_eq!(s.devices(&Options::default()).expect("defaults"), (0, 1));
    assert_eq!(
        s.devices(&user(&[("nics", Some("2"))])).expect("user"),
        (2, 1)
    );
    assert_eq!(
        s.devices(&user(&[("gpus", Some("0"))])).expect("user"),
        (0, 0)
    );
    assert_eq!(s.devices(&user(&[("off", None)])).expect("off"), (0, 0));
    // A device option alone asks for lama's placement, like any --lama option.
    assert!(s
        .request(&user(&[("gpus", Some("1"))]), Some(2))
        .expect("request")
        .is_some());
    assert_eq!(
        err_text(s.devices(&user(&[("gpus", Some("two"))]))),
        "invalid --lama-gpus 'two': not a number of devices; valid: 0 to 64 per task"
    );
    assert_eq!(
        err_text(Settings::parse(&["nics=-1"])),
        "plugstack.conf: invalid nics '-1': not a number of devices; valid: 0 to 64 per task"
    );
    assert!(err_text(Settings::parse(&["weights="])).contains("weights= needs the path"));
}

#[test]
fn node_devices_follow_the_placement() {
    // POWER8, two GPUs per package; four tasks bound to one core each, s fastest: tasks 0 and 2 on
    // package 0 (cuda0, cuda1), tasks 1 and 3 on package 1 (cuda2, cuda3).
    let xml = std::path::PathBuf::from(format!(
        "{}/../tests/topologies/power8gpudistances.xml",
        env!("CARGO_MANIFEST_DIR")
    ));
    let node = NodeTopology::from_xml_file(&xml).expect("topology");
    let loc = Locality::from_xml_file(&xml).expect("devices");
    let req = Settings::default()
        .request(
            &user(&[("map", Some("scbnh")), ("bind", Some("1c"))]),
            Some(4),
        )
        .expect("request")
        .expect("placing");
    let tasks = place_node(&node, &node.cpus(), &req, &[0, 1, 2, 3], false).expect("placed");
    let env = node_devices(&loc, &tasks, (0, 1), None, |_| None).expect("devices");
    let cuda: Vec<String> = env
        .iter()
        .map(|e| {
            e.iter()
                .find(|(k, _)| k == "CUDA_VISIBLE_DEVICES")
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(cuda, ["0", "2", "1", "3"]);
    // Slurm gave GPUs 2 and 3 only: package 0's tasks get the nearer of those, in turn.
    let given = |k: &str| (k == "CUDA_VISIBLE_DEVICES").then(|| "2,3".to_string());
    let env = node_devices(&loc, &tasks, (0, 1), None, given).expect("devices");
    assert_eq!(
        env[0],
        vec![
            ("LAMA_GPUS".to_string(), "cuda2".to_string()),
            ("CUDA_VISIBLE_DEVICES".to_string(), "2".to_string())
        ]
    );
    let e = node_devices(&loc, &tasks, (1, 0), None, |_| None).expect_err("no NIC");
    assert_eq!(
        e.to_string(),
        "1 NIC(s) per task asked for, but this node has 0"
    );
}

#[test]
fn heterogeneous_step_maps_are_checked_per_task() {
    // `srun -N1 -n2 : -N2 -n3`: Slurm exports the whole step's layout (2,2,1 over n[1-3]), while
    // on n3 its items say node 1 of the second component, holding that component's task 2 of 3.
    let map = TaskMap::encode(&[0, 0, 1, 1, 2]);
    assert_eq!(
        check_step_map(&map, 1, &[2], 3, Some(2)),
        Ok(MapCheck::PerTask)
    );
    // The same items without a heterogeneous step are a disagreement.
    assert!(check_step_map(&map, 1, &[2], 3, None).is_err());
    // An ordinary step, even with SLURM_HET_SIZE set by hand, is checked against the items.
    assert_eq!(
        check_step_map(&map, 2, &[4], 5, Some(2)),
        Ok(MapCheck::Node)
    );
    assert!(check_step_map(&map, 0, &[4], 5, Some(2)).is_err());
    // Per task: SLURM_PROCID 4 runs on SLURM_NODEID 2.
    assert!(check_task(&map, "4", "2").is_ok());
    let e = err_text(check_task(&map, "4", "1"));
    assert!(
        e.contains("puts task 4 on node 2, Slurm runs it on node 1"),
        "{e}"
    );
    assert!(err_text(check_task(&map, "9", "2")).contains("on node none"));
    assert!(err_text(check_task(&map, "x", "2")).contains("cannot be read"));
}

#[test]
fn slurm_cpu_bind_describes_lamas_binding() {
    // Slurm wrote its own masks (cores 0 and 1); lama bound local task 0 to CPUs 2-3 and local
    // task 1 to CPU 0 and CPU 9: masks 0xC and 0x201, in local task order.
    let env = cpu_bind_env("verbose,mask_cpu:0x1,0x2", &[&[2, 3], &[0, 9]]);
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    assert_eq!(get("SLURM_CPU_BIND"), Some("verbose,mask_cpu:0xC,0x201"));
    assert_eq!(get("SLURM_CPU_BIND_TYPE"), Some("mask_cpu:"));
    assert_eq!(get("SLURM_CPU_BIND_LIST"), Some("0xC,0x201"));
    assert_eq!(get("SLURM_CPU_BIND_VERBOSE"), Some("verbose"));
    let env = cpu_bind_env("quiet,none", &[&[64]]);
    assert_eq!(env[0].1, "quiet,mask_cpu:0x10000000000000000");
}

#[test]
fn threads_merge_user_over_defaults() {
    use lama::openmp::{ProcBind, Threads};
    let s = Settings::parse(&["threads=auto", "omp-bind=close"]).unwrap();
    let t = s.threads(&user(&[])).unwrap().unwrap();
    assert_eq!(
        (t.threads, t.bind, t.replace),
        (Threads::Auto, ProcBind::Close, false)
    );
    let t = s
        .threads(&user(&[("threads", Some("4")), ("omp-override", None)]))
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.threads, t.bind, t.replace),
        (Threads::Count(4), ProcBind::Close, true)
    );
    assert_eq!(s.threads(&user(&[("off", None)])).unwrap(), None);
    let none = Settings::parse::<&str>(&[]).unwrap();
    assert_eq!(none.threads(&user(&[])).unwrap(), None);
    assert!(err_text(none.threads(&user(&[("threads", Some("0"))])))
        .starts_with("invalid --lama-threads '0'"));
    assert!(
        err_text(none.threads(&user(&[("omp-bind", Some("close"))])))
            .contains("needs --lama-threads")
    );
    assert!(
        err_text(none.threads(&user(&[("threads", Some("2")), ("omp-bind", Some("x"))])))
            .starts_with("invalid --lama-omp-bind 'x'")
    );
    // --lama-threads alone asks for placement, like any --lama option.
    assert!(none
        .request(&user(&[("threads", Some("2"))]), Some(1))
        .unwrap()
        .is_some());
    let e = Settings::parse(&["threads=lots"]).unwrap_err().to_string();
    assert!(
        e.starts_with("plugstack.conf: invalid threads 'lots'"),
        "{e}"
    );
    assert!(Settings::parse(&["omp-override=maybe"]).is_err());
}

#[test]
fn every_documented_plugstack_argument_is_accepted() {
    use lama::plugin::SETTINGS;
    // A valid value for each key (the manual page is made from SETTINGS).
    let sample = |key: &str| match key {
        "map" => "csbnh",
        "bind" => "1c",
        "mppr" => "1:c",
        "order" => "n",
        "map-by" | "bind-to" => "core",
        "rank-by" => "slot",
        "nics" | "gpus" | "threads" => "1",
        "omp-bind" => "close",
        "gpu-visibility" => "all",
        "policy" => "auto",
        "mem" => "local",
        "apply" => "always",
        "init-failure" => "job",
        "cache" => "/run/lama",
        "topology" | "weights" => "/some/file",
        _ => "yes",
    };
    for s in SETTINGS {
        // Expert and simple defaults cannot be mixed, so each key is parsed alone.
        let arg = format!("{}={}", s.key, sample(s.key));
        assert!(Settings::parse(&[arg.as_str()]).is_ok(), "{arg} refused");
    }
    let e = Settings::parse(&["colour=blue"]).unwrap_err().to_string();
    for s in SETTINGS {
        assert!(e.contains(s.key), "the message lists valid keys: {e}");
    }
}

#[test]
fn policy_gpus_stay_within_those_slurm_left_each_task() {
    // POWER8, two GPUs per package; the policy's two tasks, one per package, get cuda0-1 and
    // cuda2-3. Slurm bound task 0 to GPU 3 alone (--gpu-bind=map_gpu:3,...).
    let xml = std::path::PathBuf::from(format!(
        "{}/../tests/topologies/power8gpudistances.xml",
        env!("CARGO_MANIFEST_DIR")
    ));
    let node = NodeTopology::from_xml_file(&xml).expect("topology");
    let loc = Locality::from_xml_file(&xml).expect("devices");
    let gpus = lama::policy::gpus_of(&loc, None);
    let placed = lama::plugin::place_auto(
        &node,
        &node.cpus(),
        &gpus,
        &[0, 1],
        (1, false),
        false,
        false,
    )
    .expect("placed");
    let d = lama::plugin::auto_devices(&loc, &placed.tasks, &placed.gpus, 0, None, None)
        .expect("devices");
    let var =
        |v: &[(String, String)], k: &str| v.iter().find(|(n, _)| n == k).map(|(_, x)| x.clone());
    // Slurm left the task every GPU of the step: the policy's own choice.
    let all = |k: &str| (k == "CUDA_VISIBLE_DEVICES").then(|| "0,1,2,3".to_string());
    let ok = d.env_within_task_gpus(&loc, 0, all).expect("within");
    assert_eq!(var(&ok, "CUDA_VISIBLE_DEVICES").as_deref(), Some("0,1"));
    // Slurm left task 0 GPU 3 only: no GPU variable of lama's, and why.
    let one = |k: &str| (k == "CUDA_VISIBLE_DEVICES").then(|| "3".to_string());
    let kept = d.env_within_task_gpus(&loc, 0, one).expect_err("outside");
    assert_eq!(var(&kept.env, "CUDA_VISIBLE_DEVICES"), None);
    assert_eq!(var(&kept.env, "LAMA_GPUS"), None);
    assert_eq!(
        kept.why,
        "Slurm left this task 1 of the step's GPUs, not the 2 lama chose"
    );
    // A step marked as binding GPUs per task: Slurm's GPUs, whatever the variables say.
    let bound = |k: &str| match k {
        "SLURMD_TRES_BIND" => Some("gres/gpu:closest".to_string()),
        "CUDA_VISIBLE_DEVICES" => Some("0,1,2,3".to_string()),
        _ => None,
    };
    let kept = d
        .env_within_task_gpus(&loc, 0, bound)
        .expect_err("bound per task");
    assert!(
        kept.why.contains("Slurm binds GPUs task by task"),
        "{}",
        kept.why
    );
}

#[test]
fn simple_level_on_a_node_counts_slurms_tasks_as_its_slots() {
    // pack:1 core:2 pu:2 (core k is CPUs 2k and 2k+1): four tasks of a step Slurm gave every
    // hardware thread, --lama-map-by=core. More tasks than cores is not refused (Slurm counted
    // hardware threads as its CPUs, as Open MPI's :hwtcpus does): each task is bound to its core,
    // two tasks to each, as Open MPI binds them; --lama-bind-to=hwthread gives each its thread.
    let t = NodeTopology::from_synthetic("pack:1 core:2 pu:2").expect("synthetic");
    let place = |opts: &[(&str, Option<&str>)]| {
        let req = Settings::default()
            .request(&user(opts), Some(4))
            .expect("request")
            .expect("a map");
        place_node(&t, &t.cpus(), &req, &[0, 1, 2, 3], false).expect("placed")
    };
    let got: Vec<Vec<u32>> = place(&[("map-by", Some("core"))])
        .into_iter()
        .map(|b| b.cpus)
        .collect();
    assert_eq!(got, vec![vec![0, 1], vec![0, 1], vec![2, 3], vec![2, 3]]);
    let mut got: Vec<Vec<u32>> = place(&[("map-by", Some("core")), ("bind-to", Some("hwthread"))])
        .into_iter()
        .map(|b| b.cpus)
        .collect();
    got.sort();
    assert_eq!(got, vec![vec![0], vec![1], vec![2], vec![3]]);
}
