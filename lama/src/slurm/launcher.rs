//! MPI launchers inside a Slurm allocation: recognising their daemon steps, reading which cores
//! Slurm gave the job on each node, and writing a whole-job plan in the words of Open MPI's
//! rankfiles (4.x and 5.x number CPUs differently), MPICH's Hydra
//! (`mpiexec -hosts ... -bind-to user:...`) and Intel MPI's Hydra (`-ppn ... -cpu-bind list:...`);
//! with devices and memory too, srun's own binding options and Cray PALS' `mpiexec` ([`bindings`]).
//!
//! Every launcher starts one daemon per node through `srun` and forks the ranks itself, so the
//! SPANK plugin sees the daemons' step, never the ranks. Pure functions: the CLI runs `scontrol`,
//! `mpirun --version` and the per-node probe, and hands their text here.

use thiserror::Error;

pub mod bindings;

pub use bindings::{pals_script, srun_script, RankBinding};

use super::hostlist::expand_hostlist;
use crate::idset::{format_list, parse_list};
use crate::taskmap::{rfc34, TaskMap};

/// Programs that MPI launchers start with `srun`, one per node, to fork the ranks, as seen in
/// their steps: Open MPI 4's `orted`, Open MPI 5's `prted` (PRRTE, by its full path), MPICH's
/// `hydra_pmi_proxy`, and Intel MPI's `hydra_bstrap_proxy` (its Slurm bootstrap, which then
/// becomes `hydra_pmi_proxy`).
pub const LAUNCHER_DAEMONS: [(&str, &str); 4] = [
    ("orted", "Open MPI's orted"),
    ("prted", "Open MPI's prted"),
    ("hydra_pmi_proxy", "MPICH's hydra_pmi_proxy"),
    ("hydra_bstrap_proxy", "Intel MPI's hydra_bstrap_proxy"),
];

/// What a Flux instance started by `srun` runs on each node: `flux start` (or `flux broker`),
/// which becomes `flux-broker`.
pub const FLUX_BROKER: &str = "Flux's brokers (flux start)";

/// Which launcher's daemon a step runs, from the step's first argument (its program), or `None`
/// for any other program; `argv1` gives the second argument, asked for only when the program is
/// `flux`. Bytes, compared in place: every step asks.
pub fn launcher_daemon<'a>(
    argv0: &[u8],
    argv1: impl FnOnce() -> Option<&'a [u8]>,
) -> Option<&'static str> {
    let base = match argv0.iter().rposition(|&b| b == b'/') {
        Some(i) => &argv0[i + 1..],
        None => argv0,
    };
    match base {
        b"flux" => matches!(argv1(), Some(b"start" | b"broker")).then_some(FLUX_BROKER),
        b"flux-broker" | b"flux-start" => Some(FLUX_BROKER),
        _ => LAUNCHER_DAEMONS
            .iter()
            .find(|(name, _)| name.as_bytes() == base)
            .map(|(_, what)| *what),
    }
}

/// What the plugin says, once per step, when a launcher's daemon step asked lama to place
/// (options given to `sbatch`, or `SLURM_LAMA_*` variables, reach `mpirun`'s own `srun`).
pub fn daemon_note(what: &str) -> String {
    if what == FLUX_BROKER {
        return format!(
            "this step runs {what}, one per node: lama leaves it unbound and exports none of its variables, so that the Flux instance spans every CPU the job has on each node (a binding here would confine the whole instance); lama's Flux plugin places the instance's jobs (flux run -o lama.map=... or -o lama.policy=auto)"
        );
    }
    format!(
        "this step runs {what}, one per node, which start the MPI ranks themselves: lama does not place or bind it and exports no TASK_MAP (it would describe the daemons, not the ranks); to place the ranks, give the launcher lama's plan: `lama plan --from-slurm ... --format rankfile` (Open MPI), `--format hydra` (MPICH) or `--format impi` (Intel MPI)"
    )
}

/// A plan a launcher cannot be told, or Slurm text that cannot be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LauncherError {
    /// `scontrol show job -d` did not say which CPUs the job has.
    #[error("cannot read the job's CPUs from `scontrol show job -d`: {0}")]
    Scontrol(String),
    /// Hydra cannot express the ranks' nodes or bindings.
    #[error("MPICH's mpiexec cannot express this plan: {0}; run the ranks with srun (the plugin places them), or choose a map whose nodes have alike bindings")]
    Hydra(String),
    /// Intel MPI's mpiexec cannot express the ranks' nodes or bindings.
    #[error("Intel MPI's mpiexec cannot express this plan: {0}; run the ranks with srun (the plugin places them), or choose a map whose nodes have alike bindings")]
    Impi(String),
    /// srun's binding options cannot express the plan.
    #[error("srun's --cpu-bind/--gpu-bind/--mem-bind cannot express this plan: {0}")]
    Srun(String),
    /// Cray PALS' mpiexec cannot express the plan.
    #[error("Cray PALS mpiexec cannot express this plan: {0}")]
    Pals(String),
    /// Open MPI 5 counts a rankfile's CPUs among those its daemon may use on the node.
    #[error("Open MPI 5 cannot bind rank {rank} on {host} to CPU {cpu}: its daemon there may use only CPUs {usable}")]
    Unusable {
        /// The rank.
        rank: usize,
        /// Its host.
        host: String,
        /// The CPU (OS index).
        cpu: u32,
        /// The CPUs Open MPI's daemon may use there.
        usable: String,
    },
}

/// The CPUs Slurm gave the job on each of its nodes, from `scontrol show job -d`: its
/// `Nodes=... CPU_IDs=...` lines, which name Slurm's abstract CPUs (core `c` of a node with `t`
/// threads per core is CPUs `c*t` to `c*t+t-1`). Returns, per host, its core indexes as Slurm
/// numbers them (what the plugin gets as the step's cores), given each host's threads per core.
pub fn job_cores(
    scontrol: &str,
    threads_per_core: impl Fn(&str) -> u32,
) -> Result<Vec<(String, Vec<u32>)>, LauncherError> {
    let mut out = Vec::new();
    for line in scontrol.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let field = |k: &str| words.iter().find_map(|w| w.strip_prefix(k));
        let (Some(nodes), Some(ids)) = (field("Nodes="), field("CPU_IDs=")) else {
            continue;
        };
        let hosts = expand_hostlist(nodes)
            .map_err(|e| LauncherError::Scontrol(format!("Nodes={nodes}: {e}")))?;
        let cpus =
            parse_list(ids).map_err(|e| LauncherError::Scontrol(format!("CPU_IDs={ids}: {e}")))?;
        for h in hosts {
            let t = threads_per_core(&h).max(1);
            let mut cores: Vec<u32> = cpus.iter().map(|c| c / t).collect();
            cores.dedup();
            out.push((h, cores));
        }
    }
    if out.is_empty() {
        return Err(LauncherError::Scontrol(
            "no Nodes=... CPU_IDs=... line (is the job running?)".into(),
        ));
    }
    Ok(out)
}

/// One rank of a whole-job plan, as a launcher needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankPlace {
    /// The rank's node (an index into the host names).
    pub node: usize,
    /// Its CPUs, OS indexes, ascending.
    pub cpus: Vec<u32>,
}

/// Which Open MPI reads a rankfile: their `slot=` numbers mean different CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMpi {
    /// Open MPI 4.x (ORTE): OS (physical) CPU numbers, with
    /// `--mca rmaps_rank_file_physical 1 --use-hwthread-cpus`.
    V4,
    /// Open MPI 5.x (PRRTE): with `--use-hwthread-cpus`, the n-th PU in hwloc's logical order
    /// among those the node's daemon may use (its cpuset), counted from 0. PRRTE accepts the 4.x
    /// option without a word and ignores it; a number past the PUs it counts leaves the rank
    /// unbound without one.
    V5,
}

impl OpenMpi {
    /// The Open MPI release an `mpirun --version` text names (`mpirun (Open MPI) 5.0.11`), if any.
    pub fn from_version(text: &str) -> Option<OpenMpi> {
        let rest = text.split("(Open MPI)").nth(1)?;
        let major: u32 = rest.trim().split('.').next()?.parse().ok()?;
        Some(if major >= 5 { OpenMpi::V5 } else { OpenMpi::V4 })
    }
}

/// An Open MPI rankfile: one `rank R=HOST slot=CPUS` line per rank, numbered as `version`
/// reads them. For 5.x, `usable[node]` lists the PUs (OS indexes, hwloc logical order) that
/// Open MPI's daemon may use on each node: slots count along it. The comment lines at the top
/// say which Open MPI the file is for, the command that reads it, and the ranks' `TASK_MAP`
/// (Flux RFC 34), which `mpirun -x` can pass on.
pub fn rankfile(
    ranks: &[RankPlace],
    hosts: &[String],
    version: OpenMpi,
    usable: &[Vec<u32>],
) -> Result<String, LauncherError> {
    let name = |n: usize| hosts.get(n).map_or("?", String::as_str);
    let mut lines = String::new();
    let mut shared = false;
    let mut seen: Vec<Vec<u32>> = vec![Vec::new(); usable.len().max(distinct_max(ranks))];
    for (r, p) in ranks.iter().enumerate() {
        shared |= p.cpus.iter().any(|c| seen[p.node].contains(c));
        seen[p.node].extend(&p.cpus);
        let slots = match version {
            OpenMpi::V4 => p.cpus.clone(),
            OpenMpi::V5 => {
                let order = usable.get(p.node).map_or(&[][..], Vec::as_slice);
                let mut s = Vec::with_capacity(p.cpus.len());
                for &cpu in &p.cpus {
                    let i = order.iter().position(|&u| u == cpu).ok_or_else(|| {
                        LauncherError::Unusable {
                            rank: r,
                            host: name(p.node).to_string(),
                            cpu,
                            usable: format_list(&sorted(order)),
                        }
                    })?;
                    s.push(i as u32);
                }
                s.sort_unstable();
                s
            }
        };
        lines.push_str(&format!(
            "rank {r}={} slot={}\n",
            name(p.node),
            format_list(&slots)
        ));
    }
    let nodes: Vec<u32> = ranks.iter().map(|p| p.node as u32).collect();
    let map = rfc34::encode_wrapped(&TaskMap::encode(&nodes));
    let (n, nn) = (ranks.len(), distinct_nodes(ranks));
    // Open MPI 5 refuses ranks that share a CPU unless told to oversubscribe.
    let over = if shared { ":oversubscribe" } else { "" };
    let head = match version {
        OpenMpi::V4 => format!(
            "# Open MPI 4.x rankfile from lama: {n} ranks on {nn} nodes, CPUs as OS (physical) numbers. Run:\n\
             # mpirun --rankfile FILE --mca rmaps_rank_file_physical 1 --use-hwthread-cpus -n {n} PROGRAM\n"
        ),
        OpenMpi::V5 => format!(
            "# Open MPI 5.x (PRRTE) rankfile from lama: {n} ranks on {nn} nodes, slots as hardware threads\n\
             # counted in hwloc's logical order among the CPUs the job may use on each node. Run:\n\
             # mpirun --map-by rankfile:file=FILE{over} --use-hwthread-cpus -n {n} PROGRAM\n"
        ),
    };
    Ok(format!("{head}# TASK_MAP={map}\n{lines}"))
}

fn sorted(v: &[u32]) -> Vec<u32> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v
}

fn distinct_max(ranks: &[RankPlace]) -> usize {
    ranks.iter().map(|p| p.node + 1).max().unwrap_or(0)
}

fn distinct_nodes(ranks: &[RankPlace]) -> usize {
    let mut n: Vec<usize> = ranks.iter().map(|p| p.node).collect();
    n.sort_unstable();
    n.dedup();
    n.len()
}

/// MPICH Hydra's arguments for a plan: `-n N -hosts H1:C1,H2:C2,... -bind-to user:A,B,...`.
///
/// Hydra hands out ranks in rounds: `C1` consecutive ranks on `H1`, then `C2` on `H2`, and so on,
/// then again from `H1`. Each host is named once. It binds the `i`-th rank of every node to
/// entry `i` (modulo their count) of one list of OS CPU numbers shared by all nodes. A plan
/// whose ranks do not follow such rounds, or whose nodes bind their ranks differently, cannot be
/// written this way: that is an error which says where it differs.
pub fn hydra_args(ranks: &[RankPlace], hosts: &[String]) -> Result<String, LauncherError> {
    let round = first_round(ranks);
    follows_rounds(ranks, &round, hosts).map_err(LauncherError::Hydra)?;
    let bind = local_bindings(ranks, hosts, "-bind-to user:").map_err(LauncherError::Hydra)?;
    let hosts_arg: Vec<String> = round
        .iter()
        .map(|&(n, c)| format!("{}:{c}", host(hosts, n)))
        .collect();
    Ok(format!(
        "-n {} -hosts {} -bind-to user:{}\n",
        ranks.len(),
        hosts_arg.join(","),
        cpu_lists(&bind, "+", ",")
    ))
}

/// Intel MPI's `mpiexec.hydra` arguments for a plan:
/// `-bootstrap slurm -n N -hosts H1,H2,... -ppn C -cpu-bind list:A,B:C,D`.
///
/// Intel MPI ignores MPICH's `-bind-to` and reads `H:C` hosts as blocks, so a plan must start
/// its ranks in rounds of the same `C` ranks on each host in turn (`-ppn`; the job's last
/// round may stop short), and bind the `i`-th rank of every node to the same OS CPUs (entry
/// `i` of the list, `:` between ranks). `-bootstrap slurm` starts its proxies through `srun`,
/// as it does inside an allocation without `-hosts`.
pub fn impi_args(ranks: &[RankPlace], hosts: &[String]) -> Result<String, LauncherError> {
    let round = first_round(ranks);
    let ppn = round.iter().map(|&(_, c)| c).max().unwrap_or(1);
    let even: Vec<(usize, usize)> = round.iter().map(|&(n, _)| (n, ppn)).collect();
    follows_rounds(ranks, &even, hosts)
        .map_err(|e| LauncherError::Impi(format!("with -ppn {ppn}, {e}")))?;
    let bind = local_bindings(ranks, hosts, "-cpu-bind list:").map_err(LauncherError::Impi)?;
    let names: Vec<&str> = round.iter().map(|&(n, _)| host(hosts, n)).collect();
    Ok(format!(
        "-bootstrap slurm -n {} -hosts {} -ppn {ppn} -cpu-bind list:{}\n",
        ranks.len(),
        names.join(","),
        cpu_lists(&bind, ",", ":")
    ))
}

fn host(hosts: &[String], n: usize) -> &str {
    hosts.get(n).map_or("?", String::as_str)
}

/// The plan's first round: runs of consecutive ranks on one node, up to where a node comes again.
fn first_round(ranks: &[RankPlace]) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for p in ranks {
        match runs.last_mut() {
            Some((n, c)) if *n == p.node => *c += 1,
            _ => runs.push((p.node, 1)),
        }
    }
    let len = (0..runs.len())
        .find(|&i| runs[..i].iter().any(|(n, _)| *n == runs[i].0))
        .unwrap_or(runs.len());
    runs.truncate(len);
    runs
}

/// Whether every rank is where repeating `round` (node, count) would start it; if not, where not.
fn follows_rounds(
    ranks: &[RankPlace],
    round: &[(usize, usize)],
    hosts: &[String],
) -> Result<(), String> {
    let said = round
        .iter()
        .map(|&(n, c)| format!("{c} on {}", host(hosts, n)))
        .collect::<Vec<_>>()
        .join(", ");
    let mut rank = 0;
    while rank < ranks.len() {
        for &(node, count) in round {
            for _ in 0..count {
                let Some(p) = ranks.get(rank) else {
                    return Ok(());
                };
                if p.node != node {
                    return Err(format!(
                        "it starts ranks in rounds ({said}), which would put rank {rank} on {}, not on {}",
                        host(hosts, node),
                        host(hosts, p.node)
                    ));
                }
                rank += 1;
            }
        }
    }
    Ok(())
}

/// The CPUs of each local rank index, the same on every node (the longest node's list), or
/// where a node differs. `option` names the launcher's option in the message.
fn local_bindings<'a>(
    ranks: &'a [RankPlace],
    hosts: &[String],
    option: &str,
) -> Result<Vec<&'a [u32]>, String> {
    let mut per_node: Vec<Vec<&[u32]>> = vec![Vec::new(); distinct_max(ranks)];
    for p in ranks {
        per_node[p.node].push(&p.cpus);
    }
    let longest = per_node
        .iter()
        .max_by_key(|l| l.len())
        .cloned()
        .unwrap_or_default();
    for (n, list) in per_node.iter().enumerate() {
        if let Some(i) = (0..list.len()).find(|&i| list[i] != longest[i]) {
            return Err(format!(
                "its {option} list is the same on every node, but the local rank {i} of {} is bound to CPUs {} and of another node to {}",
                host(hosts, n),
                format_list(list[i]),
                format_list(longest[i])
            ));
        }
    }
    Ok(longest)
}

/// CPU lists written out: `within` between a rank's CPUs, `between` between ranks.
fn cpu_lists(bind: &[&[u32]], within: &str, between: &str) -> String {
    bind.iter()
        .map(|cpus| {
            cpus.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(within)
        })
        .collect::<Vec<_>>()
        .join(between)
}

#[cfg(test)]
mod tests;
