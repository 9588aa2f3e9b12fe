//! Which rank of its node a process is, read from the variables of whatever launcher started it.
//!
//! Launchers nest: `torchrun` under srun, `mpirun` inside an allocation, Flux under Slurm. Every
//! inner launcher's ranks inherit the outer one's variables (an srun task's `SLURM_LOCALID` is
//! still there under the `mpirun` it ran), so the launchers are tried innermost first:
//! `torchrun`'s workers are never launchers themselves, MPI launchers run inside Flux and Slurm
//! jobs, and Flux runs inside Slurm's.

use thiserror::Error;

/// A launcher whose variables say where a rank is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// `--local-rank` and `--local-size`.
    Given,
    /// `torchrun` and the launchers of the same contract (accelerate, DeepSpeed).
    Torchrun,
    /// Open MPI's `mpirun` (4.x's ORTE and 5.x's PRRTE alike).
    OpenMpi,
    /// Cray PALS `mpiexec` (PBS machines).
    Pals,
    /// MPICH's and Intel MPI's Hydra `mpiexec`.
    Hydra,
    /// A Flux job's shell.
    Flux,
    /// `srun`.
    Slurm,
}

/// Each launcher's variables for the local rank and the node's size, innermost first. Flux
/// names no size; Slurm's is a count per node.
const TRIED: [(Launcher, &str, &str); 7] = [
    (Launcher::Torchrun, "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    (
        Launcher::OpenMpi,
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    (Launcher::Pals, "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE"),
    (Launcher::Hydra, "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    (Launcher::Flux, "FLUX_TASK_LOCAL_ID", "FLUX_JOB_ID"),
    (
        Launcher::Slurm,
        "SLURM_LOCALID",
        "SLURM_STEP_TASKS_PER_NODE",
    ),
    (Launcher::Given, "--local-rank", "--local-size"),
];

impl Launcher {
    /// The launcher's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Launcher::Given => "--local-rank/--local-size",
            Launcher::Torchrun => "torchrun",
            Launcher::OpenMpi => "Open MPI",
            Launcher::Pals => "PALS",
            Launcher::Hydra => "Hydra (MPICH, Intel MPI)",
            Launcher::Flux => "Flux",
            Launcher::Slurm => "srun",
        }
    }

    /// The variable (or option) that names the local rank.
    pub fn rank_variable(self) -> &'static str {
        TRIED
            .iter()
            .find(|t| t.0 == self)
            .map_or("--local-rank", |t| t.1)
    }
}

/// A process's place among its node's ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalRank {
    /// Its rank among the node's ranks, from 0.
    pub rank: u32,
    /// How many ranks the node runs.
    pub size: u32,
    /// Whose variables said so.
    pub launcher: Launcher,
}

/// Why a process cannot tell its rank on its node.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum RankError {
    /// No launcher's variables are set.
    #[error("cannot tell this process's rank on its node: none of {tried} is set (is it started by a launcher?); give --local-rank R --local-size N")]
    Unknown {
        /// The variables looked for.
        tried: String,
    },
    /// A launcher's rank is set but not its size.
    #[error("{rank_var} is set ({launcher}) but {size_var} is not: lama exec needs the number of ranks on the node too; give --local-rank R --local-size N")]
    NoSize {
        /// The launcher.
        launcher: &'static str,
        /// Its rank variable.
        rank_var: &'static str,
        /// Its missing size variable.
        size_var: &'static str,
    },
    /// A value is not a number in range.
    #[error("{name}='{value}' is not valid: {why}")]
    Value {
        /// The variable or option.
        name: String,
        /// Its value, quoted for the message.
        value: String,
        /// What would be valid.
        why: String,
    },
    /// The rank is not below the size.
    #[error("{rank_var}={rank} is not below the node's {size} rank(s) ({size_var}): the launcher's variables disagree")]
    Outside {
        /// The rank's variable.
        rank_var: &'static str,
        /// The rank.
        rank: u32,
        /// Where the size came from.
        size_var: String,
        /// The size.
        size: u32,
    },
}

/// Most ranks one node may run (as many as a node may have CPUs).
pub const MAX_LOCAL_SIZE: u32 = 1 << 20;

fn number(name: &str, value: &str) -> Result<u32, RankError> {
    value
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|&n| n < MAX_LOCAL_SIZE)
        .ok_or_else(|| RankError::Value {
            name: name.to_string(),
            value: crate::quote::cut(value).into_owned(),
            why: format!("a whole number below {MAX_LOCAL_SIZE} is needed"),
        })
}

/// This process's rank on its node, from `given` (`--local-rank`, `--local-size`) or the first
/// launcher whose rank variable `get` finds. Slurm and Flux name no size of their own:
/// `node_size` works it out from the launcher and its size variable's value (Slurm's counts per
/// node at `SLURM_NODEID`; Flux's task map, asked for by `FLUX_JOB_ID`), or says why not.
pub fn local_rank(
    get: impl Fn(&str) -> Option<String>,
    given: Option<(u32, u32)>,
    node_size: impl FnOnce(Launcher, &str) -> Result<u32, String>,
) -> Result<LocalRank, RankError> {
    let (launcher, rank_var, size_var, rank, size) = match given {
        Some((rank, size)) => (
            Launcher::Given,
            "--local-rank",
            "--local-size".into(),
            rank,
            size,
        ),
        None => {
            let Some(&(launcher, rank_var, size_var)) = TRIED.iter().find(|t| get(t.1).is_some())
            else {
                let tried: Vec<&str> = TRIED[..6].iter().map(|t| t.1).collect();
                return Err(RankError::Unknown {
                    tried: tried.join(", "),
                });
            };
            let rank = number(rank_var, &get(rank_var).unwrap_or_default())?;
            let missing = RankError::NoSize {
                launcher: launcher.name(),
                rank_var,
                size_var,
            };
            let value = get(size_var).ok_or(missing)?;
            let (size, from) = match launcher {
                Launcher::Slurm | Launcher::Flux => {
                    let size = node_size(launcher, &value).map_err(|why| RankError::Value {
                        name: size_var.into(),
                        value: crate::quote::cut(&value).into_owned(),
                        why,
                    })?;
                    (size, format!("the node's tasks in {size_var}"))
                }
                _ => (number(size_var, &value)?, size_var.to_string()),
            };
            (launcher, rank_var, from, rank, size)
        }
    };
    if rank >= size {
        return Err(RankError::Outside {
            rank_var,
            rank,
            size_var,
            size,
        });
    }
    Ok(LocalRank {
        rank,
        size,
        launcher,
    })
}

/// What the node's ranks of one launch share and no other launch does, so that they can find
/// each other on the node: the launcher's own job id where it exports one, else `None` (the
/// caller then uses the parent process, which Hydra's proxy and `--local-rank` leave).
pub fn launch_key(get: impl Fn(&str) -> Option<String>, launcher: Launcher) -> Option<String> {
    let one = |k: &str| get(k).map(|v| format!("{k}={v}"));
    match launcher {
        Launcher::Torchrun => Some(format!(
            "{}.{}",
            one("TORCHELASTIC_RUN_ID")?,
            get("TORCHELASTIC_RESTART_COUNT").unwrap_or_default()
        )),
        Launcher::OpenMpi => one("PMIX_NAMESPACE").or_else(|| one("OMPI_MCA_ess_base_jobid")),
        Launcher::Pals => one("PALS_APID"),
        Launcher::Flux => one("FLUX_JOB_ID"),
        Launcher::Slurm => Some(format!(
            "{}.{}",
            one("SLURM_JOB_ID")?,
            get("SLURM_STEP_ID")?
        )),
        Launcher::Hydra | Launcher::Given => None,
    }
}

/// The task map of a `torchrun` launch, when its variables say every node runs
/// `LOCAL_WORLD_SIZE` workers in rank blocks (`RANK = GROUP_RANK * LOCAL_WORLD_SIZE +
/// LOCAL_RANK`, `WORLD_SIZE` a multiple): the node of each rank.
pub fn torchrun_nodes(get: impl Fn(&str) -> Option<String>, local: &LocalRank) -> Option<Vec<u32>> {
    let n = |k: &str| get(k)?.trim().parse::<u64>().ok();
    let (world, group, rank) = (n("WORLD_SIZE")?, n("GROUP_RANK")?, n("RANK")?);
    let size = u64::from(local.size);
    let fits = world % size == 0
        && world <= u64::from(MAX_LOCAL_SIZE)
        && rank == group * size + u64::from(local.rank);
    fits.then(|| (0..world).map(|r| (r / size) as u32).collect())
}
