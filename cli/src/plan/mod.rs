//! `lama plan`: reading the topologies, the request and the job's hosts, then planning.
//! How a plan is shown (text, JSON, pictures) is in [`output`].

mod auto;
mod bindings;
mod launchers;
mod memory;
mod nodes;
use nodes::{the_nodes, Model};
mod output;
pub mod slurm_job;

use output::{drawings, to_json, to_text, Extra};

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgMatches, Args, ValueEnum};
use lama::locality::{choose, Weights};
use lama::openmp::{plan_threads, ProcBind, ThreadPlan, Threads};
use lama::slurm::hostfile::slurm_hostfile;
use lama::spec::{Expert, Request, Simple};

use lama::{plan, NodeTopology, Plan};
use serde_json::json;

use crate::svg;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// `lama plan`'s output formats.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum PlanFormat {
    Text,
    Json,
    /// A picture of each distinct node shape, PUs coloured by rank.
    Svg,
    /// An Open MPI rankfile for the `mpirun` first in PATH (its `--version` says 4.x or 5.x);
    /// needs the job's host names.
    Rankfile,
    /// An Open MPI 4.x rankfile: OS CPU numbers (`mpirun --rankfile FILE --mca
    /// rmaps_rank_file_physical 1 --use-hwthread-cpus`).
    RankfileOmpi4,
    /// An Open MPI 5.x rankfile: hardware threads counted in logical order among the CPUs the
    /// job may use on each node (`mpirun --map-by rankfile:file=FILE --use-hwthread-cpus`).
    RankfileOmpi5,
    /// MPICH `mpiexec` arguments: `-hosts H:N,... -bind-to user:CPUS,...`; needs the job's host
    /// names, and fails when Hydra cannot express the plan.
    Hydra,
    /// Intel MPI `mpiexec.hydra` arguments: `-bootstrap slurm -hosts H,... -ppn N -cpu-bind
    /// list:CPUS:...`; needs the job's host names, and fails when Intel MPI cannot express the plan.
    Impi,
    /// A script of srun lines binding by srun's own options (`--cpu-bind=mask_cpu:`,
    /// `--gpu-bind=map_gpu:`, `--mem-bind=map_mem:`), one step per node shape, for clusters
    /// without the plugin: `sh FILE PROGRAM`; needs the job's host names.
    Srun,
    /// A script running Cray PALS `mpiexec --ppn N --cpu-bind list:... --mem-bind list:...`,
    /// each rank's GPU variable set by PALS_LOCAL_RANKID: `sh FILE PROGRAM`; needs the job's
    /// host names.
    Pals,
}

impl PlanFormat {
    /// Whether the output is for an MPI launcher (and needs host names).
    fn is_launcher(self) -> bool {
        matches!(
            self,
            PlanFormat::Rankfile
                | PlanFormat::RankfileOmpi4
                | PlanFormat::RankfileOmpi5
                | PlanFormat::Hydra
                | PlanFormat::Impi
                | PlanFormat::Srun
                | PlanFormat::Pals
        )
    }
}

impl PlanFormat {
    /// How errors are written: JSON for JSON output, text otherwise.
    fn errors(self) -> Format {
        if self == PlanFormat::Json {
            Format::Json
        } else {
            Format::Text
        }
    }
}

/// Preview where every rank of a job goes.
#[derive(Args)]
pub struct PlanArgs {
    /// Plan for the running Slurm job (inside salloc or sbatch): its nodes, the CPUs Slurm gave
    /// it on each, each node's own topology (read there by one srun task per node), and
    /// SLURM_NTASKS ranks unless --np says otherwise.
    #[arg(long, conflicts_with_all = ["topology", "synthetic", "this_machine", "nodes", "restrict", "nodelist"])]
    from_slurm: bool,
    /// An hwloc XML file for the next node (repeat for more nodes, in node order).
    #[arg(long, value_name = "FILE")]
    topology: Vec<PathBuf>,
    /// An hwloc synthetic description for the next node, e.g. "pack:2 core:4 pu:2".
    #[arg(long, value_name = "DESC")]
    synthetic: Vec<String>,
    /// This machine as the next node (the default when no node is given).
    #[arg(long)]
    this_machine: bool,
    /// Number of nodes when a single topology is given: that many identical nodes.
    #[arg(long, value_name = "N")]
    nodes: Option<usize>,
    /// Number of processes, also -n or -np as mpirun spells it (default: one full sweep of a map; with
    /// the simple level, one per slot, or K per object with ppr:K:object).
    #[arg(long, short = 'n', value_name = "N")]
    np: Option<usize>,
    /// Place with the automatic policy, as --lama-policy=auto does: each node's ranks over its
    /// NUMA domains by GPUs (or cores), whole cores, GPUs shared out evenly, OpenMP threads
    /// (--threads N: N workers per rank). Ranks go to nodes in Slurm's block order; every GPU
    /// of a node counts as the job's.
    #[arg(long, value_name = "auto", value_parser = ["auto"],
          conflicts_with_all = ["map", "bind", "mppr", "order", "map_by", "bind_to", "rank_by", "gpus", "nics", "slurm_hostfile"])]
    policy: Option<String>,
    /// Text: every line whole, however long (default: lines fit 100 columns, long lists are
    /// shortened and pictures wrapped).
    #[arg(long)]
    pub wide: bool,
    /// The policy was chosen because no placement option was given (said in the output).
    #[arg(skip)]
    pub default_policy: bool,
    /// With --policy auto: the GPUs the job has on each node, as indexes among the node's GPUs
    /// (0,1 or 0-3), or none (default: every GPU of the node).
    #[arg(long, value_name = "LIST|none", requires = "policy")]
    step_gpus: Option<String>,
    /// With --policy auto: CPUs per rank as srun's -c gives them, the workers of each rank when
    /// --threads names no number (with --from-slurm: SLURM_CPUS_PER_TASK, as the plugin reads it).
    #[arg(long, value_name = "N", requires = "policy", value_parser = clap::value_parser!(u32).range(1..=4096))]
    cpus_per_task: Option<u32>,
    /// Expert map, e.g. csbnh (leftmost token changes fastest).
    #[arg(long, value_name = "STR")]
    map: Option<String>,
    /// Expert binding <width><level>, e.g. 1c, 2L2.
    #[arg(long, value_name = "STR")]
    bind: Option<String>,
    /// Expert MPPR, e.g. 1:c,2:s.
    #[arg(long, value_name = "STR")]
    mppr: Option<String>,
    /// Expert rank order: n (natural) or s (sequential).
    #[arg(long, value_name = "n|s")]
    order: Option<String>,
    /// Open MPI 5's --map-by: slot, node, package (socket), numa, l3cache, l2cache, l1cache, core,
    /// hwthread, ppr:K:object; with :pe=K, :span, :hwtcpus, :oversubscribe (docs/open-mpi.md).
    #[arg(long, value_name = "X")]
    map_by: Option<String>,
    /// Open MPI 5's --bind-to: none, package (socket), numa, l3cache, l2cache, l1cache, core,
    /// hwthread; with :overload-allowed.
    #[arg(long, value_name = "Y")]
    bind_to: Option<String>,
    /// Open MPI 5's --rank-by: slot, node, fill, span.
    #[arg(long, value_name = "Z")]
    rank_by: Option<String>,
    /// Keep sweeping past MPPR limits until every process is placed.
    #[arg(long)]
    oversubscribe: bool,
    /// Only these CPUs (hwloc cpulist, OS indexes) on every node, e.g. 0-3,8-11.
    #[arg(long, value_name = "CPULIST")]
    restrict: Option<String>,
    /// Give each rank its N nearest NICs (OpenFabrics devices when the node has any).
    #[arg(long, value_name = "N", default_value_t = 0)]
    nics: usize,
    /// Give each rank its N nearest GPUs or other accelerators.
    #[arg(long, value_name = "N", default_value_t = 0)]
    gpus: usize,
    /// Device weights file (OBJECT ----W---> DEVICE lines) applied on every node.
    #[arg(long, value_name = "FILE")]
    device_weights: Option<PathBuf>,
    /// OpenMP threads per rank, each on a place of the rank's binding: a number, or auto (one
    /// per core of the binding).
    #[arg(long, value_name = "N|auto")]
    threads: Option<String>,
    /// With --threads: places spread over the binding (default) or packed (close).
    #[arg(long, value_name = "spread|close", requires = "threads")]
    omp_bind: Option<String>,
    /// Each rank's memory binding, as --lama-mem gives it: local (its default-memory NUMA
    /// nodes), hbm (its nearest high-bandwidth ones), prefer-hbm (those, preferred) or
    /// interleave (its default-memory nodes, pages spread).
    #[arg(long, value_name = "MODE", value_parser = ["local", "hbm", "prefer-hbm", "interleave"])]
    mem: Option<String>,
    /// Also write every rank's host, one per line, for `SLURM_HOSTFILE=FILE srun -m arbitrary`.
    #[arg(long, value_name = "FILE")]
    slurm_hostfile: Option<PathBuf>,
    /// The job's hosts in node order for --slurm-hostfile and the MPI launcher formats
    /// (default: SLURM_JOB_NODELIST).
    #[arg(long, value_name = "HOSTLIST")]
    nodelist: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = PlanFormat::Text)]
    format: PlanFormat,
    /// Write the output to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// The version of lama's JSON (plans, errors, `lama check`): raised when a field changes meaning
/// or goes away, not when one is added.
pub const SCHEMA: u32 = 1;

/// Prints a JSON error object.
pub fn print_json_error(kind: &str, message: &str, counts: Option<(usize, usize)>) {
    let mut e = json!({"kind": kind, "message": message});
    if let Some((placed, requested)) = counts {
        e["placed"] = json!(placed);
        e["requested"] = json!(requested);
    }
    println!("{}", json!({ "schema": SCHEMA, "error": e }));
}

fn fail(format: Format, kind: &str, message: &str, counts: Option<(usize, usize)>) -> ExitCode {
    // The library words options as the plugin's (--lama-bind); lama plan's are --bind.
    let message = &lama::exec::exec_words(message);
    if format == Format::Json {
        print_json_error(kind, message, counts);
    }
    eprintln!("lama plan: {message}");
    // lama's one convention (docs/reference.md): 1 the plan cannot be made, 2 usage, 3 no job
    // or Slurm to ask.
    ExitCode::from(match kind {
        "invalid-option" => 2,
        "slurm" => 3,
        _ => 1,
    })
}

impl PlanArgs {
    /// Whether the automatic policy places this plan: asked for, or no placement option given
    /// (lama's one default, as lama exec's; devices asked for by count need a map).
    pub fn is_policy(&self) -> bool {
        let chosen = self.map.is_some()
            || self.bind.is_some()
            || self.mppr.is_some()
            || self.order.is_some()
            || self.map_by.is_some()
            || self.bind_to.is_some()
            || self.rank_by.is_some();
        self.policy.is_some()
            || (!chosen && self.gpus == 0 && self.nics == 0 && self.slurm_hostfile.is_none())
    }
    /// `--np`, else `default`.
    pub fn np_or(&self, default: usize) -> usize {
        self.np.unwrap_or(default)
    }
}

pub fn request(a: &PlanArgs) -> Result<Request, String> {
    let expert = a.map.is_some() || a.bind.is_some() || a.mppr.is_some() || a.order.is_some();
    let simple = a.map_by.is_some() || a.bind_to.is_some() || a.rank_by.is_some();
    if expert && simple {
        return Err("use either the expert options (--map, --bind, --mppr, --order) or the simple ones (--map-by, --bind-to, --rank-by), not both".into());
    }
    let r = if simple {
        let workers = a
            .threads
            .as_deref()
            .and_then(|t| t.trim().parse::<u32>().ok());
        Request::simple(
            &Simple {
                map_by: a.map_by.as_deref(),
                bind_to: a.bind_to.as_deref(),
                rank_by: a.rank_by.as_deref(),
            },
            a.np,
            a.oversubscribe,
        )
        .and_then(|r| r.with_workers(workers))
    } else {
        Request::expert(
            &Expert {
                map: a.map.as_deref(),
                bind: a.bind.as_deref(),
                mppr: a.mppr.as_deref(),
                order: a.order.as_deref(),
            },
            a.np,
            a.oversubscribe,
        )
    };
    r.map_err(|e| e.to_string())
}

/// A rank's NIC and GPU names.
type RankDevices = (Vec<String>, Vec<String>);

/// The ranks of each node, ascending.
fn ranks_by_node(p: &Plan, nodes: usize) -> Vec<Vec<usize>> {
    let mut by_node = vec![Vec::new(); nodes];
    for (r, x) in p.placements().iter().enumerate() {
        by_node[x.node as usize].push(r);
    }
    by_node
}

/// Each rank's NICs and GPUs (device names), chosen node by node among the node's ranks in rank
/// order, as the plugin does.
fn rank_devices(
    a: &PlanArgs,
    models: &[Model],
    p: &Plan,
    nodes: &[&NodeTopology],
    per_node: &[usize],
) -> Result<Vec<RankDevices>, String> {
    let weights_text = match &a.device_weights {
        Some(f) => Some(
            lama::limits::read_text(f, lama::limits::MAX_WEIGHTS_BYTES)
                .map_err(|e| format!("cannot read {}: {e}", f.display()))?,
        ),
        None => None,
    };
    // Weights are parsed once per node model, against that model's devices.
    let mut weights: Vec<Option<Weights>> = vec![None; models.len()];
    let mut out = vec![(Vec::new(), Vec::new()); p.len()];
    for (n, ranks) in ranks_by_node(p, nodes.len()).into_iter().enumerate() {
        let model = per_node[n];
        let loc = models[model].1.as_ref().ok_or_else(|| {
            format!(
                "node {n} ({}) is synthetic and has no devices",
                nodes[n].name()
            )
        })?;
        if let (Some(t), None) = (&weights_text, &weights[model]) {
            weights[model] = Some(
                Weights::parse(t, loc).map_err(|e| format!("--device-weights: node {n}: {e}"))?,
            );
        }
        let cpus: Vec<Vec<u32>> = ranks.iter().map(|&r| p.cpus(r, nodes)).collect();
        let picks = choose(loc, &cpus, a.nics, a.gpus, None, weights[model].as_ref())
            .map_err(|e| format!("node {n} ({}): {e}", nodes[n].name()))?;
        let name = |d: &usize| loc.devices()[*d].name.clone();
        for (&r, t) in ranks.iter().zip(picks) {
            out[r] = (
                t.nics.iter().map(name).collect(),
                t.gpus.iter().map(name).collect(),
            );
        }
    }
    Ok(out)
}

pub fn run(mut a: PlanArgs, m: Option<&ArgMatches>) -> ExitCode {
    if a.from_slurm && a.np.is_none() {
        a.np = crate::env("SLURM_NTASKS").and_then(|n| n.trim().parse().ok());
    }
    // The plugin's policy counts srun's -c as each task's workers: so does the plan of the job.
    if a.from_slurm && a.policy.is_some() && a.cpus_per_task.is_none() {
        a.cpus_per_task = crate::env("SLURM_CPUS_PER_TASK").and_then(|n| n.trim().parse().ok());
    }
    // No placement option: lama's one default, the automatic policy, as lama exec and a site's
    // policy=auto place (devices asked for by count need a map: those keep the expert default
    // map).
    if a.policy.is_none() && a.is_policy() {
        a.policy = Some("auto".into());
        a.default_policy = true;
    }
    let req = match request(&a) {
        Ok(r) => r,
        Err(e) => return fail(a.format.errors(), "invalid-option", &e, None),
    };
    let threads = match thread_request(&a) {
        Ok(t) => t,
        Err(e) => return fail(a.format.errors(), "invalid-option", &e, None),
    };
    let devices_wanted =
        a.nics > 0 || a.gpus > 0 || a.device_weights.is_some() || a.policy.is_some();
    // --mem reads each node's NUMA nodes from the same load as its devices.
    let (hosts, per_node, models, usable) =
        match the_nodes(&a, m, devices_wanted || a.mem.is_some()) {
            Ok(n) => n,
            Err((kind, e)) => return fail(a.format.errors(), kind, &e, None),
        };
    if a.policy.is_some() {
        let hosts = hosts.unwrap_or_default();
        let usable: Vec<Vec<u32>> = per_node.iter().map(|&i| usable[i].clone()).collect();
        return match auto::render(&a, &models, &per_node, threads, (&hosts, &usable)) {
            Ok(text) => write_out(&a, text),
            Err((kind, e)) => fail(a.format.errors(), &kind, &e, None),
        };
    }
    let nodes: Vec<&NodeTopology> = per_node.iter().map(|&i| &models[i].0).collect();
    // A machine without Core objects: "core" is a hardware thread there (said once).
    let uses_cores = req.uses_level(lama::level::Level::Core);
    if let Some(n) = nodes
        .iter()
        .find(|n| n.threads_as_cores())
        .filter(|_| uses_cores)
    {
        eprintln!(
            "lama plan: note: {} has no cores in hwloc's description: each hardware thread counts as a core",
            n.name()
        );
    }
    let p = match plan(&nodes, &req) {
        Ok(p) => p,
        Err(e) => {
            let counts = match &e {
                lama::PlacementError::Oversubscribed {
                    placed, requested, ..
                } => Some((*placed, *requested)),
                _ => None,
            };
            return fail(a.format.errors(), e.kind(), &e.to_string(), counts);
        }
    };
    if let (Some(path), Some(hosts)) = (&a.slurm_hostfile, &hosts) {
        let written = slurm_hostfile(hosts, &p.node_of_ranks())
            .map_err(|e| e.to_string())
            .and_then(|text| {
                std::fs::write(path, text)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))
            });
        if let Err(e) = written {
            return fail(a.format.errors(), "io", &e, None);
        }
    }
    let devices = if devices_wanted {
        match rank_devices(&a, &models, &p, &nodes, &per_node) {
            Ok(d) => Some(d),
            Err(e) => return fail(a.format.errors(), "devices", &e, None),
        }
    } else {
        None
    };
    let places = match threads {
        Some((t, b)) => match (0..p.len())
            .map(|r| {
                let node = nodes[p.placements()[r].node as usize];
                plan_threads(node, r as u32, &p.cpus(r, &nodes), t, b)
            })
            .collect::<Result<Vec<ThreadPlan>, _>>()
        {
            Ok(v) => Some(v),
            Err(e) => return fail(a.format.errors(), "threads", &e.to_string(), None),
        },
        None => None,
    };
    let mems = match &a.mem {
        Some(mode) => {
            let cpus: Vec<Vec<u32>> = (0..p.len()).map(|r| p.cpus(r, &nodes)).collect();
            let ranks = (0..p.len()).map(|r| {
                let n = p.placements()[r].node as usize;
                (n, per_node[n], cpus[r].as_slice())
            });
            match memory::rank_memory(mode, &models, ranks) {
                Ok(m) => Some(m),
                Err(e) => return fail(a.format.errors(), "memory", &e, None),
            }
        }
        None => None,
    };
    let extra = Extra {
        wide: a.wide,
        devices: devices.as_deref(),
        places: places.as_deref(),
        mems: mems.as_deref(),
    };
    let text = match a.format {
        PlanFormat::Json => format!("{}\n", to_json(&p, &nodes, &req, &extra)),
        PlanFormat::Text => to_text(&p, &nodes, &req, &extra),
        PlanFormat::Svg => svg::svg(&drawings(&p, &nodes, &models, &per_node, extra.devices)),
        PlanFormat::Srun | PlanFormat::Pals => {
            let ranks: Vec<_> = (0..p.len())
                .map(|r| {
                    let node = p.placements()[r].node as usize;
                    let loc = models[per_node[node]].1.as_ref();
                    let gpus = extra
                        .devices
                        .map(|d| bindings::devices_named(loc, &d[r].1))
                        .unwrap_or_default();
                    let mems = extra.mems.map(|m| m[r].0.clone()).unwrap_or_default();
                    bindings::rank_binding(loc, node, p.cpus(r, &nodes), &gpus, mems)
                })
                .collect();
            match launchers::binding_script(a.format, &ranks, &hosts.unwrap_or_default()) {
                Ok(t) => t,
                Err(e) => return fail(Format::Text, "launcher", &e, None),
            }
        }
        f => {
            let usable: Vec<Vec<u32>> = per_node.iter().map(|&i| usable[i].clone()).collect();
            match launchers::launcher(f, &p, &nodes, &hosts.unwrap_or_default(), &usable) {
                Ok(t) => t,
                Err(e) => return fail(Format::Text, "launcher", &e, None),
            }
        }
    };
    write_out(&a, text)
}

/// Writes the output to `--output` or standard output.
fn write_out(a: &PlanArgs, text: String) -> ExitCode {
    match &a.output {
        Some(path) => match std::fs::write(path, text) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(
                a.format.errors(),
                "io",
                &format!("cannot write {}: {e}", path.display()),
                None,
            ),
        },
        None => {
            print!("{text}");
            ExitCode::SUCCESS
        }
    }
}

fn thread_request(a: &PlanArgs) -> Result<Option<(Threads, ProcBind)>, String> {
    let Some(t) = &a.threads else {
        return Ok(None);
    };
    let t = Threads::parse("--threads", t).map_err(|e| e.to_string())?;
    let b = match &a.omp_bind {
        Some(b) => ProcBind::parse("--omp-bind", b).map_err(|e| e.to_string())?,
        None => ProcBind::default(),
    };
    Ok(Some((t, b)))
}
