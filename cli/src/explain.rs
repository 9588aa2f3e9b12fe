//! `lama explain`: what a placement request means, in plain words, then the placement itself on
//! a node (`lama plan`'s text for the same options). Takes `lama plan`'s options.

use std::process::ExitCode;

use clap::ArgMatches;
use lama::spec::{Order, Request};
use lama::Level;

use crate::plan::{self, PlanArgs};

/// "core", "cores": a level's name and its plural.
fn plural(l: Level) -> String {
    match l {
        Level::Numa => "NUMA nodes".into(),
        Level::Hwthread => "hardware threads".into(),
        Level::L3 | Level::L2 | Level::L1 => format!("{}s", l.name()),
        _ => format!("{}s", l.name()),
    }
}

/// The expert level in words.
fn expert(r: &Request) -> Vec<String> {
    let mut out = Vec::new();
    let letters: String = r.map.iter().map(|l| l.token()).collect();
    out.push(format!(
        "Map {letters}: a counter over the levels {}, the leftmost turning fastest.",
        r.map
            .iter()
            .map(|l| l.name())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if let [first, second, ..] = r.map.as_slice() {
        out.push(format!(
            "Rank 0 goes to the first {}, rank 1 to the next {}, and so on; when every {} of the first {} has a rank, the next {} is used.",
            first.name(),
            first.name(),
            first.name(),
            second.name(),
            second.name()
        ));
    }
    out.push(if r.bind.level == Level::Node {
        "Binding 1n: each rank may run anywhere on its node (not bound).".into()
    } else if r.bind.width == 1 {
        format!(
            "Binding 1{}: each rank is bound to one {}.",
            r.bind.level.token(),
            r.bind.level.name()
        )
    } else {
        format!(
            "Binding {}{}: each rank is bound to {} neighbouring {}.",
            r.bind.width,
            r.bind.level.token(),
            r.bind.width,
            plural(r.bind.level)
        )
    });
    for lim in &r.mppr {
        out.push(format!(
            "MPPR {}:{}: at most {} rank(s) per {}; a position that would exceed it is skipped.",
            lim.count,
            lim.level.token(),
            lim.count,
            lim.level.name()
        ));
    }
    out.push(match r.order {
        Order::Natural => "Order n: ranks are numbered in the order the map places them.".into(),
        Order::Sequential => {
            "Order s: ranks are renumbered node by node in hardware order (rank r on the r-th place).".into()
        }
    });
    out
}

/// The simple level (Open MPI's words) in plain words, its defaults spelt out.
fn simple(r: &Request, np: usize) -> Vec<String> {
    let Some(o) = &r.open_mpi else {
        return Vec::new();
    };
    let Ok(res) = o.resolve(np) else {
        return Vec::new();
    };
    use lama::spec::open_mpi::{Mapping, Ranking};
    let mut out = vec![format!(
        "Open MPI 5's rules: {} (every default spelt out).",
        res.describe()
    )];
    out.push(match res.map {
        Mapping::Slot => "Mapping by slot: each node's slots (one per core) in turn, node after node.".into(),
        Mapping::Node => "Mapping by node: one rank per node in turn, round robin.".into(),
        Mapping::Object(obj) if res.span => format!(
            "Mapping by {}, spanned: one rank per {} across every node's {}s in turn.",
            obj.name(), obj.name(), obj.name()
        ),
        Mapping::Object(obj) => format!(
            "Mapping by {}: one rank per {} in turn, a node's slots (one per core) filled before the next node.",
            obj.name(), obj.name()
        ),
        Mapping::Ppr(k, obj) => format!("ppr:{k}:{}: {k} rank(s) on every {}.", obj.name(), obj.name()),
    });
    out.push(match res.bind {
        None => "Not bound: each rank may run on every CPU of its node.".into(),
        Some(_) if res.pe > 1 => format!(
            "Bound to {} {} each (pe={}), never across two packages.",
            res.pe,
            if res.hwt { "hardware threads" } else { "cores" },
            res.pe
        ),
        Some(b) => format!(
            "Each rank is bound to the first {} with a free core inside what it was mapped to.",
            b.name()
        ),
    });
    out.push(match res.rank {
        Ranking::Slot => {
            "Ranks numbered by slot: each node's ranks in mapping order, node after node.".into()
        }
        Ranking::Node => "Ranks numbered by node: one per node in turn.".into(),
        Ranking::Fill => {
            "Ranks numbered by fill: every rank of the first object, then the next.".into()
        }
        Ranking::Span => {
            "Ranks numbered by span: one per object across every node, round after round.".into()
        }
    });
    out
}

/// `lama explain`: lama plan's options, or `--srun` alone.
#[derive(clap::Args)]
pub struct ExplainArgs {
    /// Print the plugin's short guide to its srun options instead (what `srun --lama-help`
    /// prints)
    #[arg(long, exclusive = true)]
    srun: bool,
    #[command(flatten)]
    plan: PlanArgs,
}

/// The guide, or the words then the plan.
pub fn main(a: ExplainArgs, m: Option<&ArgMatches>) -> ExitCode {
    if a.srun {
        print!("{}", lama::plugin::guide());
        return ExitCode::SUCCESS;
    }
    run(a.plan, m)
}

/// Prints the words, then the plan.
pub fn run(a: PlanArgs, m: Option<&ArgMatches>) -> ExitCode {
    let words = if a.is_policy() {
        vec![
            "The automatic policy: each node's tasks spread over its NUMA domains, in proportion to the step's GPUs under each (or its cores), on whole cores of their own; each task gets its domain's GPUs, and OpenMP threads on its cores (-c or --threads workers).".to_string(),
            "A GPU job with a task for every package keeps each task in its GPU's package. docs/policy.md shows it on real machines.".to_string(),
        ]
    } else {
        match plan::request(&a) {
            Ok(r) if r.open_mpi.is_some() => simple(&r, a.np_or(3)),
            Ok(r) => expert(&r),
            Err(_) => Vec::new(),
        }
    };
    for w in &words {
        println!("{w}");
    }
    if !words.is_empty() {
        println!();
    }
    plan::run(a, m)
}
