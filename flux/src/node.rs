//! What `shell.init` decides for this shell's node: the job's `TASK_MAP`, and when lama places
//! the job, each of the node's tasks' CPUs, devices and OpenMP places; and the `lama` task-map
//! scheme. The decisions are the library's; this module gathers what Flux says.

use std::time::{Duration, Instant};

use lama::cache::{self, Writer};
use lama::environ::{exec_limit, own_stack_limit, ExecSize, Group};
use lama::flux::{cores_per_node, cores_per_slot, flux_words, given_gpus, scheme_map, RankInfo};
use lama::idset::format_list;
use lama::locality::{AllowedGpus, Locality, Weights};
use lama::openmp::plan_threads;
use lama::plugin::{
    auto_devices, auto_threads, auto_workers, choose_among, cores_to_cpus, place_auto, place_node,
    usable_cpus, Placing, TaskBinding,
};
use lama::policy::gpus_of;
use lama::NodeTopology;
use serde_json::Value;

use crate::ffi::{self, Args, Plugin, Shell};
use crate::{affinity, Config};

/// What a task can do without `TASK_MAP` under Flux.
pub const TASK_MAP_INSTEAD: &str =
    "inside a task, `flux job taskmap $FLUX_JOB_ID` prints the job's map";

/// One placed task: its binding and the variables lama gives it, group by group.
pub struct Placed {
    pub binding: TaskBinding,
    pub groups: Vec<Group>,
    /// `lama.mem=local`: the NUMA nodes local to its CPUs (bound unless `topology=FILE`, where
    /// they are only named).
    pub mems: Option<Vec<u32>>,
    /// How `mems` are bound.
    pub mem_policy: lama::memory::MemPolicy,
}

/// This node's decisions, used by each task.
pub struct Node {
    pub host: String,
    /// The shell rank (the job's node index).
    pub rank: u32,
    /// `TASK_MAP`, when exported.
    pub taskmap: Option<Group>,
    /// Whether `TASK_MAP` is lama's business in this job (a map inherited from the job's
    /// environment is then removed when lama exports none).
    pub manage_taskmap: bool,
    /// The node's placed tasks in rank order (empty when lama does not place the job).
    pub tasks: Vec<Placed>,
    /// False with `topology=FILE`: CPUs are computed and exported, not bound.
    pub bind: bool,
    /// What the automatic policy chose on this node, for `lama.verbose`.
    pub policy: Option<String>,
    pub verbose: bool,
    /// The job's OpenMP variables lama would have replaced, kept because the user set them.
    pub omp_kept: Vec<&'static str>,
    /// Flux's `cpu-affinity` setting lama's placement replaced.
    pub replaced_affinity: Option<String>,
    /// The job's environment as `execve` counts it, and the sizes of its variables.
    pub environ: ExecSize,
    pub existing: Vec<(String, usize)>,
    /// What `execve` allows the tasks.
    pub exec_limit: usize,
    pub elapsed: Duration,
    pub phases: Vec<(&'static str, Duration)>,
}

/// The shell's info (`rank`, `size`, `R`, ...), read once where it is needed.
fn shell_info(shell: Shell) -> Result<Value, String> {
    let info = shell.info().ok_or("the shell has no job info")?;
    serde_json::from_str(&info).map_err(|e| format!("the shell's info: {e}"))
}

fn rank_info(shell: Shell, rank: u32) -> Result<RankInfo, String> {
    let i = i32::try_from(rank).map_err(|_| "too many shell ranks")?;
    let json = shell
        .rank_info(i)
        .ok_or_else(|| format!("the shell has no info on shell rank {rank}"))?;
    RankInfo::parse(&json)
}

/// The job's environment's size, and each variable's `NAME=VALUE` size.
fn environ(shell: Shell) -> (ExecSize, Vec<(String, usize)>) {
    let Some(Value::Object(env)) = shell.environ().and_then(|j| serde_json::from_str(&j).ok())
    else {
        return (ExecSize::default(), Vec::new());
    };
    let sizes: Vec<(String, usize)> = env
        .iter()
        .map(|(k, v)| (k.clone(), k.len() + 2 + v.as_str().map_or(0, str::len)))
        .collect();
    let size = ExecSize {
        bytes: sizes.iter().map(|(_, b)| b).sum(),
        strings: sizes.len(),
    };
    (size, sizes)
}

impl Node {
    /// Decides for this node; an error fails the job.
    pub fn decide(shell: Shell, config: &Config) -> Result<Node, String> {
        let started = Instant::now();
        let mut lap = started;
        let mut phases = Vec::new();
        let mut phase = |what: &'static str| {
            let now = Instant::now();
            phases.push((what, now - lap));
            lap = now;
        };
        let info = shell_info(shell)?;
        let rank = info
            .get("rank")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or("the shell's info has no rank")?;
        // `flux run -c N`: each task's workers for the policy, as srun's -c is under Slurm.
        let slot_cores = info.get("jobspec").and_then(cores_per_slot);
        let own = rank_info(shell, rank)?;
        let own = &own;
        let (environ, existing) = environ(shell);
        let mut node = Node {
            // Flux's name for the node (fake hosts in a test instance are not the machine's).
            host: if own.name.is_empty() {
                affinity::hostname()
            } else {
                own.name.clone()
            },
            rank,
            taskmap: None,
            manage_taskmap: config.settings.taskmap && !config.user.off,
            tasks: Vec::new(),
            bind: config.settings.topology.is_none(),
            policy: None,
            verbose: config.settings.verbose || config.user.verbose,
            omp_kept: Vec::new(),
            replaced_affinity: config.replaced_affinity.clone(),
            environ,
            existing,
            exec_limit: exec_limit(own_stack_limit()),
            elapsed: Duration::ZERO,
            phases: Vec::new(),
        };
        if node.manage_taskmap {
            // Every shell computes the same map: shell rank 0 says it when it cannot be exported.
            let warn = |w: String| {
                if rank == 0 {
                    ffi::log(ffi::WARN, &format!("lama: {w}"));
                }
            };
            // Flux's own encoding: TASK_MAP reads as `flux job taskmap` prints it.
            match shell.taskmap() {
                Some(text) => {
                    let g = Group::task_map(text).with_hint(TASK_MAP_INSTEAD);
                    match g.too_long() {
                        None => node.taskmap = Some(g),
                        Some(w) => warn(w.to_string()),
                    }
                }
                None => warn(format!(
                    "TASK_MAP not exported: the shell has no task map; {TASK_MAP_INSTEAD}"
                )),
            }
            phase("TASK_MAP");
        }
        if config.placing {
            node.place(shell, config, (own, slot_cores), &mut phase)
                .map_err(|e| format!("{} (node {rank} {})", flux_words(&e), node.host))?;
        }
        node.elapsed = started.elapsed();
        node.phases = phases;
        Ok(node)
    }

    fn place(
        &mut self,
        shell: Shell,
        config: &Config,
        (own, slot_cores): (&RankInfo, Option<usize>),
        phase: &mut dyn FnMut(&'static str),
    ) -> Result<(), String> {
        let ids = own.task_ids();
        // A map's request, or none for the automatic policy.
        let req = match config
            .settings
            .placing(&config.user, Some(ids.len()))
            .map_err(|e| e.to_string())?
        {
            Placing::Map(r) => Some(r),
            Placing::Policy => None,
            Placing::LeftAlone => {
                return Err("internal error: lama was to place this job, but its options ask for no placement (a bug in lama)".into())
            }
        };
        let (topo, loc, source) = topology(shell, config)?;
        phase(source);
        let cpus = cores_to_cpus(&topo, &own.cores, None).map_err(|e| e.to_string())?;
        let cpus = if self.bind {
            usable_cpus(cpus, &affinity::allowed()?).map_err(|e| e.to_string())?
        } else {
            cpus
        };
        let (tasks, auto) = match &req {
            Some(req) => {
                let t = place_node(&topo, &cpus, req, &ids, self.verbose);
                (t.map_err(|e| e.to_string())?, None)
            }
            None => self.by_policy(&topo, &loc, &cpus, config, (own, slot_cores), &ids)?,
        };
        phase("placement");
        let mut groups: Vec<Vec<Group>> = tasks
            .iter()
            .map(|t| {
                vec![Group::cpus(vec![(
                    "LAMA_CPUS".into(),
                    format_list(&t.cpus),
                )])]
            })
            .collect();
        if config.threads.is_some() || auto.is_some() {
            // Flux's -c is the slot's cores; one core (its default) leaves one thread per CPU.
            let per_task = slot_cores.filter(|&c| c > 1);
            self.openmp(
                shell,
                config,
                &topo,
                &tasks,
                (auto.is_some(), per_task),
                &mut groups,
            )?;
            phase("OpenMP places");
        }
        let mut mems = Vec::new();
        if let Some(mode) = config.mem {
            mems = affinity::tasks_numa(
                loc.numa(),
                tasks.iter().map(|t| t.cpus.as_slice()),
                mode,
                self.bind,
            )?;
            for (nodes, g) in mems.iter().zip(&mut groups) {
                if let Some(cpus) = g.first_mut() {
                    cpus.vars.push(("LAMA_MEMS".into(), format_list(nodes)));
                }
            }
            phase("memory");
        }
        let auto_gpus = auto
            .as_ref()
            .is_some_and(|(g, _)| g.iter().any(|t| !t.is_empty()));
        if config.devices != (0, 0) || auto_gpus {
            devices(config, &loc, own, &tasks, auto, &mut groups)?;
            phase("devices");
        }
        let mut mems = mems.into_iter();
        self.tasks = tasks
            .into_iter()
            .zip(groups)
            .map(|(binding, groups)| Placed {
                binding,
                groups,
                mems: mems.next(),
                mem_policy: config.mem.unwrap_or_default().policy(),
            })
            .collect();
        Ok(())
    }

    /// The automatic policy on this node's CPUs, with the GPUs Flux gave the job here.
    fn by_policy(
        &mut self,
        topo: &NodeTopology,
        loc: &Locality,
        cpus: &[u32],
        config: &Config,
        (own, slot_cores): (&RankInfo, Option<usize>),
        ids: &[u32],
    ) -> Result<(Vec<TaskBinding>, Option<PolicyGpus>), String> {
        let (gpus, given) = match own.gpus.trim() {
            "" => (Vec::new(), None),
            ids => {
                let g = given_gpus(loc, ids)?;
                (gpus_of(loc, Some(&g.devices)), Some(g))
            }
        };
        let stack = config.settings.oversubscribe(&config.user);
        let workers = auto_workers(config.threads.as_ref(), slot_cores);
        let p = place_auto(
            topo,
            cpus,
            &gpus,
            ids,
            (workers, stack),
            self.verbose,
            self.verbose,
        )
        .map_err(|e| e.to_string())?;
        self.policy = self.verbose.then(|| p.summary.clone());
        Ok((p.tasks, Some((p.gpus, given))))
    }

    /// Each task's OpenMP variables (the policy's, or `lama.threads`'), unless the job has its
    /// own and did not ask lama to override them.
    fn openmp(
        &mut self,
        shell: Shell,
        config: &Config,
        topo: &NodeTopology,
        tasks: &[TaskBinding],
        (auto, per_task): (bool, Option<usize>),
        groups: &mut [Vec<Group>],
    ) -> Result<(), String> {
        let replace = config.threads.is_some_and(|t| t.replace);
        self.omp_kept = lama::plugin::OMP_VARIABLES
            .into_iter()
            .filter(|k| !replace && shell.getenv(k).is_some())
            .collect();
        if !self.omp_kept.is_empty() {
            return Ok(());
        }
        let plans = match (auto, config.threads) {
            (true, t) => {
                auto_threads(topo, tasks, t.as_ref(), per_task).map_err(|e| e.to_string())?
            }
            (false, Some(t)) => tasks
                .iter()
                .map(|task| plan_threads(topo, task.rank, &task.cpus, t.threads, t.bind))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?,
            (false, None) => Vec::new(),
        };
        // The automatic policy runs more threads than a task's hardware threads when the node
        // cannot hold them all: said once by this node's shell.
        if let Some(p) = plans.iter().find(|p| p.extra > 0) {
            ffi::log(
                ffi::WARN,
                &format!(
                    "lama: {} OpenMP threads per task share as few as {} hardware threads on this node: ask for fewer threads or tasks to give each thread its own",
                    p.threads(),
                    p.places.len()
                ),
            );
        }
        for (p, g) in plans.iter().zip(groups) {
            g.push(Group::openmp(p.env()));
        }
        Ok(())
    }

    /// The placed task whose global id is `rank`.
    pub fn task(&self, rank: u32) -> Option<&Placed> {
        self.tasks
            .binary_search_by_key(&rank, |t| t.binding.rank)
            .ok()
            .map(|i| &self.tasks[i])
    }
}

/// The node's topology and devices from its hwloc XML (`topology=FILE` from the conf, else the
/// shell's copy of its node's XML), and where they came from. Every job's shell is a new
/// process, and hwloc parses a large node's XML in milliseconds: the shell keeps what it read
/// in its user's cache folder, named by the XML's content, so that the next job on the node
/// with the same XML reads a few kB instead. Flux counts cores over the whole node, as Slurm
/// does.
fn topology(
    shell: Shell,
    config: &Config,
) -> Result<(NodeTopology, Locality, &'static str), String> {
    let writer = Writer::User(affinity::user_id());
    // A file is known by its state, without reading it; the shell's XML by its content.
    let (source, key) = match config.settings.topology.as_deref() {
        Some(p) => match std::fs::metadata(p) {
            Ok(m) => (Xml::File(p), cache::file_key(&m)),
            Err(_) => return parse(p.display().to_string(), read_file(p)?, None, writer),
        },
        None => {
            let text = shell
                .hwloc_xml()
                .ok_or("the shell has no hwloc XML of its node")?;
            let k = cache::xml_key(text.as_bytes());
            (Xml::Shell(text), k)
        }
    };
    let file = config
        .cache
        .as_ref()
        .map(|d| d.join(format!("xml-{key}.json")));
    // A missing file is the first job with this XML; anything else found there is reported.
    if let Some(f) = file.as_ref() {
        match cache::read(f, true, writer).map(|n| (n.topology, n.locality)) {
            Ok((topo, Some(loc))) => return Ok((topo, loc, "topology from the cache")),
            Ok(_) | Err(cache::CacheError::Missing { .. }) => {}
            Err(e) => ffi::log(
                ffi::DEBUG,
                &format!("lama: {e}; reading the XML with hwloc"),
            ),
        }
    }
    match source {
        Xml::Shell(text) => parse("this node's hwloc XML".into(), text, file, writer),
        Xml::File(p) => parse(p.display().to_string(), read_file(p)?, file, writer),
    }
}

/// Where a node's XML comes from: the shell's copy, or a `topology=FILE` not read yet.
enum Xml<'a> {
    Shell(String),
    File(&'a std::path::Path),
}

fn read_file(path: &std::path::Path) -> Result<String, String> {
    lama::limits::read_text(path, lama::limits::MAX_XML_BYTES)
        .map_err(|e| format!("cannot load topology {}: {e}", path.display()))
}

/// Reads `xml` with hwloc and keeps the result in `file` for the next job.
fn parse(
    name: String,
    xml: String,
    file: Option<std::path::PathBuf>,
    writer: Writer,
) -> Result<(NodeTopology, Locality, &'static str), String> {
    let (topo, mut loc) =
        NodeTopology::from_xml_text_with_devices(&name, &xml, true).map_err(|e| e.to_string())?;
    // The broker's XML is this node's: so are the driver's MIG instances.
    lama::locality::driver::mark_mig_here(&mut loc);
    if let Some(f) = &file {
        let saved = match f.parent() {
            Some(dir) => cache::prepare_folder(dir, writer),
            None => Ok(()),
        }
        .and_then(|_| cache::write(f, &topo, &loc, None, writer));
        if let Err(e) = saved {
            ffi::log(
                ffi::DEBUG,
                &format!("lama: cannot keep the topology for the next job: {e}"),
            );
        }
    }
    Ok((topo, loc, "topology (hwloc)"))
}

/// `taskmap.lama`: every shell computes the same new map from the job's cores per node, taking
/// each node to be like this one (or like `topology=FILE`).
pub fn scheme(plugin: Plugin, args: &Args, config: &Config) -> Result<(), String> {
    let shell = plugin.shell().ok_or("no job shell")?;
    let input = args
        .input()
        .ok_or("taskmap.lama: the shell passed no arguments")?;
    let v: Value = serde_json::from_str(&input).map_err(|e| format!("taskmap.lama: {e}"))?;
    let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (current, value) = (text("taskmap"), text("value"));
    // Not the rank info: the shell would keep its answer, which describes the old map.
    let info = shell_info(shell)?;
    let cores = cores_per_node(info.get("R").ok_or("the shell's info has no R")?)?;
    let (topo, _, _) = topology(shell, config)?;
    let map = scheme_map(
        &current,
        &value,
        &topo,
        &cores,
        &config.settings,
        &config.user,
    )
    .map_err(|e| flux_words(&e.to_string()))?;
    // The shell takes the map as a string of RFC 34 JSON.
    args.set_output(&serde_json::json!({ "taskmap": map }).to_string())
}

/// The policy's GPUs for each task (device indexes), and the GPUs Flux gave the job on the node.
type PolicyGpus = (Vec<Vec<usize>>, Option<AllowedGpus>);

/// Each task's devices: its nearest NICs and GPUs (`lama.nics`, `lama.gpus`) or the policy's
/// GPUs, among those Flux gave the job, with the variables the runtimes read.
fn devices(
    config: &Config,
    loc: &Locality,
    own: &RankInfo,
    tasks: &[TaskBinding],
    auto: Option<PolicyGpus>,
    groups: &mut [Vec<Group>],
) -> Result<(), String> {
    let weights = match &config.settings.weights {
        Some(path) => {
            let text = lama::limits::read_text(path, lama::limits::MAX_WEIGHTS_BYTES)
                .map_err(|e| format!("cannot read weights file {}: {e}", path.display()))?;
            Some(Weights::parse(&text, loc).map_err(|e| format!("{}: {e}", path.display()))?)
        }
        None => None,
    };
    let chosen = match auto {
        Some((gpus, given)) => {
            auto_devices(loc, tasks, &gpus, config.devices.0, weights.as_ref(), given)
        }
        None => {
            let given = if config.devices.1 > 0 {
                Some(given_gpus(loc, &own.gpus)?)
            } else {
                None
            };
            choose_among(loc, tasks, config.devices, weights.as_ref(), given)
        }
    }
    .map_err(|e| e.to_string())?
    .sharing(config.visibility);
    for (i, g) in groups.iter_mut().enumerate() {
        let mut vars = chosen.env(loc, i);
        // Flux's numbering is PCI order (gpu-affinity sets the same when it runs).
        if vars.iter().any(|(k, _)| k == "CUDA_VISIBLE_DEVICES") {
            vars.push(("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into()));
        }
        g.push(Group::devices(vars));
    }
    Ok(())
}
