//! `lama taskmap`.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use lama::slurm::{expand_hostlist, StepEnv};
use lama::taskmap::{format_ranges, parse_any, pmi, raw, TaskMap};

use crate::env;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum To {
    Rfc34,
    Raw,
    Pmi,
    Multiline,
    Hosts,
}

/// Convert or query a task map.
#[derive(Args)]
pub struct TaskmapArgs {
    /// The map (RFC 34 bare or wrapped, raw, or PMI); default: the TASK_MAP environment variable.
    map: Option<String>,
    /// Output form.
    #[arg(long, value_enum, default_value_t = To::Rfc34)]
    to: To,
    /// Print the task ids of node NODE (an idset).
    #[arg(long, value_name = "NODE", group = "query")]
    taskids: Option<u64>,
    /// Print the number of tasks on node NODE.
    #[arg(long, value_name = "NODE", group = "query")]
    ntasks: Option<u64>,
    /// Print the node id of task TASK.
    #[arg(long, value_name = "TASK", group = "query")]
    nodeid: Option<u64>,
    /// Print the host name of task TASK (needs a node list).
    #[arg(long, value_name = "TASK", group = "query")]
    hostname: Option<u64>,
    /// The job's hosts in node order (default: SLURM_STEP_NODELIST with --from-slurm, else SLURM_JOB_NODELIST).
    #[arg(long, value_name = "HOSTLIST")]
    nodelist: Option<String>,
    /// Compute the current step's map from Slurm's environment (or the flags below).
    #[arg(long)]
    from_slurm: bool,
    /// Tasks per node as Slurm writes them, e.g. 2(x3),1 (default: SLURM_STEP_TASKS_PER_NODE).
    #[arg(long, value_name = "STR", requires = "from_slurm")]
    tasks_per_node: Option<String>,
    /// block, cyclic, plane[=N], arbitrary (default: SLURM_DISTRIBUTION, else block).
    #[arg(long, value_name = "STR", requires = "from_slurm")]
    distribution: Option<String>,
    /// Plane size for the plane distribution (default: SLURM_DIST_PLANESIZE).
    #[arg(long, value_name = "N", requires = "from_slurm")]
    plane_size: Option<u32>,
    /// Host file for the arbitrary distribution (default: SLURM_HOSTFILE).
    #[arg(long, value_name = "FILE", requires = "from_slurm")]
    hostfile: Option<String>,
}

fn nodelist(a: &TaskmapArgs) -> Option<String> {
    a.nodelist.clone().or_else(|| {
        if a.from_slurm {
            env("SLURM_STEP_NODELIST").or_else(|| env("SLURM_JOB_NODELIST"))
        } else {
            env("SLURM_JOB_NODELIST")
        }
    })
}

fn hosts(a: &TaskmapArgs) -> Result<Vec<String>, String> {
    let list =
        nodelist(a).ok_or("this needs a node list: give --nodelist or run inside a Slurm job")?;
    expand_hostlist(&list).map_err(|e| e.to_string())
}

fn from_slurm(a: &TaskmapArgs) -> Result<TaskMap, String> {
    let mut step = StepEnv::from_lookup(env);
    step.step_id = StepEnv::task_step_id(env);
    // The node order lama's srun passed (LAMA_STEP_ORDER) is the running step's: not that of
    // another layout described by these flags.
    if a.tasks_per_node.is_some() || a.nodelist.is_some() || a.distribution.is_some() {
        step.node_order = None;
    }
    if a.tasks_per_node.is_some() {
        step.tasks_per_node = a.tasks_per_node.clone();
    }
    if a.nodelist.is_some() {
        step.nodelist = a.nodelist.clone();
    }
    if a.distribution.is_some() {
        step.distribution = a.distribution.clone();
    }
    if let Some(p) = a.plane_size {
        step.plane_size = Some(p.to_string());
    }
    if a.hostfile.is_some() {
        step.hostfile = a.hostfile.clone();
    }
    step.taskmap_from_files().map_err(|e| e.to_string())
}

fn go(a: &TaskmapArgs) -> Result<String, String> {
    let map = if a.from_slurm {
        if a.map.is_some() {
            return Err("give either a MAP or --from-slurm, not both".into());
        }
        from_slurm(a)?
    } else {
        let text = match &a.map {
            Some(m) => m.clone(),
            None => env("TASK_MAP").ok_or("no MAP given and TASK_MAP is not set")?,
        };
        parse_any(&text).map_err(|e| e.to_string())?
    };
    let check_node = |n: u64| {
        if n >= map.nnodes() {
            Err(format!(
                "node {n} is not in the map (it has {} nodes)",
                map.nnodes()
            ))
        } else {
            Ok(n)
        }
    };
    if let Some(n) = a.taskids {
        return Ok(format_ranges(&map.tasks_on(check_node(n)?)));
    }
    if let Some(n) = a.ntasks {
        return Ok(map.ntasks_on(check_node(n)?).to_string());
    }
    let node_of = |t: u64| {
        map.node_of(t).ok_or(format!(
            "task {t} is not in the map (it has {} tasks)",
            map.total_tasks()
        ))
    };
    if let Some(t) = a.nodeid {
        return Ok(node_of(t)?.to_string());
    }
    if let Some(t) = a.hostname {
        let n = node_of(t)?;
        let h = hosts(a)?;
        return h.get(n as usize).cloned().ok_or(format!(
            "node {n} is beyond the node list ({} hosts)",
            h.len()
        ));
    }
    Ok(match a.to {
        To::Rfc34 => map.canonical().to_string(),
        To::Raw => raw::encode(&map),
        To::Pmi => pmi::encode(&map.canonical()),
        To::Multiline => {
            let mut s = Vec::new();
            for (t, n) in map.assignment().iter().enumerate() {
                s.push(format!("{t}: {n}"));
            }
            s.join("\n")
        }
        To::Hosts => {
            let h = hosts(a)?;
            if (h.len() as u64) < map.nnodes() {
                return Err(format!(
                    "the map has {} nodes, the node list only {}",
                    map.nnodes(),
                    h.len()
                ));
            }
            (0..map.nnodes())
                .map(|n| format!("{}: {}", h[n as usize], format_ranges(&map.tasks_on(n))))
                .collect::<Vec<_>>()
                .join("\n")
        }
    })
}

pub fn run(a: TaskmapArgs) -> ExitCode {
    match go(&a) {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lama taskmap: {e}");
            ExitCode::from(1)
        }
    }
}
