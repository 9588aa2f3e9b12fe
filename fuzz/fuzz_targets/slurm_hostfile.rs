//! `SLURM_HOSTFILE` contents (one host per task, `host*N`, hostlists) and allocation files
//! (`host slots=N`).
#![no_main]
use lama::hostfile::Allocation;
use lama::slurm_layout::read_hostfile_within;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    // A lower limit than lama's own: the same checks, without spending seconds on 16M tasks.
    if let Ok(hosts) = read_hostfile_within(text, 10_000) {
        assert!(hosts.len() <= 10_000);
    }
    // Lower limits than lama's own: the same checks, without seconds spent on a million hosts.
    if let Ok(alloc) = Allocation::parse_hostfile_within(text, 1_000) {
        assert!(!alloc.hosts().is_empty() && alloc.hosts().len() <= 1_000);
        assert!(alloc.hosts().iter().all(|h| h.slots >= 1));
    }
});
