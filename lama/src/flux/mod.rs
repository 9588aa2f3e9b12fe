//! What the Flux shell plugin decides for a job, as pure functions: the `lama` shell option and
//! the plugin's `conf` read into the same [`Options`] and [`Settings`] as the SPANK plugin's, a
//! shell rank's tasks, cores and GPUs from the shell's rank info, the GPUs Flux gave as lama's devices, and the `lama` task-map scheme that lays
//! the tasks out across the job's nodes. Flux itself is not touched here.
//!
//! Words: messages are written once, for Slurm (`--lama-map`, `plugstack.conf`); [`flux_words`]
//! turns them into Flux's (`lama.map`, the plugin's `conf`).

use serde_json::Value;

use crate::idset::{parse_list, parse_ranges};
use crate::level::Level;
use crate::locality::{AllowedGpus, Kind, Locality};
use crate::mapper::plan;
use crate::plugin::options::setting_keys;
use crate::plugin::{cores_to_cpus, Options, Settings, StepError, OPTIONS};
use crate::taskmap::{rfc34, TaskMap};
use crate::topology::{NodeTopology, Span};

/// The `plugstack.conf` arguments that mean nothing under Flux: the shell hands every job its
/// node's topology, so there is no cache for slurmd to write.
/// Where the Flux shell keeps the topologies it read, by default (`cache=` in the conf): a
/// folder of the job's user on the node (`%u`: the user id), which the shell creates.
pub const FLUX_CACHE: &str = "/tmp/lama-%u";

/// A message written for Slurm, in Flux's words: `--lama-NAME` is the shell option `lama.NAME`
/// and the admin's defaults live in the plugin's `conf`.
pub fn flux_words(msg: &str) -> String {
    msg.replace("--lama-", "lama.")
        .replace("plugstack.conf default ", "the plugin's conf default ")
        .replace("plugstack.conf", "the lama plugin's conf")
}

/// A JSON scalar as the text an option takes; `None` for `false`, `null` and `0` given to a flag.
fn scalar(key: &str, v: &Value, flag: bool) -> Result<Option<String>, String> {
    match v {
        Value::String(s) => Ok(Some(s.clone())),
        Value::Number(n) if flag => Ok((n.as_f64() != Some(0.0)).then(|| "1".into())),
        Value::Number(n) => Ok(Some(n.to_string())),
        Value::Bool(b) if flag => Ok(b.then(|| "1".into())),
        Value::Bool(true) => Err(format!("lama.{key} needs a value (-o lama.{key}=VALUE)")),
        Value::Bool(false) | Value::Null => Ok(None),
        _ => Err(format!(
            "lama.{key} takes a single value, not {v} (-o lama.{key}=VALUE)"
        )),
    }
}

/// The user's options from the `lama` shell option (`-o lama.map=csbnh -o lama.verbose` makes
/// `{"map":"csbnh","verbose":1}`), as JSON text; `None` when the job has no such option.
pub fn user_options(json: Option<&str>) -> Result<Options, StepError> {
    let mut o = Options::default();
    let Some(json) = json else { return Ok(o) };
    let bad = |m: String| StepError::Option(m);
    let v: Value = serde_json::from_str(json)
        .map_err(|e| bad(format!("the lama shell option is not JSON ({e})")))?;
    let Value::Object(map) = v else {
        return Err(bad(format!(
            "-o lama={v}: lama's options are given one by one, as -o lama.NAME=VALUE (for example -o lama.map=csbnh -o lama.bind=1c); valid names: {}",
            option_names()
        )));
    };
    for (key, value) in &map {
        let Some(info) = OPTIONS.iter().find(|i| i.name == key) else {
            return Err(bad(format!(
                "unknown option lama.{key}; valid: {}",
                option_names()
            )));
        };
        if let Some(text) = scalar(key, value, info.arg.is_none()).map_err(bad)? {
            o.set(key, Some(&text));
        }
    }
    Ok(o)
}

fn option_names() -> String {
    OPTIONS
        .iter()
        .map(|o| format!("lama.{}", o.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The admin's settings from the plugin's `conf` (`plugin.load { file = ..., conf = { map =
/// "csbnh", apply = "always" } }`), as JSON text: the same keys and values as the SPANK plugin's
/// `plugstack.conf` arguments, booleans given as `true`/`false` or `"yes"`/`"no"`.
pub fn settings(conf: Option<&str>) -> Result<Settings, StepError> {
    let bad = |m: String| StepError::Setting(m);
    let args: Vec<String> = match conf.map(serde_json::from_str::<Value>) {
        None => Vec::new(),
        Some(Err(e)) => return Err(bad(format!("not JSON ({e})"))),
        Some(Ok(Value::Object(map))) => {
            let mut args = Vec::new();
            for (key, value) in &map {
                let text = match value {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
                    _ => {
                        return Err(bad(format!(
                            "{key} takes a single value, not {value}; valid keys: {}",
                            setting_keys()
                        )))
                    }
                };
                args.push(format!("{key}={text}"));
            }
            args
        }
        // Flux hands `{}` or nothing for a plugin loaded without conf.
        Some(Ok(Value::Null)) => Vec::new(),
        Some(Ok(v)) => {
            return Err(bad(format!(
                "conf must be a table of key = value, not {v}; valid keys: {}",
                setting_keys()
            )))
        }
    };
    let named = args.iter().any(|a| a.starts_with("cache="));
    let mut s = Settings::parse(&args)?;
    if !named {
        s.cache = Some(FLUX_CACHE.into());
    }
    Ok(s)
}

/// The Flux shell's cache folder for user `uid`: `cache=` (or [`FLUX_CACHE`]) with `%u`
/// replaced by the user id; `None` for `cache=none`.
pub fn cache_folder(s: &Settings, uid: u32) -> Option<std::path::PathBuf> {
    let dir = s
        .cache
        .as_ref()?
        .to_string_lossy()
        .replace("%u", &uid.to_string());
    Some(dir.into())
}

/// One shell rank as `flux_shell_get_rank_info` describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankInfo {
    /// Its host.
    pub name: String,
    /// Its tasks' global ids, as ranges in ascending order.
    pub tasks: Vec<(u32, u32)>,
    /// The cores Flux gave the job there (hwloc logical indexes, an RFC 22 idset).
    pub cores: String,
    /// The GPUs Flux gave the job there (Flux's GPU indexes), empty for none.
    pub gpus: String,
}

impl RankInfo {
    /// Reads the rank info's JSON.
    pub fn parse(json: &str) -> Result<RankInfo, String> {
        let v: Value = serde_json::from_str(json)
            .map_err(|e| format!("the shell's rank info is not JSON ({e})"))?;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let res = v.get("resources");
        let tasks = text(v.get("taskids")).ok_or("the shell's rank info has no taskids")?;
        let mut tasks = parse_ranges(&tasks).map_err(|e| format!("the shell's task ids: {e}"))?;
        tasks.sort_unstable();
        let count: u64 = tasks.iter().map(|&(a, b)| u64::from(b - a) + 1).sum();
        if count > crate::limits::MAX_TASKS as u64 {
            return Err(format!(
                "the shell's rank info names {count} tasks, more than the {} lama places",
                crate::limits::MAX_TASKS
            ));
        }
        Ok(RankInfo {
            name: text(v.get("name")).unwrap_or_default(),
            tasks,
            cores: text(res.and_then(|r| r.get("cores"))).unwrap_or_default(),
            gpus: text(res.and_then(|r| r.get("gpus"))).unwrap_or_default(),
        })
    }

    /// Its tasks' global ids, ascending.
    pub fn task_ids(&self) -> Vec<u32> {
        self.tasks.iter().flat_map(|&(a, b)| a..=b).collect()
    }
}

/// The cores each slot asked for (`flux run -c N`): the `count` of the `core` resource inside
/// the jobspec's `slot` (RFC 14: a number, or a range whose `min` is taken), or `None` when the
/// jobspec names none. Not `flux_shell_get_jobspec_info`'s `cores_per_slot`, which divides R's
/// cores by the slots: an exclusive job's slot would count the whole node.
pub fn cores_per_slot(jobspec: &Value) -> Option<usize> {
    fn count(v: &Value) -> Option<usize> {
        let c = v.get("count")?;
        let n = c
            .as_u64()
            .or_else(|| c.get("min").and_then(Value::as_u64))?;
        usize::try_from(n).ok().filter(|&n| n > 0)
    }
    fn find(resources: &Value, in_slot: bool, depth: usize) -> Option<usize> {
        // A jobspec nests a few levels (node, slot, core); a deeper one is not Flux's.
        if depth > 16 {
            return None;
        }
        for r in resources.as_array()? {
            let ty = r.get("type").and_then(Value::as_str);
            if in_slot && ty == Some("core") {
                return count(r);
            }
            let slot = in_slot || ty == Some("slot");
            if let Some(n) = r.get("with").and_then(|w| find(w, slot, depth + 1)) {
                return Some(n);
            }
        }
        None
    }
    find(jobspec.get("resources")?, false, 0)
}

/// The cores Flux gave the job on each node, in shell rank order, from the job's resource set
/// `R` (RFC 20, as in the shell's info): shell ranks are the job's broker ranks in ascending
/// order. The task-map scheme runs before the shell's rank info may be read (the shell keeps the
/// first answer, which would then describe the old map).
pub fn cores_per_node(r: &Value) -> Result<Vec<String>, String> {
    let lite = r
        .pointer("/execution/R_lite")
        .and_then(Value::as_array)
        .ok_or("the job's R has no execution.R_lite")?;
    let mut ranks: Vec<(u32, String)> = Vec::new();
    for entry in lite {
        let ids = entry.get("rank").and_then(Value::as_str).unwrap_or("");
        let cores = entry
            .pointer("/children/core")
            .and_then(Value::as_str)
            .unwrap_or("");
        for id in parse_list(ids).map_err(|e| format!("the job's R: ranks {e}"))? {
            ranks.push((id, cores.to_string()));
        }
    }
    ranks.sort_unstable();
    Ok(ranks.into_iter().map(|(_, c)| c).collect())
}

/// The GPUs Flux gave the job on this node as lama's devices: Flux numbers a node's GPUs in
/// hwloc's order of their devices (one per PCI device), which is the order of lama's GPUs; each
/// is written in `CUDA_VISIBLE_DEVICES` (or its vendor's variable) with Flux's own index.
pub fn given_gpus(loc: &Locality, ids: &str) -> Result<AllowedGpus, String> {
    let ids = parse_list(ids).map_err(|e| format!("the job's GPUs on this node: {e}"))?;
    let devices = loc.gpus_numbered(&ids).map_err(|id| {
        format!(
            "Flux gave the job GPU {id} on this node, but its topology has {} GPU(s); is the instance's resource configuration describing this node as hwloc sees it?",
            loc.candidates(Kind::Gpu, None).len()
        )
    })?;
    let entries = devices
        .iter()
        .zip(&ids)
        .map(|(&d, id)| (d, id.to_string()))
        .collect();
    Ok(AllowedGpus { devices, entries })
}

/// The `lama` task-map scheme (`flux run -o taskmap=lama:MAP`): the job's tasks laid out across
/// its nodes by the LAMA map `map` (which may sweep the node level `n`) with the user's and the
/// site's other options. A shell sees only its own node's topology (`topo`) and, from R, the
/// cores Flux gave the job on every node (`cores[i]` for shell rank `i`): a node whose cores are
/// cores of `topo` is `topo` restricted to them; any other is modelled from its core count alone
/// ([`counted_node`]). `current` is the shell's map (RFC 34), which says how many tasks each node
/// holds and must keep. Returns the new map, RFC 34 encoded.
pub fn scheme_map(
    current: &str,
    map: &str,
    topo: &NodeTopology,
    cores: &[String],
    settings: &Settings,
    user: &Options,
) -> Result<String, StepError> {
    let layout = |m: String| StepError::Layout(m);
    let old = rfc34::decode(current).map_err(|e| layout(format!("the shell's task map: {e}")))?;
    let ntasks = usize::try_from(old.total_tasks()).map_err(|_| layout("too many tasks".into()))?;
    if old.nnodes() != cores.len() as u64 {
        return Err(layout(format!(
            "the shell's task map has {} nodes, the job {}",
            old.nnodes(),
            cores.len()
        )));
    }
    let mut opts = user.clone();
    if !map.is_empty() {
        opts.map = Some(map.to_string());
    }
    let req = settings.request(&opts, Some(ntasks))?.ok_or_else(|| {
        StepError::Option("--taskmap=lama needs lama's placement, but lama.off was given".into())
    })?;
    // Nodes given the same cores are one model (the mapper prepares a model once per address):
    // a job's nodes usually all are.
    let mut models: Vec<(&str, NodeTopology)> = Vec::new();
    let mut which = Vec::with_capacity(cores.len());
    for c in cores {
        let i = match models.iter().position(|(k, _)| k == c) {
            Some(i) => i,
            None => {
                let t = match cores_to_cpus(topo, c, None) {
                    Ok(cpus) => topo
                        .restricted(&cpus)
                        .map_err(|e| StepError::Cpus(e.to_string()))?
                        .into_owned(),
                    Err(_) => counted_node(topo, c, which.len())?,
                };
                models.push((c, t));
                models.len() - 1
            }
        };
        which.push(i);
    }
    // A node that cannot hold one task's binding would be left without a task: say which.
    for (n, &i) in which.iter().enumerate() {
        let held = models[i].1.objects(req.bind.level).len();
        if held < req.bind.width as usize {
            return Err(layout(format!(
                "--taskmap=lama:{map} binds each task to {} {} object(s), but node {n} has {held} (Flux gave the job cores {} there), so it could hold no task; bind narrower, or leave that node out",
                req.bind.width,
                req.bind.level.name(),
                cores[n]
            )));
        }
    }
    let refs: Vec<&NodeTopology> = which.iter().map(|&i| &models[i].1).collect();
    let p = plan(&refs, &req)?;
    let assignment: Vec<u32> = p.placements().iter().map(|pl| pl.node).collect();
    let new = TaskMap::encode(&assignment);
    // Flux keeps the job's node and task counts and lets the nodes' shares change, but a shell
    // without a task has nothing to run.
    if let Some(n) = (0..old.nnodes()).find(|&n| new.ntasks_on(n) == 0) {
        return Err(StepError::Layout(format!(
            "--taskmap=lama:{map} leaves node {n} without a task ({ntasks} task(s) over {} nodes); give a map that reaches every node (sweep n before the levels that fill a node, e.g. ncsbh), or fewer nodes",
            old.nnodes()
        )));
    }
    Ok(rfc34::encode_wrapped(&new))
}

/// A node another shell runs on, whose cores are not this node's, modelled from what R says of
/// it: as many cores as Flux gave the job there (`cores`, an idset), each with as many hardware
/// threads as this node's cores have, in one socket and one NUMA domain, without caches. Maps
/// over nodes, cores and hardware threads lay tasks out by it as on the real node; a map whose
/// outer levels (sockets, NUMA domains, caches) would decide which node a task goes to lays it
/// out as if the node had one of each.
pub fn counted_node(
    topo: &NodeTopology,
    cores: &str,
    rank: usize,
) -> Result<NodeTopology, StepError> {
    let cpus = |m: String| StepError::Cpus(m);
    let count = parse_list(cores)
        .map_err(|e| {
            cpus(format!(
                "node {rank}'s cores '{cores}' in R cannot be read: {e}"
            ))
        })?
        .len() as u32;
    if count == 0 {
        return Err(cpus(format!("node {rank} has no core in R")));
    }
    let threads = topo
        .objects(Level::Core)
        .first()
        .map_or(1, |s| s.len() as u32)
        .max(1);
    let n = count.saturating_mul(threads);
    // As many PUs as the largest machines have, and a little more; R could name millions.
    if n > 1 << 16 {
        return Err(cpus(format!(
            "node {rank} has {count} cores in R, more than lama places"
        )));
    }
    let whole = vec![Span { start: 0, end: n }];
    let mut levels: [Vec<Span>; 9] = Default::default();
    levels[Level::Numa.index()] = whole.clone();
    levels[Level::Socket.index()] = whole;
    levels[Level::Core.index()] = (0..count)
        .map(|c| Span {
            start: c * threads,
            end: (c + 1) * threads,
        })
        .collect();
    Ok(NodeTopology::from_parts(
        &format!("node {rank} (from R: {count} cores)"),
        (0..n).collect(),
        levels,
    ))
}

#[cfg(test)]
mod tests;
