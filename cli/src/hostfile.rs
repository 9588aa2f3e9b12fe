//! `lama hostfile`.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use lama::slurm::hostfile::{
    map, parse_host_list, parse_layout, Allocation, HostfileError, Mapper,
};
use serde_json::json;

use crate::plan::{print_json_error, Format};

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum MapperArg {
    /// One task per entry, in order (slots= ignored).
    Seq,
    /// Fill each entry's slots in order (the default).
    Rr,
}

/// Expand a layout with relative host indexes (+n#, +e, +e:#) into one host per task, the
/// SLURM_HOSTFILE of `srun -m arbitrary`.
#[derive(Args)]
pub struct HostfileArgs {
    /// Layout file: one entry per line (HOST, +n#, +e or +e:#, optionally followed by slots=N); - reads stdin.
    #[arg(
        value_name = "LAYOUT_FILE",
        required_unless_present = "host",
        conflicts_with = "host"
    )]
    layout: Option<PathBuf>,
    /// The layout on the command line, entries separated by commas, e.g. "+n2 slots=2,+e:1".
    #[arg(long, value_name = "LIST")]
    host: Option<String>,
    /// seq: one task per entry; rr: fill each entry's slots.
    #[arg(long, value_enum, default_value_t = MapperArg::Rr)]
    mapper: MapperArg,
    /// Number of tasks (default: one per entry with seq, every slot of one round with rr).
    #[arg(long, value_name = "N")]
    np: Option<usize>,
    /// Allow more tasks on a host than its slots (rr goes round the entries again).
    #[arg(long)]
    oversubscribe: bool,
    /// Allocation file: "HOST [slots=N]" lines (default: the Slurm job's nodes and CPUs).
    #[arg(long, value_name = "FILE", conflicts_with = "nodelist")]
    allocation: Option<PathBuf>,
    /// Allocation as a Slurm host list, e.g. n[1-4].
    #[arg(long, value_name = "HOSTLIST")]
    nodelist: Option<String>,
    /// Slots per --nodelist host in Slurm's form, e.g. 4(x3),2, or one count for all (default 1).
    #[arg(long, value_name = "SPEC", requires = "nodelist")]
    slots: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

fn read(path: &std::path::Path) -> Result<String, String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .take(lama::limits::MAX_HOSTFILE_BYTES)
            .read_to_string(&mut s)
            .map_err(|e| format!("cannot read the layout from stdin: {e}"))?;
        return Ok(s);
    }
    lama::limits::read_text(path, lama::limits::MAX_HOSTFILE_BYTES)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn allocation(a: &HostfileArgs) -> Result<Allocation, HostfileError> {
    match (&a.allocation, &a.nodelist) {
        (Some(f), _) => {
            let text = read(f).map_err(HostfileError::Allocation)?;
            Allocation::parse_hostfile(&text).map_err(|e| match e {
                HostfileError::Allocation(m) => {
                    HostfileError::Allocation(format!("{}: {m}", f.display()))
                }
                e => e,
            })
        }
        (None, Some(list)) => Allocation::from_nodelist(list, a.slots.as_deref()),
        (None, None) => Allocation::from_slurm(crate::env),
    }
}

fn hosts(a: &HostfileArgs) -> Result<Vec<String>, (&'static str, String)> {
    let fail = |e: HostfileError| (e.kind(), e.to_string());
    let alloc = allocation(a).map_err(fail)?;
    let entries = match (&a.host, &a.layout) {
        (Some(list), _) => parse_host_list(list),
        (None, Some(path)) => parse_layout(&read(path).map_err(|e| ("invalid-layout", e))?)
            .map_err(|e| match e {
                HostfileError::Malformed { at, reason } => HostfileError::Malformed {
                    at: format!("{} {at}", path.display()),
                    reason,
                },
                e => e,
            }),
        (None, None) => return Err(("invalid-option", "give a layout file or --host".into())),
    }
    .map_err(fail)?;
    if a.np == Some(0) {
        return Err(("invalid-option", "--np must be at least 1".into()));
    }
    let mapper = match a.mapper {
        MapperArg::Seq => Mapper::Seq,
        MapperArg::Rr => Mapper::RoundRobin,
    };
    let nodes = map(&alloc, &entries, mapper, a.np, a.oversubscribe).map_err(fail)?;
    Ok(nodes
        .into_iter()
        .map(|n| alloc.hosts()[n].name.clone())
        .collect())
}

pub fn run(a: HostfileArgs) -> ExitCode {
    match hosts(&a) {
        Ok(h) => {
            match a.format {
                Format::Json => println!("{}", json!({ "hosts": h })),
                Format::Text => h.iter().for_each(|n| println!("{n}")),
            }
            ExitCode::SUCCESS
        }
        Err((kind, message)) => {
            if a.format == Format::Json {
                print_json_error(kind, &message, None);
            }
            eprintln!("lama hostfile: {message}");
            ExitCode::from(if kind == "unsatisfiable" { 1 } else { 2 })
        }
    }
}
