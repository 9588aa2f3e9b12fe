//! `SLURM_STEP_TASKS_PER_NODE` strings, then Slurm's layouts of those counts: block, cyclic and
//! plane put exactly each node's count of tasks on it, and the map every node computes without
//! one entry per task (`step_taskmap`) is the per-task layout's.
#![no_main]
use lama::slurm::{expand_counts, layout, step_taskmap, Distribution};
use lama::taskmap::TaskMap;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: (u8, &str)| {
    let (pick, text) = data;
    let Ok(counts) = expand_counts(text) else {
        return;
    };
    // Laying out millions of tasks proves nothing more than thousands and slows the search.
    if counts.iter().map(|&c| c as u64).sum::<u64>() > 100_000 {
        return;
    }
    let dist = match pick % 3 {
        0 => Distribution::Block,
        1 => Distribution::Cyclic,
        _ => Distribution::Plane(u32::from(pick / 3).max(1)),
    };
    let nodes = layout(&counts, &dist, &[]).expect("counts always lay out");
    let map = step_taskmap(&counts, &dist, &[]).expect("counts always map");
    assert_eq!(map, TaskMap::encode(&nodes));
    let mut seen = vec![0u32; counts.len()];
    for n in nodes {
        seen[n as usize] += 1;
    }
    assert_eq!(seen, counts);
});
