//! `SLURM_HOSTFILE` contents (one host per task, `host*N`, hostlists) and allocation files
//! (`host slots=N`); the map every node streams from a host file equals the per-task layout's.
#![no_main]
use lama::slurm::hostfile::Allocation;
use lama::slurm::{layout, read_hostfile_within, Distribution};
use lama::slurm::step_map::{arbitrary_map, HostFile};
use lama::taskmap::TaskMap;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    // A lower limit than lama's own: the same checks, without spending seconds on 16M tasks.
    if let Ok(hosts) = read_hostfile_within(text, 10_000) {
        assert!(hosts.len() <= 10_000);
        // The step's nodes: the file's hosts in first-seen order, with their task counts.
        let mut nodes: Vec<String> = Vec::new();
        let mut counts: Vec<u32> = Vec::new();
        let mut index = std::collections::HashMap::new();
        for h in &hosts {
            let i = *index.entry(h.as_str()).or_insert_with(|| {
                nodes.push(h.clone());
                counts.push(0);
                nodes.len() - 1
            });
            counts[i] += 1;
        }
        if !hosts.is_empty() {
            let per_task = layout(&counts, &Distribution::Arbitrary(hosts.clone()), &nodes)
                .expect("the file's own hosts lay out");
            let map = arbitrary_map(&counts, &nodes, HostFile::Text(text)).expect("streamed");
            assert_eq!(map, TaskMap::encode(&per_task));
        }
    }
    // Lower limits than lama's own: the same checks, without seconds spent on a million hosts.
    if let Ok(alloc) = Allocation::parse_hostfile_within(text, 1_000) {
        assert!(!alloc.hosts().is_empty() && alloc.hosts().len() <= 1_000);
        assert!(alloc.hosts().iter().all(|h| h.slots >= 1));
    }
});
