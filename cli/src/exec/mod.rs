//! `lama exec [OPTIONS] -- COMMAND`: the first word of every rank's command line under any
//! launcher. It learns the rank's place on its node from the launcher's variables, places the
//! whole node as the plugins would ([`lama::exec`]), binds itself, sets the rank's variables and
//! runs COMMAND in its place.
//!
//! | module | what |
//! |---|---|
//! | [`machine`] | the node's topology, the CPUs and GPUs the job may use |
//! | [`rendezvous`] | the node's ranks of one launch agree on the node's size |
//! | this file | the options, the decisions in order, binding and `exec` |

mod machine;
mod rendezvous;

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use lama::exec::{
    exec_words, launch_key, local_rank, place_node_ranks, torchrun_nodes, with_default_policy,
    ExecNode, Launcher, LocalRank,
};
use lama::plugin::{Options, Placing, Settings, OMP_VARIABLES};
use lama::taskmap::TaskMap;

use crate::{affinity, env};

/// Run COMMAND as this rank of its node, placed: under mpirun, mpiexec, torchrun, PALS, Flux or
/// srun without the plugin.
#[derive(Args)]
pub struct ExecArgs {
    /// This process's rank among its node's ranks, when no launcher's variables say it.
    #[arg(long, value_name = "R", requires = "local_size")]
    local_rank: Option<u32>,
    /// How many ranks its node runs (with --local-rank).
    #[arg(long, value_name = "N", requires = "local_rank")]
    local_size: Option<u32>,
    /// The CPUs the job may use on this node (default: the process's cgroup cpuset).
    #[arg(long, value_name = "CPULIST")]
    cpus: Option<String>,
    /// CPUs per rank for the policy's workers, as srun's -c (default: SLURM_CPUS_PER_TASK).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    cpus_per_rank: Option<u32>,
    /// auto: the automatic policy (the default when no map is given); none: no policy.
    #[arg(long, value_name = "auto|none")]
    policy: Option<String>,
    /// LAMA map, e.g. csbnh (leftmost token changes fastest).
    #[arg(long, value_name = "STR")]
    map: Option<String>,
    /// Bind each rank to W objects of level L, e.g. 1c, 2L2.
    #[arg(long, value_name = "WL")]
    bind: Option<String>,
    /// At most K ranks per object, e.g. 1:c,2:s.
    #[arg(long, value_name = "LIST")]
    mppr: Option<String>,
    /// Rank order: n (natural) or s (sequential).
    #[arg(long, value_name = "n|s")]
    order: Option<String>,
    /// Open MPI 5's --map-by: slot, node, package, numa, ..., core, hwthread, ppr:K:object [:pe=K].
    #[arg(long, value_name = "X")]
    map_by: Option<String>,
    /// Open MPI 5's --bind-to: none, package, numa, ..., core, hwthread.
    #[arg(long, value_name = "Y")]
    bind_to: Option<String>,
    /// Open MPI 5's --rank-by: slot, node, fill, span.
    #[arg(long, value_name = "Z")]
    rank_by: Option<String>,
    /// Keep placing past MPPR limits instead of failing.
    #[arg(long)]
    oversubscribe: bool,
    /// Give each rank its N nearest NICs (LAMA_NICS, UCX_NET_DEVICES).
    #[arg(long, value_name = "N")]
    nics: Option<String>,
    /// Give each rank its N nearest GPUs (with a map; the policy shares GPUs out itself).
    #[arg(long, value_name = "N")]
    gpus: Option<String>,
    /// With --gpus: each rank sees its own GPUs (own), or all the job's, its own first (all).
    #[arg(long, value_name = "own|all")]
    gpu_visibility: Option<String>,
    /// OpenMP threads per rank, each on a place of its binding; auto: one per core.
    #[arg(long, value_name = "N|auto")]
    threads: Option<String>,
    /// With --threads: places spread over the binding (default) or packed (close).
    #[arg(long, value_name = "spread|close")]
    omp_bind: Option<String>,
    /// Replace OMP_* variables the job already has (default: they win).
    #[arg(long)]
    omp_override: bool,
    /// Memory binding: local, hbm, prefer-hbm, interleave or none.
    #[arg(long, value_name = "MODE")]
    mem: Option<String>,
    /// Device weights file (OBJECT ----W---> DEVICE lines) for NIC and GPU choice.
    #[arg(long, value_name = "FILE")]
    device_weights: Option<PathBuf>,
    /// Print each rank's placement on stderr.
    #[arg(long)]
    verbose: bool,
    /// No placement, binding or TASK_MAP: run COMMAND as it is.
    #[arg(long)]
    off: bool,
    /// Print this rank's placement and variables, and exit without running COMMAND.
    #[arg(long)]
    dry_run: bool,
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

/// The options as the plugins read them (their names and checks).
fn options(a: &ExecArgs) -> Options {
    let mut o = Options::default();
    let valued = [
        ("policy", &a.policy),
        ("map", &a.map),
        ("bind", &a.bind),
        ("mppr", &a.mppr),
        ("order", &a.order),
        ("map-by", &a.map_by),
        ("bind-to", &a.bind_to),
        ("rank-by", &a.rank_by),
        ("nics", &a.nics),
        ("gpus", &a.gpus),
        ("gpu-visibility", &a.gpu_visibility),
        ("threads", &a.threads),
        ("omp-bind", &a.omp_bind),
        ("mem", &a.mem),
    ];
    for (name, v) in valued {
        if let Some(v) = v {
            o.set(name, Some(v));
        }
    }
    for (name, on) in [
        ("oversubscribe", a.oversubscribe),
        ("omp-override", a.omp_override),
        ("verbose", a.verbose),
        ("off", a.off),
    ] {
        if on {
            o.set(name, None);
        }
    }
    with_default_policy(o)
}

/// Refuses with one line and exit 2.
fn refuse(msg: &str) -> ExitCode {
    eprintln!("lama exec: {}", exec_words(msg));
    ExitCode::from(2)
}

pub fn run(a: ExecArgs) -> ExitCode {
    let user = options(&a);
    let settings = Settings {
        weights: a.device_weights.clone(),
        ..Settings::default()
    };
    if a.off {
        return run_command(&a, Vec::new(), false);
    }
    // The options first: a bad one is the same for every rank, whatever the launcher.
    let placing = settings
        .placing(&user, None)
        .and_then(|p| settings.threads(&user).map(|_| p))
        .and_then(|p| settings.devices(&user).map(|_| p))
        .and_then(|p| settings.mem(&user).map(|_| p))
        .and_then(|p| settings.gpu_visibility(&user).map(|_| p));
    match placing {
        Err(e) => return refuse(&e.to_string()),
        // `--policy none` without a map: nothing to place, as `--off`.
        Ok(Placing::LeftAlone) => return run_command(&a, Vec::new(), false),
        Ok(_) => {}
    }
    let mut flux_map = None;
    let given = a.local_rank.zip(a.local_size);
    let local = match local_rank(env, given, |l, v| node_size(l, v, &mut flux_map)) {
        Ok(l) => l,
        Err(e) => return refuse(&e.to_string()),
    };
    let from = match local.launcher {
        Launcher::Given => "--local-size".to_string(),
        l => format!("{}'s variables", l.name()),
    };
    let key = launch_key(env, local.launcher);
    if let Err(e) = rendezvous::check(key.as_deref(), local.rank, local.size, &from) {
        return refuse(&e);
    }
    match place(&a, &settings, &user, &local) {
        Ok((mut vars, bind)) => {
            vars.push(task_map(&local, flux_map));
            run_command(&a, vars, bind)
        }
        Err(e) => refuse(&format!(
            "local rank {} of {} ({}): {e}",
            local.rank,
            local.size,
            local.launcher.name()
        )),
    }
}

/// The variables to set (`None`: remove), and whether the rank was bound.
type Placed = (Vec<(String, Option<String>)>, bool);

/// Reads the node, places its ranks, binds this one and returns its variables.
fn place(
    a: &ExecArgs,
    settings: &Settings,
    user: &Options,
    local: &LocalRank,
) -> Result<Placed, String> {
    let policy = settings.auto(user).map_err(|e| e.to_string())?;
    let counts = settings.devices(user).map_err(|e| e.to_string())?;
    let mem = settings.mem(user).map_err(|e| e.to_string())?;
    let devices = policy || counts != (0, 0) || mem.is_some();
    let m = machine::read(devices, a.cpus.as_deref())?;
    let gpus = match &m.locality {
        Some(loc) if policy || counts.1 > 0 => machine::job_gpus(loc)?,
        _ => None,
    };
    let weights = match (&settings.weights, &m.locality) {
        (Some(path), Some(loc)) => {
            let text = lama::limits::read_text(path, lama::limits::MAX_WEIGHTS_BYTES)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            Some(
                lama::locality::Weights::parse(&text, loc)
                    .map_err(|e| format!("{}: {e}", path.display()))?,
            )
        }
        _ => None,
    };
    let mems_allowed = if m.bind && mem.is_some() {
        Some(
            affinity::allowed_mems()
                .map_err(|e| format!("cannot read the NUMA nodes this job may use: {e}"))?,
        )
    } else {
        None
    };
    let node = ExecNode {
        topology: &m.topology,
        locality: m.locality.as_ref(),
        cpus: &m.cpus,
        gpus,
        cpus_per_rank: a
            .cpus_per_rank
            .map(|n| n as usize)
            .or_else(|| env("SLURM_CPUS_PER_TASK").and_then(|v| v.trim().parse().ok())),
        has_omp: OMP_VARIABLES.iter().any(|v| env(v).is_some()),
        mems_allowed: mems_allowed.as_deref(),
        weights: weights.as_ref(),
    };
    let plan = place_node_ranks(
        &node,
        settings,
        user,
        local.size as usize,
        a.verbose && local.rank == 0,
    )
    .map_err(|e| e.to_string())?;
    let me = plan
        .ranks
        .get(local.rank as usize)
        .ok_or("internal error: the node's plan has fewer ranks than the node (a bug in lama)")?;
    let cpus = lama::idset::format_list(&me.cpus);
    if m.bind {
        affinity::bind(&me.cpus).map_err(|e| format!("cannot bind to cpus {cpus}: {e}"))?;
    }
    if let Some((nodes, policy)) = &me.mems {
        affinity::bind_memory(nodes, &cpus, *policy, m.bind).map_err(|e| {
            format!(
                "cannot bind memory to NUMA nodes {}: {e}",
                lama::idset::format_list(nodes)
            )
        })?;
    }
    if a.verbose {
        say(local, &m, &plan, me, &cpus);
    }
    let vars = me
        .env
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    Ok((vars, m.bind))
}

/// The `--verbose` lines: rank 0 says what the policy chose and where the topology came from.
fn say(
    local: &LocalRank,
    m: &machine::Machine,
    plan: &lama::exec::ExecPlan,
    me: &lama::exec::ExecRank,
    cpus: &str,
) {
    let host = affinity::hostname();
    if local.rank == 0 {
        let mut what = format!(
            "{host}: {} ranks ({}), {}",
            local.size,
            local.launcher.name(),
            m.source
        );
        if let Some(n) = &m.note {
            what.push_str(&format!(" ({n})"));
        }
        if let Some(s) = &plan.summary {
            what.push_str(&format!("; {}", exec_words(s)));
        }
        eprintln!("lama exec: {what}");
        if plan.omp_kept {
            eprintln!("lama exec: {host}: the job's OMP_* variables are kept (--omp-override replaces them)");
        }
        if let Some((t, hw)) = plan.crowded {
            eprintln!("lama exec: {host}: {t} OpenMP threads per rank share as few as {hw} hardware threads: ask for fewer threads or ranks to give each thread its own");
        }
    }
    let bound = if m.bind {
        ""
    } else {
        " (computed, not bound: hwloc reads HWLOC_XMLFILE)"
    };
    let mems = lama::plugin::verbose_mems(
        me.mems.as_ref().map(|(n, _)| n.as_slice()),
        me.mems.as_ref().map(|(_, p)| *p),
    );
    let extras = lama::plugin::verbose_extras(&me.env);
    eprintln!(
        "lama exec: local rank {} on {host}: cpus {cpus}{mems}{extras}{bound}",
        local.rank
    );
}

/// How long `flux job taskmap` may take: a broker that never answers (seen once, on a loaded
/// machine, a follower broker of an instance under Slurm) must fail the rank, not hang the job.
const FLUX_TASKMAP_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// `flux job taskmap JOB`: whether it succeeded, its stdout and stderr, within
/// [`FLUX_TASKMAP_WAIT`].
fn flux_taskmap(job: &str) -> Result<(bool, Vec<u8>, Vec<u8>), String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new("flux")
        .args(["job", "taskmap", job])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`flux job taskmap` cannot run ({e}): is flux in PATH?"))?;
    // Read while waiting: a long map would fill the pipe before flux exits.
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if started.elapsed() < FLUX_TASKMAP_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`flux job taskmap {job}` did not answer in {} s (is the instance's broker on this node alive?)",
                    FLUX_TASKMAP_WAIT.as_secs()
                ));
            }
            Err(e) => return Err(format!("`flux job taskmap {job}`: {e}")),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok((status.success(), stdout, stderr))
}

/// Slurm's and Flux's count of the node's ranks: Slurm's counts per node at `SLURM_NODEID`;
/// Flux's task map (kept for `TASK_MAP`) at the node of `FLUX_TASK_RANK`.
fn node_size(l: Launcher, value: &str, flux_map: &mut Option<TaskMap>) -> Result<u32, String> {
    match l {
        Launcher::Slurm => {
            let node: usize = env("SLURM_NODEID")
                .and_then(|v| v.trim().parse().ok())
                .ok_or("SLURM_NODEID is not set or not a number")?;
            let counts = lama::slurm::expand_counts_within(value, lama::limits::MAX_NODES)
                .map_err(|e| e.to_string())?;
            counts
                .get(node)
                .copied()
                .ok_or_else(|| format!("it names no count for node {node} (SLURM_NODEID)"))
        }
        _ => {
            let task: u64 = env("FLUX_TASK_RANK")
                .and_then(|v| v.trim().parse().ok())
                .ok_or("FLUX_TASK_RANK is not set or not a number")?;
            let (ok, stdout, stderr) = flux_taskmap(value)?;
            if !ok {
                return Err(format!(
                    "`flux job taskmap {value}` failed: {}",
                    lama::quote::cut(String::from_utf8_lossy(&stderr).trim())
                ));
            }
            let map = lama::taskmap::parse_any(String::from_utf8_lossy(&stdout).trim())
                .map_err(|e| e.to_string())?;
            let node = map
                .node_of(task)
                .ok_or_else(|| format!("Flux's task map has no task {task}"))?;
            let n = map.ntasks_on(node);
            *flux_map = Some(map);
            u32::try_from(n).map_err(|_| format!("Flux's task map puts {n} tasks on one node"))
        }
    }
}

/// `TASK_MAP` where the launcher's variables give the whole job's layout (srun's, torchrun's,
/// Flux's own map); else removed, since one inherited from an outer launch is not this one's.
fn task_map(local: &LocalRank, flux_map: Option<TaskMap>) -> (String, Option<String>) {
    let map = match local.launcher {
        Launcher::Flux => flux_map,
        Launcher::Torchrun => torchrun_nodes(env, local).map(|n| TaskMap::encode(&n)),
        Launcher::Slurm => {
            let mut step = lama::slurm::StepEnv::from_lookup(env);
            step.step_id = lama::slurm::StepEnv::task_step_id(env);
            step.taskmap_from_files().ok()
        }
        _ => None,
    };
    let text = map
        .map(|m| lama::taskmap::rfc34::encode_wrapped(&m))
        .filter(|t| {
            lama::environ::Group::task_map(t.clone())
                .too_long()
                .is_none()
        });
    ("TASK_MAP".into(), text)
}

/// Sets the variables and runs the command in this process's place.
fn run_command(a: &ExecArgs, vars: Vec<(String, Option<String>)>, bound: bool) -> ExitCode {
    if a.dry_run {
        if bound {
            if let Ok(cpus) = affinity::allowed() {
                println!("bound to cpus {}", lama::idset::format_list(&cpus));
            }
        }
        for (k, v) in &vars {
            match v {
                Some(v) => println!("{k}={v}"),
                None => println!("unset {k}"),
            }
        }
        return ExitCode::SUCCESS;
    }
    let Some((program, args)) = a.command.split_first() else {
        return refuse("no command to run");
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    for (k, v) in vars {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let e = cmd.exec();
    eprintln!("lama exec: cannot run {}: {e}", program.to_string_lossy());
    ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}
