use super::*;

#[test]
fn options_from_dotted_keys() {
    let o = user_options(Some(r#"{"map":"csbnh","bind":"1c","gpus":1,"verbose":1}"#)).unwrap();
    assert_eq!(o.map.as_deref(), Some("csbnh"));
    assert_eq!(o.bind.as_deref(), Some("1c"));
    assert_eq!(o.gpus.as_deref(), Some("1"));
    assert!(o.verbose);
    assert!(!o.off);
    // `-o lama.verbose=0` turns the flag off; `-o lama.map-by=core` keeps its hyphen.
    let o = user_options(Some(
        r#"{"verbose":0,"map-by":"core","oversubscribe":true}"#,
    ))
    .unwrap();
    assert!(!o.verbose && o.oversubscribe);
    assert_eq!(o.map_by.as_deref(), Some("core"));
    assert_eq!(user_options(None).unwrap(), Options::default());
}

#[test]
fn bad_options_name_the_option_and_what_is_valid() {
    let e = user_options(Some(r#"{"mapp":"csbnh"}"#))
        .unwrap_err()
        .to_string();
    assert!(e.contains("lama.mapp") && e.contains("lama.map,"), "{e}");
    let e = user_options(Some("1")).unwrap_err().to_string();
    assert!(e.contains("-o lama.NAME=VALUE"), "{e}");
    let e = user_options(Some(r#"{"map":true}"#))
        .unwrap_err()
        .to_string();
    assert!(e.contains("lama.map needs a value"), "{e}");
    let e = user_options(Some(r#"{"map":["a"]}"#))
        .unwrap_err()
        .to_string();
    assert!(e.contains("single value"), "{e}");
}

#[test]
fn conf_is_plugstack_arguments() {
    let s = settings(Some(r#"{"map":"scbnh","apply":"always","taskmap":false}"#)).unwrap();
    assert_eq!(s.defaults.map.as_deref(), Some("scbnh"));
    assert!(!s.taskmap);
    assert_eq!(s.apply, crate::plugin::Apply::Always);
    // Under Flux, the cache is the job's user's own unless the conf names one.
    let flux_default = Settings {
        cache: Some(FLUX_CACHE.into()),
        ..Settings::default()
    };
    assert_eq!(settings(Some("{}")).unwrap(), flux_default);
    assert_eq!(settings(None).unwrap(), flux_default);
    assert_eq!(
        cache_folder(&settings(None).unwrap(), 1234),
        Some("/tmp/lama-1234".into())
    );
    let named = settings(Some(r#"{"cache":"/var/tmp/lama-%u/x"}"#)).unwrap();
    assert_eq!(cache_folder(&named, 7), Some("/var/tmp/lama-7/x".into()));
    assert_eq!(
        cache_folder(&settings(Some(r#"{"cache":"none"}"#)).unwrap(), 7),
        None
    );
    let e = flux_words(&settings(Some(r#"{"bind":"9x"}"#)).unwrap_err().to_string());
    assert!(e.starts_with("the lama plugin's conf:"), "{e}");
    assert!(!e.contains("plugstack"), "{e}");
}

#[test]
fn messages_in_flux_words() {
    let s = Settings::default();
    let u = user_options(Some(r#"{"map":"csbnh","map-by":"core"}"#)).unwrap();
    let e = flux_words(&s.request(&u, Some(2)).unwrap_err().to_string());
    assert!(
        e.contains("lama.map cannot be combined with lama.map-by"),
        "{e}"
    );
    assert!(!e.contains("--lama"), "{e}");
}

#[test]
fn rank_info_reads_flux_json() {
    let r = RankInfo::parse(
        r#"{"id":1,"name":"fake1","broker_rank":1,"ntasks":3,"taskids":"3-5","resources":{"ncores":6,"cores":"0-5","gpus":"0-1"}}"#,
    )
    .unwrap();
    assert_eq!(r.task_ids(), vec![3, 4, 5]);
    assert_eq!((r.cores.as_str(), r.gpus.as_str()), ("0-5", "0-1"));
    assert!(RankInfo::parse(r#"{"id":1}"#).is_err());
    assert!(RankInfo::parse("nope").is_err());
}

#[cfg(feature = "hwloc")]
mod on_hwloc {
    use super::*;

    fn synthetic(desc: &str) -> NodeTopology {
        NodeTopology::from_synthetic(desc).expect("synthetic")
    }

    #[test]
    fn scheme_lays_tasks_across_nodes() {
        // Two nodes of 2 sockets x 2 cores; the job has every core. By socket then node: the
        // first task on node 0 socket 0, the next on node 0 socket 1, then node 1.
        let topo = synthetic("pack:2 core:2 pu:1");
        let cores = vec!["0-3".to_string(), "0-3".to_string()];
        let current = r#"{"version":1,"map":[[0,2,2,1]]}"#;
        let s = Settings::default();
        let u = Options::default();
        let got = scheme_map(current, "sncbh", &topo, &cores, &s, &u).unwrap();
        assert_eq!(got, r#"{"version":1,"map":[[0,2,2,1]]}"#);
        // Nodes first: round robin.
        let got = scheme_map(current, "nscbh", &topo, &cores, &s, &u).unwrap();
        assert_eq!(got, r#"{"version":1,"map":[[0,2,1,2]]}"#);
    }

    #[test]
    fn scheme_models_other_nodes_from_their_core_counts() {
        // The shell runs on a node of one core; R gives the job 2, 1 and 2 cores. Nodes first,
        // one core per task: the one-core node takes one task, the others two each.
        let topo = synthetic("pack:1 core:1 pu:1");
        let cores = vec!["0-1".to_string(), "0".to_string(), "0-1".to_string()];
        let current = r#"{"version":1,"map":[[0,3,1,1],[0,2,1,1]]}"#;
        let u = Options {
            bind: Some("1c".into()),
            ..Options::default()
        };
        let got = scheme_map(current, "ncsbh", &topo, &cores, &Settings::default(), &u).unwrap();
        let nodes: Vec<u64> = (0..5)
            .map(|t| rfc34::decode(&got).unwrap().node_of(t).unwrap())
            .collect();
        assert_eq!(nodes, [0, 1, 2, 0, 2], "{got}");
        // A node R describes by count keeps its hardware threads: two per core, like this one's.
        let two = synthetic("pack:1 core:1 pu:2");
        let node = counted_node(&two, "0-2", 4).unwrap();
        assert_eq!(node.objects(Level::Core).len(), 3);
        assert_eq!(node.num_pus(), 6);
        assert!(counted_node(&two, "", 4).is_err());
        // More tasks than the nodes' cores hold: refused, as on alike nodes.
        let current = r#"{"version":1,"map":[[0,3,2,1]]}"#;
        let e = scheme_map(current, "ncsbh", &topo, &cores, &Settings::default(), &u)
            .unwrap_err()
            .to_string();
        assert!(e.contains("oversubscribed") || e.contains("only"), "{e}");
        // Two cores per task: the one-core node could hold none, and the error names it.
        let two = Options {
            bind: Some("2c".into()),
            ..Options::default()
        };
        let current = r#"{"version":1,"map":[[0,3,1,1]]}"#;
        let e = scheme_map(current, "ncsbh", &topo, &cores, &Settings::default(), &two)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("but node 1 has 1 (Flux gave the job cores 0 there)"),
            "{e}"
        );
    }

    #[test]
    fn scheme_refuses_an_empty_node() {
        // Four tasks fit on node 0's four cores: node 1 would be left without a task.
        let topo = synthetic("pack:2 core:2 pu:1");
        let cores = vec!["0-3".to_string(), "0-3".to_string()];
        let current = r#"{"version":1,"map":[[0,2,2,1]]}"#;
        let e = scheme_map(
            current,
            "csbnh",
            &topo,
            &cores,
            &Settings::default(),
            &Options::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("leaves node 1 without a task"), "{e}");
    }

    #[test]
    fn gpus_by_flux_index() {
        let xml = format!(
            "{}/../tests/topologies/power8gpudistances.xml",
            env!("CARGO_MANIFEST_DIR")
        );
        let (_, loc) =
            NodeTopology::from_xml_file_with_devices(std::path::Path::new(&xml), true).unwrap();
        let g = given_gpus(&loc, "1,3").unwrap();
        let names: Vec<&str> = g
            .devices
            .iter()
            .map(|&d| loc.devices()[d].name.as_str())
            .collect();
        assert_eq!(names, ["cuda1", "cuda3"]);
        assert_eq!(g.entries[1].1, "3");
        let e = given_gpus(&loc, "4").unwrap_err();
        assert!(e.contains("has 4 GPU(s)"), "{e}");
    }
}

#[test]
fn cores_from_the_jobs_r() {
    let r: Value = serde_json::from_str(
        r#"{"version":1,"execution":{"R_lite":[{"rank":"3","children":{"core":"2-3"}},{"rank":"0-1","children":{"core":"0-1","gpu":"0"}}],"nodelist":["a","b","c"]}}"#,
    )
    .unwrap();
    assert_eq!(cores_per_node(&r).unwrap(), ["0-1", "0-1", "2-3"]);
    assert!(cores_per_node(&serde_json::json!({})).is_err());
}

#[test]
fn cores_per_slot_is_the_jobs_dash_c() {
    let spec = |r: serde_json::Value| serde_json::json!({"version": 1, "resources": r});
    // `flux run -n2 -c4`: two slots of four cores.
    let plain = spec(serde_json::json!([
        {"type": "slot", "count": 2, "label": "task", "with": [{"type": "core", "count": 4}]}
    ]));
    assert_eq!(cores_per_slot(&plain), Some(4));
    // `flux run -N1 -n2 -c3 -g1`: under a node, beside a GPU.
    let nested = spec(serde_json::json!([
        {"type": "node", "count": 1, "with": [
            {"type": "slot", "count": 2, "label": "task", "with": [
                {"type": "gpu", "count": 1}, {"type": "core", "count": 3}]}]}
    ]));
    assert_eq!(cores_per_slot(&nested), Some(3));
    // A range (RFC 14) counts its minimum; a core outside any slot is not a slot's.
    let range = spec(serde_json::json!([
        {"type": "slot", "count": 1, "with": [{"type": "core", "count": {"min": 2, "max": 8}}]}
    ]));
    assert_eq!(cores_per_slot(&range), Some(2));
    let bare = spec(serde_json::json!([{"type": "core", "count": 5}]));
    assert_eq!(cores_per_slot(&bare), None);
    assert_eq!(cores_per_slot(&serde_json::json!({})), None);
}
