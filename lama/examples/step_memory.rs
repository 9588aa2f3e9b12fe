//! Memory probe: how much a process grows to compute a step's `TASK_MAP` as the plugin's
//! `user_init` does (`StepEnv::taskmap_from_files_within`, then the RFC 34 text), for a step of
//! `TASKS` tasks on `NODES` nodes. Prints the peak resident size before and after (VmHWM).
//!
//! `step_memory block|cyclic|plane=N NODES TASKS`, or `step_memory arbitrary NODES TASKS FILE`
//! with a host file of the step's hosts `n1`..`nNODES` (see BENCHMARKS.md for one made by awk).

use lama::environ::MAX_TASK_MAP_BLOCKS;
use lama::slurm::StepEnv;
use lama::taskmap::rfc34;

/// VmHWM, the process's peak resident size, in kB.
fn peak_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: step_memory block|cyclic|plane=N|arbitrary NODES TASKS [HOSTFILE]";
    let (Some(dist), Some(nodes), Some(tasks)) = (
        args.get(1),
        args.get(2).and_then(|a| a.parse::<u32>().ok()),
        args.get(3).and_then(|a| a.parse::<u32>().ok()),
    ) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let (q, r) = (tasks / nodes, tasks % nodes);
    let env = StepEnv {
        tasks_per_node: Some(format!("{}(x{r}),{q}(x{})", q + 1, nodes - r)),
        nodelist: Some(format!("n[1-{nodes}]")),
        distribution: Some(dist.clone()),
        plane_size: dist.strip_prefix("plane=").map(str::to_string),
        hostfile: args.get(4).cloned(),
        node_order: None,
        step_id: None,
    };
    let before = peak_kb();
    let text = match env.taskmap_from_files_within(MAX_TASK_MAP_BLOCKS) {
        Ok(Some(m)) => rfc34::encode_wrapped(&m),
        Ok(None) => String::from("(too many blocks to export: not read to the end)"),
        Err(e) => {
            eprintln!("step_memory: {e}");
            std::process::exit(1);
        }
    };
    let after = peak_kb();
    println!(
        "{dist} {tasks} tasks on {nodes} nodes: map {} bytes; peak resident {before} kB before, {after} kB after (+{} kB)",
        text.len(),
        after.saturating_sub(before)
    );
}
