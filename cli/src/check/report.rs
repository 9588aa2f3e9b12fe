//! `lama check`'s report: a table of the step's tasks as they really run (in `lama plan`'s
//! style) and one line per finding; or the same as JSON (`tasks`, `findings`).

use std::collections::HashMap;

use lama::check::{Finding, NodeSeen, TaskSeen};
use lama::idset::format_list;
use lama::memory::local_nodes;
use lama::{Level, NodeTopology};

/// The logical indexes of the cores holding `cpus`.
fn cores(topo: &NodeTopology, cpus: &[u32]) -> Vec<u32> {
    topo.objects(Level::Core)
        .iter()
        .enumerate()
        .filter(|(_, s)| topo.span_cpus(**s).iter().any(|c| cpus.contains(c)))
        .map(|(i, _)| i as u32)
        .collect()
}

fn or_dash(s: String) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s
    }
}

/// "4 (4 busy on 0-3)": threads, those that ran during the sample and where.
fn threads(t: &TaskSeen) -> String {
    let busy: Vec<_> = t.threads.iter().filter(|th| th.busy).collect();
    let mut ran: Vec<u32> = busy.iter().flat_map(|th| th.last_cpus.clone()).collect();
    ran.sort_unstable();
    ran.dedup();
    if busy.is_empty() {
        format!("{} (none busy)", t.threads.len())
    } else {
        format!(
            "{} ({} busy on {})",
            t.threads.len(),
            busy.len(),
            format_list(&ran)
        )
    }
}

/// The table and the findings.
pub fn text(
    job: u32,
    step: u32,
    sample: f64,
    nodes: &[NodeSeen],
    topologies: &HashMap<String, NodeTopology>,
    tasks: &[TaskSeen],
    findings: &[Finding],
) {
    println!(
        "job {job} step {step}: {} task(s) on {} node(s), threads sampled for {sample} s",
        tasks.len(),
        nodes.len()
    );
    let mut rows = vec![[
        "node", "rank", "pid", "cpus", "cores", "numa", "gpus", "nics", "threads",
    ]
    .map(String::from)];
    for t in tasks {
        let node = nodes.iter().find(|n| n.host == t.host);
        let numa = node
            .map(|n| local_nodes(&n.numa, &t.cpus, None))
            .unwrap_or_default();
        let core_list = topologies
            .get(&t.host)
            .map(|topo| cores(topo, &t.cpus))
            .unwrap_or_default();
        rows.push([
            t.host.clone(),
            t.rank.to_string(),
            t.pid.to_string(),
            or_dash(format_list(&t.cpus)),
            or_dash(format_list(&core_list)),
            or_dash(format_list(&numa)),
            or_dash(format_list(&t.gpus)),
            or_dash(t.nics.join(",")),
            threads(t),
        ]);
    }
    let widths: Vec<usize> = (0..9)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(v, &w)| format!("{v:<w$}"))
            .collect();
        println!("  {}", line.join("  ").trim_end());
    }
    if findings.is_empty() {
        println!("no findings: every task has CPUs of its own, its threads spread over them, its memory and devices near");
    } else {
        println!("{} finding(s):", findings.len());
        for f in findings {
            println!("  {}: {}", f.kind.name(), f.message);
        }
    }
}

/// The report as one JSON object.
pub fn json(job: u32, step: u32, tasks: &[TaskSeen], findings: &[Finding]) {
    println!(
        "{}",
        serde_json::json!({"schema": crate::plan::SCHEMA, "job": job, "step": step, "tasks": tasks, "findings": findings})
    );
}
