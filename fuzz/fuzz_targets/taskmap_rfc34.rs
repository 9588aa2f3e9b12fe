//! RFC 34 JSON task maps: decode, then every other form and query agrees with the decoded map.
#![no_main]
use lama::taskmap::{pmi, raw, rfc34, TaskMap};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(map) = rfc34::decode(text) {
        lama_fuzz_check(&map);
        let canon = map.canonical();
        assert_eq!(canon.canonical(), canon);
        assert_eq!(
            rfc34::decode(&rfc34::encode_wrapped(&map)).ok(),
            Some(map.clone())
        );
        // PMI has no repeat: its text grows with the repeats, so only small ones are compared.
        if map.blocks().iter().map(|b| b.repeat).sum::<u64>() <= 1 << 16 {
            assert_eq!(pmi::decode(&pmi::encode(&map)).ok(), Some(canon.clone()));
        }
        if map.total_tasks() <= 1 << 16 {
            assert_eq!(raw::decode(&raw::encode(&map)).ok(), Some(canon));
        }
    }
});

/// Queries agree with each other on the first and last tasks and nodes.
fn lama_fuzz_check(map: &TaskMap) {
    let total = map.total_tasks();
    for t in [0, total / 2, total.saturating_sub(1), total] {
        match map.node_of(t) {
            Some(n) => {
                assert!(t < total && n < map.nnodes());
                assert!(map.tasks_on(n).iter().any(|&(a, b)| a <= t && t <= b));
            }
            None => assert!(t >= total),
        }
    }
    let n = map.nnodes().min(4);
    for node in 0..n {
        let tasks: u64 = map.tasks_on(node).iter().map(|(a, b)| b - a + 1).sum();
        assert_eq!(tasks, map.ntasks_on(node));
    }
}
