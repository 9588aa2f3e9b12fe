//! Each task: its variables before it starts (`task.init`, in the shell), its binding and the
//! verbose line in its own process (`task.exec`).
//!
//! What is said once is said by the node's first task (local id 0), or for the whole job by
//! shell rank 0's; a task's own line is its own.

use lama::environ::fit;
use lama::flux::flux_words;
use lama::idset::format_list;
use lama::plugin::{placed_in, verbose_extras, verbose_mems};
use serde_json::Value;

use crate::affinity;
use crate::ffi::{self, Shell, Task};
use crate::node::Node;

/// The current task, its global id and its local id.
fn current(shell: Shell) -> Result<(Task, u32, u32), String> {
    let task = shell
        .current_task()
        .ok_or("the shell has no current task")?;
    let v: Value = serde_json::from_str(&task.info).map_err(|e| format!("the task's info: {e}"))?;
    let id = |k: &str| {
        v.get(k)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("the task's info has no {k}"))
    };
    let (rank, local) = (id("rank")?, id("localid")?);
    Ok((task, rank, local))
}

/// `task.init`: the task's `TASK_MAP`, `LAMA_CPUS`, device and OpenMP variables, those that fit.
pub fn init(shell: Shell, node: &Node) -> Result<(), String> {
    let (task, rank, local) = current(shell)?;
    let mut groups = Vec::new();
    groups.extend(node.taskmap.iter().cloned());
    let placed = node.task(rank);
    if let Some(p) = placed {
        groups.extend(p.groups.iter().cloned());
    } else if !node.tasks.is_empty() {
        return Err(format!(
            "task {rank} was not placed on node {} {}",
            node.rank, node.host
        ));
    }
    let existing = |n: &str| node.existing.iter().find(|(k, _)| k == n).map(|(_, b)| *b);
    let (vars, withheld) = fit(groups, node.environ, existing, node.exec_limit);
    if local == 0 {
        for w in &withheld {
            ffi::log(
                ffi::WARN,
                &format!(
                    "lama: {} (node {} {}; said once per node)",
                    flux_words(&w.to_string()),
                    node.rank,
                    node.host
                ),
            );
        }
        if node.rank == 0 && !node.omp_kept.is_empty() {
            ffi::log(
                ffi::WARN,
                &format!(
                    "lama: the job sets {}, so lama's OpenMP places are not exported (-o lama.omp-override replaces them)",
                    node.omp_kept.join(", ")
                ),
            );
        }
        if let (0, Some(a)) = (node.rank, &node.replaced_affinity) {
            ffi::log(
                ffi::WARN,
                &format!("lama: cpu-affinity={a} is replaced by lama's placement for this job"),
            );
        }
    }
    for (k, v) in &vars {
        task.setenv(k, v)?;
    }
    if node.manage_taskmap && !vars.iter().any(|(k, _)| k == "TASK_MAP") {
        // A map inherited from the job's environment (a Flux instance started by srun, say)
        // would describe another job.
        task.unsetenv("TASK_MAP");
    }
    Ok(())
}

/// `task.exec`, in the task's process: binds it and prints its `lama.verbose` line.
pub fn exec(shell: Shell, node: &Node) -> Result<(), String> {
    let (_, rank, local) = current(shell)?;
    let Some(p) = node.task(rank) else {
        return Ok(());
    };
    let t = &p.binding;
    let list = format_list(&t.cpus);
    if node.bind {
        affinity::bind(&t.cpus).map_err(|e| {
            format!(
                "cannot bind task {rank} on {} to cpus {list}: {e}",
                node.host
            )
        })?;
    }
    if let Some(nodes) = &p.mems {
        affinity::bind_memory(nodes, &list, p.mem_policy, node.bind).map_err(|e| {
            format!(
                "cannot bind the memory of task {rank} on {} to the NUMA nodes of cpus {list}: {e}",
                node.host
            )
        })?;
    }
    if let Some(policy) = node.policy.as_ref().filter(|_| local == 0) {
        say!(
            "lama: policy auto on {} (node {}): {policy}",
            node.host,
            node.rank
        );
    }
    if node.verbose {
        let how = if node.bind { "bound to" } else { "computed" };
        let shown = verbose_extras(p.groups.iter().flat_map(|g| &g.vars))
            + &verbose_mems(p.mems.as_deref(), p.mems.as_ref().map(|_| p.mem_policy));
        let cost = if local == 0 {
            placed_in(node.elapsed, &node.phases)
        } else {
            String::new()
        };
        say!(
            "lama: task {rank} on {} (node {}): {how} cpus {list} {}{shown}{cost}",
            node.host,
            node.rank,
            t.picture.as_deref().unwrap_or_default()
        );
    }
    Ok(())
}
