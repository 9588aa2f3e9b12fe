//! Relative host indexing and the seq / round-robin mappers. Expected hosts are worked out by hand
//! from the rules (and, for the seed's examples, copied from PRRTE's documentation).

use lama::slurm::hostfile::{
    map, parse_host_list, parse_layout, slurm_hostfile, Allocation, Entry, Host, HostfileError,
    Mapper, Target,
};
use proptest::prelude::*;

fn dummies() -> Allocation {
    Allocation::parse_hostfile(
        "dummy1 slots=4\ndummy2 slots=4\ndummy3 slots=4\ndummy4 slots=4\ndummy5 slots=4\n",
    )
    .expect("allocation")
}

const SEED_LAYOUT: &str = "+n2 slots=2\n+e:1\ndummy4 slots=1\n+n2\n+e\n";

fn names(alloc: &Allocation, nodes: &[usize]) -> Vec<String> {
    nodes
        .iter()
        .map(|&n| alloc.hosts()[n].name.clone())
        .collect()
}

fn run(
    alloc: &Allocation,
    layout: &str,
    mapper: Mapper,
    np: Option<usize>,
    over: bool,
) -> Result<Vec<String>, HostfileError> {
    let entries = parse_layout(layout)?;
    map(alloc, &entries, mapper, np, over).map(|n| names(alloc, &n))
}

fn hosts(list: &str) -> Vec<String> {
    list.split_whitespace().map(String::from).collect()
}

#[test]
fn seed_example_with_the_seq_mapper() {
    // "rank0 dummy3, rank1 dummy1 as the first empty node, rank2 dummy4, rank3 dummy3,
    // rank4 dummy2 and rank5 dummy5 as the last remaining unused nodes"
    let got = run(&dummies(), SEED_LAYOUT, Mapper::Seq, None, false).expect("seq");
    assert_eq!(got, hosts("dummy3 dummy1 dummy4 dummy3 dummy2 dummy5"));
}

#[test]
fn seed_example_with_the_round_robin_mapper() {
    // Ranks 0-1 dummy3 (slots=2), 2-5 dummy1 (an empty node, 4 slots), 6 dummy4 (slots=1),
    // 7-8 dummy3 (the two slots it has left), 9-12 dummy2, 13-16 dummy5.
    let got = run(&dummies(), SEED_LAYOUT, Mapper::RoundRobin, None, false).expect("rr");
    let mut want = hosts("dummy3 dummy3");
    want.extend(hosts("dummy1 dummy1 dummy1 dummy1 dummy4 dummy3 dummy3"));
    want.extend(hosts(
        "dummy2 dummy2 dummy2 dummy2 dummy5 dummy5 dummy5 dummy5",
    ));
    assert_eq!(got, want);
}

#[test]
fn host_option_is_the_layout_file_on_one_line() {
    let file = parse_layout(SEED_LAYOUT).expect("file");
    let list = parse_host_list("+n2 slots=2, +e:1,dummy4 slots=1,+n2,+e").expect("list");
    let strip = |v: Vec<Entry>| -> Vec<(Target, Option<u32>)> {
        v.into_iter().map(|e| (e.target, e.slots)).collect()
    };
    assert_eq!(strip(file), strip(list));
}

#[test]
fn allocation_from_the_slurm_job() {
    let env = |k: &str| match k {
        "SLURM_JOB_NODELIST" => Some("n[1-3],login".to_string()),
        "SLURM_JOB_CPUS_PER_NODE" => Some("4(x2),2,1".to_string()),
        _ => None,
    };
    let a = Allocation::from_slurm(env).expect("slurm");
    let want = [("n1", 4), ("n2", 4), ("n3", 2), ("login", 1)];
    assert_eq!(a.hosts().len(), want.len());
    for (h, (name, slots)) in a.hosts().iter().zip(want) {
        assert_eq!((h.name.as_str(), h.slots), (name, slots));
    }
    let err = Allocation::from_slurm(|_| None).expect_err("outside a job");
    assert!(err.to_string().contains("SLURM_JOB_NODELIST"), "{err}");
}

#[test]
fn allocation_from_a_nodelist_and_slots_spec() {
    let a = Allocation::from_nodelist("c[01-03]", Some("2(x2),8")).expect("alloc");
    let slots: Vec<u32> = a.hosts().iter().map(|h| h.slots).collect();
    assert_eq!(slots, [2, 2, 8]);
    assert_eq!(a.hosts()[0].name, "c01");
    // One count stands for every host; no count means one slot each.
    let one = Allocation::from_nodelist("c[1-3]", Some("6")).expect("alloc");
    assert!(one.hosts().iter().all(|h| h.slots == 6));
    let none = Allocation::from_nodelist("c[1-3]", None).expect("alloc");
    assert!(none.hosts().iter().all(|h| h.slots == 1));
    let err = Allocation::from_nodelist("c[1-3]", Some("2,2")).expect_err("2 counts, 3 hosts");
    assert!(err.to_string().contains("2 counts for 3 hosts"), "{err}");
    assert!(Allocation::from_nodelist("c[1-3]", Some("0")).is_err());
    assert!(Allocation::from_nodelist("c[1-", None).is_err());
}

#[test]
fn allocation_files() {
    let a = Allocation::parse_hostfile("# rack 1\nr1n[1-2] slots=3\n\nlogin   # no slots: one\n")
        .expect("alloc");
    let got: Vec<(&str, u32)> = a
        .hosts()
        .iter()
        .map(|h| (h.name.as_str(), h.slots))
        .collect();
    assert_eq!(got, [("r1n1", 3), ("r1n2", 3), ("login", 1)]);
    let e = Allocation::parse_hostfile("a slots=2\nb slots=x\n").expect_err("bad slots");
    assert!(e.to_string().contains("line 2"), "{e}");
    let e = Allocation::parse_hostfile("a\n+n1\n").expect_err("relative");
    assert!(
        e.to_string().contains("line 2") && e.to_string().contains("relative"),
        "{e}"
    );
    let e = Allocation::parse_hostfile("a\nb\na\n").expect_err("duplicate");
    assert!(e.to_string().contains("listed twice"), "{e}");
    assert!(Allocation::parse_hostfile("# nothing\n").is_err());
    assert_eq!(
        Allocation::new(vec![Host {
            name: "a".into(),
            slots: 0
        }])
        .expect_err("0 slots")
        .kind(),
        "invalid-allocation"
    );
}

#[test]
fn comments_blank_lines_and_mixed_entries() {
    let a = Allocation::from_nodelist("h[0-3]", Some("2")).expect("alloc");
    let layout = "# head node first\n\n  h3   # by name\n+n0 slots=1\n\t\n+e:1  # h1\n+e\n";
    let got = run(&a, layout, Mapper::Seq, None, false).expect("seq");
    assert_eq!(got, hosts("h3 h0 h1 h2"));
}

#[test]
fn empty_nodes_are_tracked_across_entries() {
    let a = Allocation::from_nodelist("h[0-5]", Some("1")).expect("alloc");
    // h2 is used by name, h0 by index; the +e entries then get h1, h3, and the rest (h4, h5).
    let layout = "h2\n+n0\n+e:1\n+e:1\n+e\n";
    let got = run(&a, layout, Mapper::Seq, None, false).expect("seq");
    assert_eq!(got, hosts("h2 h0 h1 h3 h4 h5"));
    // A node used later by name is still empty when an earlier +e looks.
    let got = run(&a, "+e:1\nh0\n", Mapper::Seq, None, true).expect("seq");
    assert_eq!(got, hosts("h0 h0"));
}

#[test]
fn seq_ignores_slots_truncates_and_checks_host_slots() {
    let a = Allocation::from_nodelist("h[0-1]", Some("2,1")).expect("alloc");
    let got = run(&a, "h1 slots=1\nh0\nh0\n", Mapper::Seq, Some(2), false).expect("seq");
    assert_eq!(got, hosts("h1 h0"));
    let e = run(&a, "h1\nh0\n", Mapper::Seq, Some(3), false).expect_err("3 > 2 entries");
    assert_eq!(e, HostfileError::NotEnoughEntries { np: 3, entries: 2 });
    let e = run(&a, "h1\nh1\n", Mapper::Seq, None, false).expect_err("h1 has one slot");
    assert!(
        e.to_string().contains("2 task(s) on h1, which has 1 slot"),
        "{e}"
    );
    let got = run(&a, "h1\nh1\n", Mapper::Seq, None, true).expect("oversubscribed");
    assert_eq!(got, hosts("h1 h1"));
}

#[test]
fn round_robin_takes_remaining_slots_and_goes_round_when_allowed() {
    let a = Allocation::from_nodelist("a,b", Some("3,1")).expect("alloc");
    // Without slots= an entry takes what the node has left: a gets 3, then nothing.
    let got = run(&a, "a\n+n0\nb\n", Mapper::RoundRobin, None, false).expect("rr");
    assert_eq!(got, hosts("a a a b"));
    // Fewer tasks than one round: the first ones.
    let got = run(&a, "b\na\n", Mapper::RoundRobin, Some(2), false).expect("rr");
    assert_eq!(got, hosts("b a"));
    // More: refused, or round again with each entry's quota (slots=, else the node's slots).
    let e = run(&a, "a slots=1\nb\n", Mapper::RoundRobin, Some(5), false).expect_err("5 > 2");
    assert_eq!(e, HostfileError::NotEnoughSlots { np: 5, slots: 2 });
    let got = run(&a, "a slots=1\nb\n", Mapper::RoundRobin, Some(5), true).expect("rr");
    assert_eq!(got, hosts("a b a b a"));
    let got = run(&a, "a\n", Mapper::RoundRobin, Some(7), true).expect("rr");
    assert_eq!(got, hosts("a a a a a a a"));
}

#[test]
fn errors_name_the_entry() {
    let a = dummies();
    let at = |layout: &str, mapper| run(&a, layout, mapper, None, false).expect_err(layout);
    let e = at("dummy1\n+n5\n", Mapper::Seq);
    assert_eq!(
        e.to_string(),
        "line 2 '+n5': the allocation has 5 node(s), so valid indexes are +n0 to +n4"
    );
    let e = at("+n0\n+n1\n+e:4\n", Mapper::Seq);
    assert_eq!(
        e,
        HostfileError::NotEnoughEmpty {
            at: "line 3 '+e:4'".into(),
            requested: 4,
            remaining: 3,
            nodes: 5
        }
    );
    let e = at("+e\n+e\n", Mapper::RoundRobin);
    assert!(
        e.to_string()
            .starts_with("line 2 '+e': asks for 1 empty node(s), but only 0"),
        "{e}"
    );
    let e = at("dummy9\n", Mapper::Seq);
    assert!(
        e.to_string()
            .starts_with("line 1 'dummy9': host 'dummy9' is not in the allocation (dummy1, dummy2"),
        "{e}"
    );
    let e = at("dummy1 slots=5\n", Mapper::RoundRobin);
    assert!(
        e.to_string()
            .contains("slots=5 is more than the 4 slot(s) dummy1 has"),
        "{e}"
    );
    let e = run(&a, "dummy1\n", Mapper::RoundRobin, Some(5), false).expect_err("5 > 4");
    assert_eq!(e, HostfileError::NotEnoughSlots { np: 5, slots: 4 });
    for (layout, line) in [
        ("dummy1\n\n+x3\n", "line 3 '+x3'"),
        ("+n\n", "line 1 '+n'"),
        ("+e:0\n", "line 1 '+e:0'"),
        ("# c\n+e:two\n", "line 2 '+e:two'"),
        ("dummy1 slots=0\n", "line 1 'dummy1 slots=0'"),
        ("dummy1 slots=2 slots=3\n", "line 1"),
        ("dummy1 max_slots=2\n", "line 1 'dummy1 max_slots=2'"),
        ("dummy1:2\n", "line 1 'dummy1:2'"),
    ] {
        let e = parse_layout(layout).expect_err(layout);
        assert_eq!(e.kind(), "invalid-layout", "{layout}");
        assert!(e.to_string().starts_with(line), "{layout}: {e}");
    }
    let e = parse_host_list("dummy1,,dummy2").expect_err("empty item");
    assert!(e.to_string().starts_with("--host entry 2"), "{e}");
    assert!(run(&a, "# only a comment\n", Mapper::Seq, None, false).is_err());
    assert!(run(&a, "dummy1\n", Mapper::Seq, Some(0), false).is_err());
}

#[test]
fn slurm_hostfile_text() {
    let h = hosts("n1 n2 n3");
    assert_eq!(
        slurm_hostfile(&h, &[2, 0, 0, 1]).expect("text"),
        "n3\nn1\nn1\nn2\n"
    );
    let e = slurm_hostfile(&h, &[0, 3]).expect_err("node 3 of 3");
    assert!(
        e.to_string().contains("node 3") && e.to_string().contains("3 node(s)"),
        "{e}"
    );
}

prop_compose! {
    fn allocation()(slots in proptest::collection::vec(1..5u32, 1..7)) -> Allocation {
        Allocation::new(slots.iter().enumerate().map(|(i, &s)| Host { name: format!("h{i}"), slots: s }).collect())
            .expect("allocation")
    }
}

/// Entries as text: names, +n#, +e, +e:#, with or without slots (some may not resolve).
fn entry_text() -> impl Strategy<Value = String> {
    let target = prop_oneof![
        (0..7usize).prop_map(|i| format!("h{i}")),
        (0..7usize).prop_map(|i| format!("+n{i}")),
        Just("+e".to_string()),
        (1..4usize).prop_map(|k| format!("+e:{k}")),
    ];
    (target, proptest::option::of(1..4u32)).prop_map(|(t, s)| match s {
        Some(s) => format!("{t} slots={s}"),
        None => t,
    })
}

/// The rules written out plainly: each entry in order, `+e` from the nodes not used so far.
fn expand(alloc: &Allocation, entries: &[Entry]) -> Option<Vec<usize>> {
    let hosts = alloc.hosts();
    let mut used = vec![false; hosts.len()];
    let mut out = Vec::new();
    for e in entries {
        let nodes = match &e.target {
            Target::Host(h) => vec![hosts.iter().position(|x| &x.name == h)?],
            Target::Index(i) => vec![*i].into_iter().filter(|&i| i < hosts.len()).collect(),
            Target::Empty(k) => {
                let free: Vec<usize> = (0..hosts.len()).filter(|&i| !used[i]).collect();
                free.iter().copied().take(k.unwrap_or(free.len())).collect()
            }
        };
        let wanted = match e.target {
            Target::Empty(Some(k)) => k,
            _ => 1,
        };
        if nodes.is_empty() || (matches!(e.target, Target::Empty(Some(_))) && nodes.len() < wanted)
        {
            return None;
        }
        for n in nodes {
            if e.slots.is_some_and(|s| s > hosts[n].slots) {
                return None;
            }
            used[n] = true;
            out.push(n);
        }
    }
    Some(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_task_gets_exactly_one_allocated_host(
        alloc in allocation(),
        lines in proptest::collection::vec(entry_text(), 1..8),
        seq in any::<bool>(),
        np in proptest::option::of(1..40usize),
        over in any::<bool>(),
    ) {
        let entries = parse_layout(&lines.join("\n")).expect("generated entries parse");
        let mapper = if seq { Mapper::Seq } else { Mapper::RoundRobin };
        if let Ok(nodes) = map(&alloc, &entries, mapper, np, over) {
            if let Some(np) = np { prop_assert_eq!(nodes.len(), np); }
            prop_assert!(nodes.iter().all(|&n| n < alloc.hosts().len()));
            if !over {
                for (i, h) in alloc.hosts().iter().enumerate() {
                    prop_assert!(nodes.iter().filter(|&&n| n == i).count() <= h.slots as usize);
                }
            }
            let names: Vec<String> = alloc.hosts().iter().map(|h| h.name.clone()).collect();
            let idx: Vec<u32> = nodes.iter().map(|&n| n as u32).collect();
            let text = slurm_hostfile(&names, &idx).expect("text");
            prop_assert_eq!(text.lines().count(), nodes.len());
        }
    }

    #[test]
    fn seq_yields_exactly_the_expanded_entries(
        alloc in allocation(),
        lines in proptest::collection::vec(entry_text(), 1..8),
    ) {
        let entries = parse_layout(&lines.join("\n")).expect("generated entries parse");
        let got = map(&alloc, &entries, Mapper::Seq, None, true).ok();
        prop_assert_eq!(got, expand(&alloc, &entries));
    }

    #[test]
    fn layout_text_round_trips(lines in proptest::collection::vec(entry_text(), 1..8)) {
        let entries = parse_layout(&lines.join("\n")).expect("parse");
        let again: Vec<String> = entries.iter().map(|e| {
            let t = match &e.target {
                Target::Host(h) => h.clone(),
                Target::Index(i) => format!("+n{i}"),
                Target::Empty(None) => "+e".into(),
                Target::Empty(Some(k)) => format!("+e:{k}"),
            };
            match e.slots { Some(s) => format!("{t} slots={s}"), None => t }
        }).collect();
        prop_assert_eq!(again, lines.clone());
        let list = parse_host_list(&lines.join(",")).expect("list");
        prop_assert_eq!(list.len(), entries.len());
    }
}

proptest! {
    /// Layouts and allocation files are user input: any text parses or gives an error.
    #[test]
    fn parsing_never_panics(text in "[ -~×é\n+:=#\\[\\],-]{0,80}") {
        let _ = parse_layout(&text);
        let _ = parse_host_list(&text);
        let _ = Allocation::parse_hostfile(&text);
        let _ = Allocation::from_nodelist(&text, Some(&text));
    }
}
