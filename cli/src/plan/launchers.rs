//! `lama plan`'s launcher formats: Open MPI rankfiles, MPICH's and Intel MPI's mpiexec
//! arguments, and the srun and PALS scripts, for ranks placed by a map or the policy.

use lama::slurm::launcher::{hydra_args, impi_args, rankfile, OpenMpi, RankPlace};
use lama::{NodeTopology, Plan};

use super::PlanFormat;

/// An Open MPI rankfile, or MPICH's or Intel MPI's mpiexec arguments, for the plan.
pub(super) fn launcher(
    format: PlanFormat,
    p: &Plan,
    nodes: &[&NodeTopology],
    hosts: &[String],
    usable: &[Vec<u32>],
) -> Result<String, String> {
    let ranks: Vec<RankPlace> = (0..p.len())
        .map(|r| RankPlace {
            node: p.placements()[r].node as usize,
            cpus: p.cpus(r, nodes),
        })
        .collect();
    launcher_text(format, &ranks, hosts, usable)
}

/// A launcher format's text for ranks placed by any means.
pub(super) fn launcher_text(
    format: PlanFormat,
    ranks: &[RankPlace],
    hosts: &[String],
    usable: &[Vec<u32>],
) -> Result<String, String> {
    let text = match format {
        PlanFormat::Rankfile => rankfile(ranks, hosts, installed_open_mpi()?, usable),
        PlanFormat::RankfileOmpi4 => rankfile(ranks, hosts, OpenMpi::V4, usable),
        PlanFormat::RankfileOmpi5 => rankfile(ranks, hosts, OpenMpi::V5, usable),
        PlanFormat::Impi => impi_args(ranks, hosts),
        _ => hydra_args(ranks, hosts),
    };
    text.map_err(|e| e.to_string())
}

/// srun's or PALS' script for ranks placed by any means.
pub(super) fn binding_script(
    format: PlanFormat,
    ranks: &[lama::slurm::launcher::RankBinding],
    hosts: &[String],
) -> Result<String, String> {
    let text = match format {
        PlanFormat::Pals => lama::slurm::launcher::pals_script(ranks, hosts),
        _ => lama::slurm::launcher::srun_script(ranks, hosts),
    };
    text.map_err(|e| e.to_string())
}

/// The Open MPI release of the `mpirun` first in PATH, from its `--version`.
fn installed_open_mpi() -> Result<OpenMpi, String> {
    let say = "--format rankfile writes for the Open MPI whose mpirun is first in PATH";
    let pick = "give --format rankfile-ompi4 or --format rankfile-ompi5";
    let out = std::process::Command::new("mpirun")
        .arg("--version")
        .output()
        .map_err(|e| format!("{say}, but `mpirun --version` cannot run ({e}): {pick}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    OpenMpi::from_version(&text).ok_or_else(|| {
        format!(
            "{say}, but `mpirun --version` names no Open MPI release ({}): {pick}",
            lama::quote::cut(text.lines().next().unwrap_or("").trim())
        )
    })
}
