//! `lama plan`: reading the topologies, the request and the job's hosts, then planning.
//! How a plan is shown (text, JSON, pictures) is in [`output`].

mod auto;
mod bindings;
mod launchers;
mod memory;
mod output;
pub mod slurm_job;

use output::{drawings, to_json, to_text, Extra};

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgMatches, Args, ValueEnum};
use lama::locality::{choose, Locality, Weights};
use lama::openmp::{plan_threads, ProcBind, ThreadPlan, Threads};
use lama::slurm::expand_hostlist;
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

/// The host names --slurm-hostfile writes, from --nodelist or the running job.
fn job_hosts(a: &PlanArgs) -> Result<Option<Vec<String>>, String> {
    if a.slurm_hostfile.is_none() && !a.format.is_launcher() {
        if a.nodelist.is_some() {
            return Err("--nodelist names the hosts for --slurm-hostfile and the MPI launcher formats (rankfile, hydra, impi)".into());
        }
        return Ok(None);
    }
    let list = match &a.nodelist {
        Some(l) => l.clone(),
        None => crate::env("SLURM_JOB_NODELIST")
            .ok_or("--slurm-hostfile and the MPI launcher formats (rankfile, hydra, impi) need the job's host names: run inside a Slurm job or give --nodelist HOSTLIST (or --from-slurm)")?,
    };
    let hosts = expand_hostlist(&list).map_err(|e| format!("--nodelist: {e}"))?;
    if hosts.is_empty() {
        return Err(format!("--nodelist '{list}' names no host"));
    }
    Ok(Some(hosts))
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

/// Why hwloc refused an XML file, in the words of its parser (`line 4: AttValue: " or '
/// expected`): the file loaded again by `lama xml-reason` in a child process whose hwloc says
/// (HWLOC_XML_VERBOSE), as hwloc writes the reason to standard error, not to its caller.
fn xml_reason(path: &std::path::Path) -> Option<String> {
    let me = std::env::current_exe().ok()?;
    let out = std::process::Command::new(me)
        .arg("xml-reason")
        .arg(path)
        .env("HWLOC_XML_VERBOSE", "1")
        .output()
        .ok()?;
    let err = String::from_utf8_lossy(&out.stderr);
    // libxml2: ":LINE: parser error : REASON"; hwloc's own checks: "...: REASON".
    let first = err
        .lines()
        .find(|l| l.contains("error") || l.contains("hwloc/xml"))?;
    let reason = match first.split_once(": parser error : ") {
        Some((at, why)) => format!("line {}: {why}", at.trim_start_matches(':').trim()),
        None => first.trim().to_string(),
    };
    Some(crate::quote_line(&reason))
}

enum Source {
    Xml(PathBuf),
    Synthetic(String),
    ThisMachine,
}

/// The node sources in the order they were written on the command line.
fn sources(a: &PlanArgs, m: Option<&ArgMatches>) -> Vec<Source> {
    let idx = |id: &str| -> Vec<usize> {
        m.and_then(|m| m.indices_of(id))
            .map(|i| i.collect())
            .unwrap_or_default()
    };
    let mut all: Vec<(usize, Source)> = Vec::new();
    let ti = idx("topology");
    for (k, p) in a.topology.iter().enumerate() {
        all.push((ti.get(k).copied().unwrap_or(k), Source::Xml(p.clone())));
    }
    let si = idx("synthetic");
    for (k, s) in a.synthetic.iter().enumerate() {
        all.push((
            si.get(k).copied().unwrap_or(k),
            Source::Synthetic(s.clone()),
        ));
    }
    if a.this_machine {
        all.push((
            idx("this_machine").first().copied().unwrap_or(0),
            Source::ThisMachine,
        ));
    }
    all.sort_by_key(|(i, _)| *i);
    let mut v: Vec<Source> = all.into_iter().map(|(_, s)| s).collect();
    if v.is_empty() {
        v.push(Source::ThisMachine);
    }
    v
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

/// A node model and, when devices were asked for, its devices (`None` for synthetic topologies,
/// which have none), read from one hwloc load.
type Model = (NodeTopology, Option<Locality>);

fn load(a: &PlanArgs, m: Option<&ArgMatches>) -> Result<Vec<Model>, String> {
    let devices = a.nics > 0
        || a.gpus > 0
        || a.device_weights.is_some()
        || a.policy.is_some()
        || a.mem.is_some();
    let mut models = Vec::new();
    for s in sources(a, m) {
        let file = match &s {
            Source::Xml(p) => Some(p.clone()),
            _ => None,
        };
        let (t, loc) = match s {
            Source::Xml(p) if devices => {
                NodeTopology::from_xml_file_with_devices(&p, false).map(|(t, l)| (t, Some(l)))
            }
            Source::Xml(p) => NodeTopology::from_xml_file(&p).map(|t| (t, None)),
            Source::Synthetic(d) => NodeTopology::from_synthetic(&d).map(|t| (t, None)),
            Source::ThisMachine if devices => {
                NodeTopology::this_machine_with_devices(false).map(|(t, _, l)| (t, Some(l)))
            }
            Source::ThisMachine => NodeTopology::this_machine().map(|t| (t, None)),
        }
        .map_err(|e| match file.as_deref().and_then(xml_reason) {
            Some(why) => format!("{e}: {why}"),
            None => e.to_string(),
        })?;
        let t = match &a.restrict {
            Some(list) => {
                // A CPU the node lacks is a typo to say, not a CPU to drop in silence.
                let wanted =
                    lama::idset::parse_list(list).map_err(|e| format!("--restrict: {e}"))?;
                let have = t.cpus();
                let missing: Vec<u32> = wanted
                    .iter()
                    .copied()
                    .filter(|c| !have.contains(c))
                    .collect();
                if !missing.is_empty() {
                    return Err(format!(
                        "--restrict '{list}': node {} has no CPU {} (its CPUs are {})",
                        t.name(),
                        lama::idset::format_list(&missing),
                        lama::idset::format_list(&have)
                    ));
                }
                t.restrict_to_list(list)
                    .map_err(|e| format!("--restrict: {e}"))?
            }
            None => t,
        };
        models.push((t, loc));
    }
    Ok(models)
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

use lama::limits::MAX_NODES;

/// Node models and, per node of the job, which model it uses.
///
/// One topology without `--nodes` stands for every host of `hosts` when they are known.
fn job_nodes(
    a: &PlanArgs,
    m: Option<&ArgMatches>,
    hosts: Option<&[String]>,
) -> Result<(Vec<Model>, Vec<usize>), String> {
    let models = load(a, m)?;
    let nodes = a.nodes.or(hosts.map(|h| h.len()));
    let per_node = match (models.len(), nodes) {
        (1, Some(0)) => return Err("--nodes must be at least 1".into()),
        (_, Some(n)) if n > MAX_NODES => {
            return Err(format!(
                "invalid --nodes {n}: at most {MAX_NODES} nodes can be planned"
            ))
        }
        (1, Some(n)) => vec![0; n],
        (k, Some(n)) if n != k => {
            return Err(format!("--nodes {n} does not match the {k} topologies given (give one topology for N identical nodes)"))
        }
        (k, _) => (0..k).collect(),
    };
    if let Some(h) = hosts.filter(|h| h.len() < per_node.len()) {
        return Err(format!(
            "the plan has {} nodes but the job's node list has {} host(s)",
            per_node.len(),
            h.len()
        ));
    }
    Ok((models, per_node))
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

/// The job's hosts (when known), each node's model index, the models, and per model the PUs an
/// MPI launcher's daemon may use there (OS indexes, logical order).
type JobNodes = (Option<Vec<String>>, Vec<usize>, Vec<Model>, Vec<Vec<u32>>);

/// The running Slurm job's nodes (`--from-slurm`), else those the options describe. Errors
/// carry their kind.
fn the_nodes(
    a: &PlanArgs,
    m: Option<&ArgMatches>,
    devices_wanted: bool,
) -> Result<JobNodes, (&'static str, String)> {
    if a.from_slurm {
        // One model per host, in the job's order.
        let (h, models, usable) =
            slurm_job::job_models(devices_wanted).map_err(|e| ("slurm", e))?;
        return Ok((Some(h), (0..models.len()).collect(), models, usable));
    }
    let hosts = job_hosts(a).map_err(|e| ("invalid-option", e))?;
    let (models, per_node) =
        job_nodes(a, m, hosts.as_deref()).map_err(|e| ("invalid-option", e))?;
    // A described node's daemon may use every PU the description leaves (after --restrict).
    let usable = models.iter().map(|(t, _)| t.pus().to_vec()).collect();
    Ok((hosts, per_node, models, usable))
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
