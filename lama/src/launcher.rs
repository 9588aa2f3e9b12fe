//! MPI launchers inside a Slurm allocation: recognising their daemon steps, reading which cores
//! Slurm gave the job on each node, and writing a whole-job plan in the words of Open MPI's
//! `mpirun --rankfile` and MPICH's Hydra `mpiexec -hosts ... -bind-to user:...`.
//!
//! Both launchers start one daemon per node through `srun` and fork the ranks themselves, so
//! the SPANK plugin sees the daemons' step, never the ranks. Pure functions: the CLI runs
//! `scontrol` and the per-node probe, and hands their text here.

use thiserror::Error;

use crate::idset::{format_list, parse_list};
use crate::slurm_layout::expand_hostlist;
use crate::taskmap::{rfc34, TaskMap};

/// Programs that MPI launchers start with `srun`, one per node, to fork the ranks: Open MPI 4's
/// `orted`, Open MPI 5's `prted` (PRRTE), MPICH's `hydra_pmi_proxy` and Intel MPI's `pmi_proxy`.
pub const LAUNCHER_DAEMONS: [(&str, &str); 4] = [
    ("orted", "Open MPI's orted"),
    ("prted", "Open MPI's prted"),
    ("hydra_pmi_proxy", "MPICH's hydra_pmi_proxy"),
    ("pmi_proxy", "Intel MPI's pmi_proxy"),
];

/// Which launcher's daemon a step runs, from the step's first argument (its program), or `None`
/// for any other program. Bytes, compared in place: every step asks.
pub fn launcher_daemon(argv0: &[u8]) -> Option<&'static str> {
    let base = match argv0.iter().rposition(|&b| b == b'/') {
        Some(i) => &argv0[i + 1..],
        None => argv0,
    };
    LAUNCHER_DAEMONS
        .iter()
        .find(|(name, _)| name.as_bytes() == base)
        .map(|(_, what)| *what)
}

/// What the plugin says, once per step, when a launcher's daemon step asked lama to place
/// (options given to `sbatch`, or `SLURM_LAMA_*` variables, reach `mpirun`'s own `srun`).
pub fn daemon_note(what: &str) -> String {
    format!(
        "this step runs {what}, one per node, which start the MPI ranks themselves: lama does not place or bind it and exports no TASK_MAP (it would describe the daemons, not the ranks); to place the ranks, give the launcher lama's plan: `lama plan --from-slurm ... --format rankfile` (Open MPI) or `--format hydra` (MPICH)"
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

/// An Open MPI rankfile: one `rank R=HOST slot=CPUS` line per rank, CPUs as physical (OS)
/// indexes, which Open MPI reads as such with `--mca rmaps_rank_file_physical 1
/// --use-hwthread-cpus` (without them it reads logical core numbers). The comment lines at the
/// top say so, and give the ranks' `TASK_MAP` (Flux RFC 34), which `mpirun -x` can pass on.
pub fn rankfile(ranks: &[RankPlace], hosts: &[String]) -> String {
    let nodes: Vec<u32> = ranks.iter().map(|p| p.node as u32).collect();
    let map = rfc34::encode_wrapped(&TaskMap::encode(&nodes));
    let mut out = format!(
        "# Open MPI rankfile from lama: {} ranks on {} nodes, CPUs as OS (physical) numbers. Run:\n\
         # mpirun --rankfile FILE --mca rmaps_rank_file_physical 1 --use-hwthread-cpus -n {} PROGRAM\n\
         # TASK_MAP={map}\n",
        ranks.len(),
        distinct_nodes(ranks),
        ranks.len()
    );
    for (r, p) in ranks.iter().enumerate() {
        let host = hosts.get(p.node).map_or("?", String::as_str);
        out.push_str(&format!("rank {r}={host} slot={}\n", format_list(&p.cpus)));
    }
    out
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
    let err = |m: String| LauncherError::Hydra(m);
    let name = |n: usize| hosts.get(n).map_or("?", String::as_str);
    // Runs of consecutive ranks on one node.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for p in ranks {
        match runs.last_mut() {
            Some((n, c)) if *n == p.node => *c += 1,
            _ => runs.push((p.node, 1)),
        }
    }
    // The first round ends where a node comes again.
    let round_len = (0..runs.len())
        .find(|&i| runs[..i].iter().any(|(n, _)| *n == runs[i].0))
        .unwrap_or(runs.len());
    let round = &runs[..round_len];
    let rounds = round
        .iter()
        .map(|&(n, c)| format!("{c} on {}", name(n)))
        .collect::<Vec<_>>()
        .join(", ");
    let mut rank = 0;
    'rounds: loop {
        for &(node, count) in round {
            for _ in 0..count {
                let Some(p) = ranks.get(rank) else {
                    break 'rounds;
                };
                if p.node != node {
                    return Err(err(format!(
                        "it starts ranks in rounds ({rounds}), which would put rank {rank} on {}, not on {}",
                        name(node),
                        name(p.node)
                    )));
                }
                rank += 1;
            }
        }
    }
    // Each node's bindings by local index; every node must follow one list.
    let nodes = ranks.iter().map(|p| p.node + 1).max().unwrap_or(0);
    let mut per_node: Vec<Vec<&[u32]>> = vec![Vec::new(); nodes];
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
            return Err(err(format!(
                "its -bind-to user: list is the same on every node, but the local rank {i} of {} is bound to CPUs {} and of another node to {}",
                name(n),
                format_list(list[i]),
                format_list(longest[i])
            )));
        }
    }
    let hosts_arg: Vec<String> = round
        .iter()
        .map(|&(n, c)| format!("{}:{c}", name(n)))
        .collect();
    let bind: Vec<String> = longest
        .iter()
        .map(|cpus| {
            cpus.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Ok(format!(
        "-n {} -hosts {} -bind-to user:{}\n",
        ranks.len(),
        hosts_arg.join(","),
        bind.join(",")
    ))
}

#[cfg(test)]
mod tests;
