//! The node cache slurmd writes and steps read: what hwloc loaded comes back unchanged, and a
//! damaged file is an error (the plugin then probes the machine), never a panic.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use lama::cache::{read, write, CacheError, Detail, Writer};
use lama::NodeTopology;
use proptest::prelude::*;

#[path = "common/scratch.rs"]
mod scratch_folder;
use scratch_folder::scratch;

fn xml(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}/../tests/topologies/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

#[test]
fn machines_with_devices_come_back_unchanged() {
    let mut names: Vec<String> = std::fs::read_dir(xml(""))
        .expect("topologies")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".xml"))
        .collect();
    names.sort();
    assert!(names.len() >= 18, "every real machine: {names:?}");
    for name in names.iter().map(String::as_str) {
        let (node, loc) = NodeTopology::from_xml_file_with_devices(&xml(name), true).expect("xml");
        let dir = scratch(&format!("cache-{}", name.replace('.', "-")));
        let file = dir.join("topology-n1.json");
        write(&file, &node, &loc, None, Writer::Root).expect("write");
        let back = read(&file, true, Writer::Root).expect("read");
        assert_eq!(back.topology, node, "{name}: topology");
        assert_eq!(back.locality.as_ref(), Some(&loc), "{name}: devices");
        let bare = read(&file, false, Writer::Root).expect("read without devices");
        assert_eq!(bare.topology, node, "{name}: topology alone");
        assert_eq!(
            bare.locality, None,
            "{name}: devices skipped when not asked for"
        );
        assert_eq!(
            bare.numa, None,
            "{name}: NUMA nodes skipped when not asked for"
        );
        // --lama-mem=local reads the NUMA nodes alone: hwloc's, without the places and devices.
        let numa = read(&file, Detail::Numa, Writer::Root).expect("read NUMA nodes");
        assert_eq!(numa.topology, node, "{name}: topology with NUMA nodes");
        assert_eq!(numa.locality, None, "{name}: no devices with NUMA nodes");
        assert_eq!(numa.numa.as_deref(), Some(loc.numa()), "{name}: NUMA nodes");
        assert_eq!(
            back.numa.as_deref(),
            Some(loc.numa()),
            "{name}: NUMA nodes with devices"
        );
        let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o644,
            "{name}: readable by every step, written by root only"
        );
        let left: Vec<_> = std::fs::read_dir(&dir).expect("dir").collect();
        assert_eq!(left.len(), 1, "no temporary file left behind");
        // Written again over itself (slurmd restarting), still whole.
        write(&file, &node, &loc, None, Writer::Root).expect("rewrite");
        assert_eq!(
            read(&file, true, Writer::Root).expect("read").topology,
            node
        );
    }
}

#[test]
fn damaged_caches_are_errors() {
    let (node, loc) =
        NodeTopology::from_xml_file_with_devices(&xml("32em64t-2n8c2t-pci-normalio.xml"), true)
            .expect("xml");
    let dir = scratch("cache-damaged");
    let good = dir.join("good.json");
    write(&good, &node, &loc, None, Writer::Root).expect("write");
    let text = std::fs::read_to_string(&good).expect("text");
    // The good file with its first `from` replaced by `to`.
    let damage = |from: &str, to: &str| text.replacen(from, to, 1);
    let cases = [
        ("truncated", text[..text.len() / 2].to_string()),
        ("not JSON", "<topology/>".to_string()),
        (
            "another format",
            damage(
                &format!("\"lama_node_cache\":{}", lama::cache::FORMAT),
                &format!("\"lama_node_cache\":{}", lama::cache::FORMAT - 1),
            ),
        ),
        (
            "a place of an unknown kind",
            damage("\"places\":[[0,", "\"places\":[[99,"),
        ),
        (
            "places beyond the machine's PUs",
            damage("\"places\":[[0,0,0,1,0,", "\"places\":[[0,0,0,1,5,"),
        ),
        (
            "billions of places in one run",
            damage(
                "\"places\":[[0,0,0,1,0,32,1]",
                "\"places\":[[0,0,0,1,0,32,4000000000]",
            ),
        ),
        (
            "a place outside its parent",
            damage(
                "\"places\":[[0,0,0,1,0,32,1]",
                "\"places\":[[0,0,0,1,0,16,1]",
            ),
        ),
        (
            "a place before its parent",
            damage(
                "\"places\":[[0,0,0,1,0,32,1],[",
                "\"places\":[[0,0,0,1,0,32,1],[0,0,9,1,0,1,1],[",
            ),
        ),
        (
            "a huge CPU number",
            damage("\"pus\":\"0,", "\"pus\":\"4000000000,"),
        ),
        ("a CPU twice", damage("\"pus\":\"0,", "\"pus\":\"0,0,")),
        (
            "a PU that is not a number",
            damage("\"pus\":\"0,", "\"pus\":\"0,x,"),
        ),
        (
            "an empty entry in the PU list",
            damage("\"pus\":\"0,", "\"pus\":\"0,,"),
        ),
        (
            "a PU number beyond 64 bits",
            damage("\"pus\":\"0,", "\"pus\":\"99999999999999999999999,"),
        ),
        (
            "one NUMA latency too many",
            damage("\"latency\":\"", "\"latency\":\"1,"),
        ),
        (
            "one NUMA latency too few",
            damage("\"latency\":\"10,", "\"latency\":\""),
        ),
        (
            "a device off the tree",
            damage("\"place\":", "\"place\":99999,\"x\":"),
        ),
        ("no levels", damage("\"levels\":[", "\"levels\":[[],")),
    ];
    for (what, body) in cases {
        assert_ne!(body, text, "{what}: the damage was not applied");
        let f = dir.join(format!("{}.json", what.replace(' ', "-")));
        std::fs::write(&f, body).expect("write");
        match read(&f, true, Writer::Root) {
            Err(CacheError::Invalid { reason, .. }) => assert!(!reason.is_empty()),
            other => panic!("{what}: {other:?}"),
        }
    }
    // Missing, told apart from unreadable: steps look for the cache without a stat of it.
    assert!(matches!(
        read(&dir.join("missing.json"), false, Writer::Root),
        Err(CacheError::Missing { .. })
    ));
    assert!(matches!(
        read(&dir.join("no-folder/missing.json"), false, Writer::Root),
        Err(CacheError::Missing { .. })
    ));
    std::fs::create_dir(dir.join("a-folder.json")).expect("folder");
    assert!(matches!(
        read(&dir.join("a-folder.json"), false, Writer::Root),
        Err(CacheError::Io { .. })
    ));
}

proptest! {
    /// Any bytes at all: an answer, never a panic.
    #[test]
    fn reading_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let dir = scratch("cache-fuzz");
        let f = dir.join("t.json");
        std::fs::write(&f, &bytes).expect("write");
        let _ = read(&f, true, Writer::Root);
    }
}

#[test]
fn caches_of_another_host_or_other_cpus_are_not_fresh() {
    let t = NodeTopology::from_synthetic("pack:1 core:2 pu:1")
        .unwrap()
        .with_name("n1");
    assert_eq!(lama::cache::check_fresh(&t, "n1", &[0, 1]), Ok(()));
    assert_eq!(lama::cache::check_fresh(&t, "n1", &[1]), Ok(()));
    let e = lama::cache::check_fresh(&t, "n2", &[0]).unwrap_err();
    assert!(e.contains("written by host 'n1', not by n2"), "{e}");
    let e = lama::cache::check_fresh(&t, "n1", &[0, 1, 2]).unwrap_err();
    assert!(e.contains("does not know CPU 2"), "{e}");
}

#[test]
fn caches_are_not_written_into_folders_others_can_change() {
    let dir = scratch("cache-open-folder");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let t = NodeTopology::from_synthetic("pack:1 core:2 pu:1").unwrap();
    let loc = lama::locality::Locality::new(Vec::new(), Vec::new(), None, Vec::new());
    let e = write(&dir.join("topology-x.json"), &t, &loc, None, Writer::Root)
        .unwrap_err()
        .to_string();
    assert!(e.contains("writable by others than root (mode 777)"), "{e}");
}

/// What a user without privileges could leave where slurmd keeps its cache: each is refused by
/// the reader (every step) and the writer (slurmd), and a cache root wrote is still read.
/// Ownership can be given away only by root: cargo lists this test as ignored (a skip), and the
/// test command, which runs as root, runs it with `--include-ignored`.
#[test]
#[ignore = "needs root (the test command runs it as root)"]
fn only_a_cache_root_wrote_is_trusted() {
    use std::os::unix::fs::{chown, symlink};
    // SAFETY: geteuid has no preconditions and cannot fail.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the ownership cases need root"
    );
    let t = NodeTopology::from_synthetic("pack:1 core:2 pu:1").unwrap();
    let loc = lama::locality::Locality::new(Vec::new(), Vec::new(), None, Vec::new());
    let good = scratch("root-folder");
    std::fs::set_permissions(&*good, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = good.join("topology-x.json");
    write(&file, &t, &loc, None, Writer::Root).unwrap();
    assert_eq!(
        read(&file, false, Writer::Root).unwrap().topology.cpus(),
        t.cpus()
    );

    // A folder a user made first, with a file planted in it.
    let planted = scratch("user-folder");
    std::fs::set_permissions(&*planted, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::copy(&file, planted.join("topology-x.json")).unwrap();
    chown(&*planted, Some(65534), Some(65534)).unwrap();
    let e = read(&planted.join("topology-x.json"), false, Writer::Root)
        .unwrap_err()
        .to_string();
    assert!(e.contains("folder is owned by uid 65534, not root"), "{e}");
    let e = write(
        &planted.join("topology-x.json"),
        &t,
        &loc,
        None,
        Writer::Root,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("folder is owned by uid 65534, not root"), "{e}");

    // A file a user owns in root's folder.
    let theirs = good.join("topology-theirs.json");
    std::fs::copy(&file, &theirs).unwrap();
    chown(&theirs, Some(65534), None).unwrap();
    let e = read(&theirs, false, Writer::Root).unwrap_err().to_string();
    assert!(e.contains("file is owned by uid 65534, not root"), "{e}");

    // A symbolic link for the folder, or for the file, even to root's own.
    let linked = good.join("linked");
    symlink(&*good, &linked).unwrap();
    let e = read(&linked.join("topology-x.json"), false, Writer::Root)
        .unwrap_err()
        .to_string();
    assert!(e.contains("folder is a symbolic link"), "{e}");
    let e = write(
        &linked.join("topology-y.json"),
        &t,
        &loc,
        None,
        Writer::Root,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("folder is a symbolic link"), "{e}");
    symlink(&file, good.join("topology-link.json")).unwrap();
    let e = read(&good.join("topology-link.json"), false, Writer::Root)
        .unwrap_err()
        .to_string();
    assert!(e.contains("file is a symbolic link"), "{e}");

    // A folder slurmd makes is root's, mode 0755.
    let made = good.join("made/lama");
    lama::cache::prepare_folder(&made, Writer::Root).unwrap();
    let mode = std::fs::metadata(&made).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o755);
}

/// The Flux shell names its cache by the XML's content, or a file by its state.
#[test]
fn keys_follow_the_content_and_the_file() {
    let xml = std::fs::read(xml("32em64t-2n8c2t-pci-normalio.xml")).unwrap();
    let key = lama::cache::xml_key(&xml);
    assert_eq!(key, lama::cache::xml_key(&xml.clone()));
    for at in [0, 1, 31, 32, xml.len() / 2, xml.len() - 1] {
        let mut other = xml.clone();
        other[at] ^= 1;
        assert_ne!(lama::cache::xml_key(&other), key, "a byte changed at {at}");
    }
    assert_ne!(lama::cache::xml_key(&xml[..xml.len() - 1]), key);
    let dir = scratch("keys");
    let f = dir.join("t.xml");
    std::fs::write(&f, b"one").unwrap();
    let before = lama::cache::file_key(&std::fs::metadata(&f).unwrap());
    std::fs::write(&f, b"other").unwrap();
    assert_ne!(
        lama::cache::file_key(&std::fs::metadata(&f).unwrap()),
        before
    );
}

/// What slurmd learns of its node once (the CPUs online, where the cpusets' hierarchy is
/// mounted) comes back as written, in every mode a step reads; a cache written without it (by
/// an older lama) still serves, saying nothing of it; an online list naming a CPU the machine
/// does not have is refused like any other damage.
#[test]
fn the_system_record_comes_back_and_is_optional() {
    use lama::cache::System;
    use lama::cpuset::Hierarchy;
    use lama::topology::AbstractCores;
    let (node, loc) =
        NodeTopology::from_xml_file_with_devices(&xml("32em64t-2n8c2t-pci-normalio.xml"), true)
            .expect("xml");
    let dir = scratch("system");
    let cases = [
        System {
            online: node.cpus(),
            cpusets: Some(Hierarchy {
                point: "/sys/fs/cgroup".into(),
                root: "/".into(),
                version: 2,
            }),
            slurm_cores: Some(None),
        },
        System {
            online: node.cpus()[..8].to_vec(),
            cpusets: Some(Hierarchy {
                point: "/sys/fs/cgroup/cpu set".into(),
                root: "/docker/abc".into(),
                version: 1,
            }),
            slurm_cores: Some(Some(AbstractCores {
                threads: 1,
                stride: 2,
                cores: 16,
            })),
        },
        System {
            online: node.cpus(),
            cpusets: None,
            slurm_cores: None,
        },
    ];
    for sys in &cases {
        let file = dir.join("topology-n1.json");
        write(&file, &node, &loc, Some(sys), Writer::Root).expect("write");
        for detail in [Detail::Topology, Detail::Numa, Detail::Devices] {
            let back = read(&file, detail, Writer::Root).expect("read");
            assert_eq!(back.system.as_ref(), Some(sys), "{detail:?}");
            assert_eq!(back.topology, node);
        }
    }
    let file = dir.join("older.json");
    write(&file, &node, &loc, None, Writer::Root).expect("write");
    assert_eq!(read(&file, true, Writer::Root).expect("read").system, None);
    let text = std::fs::read_to_string(dir.join("topology-n1.json")).expect("text");
    let bad = text.replacen("\"online\":\"", "\"online\":\"4000,", 1);
    assert_ne!(bad, text, "the record is on the first line");
    let file = dir.join("bad.json");
    std::fs::write(&file, bad).expect("write");
    match read(&file, true, Writer::Root) {
        Err(CacheError::Invalid { reason, .. }) => assert!(reason.contains("online"), "{reason}"),
        other => panic!(
            "a damaged online list read as {:?}",
            other.map(|n| n.system)
        ),
    }
    write(&file, &node, &loc, Some(&cases[1]), Writer::Root).expect("write");
    let text = std::fs::read_to_string(&file).expect("text");
    let bad = text.replacen("\"slurm_cores\":[", "\"slurm_cores\":[0,", 1);
    assert_ne!(bad, text, "the record has Slurm's cores");
    std::fs::write(&file, bad).expect("write");
    match read(&file, true, Writer::Root) {
        Err(CacheError::Invalid { reason, .. }) => {
            assert!(reason.contains("Slurm's cores"), "{reason}")
        }
        other => panic!("damaged Slurm cores read as {:?}", other.map(|n| n.system)),
    }
}
