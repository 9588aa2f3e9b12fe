//! Host layouts with relative indexes (`+n#`, `+e`, `+e:#`) resolved against an allocation and
//! mapped: every task lands on a host of the allocation, and without oversubscription no host
//! gets more tasks than its slots. Input: allocation, a line `---`, then the layout.
#![no_main]
use lama::slurm::hostfile::{map, parse_host_list, parse_layout, Allocation, Mapper};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: (u8, u16, &str)| {
    let (flags, np, text) = data;
    let (alloc_text, layout_text) = text.split_once("\n---\n").unwrap_or((text, ""));
    let _ = parse_host_list(layout_text);
    let (Ok(alloc), Ok(entries)) = (
        Allocation::parse_hostfile_within(alloc_text, 1_000),
        parse_layout(layout_text),
    ) else {
        return;
    };
    let mapper = if flags & 1 == 0 {
        Mapper::Seq
    } else {
        Mapper::RoundRobin
    };
    let oversubscribe = flags & 2 != 0;
    let np = (flags & 4 != 0).then_some(usize::from(np));
    // Without --np, one round of every slot: skip rounds of millions of tasks (slow, not deeper).
    let slots: u64 = alloc.hosts().iter().map(|h| u64::from(h.slots)).sum();
    if np.is_none() && slots > 10_000 {
        return;
    }
    if let Ok(nodes) = map(&alloc, &entries, mapper, np, oversubscribe) {
        let hosts = alloc.hosts();
        if let Some(np) = np {
            assert_eq!(nodes.len(), np);
        }
        let mut count = vec![0u64; hosts.len()];
        for &n in &nodes {
            count[n] += 1;
        }
        if !oversubscribe {
            for (c, h) in count.iter().zip(hosts) {
                assert!(*c <= u64::from(h.slots), "{} over its slots", h.name);
            }
        }
    }
});
