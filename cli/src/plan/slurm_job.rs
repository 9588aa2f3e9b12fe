//! `lama plan --from-slurm`: the running job's nodes, the CPUs Slurm gave the job on each
//! (`scontrol show job -d`), and each node's own topology, read on the node by one task of a
//! probe step (`srun ... lama node-report`). Both ends of the probe's little protocol are here.
//!
//! The probe step runs with `SLURM_LAMA_OFF=1`, so that the plugin, when installed, leaves it
//! alone, and with `--overlap`, so that it runs beside whatever else the job is running.

use std::collections::HashMap;
use std::process::{Command, ExitCode};

use clap::Args;
use lama::cache;
use lama::idset::format_list;
use lama::plugin::cores_to_cpus;
use lama::slurm::expand_hostlist;
use lama::slurm::launcher::job_cores;
use lama::NodeTopology;

use super::Model;

/// Longest line of the report: srun passes shorter lines whole, one task's at a time.
const CHUNK: usize = 1000;

/// Print this node's topology for `lama plan --from-slurm` (run by it, one task per node).
#[derive(Args)]
pub struct NodeReportArgs {
    /// Include the node's devices (NICs and GPUs).
    #[arg(long)]
    devices: bool,
}

/// The node's name as Slurm knows it (slurmd's, which may differ from the host name), then its
/// topology as lama's cache text, in short lines.
pub fn node_report(a: NodeReportArgs) -> ExitCode {
    match report_lines(a.devices) {
        Ok((host, lines)) => {
            println!("host {host}");
            for l in lines {
                println!("{l}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(3)
        }
    }
}

/// This node's name as Slurm knows it, and its topology (with its devices when asked) as lama's
/// cache text in `lineI CHUNK` lines (`lama check`'s probe sends them too).
pub fn report_lines(devices: bool) -> Result<(String, Vec<String>), String> {
    let host = crate::env("SLURMD_NODENAME")
        .unwrap_or_else(|| nix_hostname().unwrap_or_else(|| "unknown".into()));
    let text = if devices {
        NodeTopology::this_machine_with_devices(true)
            .map_err(|e| e.to_string())
            .and_then(|(t, allowed, loc)| cache::encode(&t, Some(&loc), Some(&allowed), None))
    } else {
        NodeTopology::this_machine_whole()
            .map_err(|e| e.to_string())
            .and_then(|(t, allowed)| cache::encode(&t, None, Some(&allowed), None))
    };
    let text = text.map_err(|e| format!("lama node-report on {host}: {e}"))?;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        // JSON text is ASCII: chunks never split a character.
        for chunk in line.as_bytes().chunks(CHUNK) {
            lines.push(format!("line{i} {}", String::from_utf8_lossy(chunk)));
        }
    }
    Ok((host, lines))
}

fn nix_hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
}

/// Runs a command and returns its standard output, or what went wrong.
pub fn output(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if !out.status.success() {
        // One line: Slurm's commands print a chain of errors ending in the one that decided
        // (`fatal: Could not establish a configuration source` when no Slurm is reachable).
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no message");
        let hint = if err.contains("configuration source")
            || err.contains("Unable to contact slurm controller")
        {
            "; no Slurm controller answers here (run it on a node of the cluster, or set SLURM_CONF)"
        } else {
            ""
        };
        return Err(format!("{what} failed ({}): {last}{hint}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The job's cores on each of its `nodes` (a host list), from its `scontrol show job -d` record:
/// Slurm's CPU numbers there count threads as each node declares them.
pub fn cores_by_host(detail: &str, nodes: &str) -> Result<HashMap<String, Vec<u32>>, String> {
    let threads = threads_per_core(nodes)?;
    Ok(job_cores(detail, |h| threads.get(h).copied().unwrap_or(1))
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect())
}

/// Each node's `ThreadsPerCore` as Slurm declares it (`scontrol show node`), for Slurm's CPU
/// numbers in `scontrol show job -d`.
fn threads_per_core(nodes: &str) -> Result<HashMap<String, u32>, String> {
    let text = output(
        Command::new("scontrol").args(["-o", "show", "node", nodes]),
        "scontrol show node",
    )?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let field = |k: &str| l.split_whitespace().find_map(|w| w.strip_prefix(k));
            Some((
                field("NodeName=")?.to_string(),
                field("ThreadsPerCore=")?.parse().ok()?,
            ))
        })
        .collect())
}

/// The job's hosts, their models, and the PUs a step may use on each (see [`job_models`]).
pub type JobModels = (Vec<String>, Vec<Model>, Vec<Vec<u32>>);

/// The job's hosts, in Slurm's node order; per host its model: the node's topology restricted
/// to the CPUs Slurm gave the job there, named by the host; and per host the PUs a step of the
/// job may use there (OS indexes in logical order), which an MPI launcher's daemon sees too.
pub fn job_models(devices: bool) -> Result<JobModels, String> {
    let job = crate::env("SLURM_JOB_ID").ok_or(
        "--from-slurm plans for the running Slurm job: run it inside salloc or sbatch (SLURM_JOB_ID is not set)",
    )?;
    let list = crate::env("SLURM_JOB_NODELIST").ok_or("SLURM_JOB_NODELIST is not set")?;
    let hosts = expand_hostlist(&list).map_err(|e| format!("SLURM_JOB_NODELIST: {e}"))?;
    let detail = output(
        Command::new("scontrol").args(["show", "job", "-d", &job]),
        "scontrol show job -d",
    )?;
    let cores = cores_by_host(&detail, &list)?;
    let reports = probe(&hosts, devices)?;
    let mut models: Vec<Model> = Vec::new();
    let mut usable = Vec::new();
    for host in &hosts {
        let text = reports
            .get(host)
            .ok_or_else(|| format!("node {host} did not report its topology"))?;
        let node = cache::decode(text, &format!("the topology reported by {host}"), devices)
            .map_err(|e| e.to_string())?;
        let job_cores = cores
            .get(host)
            .map(|c| format_list(c))
            .ok_or_else(|| format!("scontrol does not say which CPUs the job has on {host}"))?;
        let cpus =
            cores_to_cpus(&node.topology, &job_cores, None).map_err(|e| format!("{host}: {e}"))?;
        // Each node keeps its own model, named by its host, as the plan shows it.
        let t = node
            .topology
            .restrict(&cpus)
            .map_err(|e| format!("{host}: {e}"))?
            .with_name(host);
        models.push((t, node.locality));
        usable.push(match &node.allowed {
            Some(allowed) => node
                .topology
                .pus()
                .iter()
                .copied()
                .filter(|c| allowed.binary_search(c).is_ok())
                .collect(),
            None => node.topology.pus().to_vec(),
        });
    }
    Ok((hosts, models, usable))
}

/// Runs `lama node-report` once on every node of the job and returns each node's text.
fn probe(hosts: &[String], devices: bool) -> Result<HashMap<String, String>, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find lama's own path: {e}"))?;
    let n = hosts.len().to_string();
    let mut cmd = Command::new("srun");
    cmd.args(["--nodes", &n, "--ntasks", &n, "--ntasks-per-node=1"])
        .args([
            "--cpu-bind=none",
            "--overlap",
            "--label",
            "--kill-on-bad-exit=1",
        ])
        .arg(&me)
        .arg("node-report")
        .env("SLURM_LAMA_OFF", "1")
        // The user's arbitrary layout is for the ranks, not for this step.
        .env_remove("SLURM_HOSTFILE")
        .env_remove("SLURM_DISTRIBUTION")
        .env_remove("SLURM_ARBITRARY_NODELIST");
    if devices {
        cmd.arg("--devices");
    }
    let text = output(&mut cmd, "srun lama node-report (one task per node)")?;
    Ok(reports(&text)
        .into_iter()
        .map(|r| (r.host, r.topology))
        .collect())
}

/// One node's report, put back together from a probe step's labelled lines.
#[derive(Default)]
pub struct Report {
    /// The node, as Slurm names it.
    pub host: String,
    /// Its topology, as lama's cache text.
    pub topology: String,
    /// The rest: each `seen CHUNK` line's chunk, in order.
    pub seen: String,
}

/// The reports in a probe step's output: "K: host NAME", "K: lineI CHUNK" and "K: seen CHUNK"
/// lines, K the task; one task's lines stay in order.
pub fn reports(text: &str) -> Vec<Report> {
    let mut by_task: HashMap<String, (Option<String>, Vec<String>, String)> = HashMap::new();
    for line in text.lines() {
        let Some((task, rest)) = line.split_once(": ") else {
            continue;
        };
        let entry = by_task.entry(task.trim().to_string()).or_default();
        if let Some(h) = rest.strip_prefix("host ") {
            entry.0 = Some(h.to_string());
        } else if let Some(chunk) = rest.strip_prefix("seen ") {
            entry.2.push_str(chunk);
        } else if let Some((i, chunk)) = rest
            .strip_prefix("line")
            .and_then(|r| r.split_once(' '))
            .and_then(|(i, c)| Some((i.parse::<usize>().ok().filter(|&i| i < 8)?, c)))
        {
            if entry.1.len() <= i {
                entry.1.resize(i + 1, String::new());
            }
            entry.1[i].push_str(chunk);
        }
    }
    by_task
        .into_values()
        .filter_map(|(h, lines, seen)| {
            Some(Report {
                host: h?,
                topology: lines.join("\n"),
                seen,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_command_is_one_line_with_its_last_error() {
        // A real command failing as scontrol does without a Slurm to ask: a chain of errors.
        let e = output(
            Command::new("sh").args([
                "-c",
                "echo 'x: error: one' >&2; echo 'x: fatal: Could not establish a configuration source' >&2; exit 1",
            ]),
            "x",
        )
        .unwrap_err();
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(
            e.contains("fatal: Could not establish") && !e.contains("one"),
            "{e}"
        );
        assert!(e.contains("no Slurm controller answers here"), "{e}");
    }
}
