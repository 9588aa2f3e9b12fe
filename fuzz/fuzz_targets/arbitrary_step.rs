//! The whole `-m arbitrary` path as slurmstepd's `user_init` runs it on every node: the step's
//! tasks per node and node list from its environment, the host file read from disk with the
//! plugin's block limit. Input: tasks per node, a line `---`, the node list, a line `---`, the
//! host file. Run with libFuzzer's memory limits (contrib/fuzz.sh), so that a short input that
//! costs much memory or time is a finding, not only a crash.
#![no_main]
use lama::environ::MAX_TASK_MAP_BLOCKS;
use lama::slurm::{expand_counts, StepEnv};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let mut parts = text.splitn(3, "\n---\n");
    let (Some(tpn), Some(nodes), Some(file)) = (parts.next(), parts.next(), parts.next()) else {
        return;
    };
    // One file per fuzzing process, rewritten for each input.
    let path = std::env::temp_dir().join(format!("lama-fuzz-hostfile-{}", std::process::id()));
    if std::fs::write(&path, file).is_err() {
        return;
    }
    let env = StepEnv {
        tasks_per_node: Some(tpn.to_string()),
        nodelist: Some(nodes.to_string()),
        distribution: Some("arbitrary".into()),
        plane_size: None,
        hostfile: path.to_str().map(str::to_string),
        node_order: None,
        step_id: None,
    };
    match env.taskmap_from_files_within(MAX_TASK_MAP_BLOCKS) {
        Ok(Some(map)) => {
            let counts = expand_counts(tpn).expect("counts read once already");
            let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
            assert_eq!(map.total_tasks(), total);
            assert!(map.blocks().len() <= MAX_TASK_MAP_BLOCKS);
        }
        Ok(None) => {}
        // Every refusal is one bounded line for the user.
        Err(e) => {
            let m = lama::quote::for_log(&e.to_string()).into_owned();
            assert!(!m.contains('\n') && m.len() <= lama::quote::MAX_MESSAGE_BYTES + 64);
        }
    }
});
