//! Task maps against Flux RFC 34's test vectors and the PMI table of its background section,
//! and Slurm layouts against the examples in the issue and in `slurm-sandbox.md`.

use lama::slurm::{expand_counts, expand_hostlist, layout, step_taskmap, Distribution};
use lama::taskmap::{parse_any, pmi, raw, rfc34, TaskMap};

/// (raw, RFC 34) from RFC 34's "Test Vectors" table.
const VECTORS: [(&str, &str); 15] = [
    ("", "[]"),
    ("0", "[[0,1,1,1]]"),
    ("0;1", "[[0,2,1,1]]"),
    ("0-1", "[[0,1,2,1]]"),
    ("0-1;2-3", "[[0,2,2,1]]"),
    ("0,2;1,3", "[[0,2,1,2]]"),
    ("1;0", "[[1,1,1,1],[0,1,1,1]]"),
    ("0-3;4-7;8-11;12-15", "[[0,4,4,1]]"),
    ("0,4,8,12;1,5,9,13;2,6,10,14;3,7,11,15", "[[0,4,1,4]]"),
    ("0-1,8-9;2-3,10-11;4-5,12-13;6-7,14-15", "[[0,4,2,2]]"),
    ("0-1;2-3;4-5;6-7;8-11;12-15", "[[0,4,2,1],[4,2,4,1]]"),
    (
        "0,6;1,7;2,8;3,9;4,10,12,14;5,11,13,15",
        "[[0,6,1,2],[4,2,1,2]]",
    ),
    (
        "14-15;12-13;10-11;8-9;4-7;0-3",
        "[[5,1,4,1],[4,1,4,1],[3,1,2,1],[2,1,2,1],[1,1,2,1],[0,1,2,1]]",
    ),
    (
        "0-1;2-3;4-5;6-7;8-9;12-13;10-11;14-15",
        "[[0,5,2,1],[6,1,2,1],[5,1,2,1],[7,1,2,1]]",
    ),
    (
        "12-15;8-11;4-7;0-3",
        "[[3,1,4,1],[2,1,4,1],[1,1,4,1],[0,1,4,1]]",
    ),
];

#[test]
fn rfc34_test_vectors_both_directions() {
    for (rawmap, json) in VECTORS {
        let from_raw = raw::decode(rawmap).expect(rawmap);
        assert_eq!(from_raw.to_string(), json, "raw {rawmap:?} -> rfc34");
        let from_json = rfc34::decode(json).expect(json);
        assert_eq!(raw::encode(&from_json), rawmap, "rfc34 {json} -> raw");
        assert_eq!(
            from_json.canonical().to_string(),
            json,
            "{json} is canonical"
        );
        let wrapped = rfc34::encode_wrapped(&from_json);
        assert_eq!(rfc34::decode(&wrapped).expect("wrapped"), from_json);
    }
}

/// (PMI, RFC 34) from the RFC's two tables (4*4 and 4*2 + 2*4; block, cyclic:1, cyclic:2).
const PMI_TABLE: [(&str, &str); 6] = [
    ("(vector,(0,4,4))", "[[0,4,4,1]]"),
    ("(vector,(0,4,1),(0,4,1),(0,4,1),(0,4,1))", "[[0,4,1,4]]"),
    ("(vector,(0,4,2),(0,4,2))", "[[0,4,2,2]]"),
    ("(vector,(0,4,2),(4,2,4))", "[[0,4,2,1],[4,2,4,1]]"),
    (
        "(vector,(0,6,1),(0,6,1),(4,2,1),(4,2,1))",
        "[[0,6,1,2],[4,2,1,2]]",
    ),
    ("(vector,(0,6,2),(4,2,2))", "[[0,6,2,1],[4,2,2,1]]"),
];

#[test]
fn pmi_table_both_directions() {
    for (p, json) in PMI_TABLE {
        assert_eq!(pmi::decode(p).expect(p).to_string(), json);
        assert_eq!(pmi::encode(&rfc34::decode(json).expect(json)), p);
    }
    // Blanks and a trailing comma are tolerated.
    assert_eq!(
        pmi::decode(" ( vector, (0, 4, 4), ) ")
            .expect("tolerant")
            .to_string(),
        "[[0,4,4,1]]"
    );
    // 4096*256 block is compact in both forms.
    assert_eq!(
        pmi::decode("(vector,(0,4096,256))")
            .expect("big")
            .to_string(),
        "[[0,4096,256,1]]"
    );
}

#[test]
fn rfc34_rejects_bad_maps() {
    for (bad, needle) in [
        ("[[0,1,1]]", "4 values"),
        ("[[0,1,1,1,1]]", "4 values"),
        ("[[-1,1,1,1]]", "non-negative integer"),
        ("[[0,1.5,1,1]]", "non-negative integer"),
        ("[[0,0,1,1]]", "at least 1"),
        ("[[0,1,0,1]]", "at least 1"),
        ("[[0,1,1,0]]", "at least 1"),
        ("{\"version\":2,\"map\":[]}", "version"),
        ("{\"map\":[]}", "version"),
        ("{\"version\":1,\"map\":{}}", "array"),
        ("{\"version\":1}", "map"),
        ("[1,2]", "block 1"),
        ("nope[", "JSON"),
    ] {
        let e = rfc34::decode(bad).expect_err(bad).to_string();
        assert!(e.contains(needle), "{bad}: {e}");
    }
}

#[test]
fn raw_rejects_bad_maps_naming_ids() {
    for (bad, needle) in [
        ("0-1;1-2", "task 1"),
        ("0;2", "task ids 1 are missing"),
        ("0,3;4", "task ids 1-2 are missing"),
        ("2,0;1", "out of order"),
        ("0-2,1;3", "out of order"),
        ("0-x", "not a non-negative integer"),
        ("3-1;0", "backwards"),
    ] {
        let e = raw::decode(bad).expect_err(bad).to_string();
        assert!(e.contains(needle), "{bad}: {e}");
    }
}

#[test]
fn pmi_rejects_bad_maps() {
    for bad in [
        "(vector,(0,1))",
        "vector,(0,1,1)",
        "(vector,(0,1,x))",
        "(vector,(0,0,1))",
        "(vector,(0,1,1)(1,1,1))",
    ] {
        assert!(pmi::decode(bad).is_err(), "{bad}");
    }
}

#[test]
fn parse_any_detects_the_form() {
    assert_eq!(
        parse_any("[[0,4,4,1]]").expect("rfc34").to_string(),
        "[[0,4,4,1]]"
    );
    assert_eq!(
        parse_any("{\"version\":1,\"map\":[[0,4,1,4]]}")
            .expect("wrapped")
            .to_string(),
        "[[0,4,1,4]]"
    );
    assert_eq!(
        parse_any("(vector,(0,4,4))").expect("pmi").to_string(),
        "[[0,4,4,1]]"
    );
    assert_eq!(
        parse_any("0-1;2-3").expect("raw").to_string(),
        "[[0,2,2,1]]"
    );
}

#[test]
fn queries_walk_blocks() {
    let m = rfc34::decode("[[0,6,1,2],[4,2,1,2]]").expect("map");
    assert_eq!(m.total_tasks(), 16);
    assert_eq!(m.nnodes(), 6);
    assert_eq!(m.node_of(13), Some(5));
    assert_eq!(m.node_of(16), None);
    assert_eq!(m.ntasks_on(4), 4);
    assert_eq!(lama::taskmap::format_ranges(&m.tasks_on(4)), "4,10,12,14");
    assert_eq!(m.check_shape(16, 6), Ok(()));
    assert_eq!(
        m.check_shape(12, 6).unwrap_err().to_string(),
        "got 16 total tasks, expected 12"
    );
    let cyclic = rfc34::decode("[[0,4096,1,256]]").expect("map");
    assert_eq!(cyclic.total_tasks(), 1 << 20);
    assert_eq!(cyclic.node_of(4096 * 7 + 5), Some(5));
    assert_eq!(cyclic.tasks_on(3).len(), 256);
    assert!(TaskMap::default().is_unknown());
}

#[test]
fn hostlists_and_counts() {
    assert_eq!(
        expand_hostlist("n[1-3,7]").expect("hl"),
        ["n1", "n2", "n3", "n7"]
    );
    assert_eq!(
        expand_hostlist("c[001-003]").expect("hl"),
        ["c001", "c002", "c003"]
    );
    assert_eq!(
        expand_hostlist("a[1-2],b[08-09],login").expect("hl"),
        ["a1", "a2", "b08", "b09", "login"]
    );
    assert_eq!(
        expand_hostlist("r[1-2]n[1-2]").expect("hl"),
        ["r1n1", "r1n2", "r2n1", "r2n2"]
    );
    assert!(expand_hostlist("n[1-").is_err());
    assert!(expand_hostlist("a[0-999999]b[0-999999]").is_err());
    assert_eq!(expand_counts("2(x3),1").expect("counts"), [2, 2, 2, 1]);
    assert!(expand_counts("2(x0)").is_err());
    assert!(expand_counts("x").is_err());
}

#[test]
fn slurm_layouts() {
    let none: Vec<String> = Vec::new();
    let tm = |counts: &str, dist: &str, plane: Option<u32>| {
        let d = Distribution::parse(dist, plane, None).expect(dist);
        step_taskmap(&expand_counts(counts).expect(counts), &d, &none)
            .expect("layout")
            .to_string()
    };
    // From the issue.
    assert_eq!(tm("2,1,1", "block", None), "[[0,1,2,1],[1,2,1,1]]");
    assert_eq!(tm("2(x3)", "cyclic", None), "[[0,3,1,2]]");
    let d = Distribution::parse("plane", Some(2), None).expect("plane");
    let nodes = layout(&[4, 4], &d, &none).expect("layout");
    let first: Vec<usize> = (0..8).filter(|&t| nodes[t] == 0).collect();
    assert_eq!(first, [0, 1, 4, 5]);
    // RFC 34's distributions as Slurm layouts (4*2 + 2*4 nodes).
    assert_eq!(
        tm("2(x4),4(x2)", "cyclic:block", None),
        "[[0,6,1,2],[4,2,1,2]]"
    );
    assert_eq!(tm("2(x4),4(x2)", "plane=2", None), "[[0,6,2,1],[4,2,2,1]]");
    assert_eq!(tm("4(x4)", "block:cyclic", None), "[[0,4,4,1]]");
    // slurm-sandbox.md: -N3 -n6 -m cyclic puts tasks 1 and 4 on the second node.
    let d = Distribution::parse("cyclic", None, None).expect("cyclic");
    let nodes = layout(&[2, 2, 2], &d, &none).expect("layout");
    assert_eq!(
        (0..6).filter(|&t| nodes[t] == 1).collect::<Vec<_>>(),
        [1, 4]
    );
}

#[test]
fn arbitrary_follows_the_hostfile() {
    // slurm-sandbox.md: hostfile n2 n1 n1 n3 n2 with -n5: n2 has 0,4; n1 has 1,2; n3 has 3.
    let hosts = expand_hostlist("n[1-3]").expect("hl");
    let d = Distribution::parse("arbitrary", None, Some("n2\nn1\nn1\n# comment\nn3\nn2\n"))
        .expect("arb");
    let nodes = layout(&[2, 2, 1], &d, &hosts).expect("layout");
    assert_eq!(nodes, [1, 0, 0, 2, 1]);
    let d = Distribution::parse("arbitrary", None, Some("n9\n")).expect("arb");
    assert!(layout(&[1], &d, &hosts)
        .unwrap_err()
        .to_string()
        .contains("n9"));
    assert!(Distribution::parse("arbitrary", None, None).is_err());
    assert!(Distribution::parse("plane", None, None).is_err());
    assert!(Distribution::parse("diagonal", None, None).is_err());
}
