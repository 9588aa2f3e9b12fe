//! The probe `lama check` runs on each node of the step (`lama check-probe`, one task per node):
//! it finds the step's processes by their environment, samples every thread's CPUs over the
//! window, reads each task's memory policy and pages, and prints the node's topology and what it
//! saw as short lines. It reads `/proc` only: it never signals, traces or stops a process, and
//! sees only the processes whose environment its user may read (the user's own; root's, all).

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use lama::idset::parse_list;
use serde::{Deserialize, Serialize};

/// Longest line printed: srun passes shorter lines whole.
const CHUNK: usize = 1000;
/// How often the threads' CPUs are read during the sample.
const TICK: Duration = Duration::from_millis(20);

/// Read one node's share of a running step (run by `lama check`, one task per node).
#[derive(Args)]
pub struct ProbeArgs {
    /// The job.
    #[arg(long)]
    job: u32,
    /// The step.
    #[arg(long)]
    step: String,
    /// Seconds to sample the threads' CPUs over.
    #[arg(long, default_value_t = 1.0)]
    sample: f64,
}

/// One thread, as carried from the probe.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProbeThread {
    pub tid: u32,
    pub cpus: Vec<u32>,
    pub last_cpus: Vec<u32>,
    pub busy: bool,
}

/// One task, as carried from the probe.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProbeTask {
    pub rank: u32,
    pub pid: u32,
    pub cpus: Vec<u32>,
    pub threads: Vec<ProbeThread>,
    pub pages: Vec<(u32, u64)>,
    pub policy: Option<Policy>,
    pub gpus: Vec<u32>,
    pub nics: Vec<String>,
    pub planned: Option<Vec<u32>>,
    pub planned_node: Option<u32>,
}

/// What one probe saw on its node.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProbeNode {
    pub tasks: Vec<ProbeTask>,
    /// The GPUs Slurm gave the job there (`SLURM_JOB_GPUS`, else the step's).
    pub job_gpus: Vec<u32>,
}

/// A process of the step: its parent, its environment's variables that matter.
struct Proc {
    pid: u32,
    ppid: u32,
    env: HashMap<String, String>,
}

fn read(path: &str) -> Option<String> {
    lama::limits::read_text(std::path::Path::new(path), 64 << 20).ok()
}

/// Whether a process's environment is an MPI launcher's rank (`mpirun`'s, Hydra's, PMIx's).
fn mpi_rank(env: &HashMap<String, String>) -> bool {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"]
        .iter()
        .any(|k| env.contains_key(*k))
}

/// The step's processes on this node (`host`): those whose environment names the job, the step
/// and this node (several slurmd may share one machine). An `mpirun` in the batch script runs
/// ranks outside any step on its own node: those with an MPI rank variable count too.
fn step_processes(job: u32, step: &str, host: &str) -> Vec<Proc> {
    let me = std::process::id();
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        // Another user's processes: their environment is unreadable, so they are not seen.
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let env: HashMap<String, String> = raw
            .split(|&b| b == 0)
            .filter_map(|kv| {
                let kv = String::from_utf8_lossy(kv);
                let (k, v) = kv.split_once('=')?;
                (k.starts_with("SLURM_")
                    || k == "SLURMD_NODENAME"
                    || k.starts_with("LAMA_")
                    || k.starts_with("OMPI_COMM_WORLD_RANK")
                    || k.starts_with("PMI")
                    || k.ends_with("_VISIBLE_DEVICES")
                    || matches!(k, "TASK_MAP" | "UCX_NET_DEVICES" | "ZE_AFFINITY_MASK"))
                .then(|| (k.to_string(), v.to_string()))
            })
            .collect();
        // The batch script's step id is unset, 0xFFFFFFFE (22.05) or negative (-5, 26.05): any
        // id Slurm keeps for its special steps.
        let in_step = match env.get("SLURM_STEP_ID").map(String::as_str) {
            Some(s) if s == step => true,
            None => mpi_rank(&env),
            Some(s) => match s.parse::<i64>() {
                Ok(id) if !(0..0xFFFF_FFF0).contains(&id) => mpi_rank(&env),
                Ok(_) => false,
                Err(_) => s == "batch" && mpi_rank(&env),
            },
        };
        if env.get("SLURM_JOB_ID").and_then(|j| j.parse().ok()) != Some(job)
            || !in_step
            || env.get("SLURMD_NODENAME").is_some_and(|n| n != host)
        {
            continue;
        }
        let ppid = read(&format!("/proc/{pid}/stat"))
            .and_then(|s| after_comm(&s).and_then(|f| f.get(1)?.parse().ok()))
            .unwrap_or(0);
        out.push(Proc { pid, ppid, env });
    }
    out
}

/// The fields of a `/proc/.../stat` line after the command (field 3 on), split.
fn after_comm(stat: &str) -> Option<Vec<String>> {
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// A process's MPI rank, from the variables MPI launchers set, else Slurm's task id. `mpi`
/// says whether an MPI launcher's variable gave it.
fn rank_of(env: &HashMap<String, String>) -> Option<(u32, bool)> {
    for k in ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"] {
        if let Some(r) = env.get(k).and_then(|v| v.parse().ok()) {
            return Some((r, true));
        }
    }
    env.get("SLURM_PROCID")
        .and_then(|v| v.parse().ok())
        .map(|r| (r, false))
}

fn list(v: Option<&String>) -> Vec<u32> {
    v.and_then(|s| parse_list(s.trim()).ok())
        .unwrap_or_default()
}

/// (utime + stime, last CPU) of a thread.
fn thread_stat(pid: u32, tid: u32) -> Option<(u64, u32)> {
    let f = after_comm(&read(&format!("/proc/{pid}/task/{tid}/stat"))?)?;
    // After the command: state is field 3, utime 14, stime 15, processor 39.
    let at = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
    Some((at(14)? + at(15)?, u32::try_from(at(39)?).ok()?))
}

fn allowed(pid: u32, tid: u32) -> Vec<u32> {
    read(&format!("/proc/{pid}/task/{tid}/status"))
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(|v| parse_list(v.trim()).ok())
        })
        .unwrap_or_default()
}

fn threads_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A memory policy's name and the NUMA nodes it names.
type Policy = (String, Vec<u32>);

/// The task's pages per NUMA node and its memory policy, from `numa_maps`.
fn memory(pid: u32) -> (Vec<(u32, u64)>, Option<Policy>) {
    let mut pages: BTreeMap<u32, u64> = BTreeMap::new();
    let mut policy = None;
    for line in read(&format!("/proc/{pid}/numa_maps"))
        .unwrap_or_default()
        .lines()
    {
        let mut words = line.split_whitespace();
        let _addr = words.next();
        let mut rest: Vec<&str> = words.collect();
        // "prefer (many):2" is the one policy written in two words.
        if rest.first() == Some(&"prefer") && rest.get(1).is_some_and(|w| w.starts_with("(many)")) {
            rest.remove(0);
        }
        if let Some(p) = rest.first() {
            if policy.is_none() && *p != "default" {
                let (name, nodes) = p.split_once(':').unwrap_or((*p, ""));
                let name = match name {
                    "(many)" => "prefer-many",
                    n => n,
                };
                policy = Some((name.to_string(), list(Some(&nodes.to_string()))));
            }
        }
        // Only the task's own memory: shared libraries and files sit wherever the page cache
        // first read them.
        if !rest.iter().any(|w| w.starts_with("anon=")) {
            continue;
        }
        for w in rest {
            if let Some((n, count)) = w.strip_prefix('N').and_then(|w| w.split_once('=')) {
                if let (Ok(n), Ok(c)) = (n.parse::<u32>(), count.parse::<u64>()) {
                    *pages.entry(n).or_default() += c;
                }
            }
        }
    }
    (pages.into_iter().collect(), policy)
}

/// The GPUs a task sees, as the node numbers them: its runtime variable, read through the
/// step's GPUs when Slurm numbered them from 0 inside the step; without one (Slurm 22.05 sets
/// none under `--gpu-bind=none`), every GPU of the step, or of the job.
fn gpus(env: &HashMap<String, String>) -> Vec<u32> {
    let step = list(env.get("SLURM_STEP_GPUS").or(env.get("SLURM_JOB_GPUS")));
    let var = [
        "CUDA_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "ZE_AFFINITY_MASK",
    ]
    .iter()
    .find_map(|k| env.get(*k));
    let Some(var) = var else {
        return step;
    };
    let seen: Vec<u32> = var
        .split(',')
        .filter_map(|g| g.trim().parse::<u32>().ok())
        .collect();
    if step.is_empty() || seen.iter().all(|g| step.contains(g)) {
        return seen;
    }
    seen.iter()
        .filter_map(|&g| step.get(g as usize).copied())
        .collect()
}

fn nics(env: &HashMap<String, String>) -> Vec<String> {
    ["LAMA_NICS", "UCX_NET_DEVICES"]
        .iter()
        .find_map(|k| env.get(*k))
        .map(|v| {
            v.split(',')
                .map(|n| n.split(':').next().unwrap_or(n).trim().to_string())
                .filter(|n| !n.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The node `TASK_MAP` gives this task's rank.
fn planned_node(env: &HashMap<String, String>, rank: u32) -> Option<u32> {
    let map = lama::taskmap::rfc34::decode(env.get("TASK_MAP")?).ok()?;
    u32::try_from(map.node_of(u64::from(rank))?).ok()
}

/// Everything the probe saw: the step's tasks on this node, sampled for `sample`.
pub fn observe(job: u32, step: &str, host: &str, sample: Duration) -> ProbeNode {
    let procs = step_processes(job, step, host);
    // An MPI launcher's ranks carry its rank variable; its daemons (with Slurm's task id
    // only) are not tasks then.
    let mpi = procs
        .iter()
        .any(|p| rank_of(&p.env).is_some_and(|(_, m)| m));
    let mut groups: BTreeMap<u32, Vec<&Proc>> = BTreeMap::new();
    for p in &procs {
        if let Some((r, m)) = rank_of(&p.env) {
            if m || !mpi {
                groups.entry(r).or_default().push(p);
            }
        }
    }
    let mut tasks: Vec<ProbeTask> = Vec::new();
    // Every thread: its task's and its own index there, its process and its id.
    let mut all: Vec<(usize, usize, u32, u32)> = Vec::new();
    for (rank, ps) in &groups {
        // The task's first process: the one whose parent is not of the task.
        let root = ps
            .iter()
            .find(|p| !ps.iter().any(|q| q.pid == p.ppid))
            .unwrap_or(&ps[0]);
        let mut t = ProbeTask {
            rank: *rank,
            pid: root.pid,
            ..Default::default()
        };
        for p in ps {
            for tid in threads_of(p.pid) {
                all.push((tasks.len(), t.threads.len(), p.pid, tid));
                t.threads.push(ProbeThread {
                    tid,
                    cpus: allowed(p.pid, tid),
                    ..Default::default()
                });
            }
        }
        (t.pages, t.policy) = memory(root.pid);
        t.gpus = gpus(&root.env);
        t.nics = nics(&root.env);
        t.planned = root.env.get("LAMA_CPUS").and_then(|v| parse_list(v).ok());
        t.planned_node = planned_node(&root.env, *rank);
        // Its binding: what lama placed it on, else what its threads may use together.
        let mut cpus: Vec<u32> = t.threads.iter().flat_map(|th| th.cpus.clone()).collect();
        cpus.extend(t.planned.iter().flatten());
        cpus.sort_unstable();
        cpus.dedup();
        t.cpus = cpus;
        tasks.push(t);
    }
    // The sample: the CPU each thread is on at every tick, and its CPU time at the first and
    // the last tick.
    let mut first: Vec<Option<u64>> = vec![None; all.len()];
    let mut last: Vec<Option<u64>> = vec![None; all.len()];
    let mut ran: Vec<Vec<u32>> = vec![Vec::new(); all.len()];
    let start = Instant::now();
    loop {
        for (i, &(_, _, p, t)) in all.iter().enumerate() {
            let stat = thread_stat(p, t);
            if let Some((time, cpu)) = stat {
                first[i].get_or_insert(time);
                if !ran[i].contains(&cpu) {
                    ran[i].push(cpu);
                }
            }
            last[i] = stat.map(|(time, _)| time);
        }
        if start.elapsed() >= sample {
            break;
        }
        std::thread::sleep(TICK);
    }
    for (i, &(task, k, _, _)) in all.iter().enumerate() {
        let th = &mut tasks[task].threads[k];
        th.busy = matches!((first[i], last[i]), (Some(a), Some(b)) if b > a);
        ran[i].sort_unstable();
        th.last_cpus = std::mem::take(&mut ran[i]);
    }
    let job_gpus = procs
        .iter()
        .find_map(|p| {
            let g = list(p.env.get("SLURM_JOB_GPUS").or(p.env.get("SLURM_STEP_GPUS")));
            (!g.is_empty()).then_some(g)
        })
        .unwrap_or_default();
    ProbeNode { tasks, job_gpus }
}

/// `lama check-probe`: the node's report lines ("host", the topology, then what it saw).
pub fn run(a: ProbeArgs) -> ExitCode {
    let (host, topo) = match crate::plan::slurm_job::report_lines(true) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("lama check: {e}");
            return ExitCode::from(2);
        }
    };
    let sample = if a.sample.is_finite() {
        Duration::from_secs_f64(a.sample.clamp(0.0, 60.0))
    } else {
        Duration::ZERO
    };
    let seen = observe(a.job, &a.step, &host, sample);
    let json = match serde_json::to_string(&seen) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("lama check on {host}: {e}");
            return ExitCode::from(2);
        }
    };
    println!("host {host}");
    for l in topo {
        println!("{l}");
    }
    // JSON text is ASCII-escaped only where serde_json must: chunk on character boundaries.
    let mut rest = json.as_str();
    while !rest.is_empty() {
        let mut cut = rest.len().min(CHUNK);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        println!("seen {}", &rest[..cut]);
        rest = &rest[cut..];
    }
    ExitCode::SUCCESS
}
