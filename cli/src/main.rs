//! `lama`: preview LAMA placements and convert task maps.

// Binding the calling process, shared with the plugins; lama exec uses part of it.
#[allow(dead_code)]
#[path = "../../spank/src/affinity.rs"]
mod affinity;
mod check;
mod examples;
mod exec;
mod explain;
mod generate;
mod hostfile;
mod oci;
mod plan;
mod svg;
mod taskmap;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Topology-aware task placement for Slurm (LAMA).
#[derive(Parser)]
#[command(name = "lama", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// One line of someone else's text for a message: control characters escaped, cut if long.
fn quote_line(s: &str) -> String {
    lama::quote::cut(s).into_owned()
}

/// An environment variable's value; unset and empty are alike (as Slurm's own tools treat them).
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[derive(Subcommand)]
enum Cmd {
    /// Preview a whole-job placement on given or real topologies.
    Plan(Box<plan::PlanArgs>),
    /// Say in plain words what a placement request means, then show it on a node (lama plan's
    /// options; default node: this machine).
    Explain(Box<explain::ExplainArgs>),
    /// Run a command as its node's rank under any launcher (mpirun, mpiexec, torchrun, PALS,
    /// Flux or srun without the plugin): placed as the plugin would, bound, then run.
    Exec(Box<exec::ExecArgs>),
    /// Convert and query task maps (RFC 34, raw, PMI), or compute the current Slurm step's map.
    Taskmap(taskmap::TaskmapArgs),
    /// Expand relative host indexes (+n#, +e:#) into a SLURM_HOSTFILE for `srun -m arbitrary`.
    Hostfile(hostfile::HostfileArgs),
    /// Check a running job's placement: where its tasks and threads really run, and what is wrong.
    Check(check::CheckArgs),
    /// Run an OCI runtime's `run` for Slurm's oci.conf (RunTimeRun) so that each container keeps
    /// its task's CPUs (crun 1.25+ and runc 1.2.7+ reset them otherwise).
    OciRun(oci::OciRunArgs),
    /// Read one node's share of a running step (`lama check`'s probe runs this).
    #[command(hide = true)]
    CheckProbe(check::probe::ProbeArgs),
    /// Print this node's topology for `lama plan --from-slurm` (its probe step runs this).
    #[command(hide = true)]
    NodeReport(plan::slurm_job::NodeReportArgs),
    /// Write the manual pages and shell completions (for packagers).
    #[command(hide = true)]
    Generate(generate::GenerateArgs),
    /// Load an XML topology with hwloc and exit (lama plan runs this to learn why hwloc refused
    /// a file: hwloc says it on standard error).
    #[command(hide = true)]
    XmlReason {
        /// The file.
        file: std::path::PathBuf,
    },
}

fn main() -> ExitCode {
    // Open MPI's `-np N` is `--np N` here (clap knows no single-dash long option).
    let argv = std::env::args_os().map(|a| if a == "-np" { "--np".into() } else { a });
    let matches = match examples::with_examples(Cli::command()).try_get_matches_from(argv) {
        Ok(m) => m,
        Err(e) => {
            if e.kind() != clap::error::ErrorKind::DisplayHelp
                && e.kind() != clap::error::ErrorKind::DisplayVersion
            {
                let args: Vec<String> = std::env::args().collect();
                if args
                    .windows(2)
                    .any(|w| w[0] == "--format" && w[1] == "json")
                    || args.iter().any(|a| a == "--format=json")
                {
                    plan::print_json_error(
                        "invalid-option",
                        &e.to_string()
                            .lines()
                            .next()
                            .unwrap_or("invalid option")
                            .replace("error: ", ""),
                        None,
                    );
                    eprint!("{e}");
                    return ExitCode::from(2);
                }
            }
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    match cli.cmd {
        Cmd::Plan(a) => {
            let sub = matches.subcommand_matches("plan");
            plan::run(*a, sub)
        }
        Cmd::Explain(a) => {
            let sub = matches.subcommand_matches("explain");
            explain::main(*a, sub)
        }
        Cmd::Exec(a) => exec::run(*a),
        Cmd::Taskmap(a) => taskmap::run(a),
        Cmd::Hostfile(a) => hostfile::run(a),
        Cmd::Check(a) => check::run(a),
        Cmd::OciRun(a) => oci::run(a),
        Cmd::CheckProbe(a) => check::probe::run(a),
        Cmd::NodeReport(a) => plan::slurm_job::node_report(a),
        Cmd::XmlReason { file } => match lama::NodeTopology::from_xml_file(&file) {
            Ok(_) => ExitCode::SUCCESS,
            Err(_) => ExitCode::from(1),
        },
        Cmd::Generate(a) => generate::run(a, examples::with_examples(Cli::command())),
    }
}
