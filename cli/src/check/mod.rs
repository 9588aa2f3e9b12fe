//! `lama check`: a running job's real placement, across its nodes. One probe per node of the
//! step (`srun --overlap`, one task per node, `probe.rs`) reports the node's topology and what
//! the step's tasks and threads are really using; the findings are judged by
//! [`lama::check::judge`] and shown as a table and lines (`report.rs`), or as JSON.
//!
//! Exit status: 0 nothing found, 1 findings, 2 an invalid option (clap), 3 the job could not be
//! checked.

use std::collections::HashMap;
use std::process::{Command, ExitCode};

use clap::{Args, ValueEnum};
use lama::check::{judge, NodeSeen, TaskSeen, ThreadSeen};
use lama::idset::format_list;
use lama::plugin::cores_to_cpus;
use lama::slurm::expand_hostlist;

use crate::plan::slurm_job::{cores_by_host, output, reports};

pub mod probe;
mod report;

/// Check a running job's placement: where its tasks and threads really run, and what is wrong
#[derive(Args)]
pub struct CheckArgs {
    /// The job (default: the allocation this runs in, SLURM_JOB_ID).
    #[arg(long)]
    jobid: Option<u32>,
    /// The step (default: the job's newest running step).
    #[arg(long)]
    step: Option<u32>,
    /// Seconds to watch the threads for, to see which CPUs they run on.
    #[arg(long, default_value_t = 1.0, value_parser = sample_seconds)]
    sample: f64,
    /// How to print the report.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

fn sample_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=60.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds from 0 to 60")),
    }
}

/// Report formats.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table and one line per finding.
    Text,
    /// `tasks` and `findings`, for scripts.
    Json,
}

/// Why a job could not be checked (exit status 2).
fn cannot(format: Format, msg: &str) -> ExitCode {
    if format == Format::Json {
        println!(
            "{}",
            serde_json::json!({"schema": crate::plan::SCHEMA, "error": {"kind": "cannot-check", "message": msg}})
        );
    }
    eprintln!("lama check: {msg}");
    // Nothing to check (no such job, not running, another user's, no Slurm): 3, lama's
    // convention (docs/reference.md); 1 is findings.
    ExitCode::from(3)
}

/// The real user id of this process.
fn my_uid() -> Option<u32> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `Key=value` of `scontrol show job` text.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.split_whitespace().find_map(|w| w.strip_prefix(key))
}

/// The job's whole record (state, owner, nodes, CPU_IDs), from `scontrol show job -d`.
fn job_record(job: u32) -> Result<String, String> {
    output(
        Command::new("scontrol").args(["show", "job", "-d", &job.to_string()]),
        "scontrol show job",
    )
}

/// What to say when a check fails: that the job ended, when it no longer runs (or cannot be
/// asked about any more), else `why`.
fn ended_or(job: u32, why: String) -> String {
    let running = job_record(job).is_ok_and(|d| field(&d, "JobState=") == Some("RUNNING"));
    if running {
        why
    } else {
        format!("job {job} ended while it was being checked")
    }
}

/// What a check of one step needs to know before probing.
struct Target {
    job: u32,
    step: u32,
    hosts: Vec<String>,
    /// Slurm's cores of the job on each host.
    cores: HashMap<String, Vec<u32>>,
}

fn target(a: &CheckArgs) -> Result<Target, String> {
    let job = match a.jobid {
        Some(j) => j,
        None => crate::env("SLURM_JOB_ID")
            .and_then(|j| j.parse().ok())
            .ok_or(
                "no job to check: run lama check inside the job's allocation, or give --jobid",
            )?,
    };
    let detail = job_record(job).map_err(|e| format!("job {job}: {e}"))?;
    let state = field(&detail, "JobState=").unwrap_or("UNKNOWN");
    if state != "RUNNING" {
        return Err(format!("job {job} is not running (JobState={state})"));
    }
    // UserId=name(uid): only that user, or root, may look at its processes.
    let owner = field(&detail, "UserId=").unwrap_or("");
    let owner_uid = owner
        .split_once('(')
        .and_then(|(_, u)| u.trim_end_matches(')').parse::<u32>().ok());
    let me = my_uid();
    if me != Some(0) && owner_uid.is_some() && me != owner_uid {
        return Err(format!(
            "job {job} belongs to {owner}: only that user or root may check it (lama check sees a user's own processes only)"
        ));
    }
    let steps_text = output(
        Command::new("squeue").args(["-h", "-s", "-j", &job.to_string(), "-o", "%i %j"]),
        "squeue -s",
    )?;
    let own = crate::env("SLURM_STEP_ID").and_then(|s| s.parse::<u32>().ok());
    let mut steps = checkable_steps(&steps_text, own);
    let step = match a.step {
        Some(s) if steps.contains(&s) => s,
        Some(s) => return Err(format!("job {job} runs no step {s}")),
        None => steps
            .pop()
            .ok_or(format!("job {job} runs no step to check"))?,
    };
    // Every node of the job, not only the step's: an `mpirun` in the batch script runs ranks
    // outside its daemons' step, on the batch script's node.
    let nodes = field(&detail, "NodeList=")
        .ok_or(format!("scontrol show job {job} names no NodeList"))?
        .to_string();
    let hosts = expand_hostlist(&nodes).map_err(|e| format!("the job's node list {nodes}: {e}"))?;
    let cores = cores_by_host(&detail, &nodes)?;
    Ok(Target {
        job,
        step,
        hosts,
        cores,
    })
}

/// The step name of `lama check`'s own probe (`srun --job-name`), so that a later check does
/// not take a probe step that is still ending for the job's newest step.
const PROBE_STEP: &str = "lama-check-probe";

/// The job's numbered steps from `squeue -s -o "%i %j"` lines, ascending: not its batch,
/// extern or interactive step, not `own` (the step this runs in), not a check's probe.
fn checkable_steps(squeue: &str, own: Option<u32>) -> Vec<u32> {
    let mut steps: Vec<u32> = squeue
        .lines()
        .filter_map(|l| {
            let (id, name) = l.trim().split_once(' ').unwrap_or((l.trim(), ""));
            let step = id.split_once('.')?.1.parse::<u32>().ok()?;
            (name.trim() != PROBE_STEP && Some(step) != own).then_some(step)
        })
        .collect();
    steps.sort_unstable();
    steps
}

/// Runs the probe on every node of the step; its output.
fn probe(t: &Target, sample: f64) -> Result<String, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find lama's own path: {e}"))?;
    let n = t.hosts.len().to_string();
    let mut cmd = Command::new("srun");
    cmd.args(["--jobid", &t.job.to_string(), "--overlap"])
        .args(["--nodes", &n, "--ntasks", &n, "--ntasks-per-node=1"])
        .args(["--nodelist", &t.hosts.join(",")])
        .args(["--cpus-per-task=1", "--cpu-bind=none", "--label"])
        .args(["--job-name", PROBE_STEP])
        .arg(&me)
        .args(["check-probe", "--job", &t.job.to_string()])
        .args([
            "--step",
            &t.step.to_string(),
            "--sample",
            &sample.to_string(),
        ])
        .env("SLURM_LAMA_OFF", "1");
    // The job's own layout and sizes are for its steps, not for this one.
    for v in [
        "SLURM_HOSTFILE",
        "SLURM_DISTRIBUTION",
        "SLURM_ARBITRARY_NODELIST",
        "SLURM_CPU_BIND",
        "SLURM_NTASKS_PER_NODE",
        "SLURM_GPUS_PER_TASK",
        "SLURM_TRES_PER_TASK",
    ] {
        cmd.env_remove(v);
    }
    output(&mut cmd, "srun lama check-probe (one task per node)")
}

/// `lama check`.
pub fn run(a: CheckArgs) -> ExitCode {
    let t = match target(&a) {
        Ok(t) => t,
        Err(e) => return cannot(a.format, &e),
    };
    let text = match probe(&t, a.sample) {
        Ok(text) => text,
        Err(e) => {
            return cannot(a.format, &ended_or(t.job, e));
        }
    };
    let mut nodes = Vec::new();
    let mut topologies = HashMap::new();
    let mut tasks = Vec::new();
    let by_host: HashMap<String, _> = reports(&text)
        .into_iter()
        .map(|r| (r.host.clone(), r))
        .collect();
    for (index, host) in t.hosts.iter().enumerate() {
        let Some(r) = by_host.get(host) else {
            return cannot(a.format, &format!("node {host} did not report"));
        };
        let node = match lama::cache::decode(&r.topology, &format!("the topology of {host}"), true)
        {
            Ok(n) => n,
            Err(e) => return cannot(a.format, &e.to_string()),
        };
        let seen: probe::ProbeNode = match serde_json::from_str(&r.seen) {
            Ok(s) => s,
            Err(e) => return cannot(a.format, &format!("what {host} saw: {e}")),
        };
        let allocated = t
            .cores
            .get(host)
            .map(|c| cores_to_cpus(&node.topology, &format_list(c), None))
            .transpose();
        let allocated = match allocated {
            Ok(c) => c.unwrap_or_default(),
            Err(e) => return cannot(a.format, &format!("{host}: {e}")),
        };
        nodes.push(NodeSeen {
            host: host.clone(),
            index: index as u32,
            allocated,
            numa: node.numa.unwrap_or_default(),
            locality: node.locality,
            job_gpus: seen.job_gpus,
        });
        topologies.insert(host.clone(), node.topology);
        tasks.extend(seen.tasks.into_iter().map(|p| {
            TaskSeen {
                host: host.clone(),
                rank: p.rank,
                pid: p.pid,
                cpus: p.cpus,
                threads: p
                    .threads
                    .into_iter()
                    .map(|th| ThreadSeen {
                        tid: th.tid,
                        cpus: th.cpus,
                        last_cpus: th.last_cpus,
                        busy: th.busy,
                    })
                    .collect(),
                mems: {
                    let mut m = p.pages.clone();
                    m.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                    m.into_iter()
                        .filter(|&(_, n)| n > 0)
                        .map(|(n, _)| n)
                        .collect()
                },
                policy: p.policy,
                pages: p.pages,
                gpus: p.gpus,
                nics: p.nics,
                planned: p.planned,
                planned_node: p.planned_node,
            }
        }));
    }
    if tasks.is_empty() {
        let msg = format!(
            "no process of step {}.{} was found on its nodes (it ended, or runs as another user)",
            t.job, t.step
        );
        return cannot(a.format, &ended_or(t.job, msg));
    }
    tasks.sort_by_key(|t| t.rank);
    let findings = judge(&nodes, &tasks);
    match a.format {
        Format::Json => report::json(t.job, t.step, &tasks, &findings),
        Format::Text => report::text(
            t.job,
            t.step,
            a.sample,
            &nodes,
            &topologies,
            &tasks,
            &findings,
        ),
    }
    if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_leave_out_special_steps_own_step_and_probes() {
        // As squeue -s -o "%i %j" prints them: the probe of a check just before (7.3) may
        // still be listed while it ends.
        let text =
            "7.batch batch\n7.extern extern\n7.0 spin\n7.2 a.out\n7.3 lama-check-probe\n7.1 spin\n";
        assert_eq!(checkable_steps(text, None), vec![0, 1, 2]);
        assert_eq!(checkable_steps(text, Some(2)), vec![0, 1]);
        assert_eq!(
            checkable_steps("7.4 lama-check-probe\n", None),
            Vec::<u32>::new()
        );
        // A name with a space, and a line without a name.
        assert_eq!(checkable_steps("7.5 my job\n7.6\n", None), vec![5, 6]);
    }
}
