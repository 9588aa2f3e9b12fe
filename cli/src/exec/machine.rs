//! What `lama exec` reads of its node: the topology (slurmd's node cache, else hwloc once), the
//! CPUs the job may use (the process's cgroup cpuset, not an affinity mask a launcher already
//! narrowed) and the GPUs the scheduler gave it.

use lama::cache::{self, CacheError, Detail, Writer};
use lama::locality::{allowed_gpus, AllowedGpus, Locality};
use lama::NodeTopology;

use crate::affinity;

/// The node as `lama exec` sees it.
pub struct Machine {
    pub topology: NodeTopology,
    pub locality: Option<Locality>,
    /// The CPUs the job may use (OS indexes, ascending).
    pub cpus: Vec<u32>,
    /// False when hwloc reads a declared machine (`HWLOC_XMLFILE`): CPUs are computed and
    /// exported, not bound, as the plugins do with `topology=FILE`.
    pub bind: bool,
    pub source: &'static str,
    /// Why a cache that is there was not used (said with `--verbose`).
    pub note: Option<String>,
}

/// Whether hwloc will read a declared machine rather than this one.
fn declared() -> bool {
    crate::env("HWLOC_XMLFILE").is_some() && crate::env("HWLOC_THISSYSTEM").as_deref() != Some("1")
}

/// The node cache slurmd keeps for its steps (`/run/lama`, or `LAMA_CACHE` when set), under
/// the name slurmd gives it for this host and hwloc source.
fn cache_file(host: &str) -> std::path::PathBuf {
    let dir = crate::env("LAMA_CACHE").unwrap_or_else(|| "/run/lama".into());
    let name = match std::env::var_os("HWLOC_XMLFILE") {
        Some(xml) => format!("topology-{host}-{:016x}.json", cache::source_key(&xml)),
        None => format!("topology-{host}.json"),
    };
    std::path::Path::new(&dir).join(name)
}

/// Reads the node: `devices` asks for its devices and NUMA nodes too; `cpus` is `--cpus`.
pub fn read(devices: bool, cpus: Option<&str>) -> Result<Machine, String> {
    let bind = !declared();
    let host = affinity::hostname();
    let detail = if devices {
        Detail::Devices
    } else {
        Detail::Topology
    };
    // A missing cache is the usual case off Slurm; one that cannot be used is said with
    // --verbose, and hwloc reads the machine instead.
    let mut note = None;
    let cached = match cache::read(&cache_file(&host), detail, Writer::Root) {
        Ok(n) => Some(n),
        Err(CacheError::Missing { .. }) => None,
        Err(e) => {
            note = Some(e.to_string());
            None
        }
    };
    let (topology, locality, allowed, source) = match cached {
        Some(n) => {
            let allowed = if bind {
                affinity::cpuset_cpus(n.system.as_ref())?
            } else {
                n.topology.cpus()
            };
            match cache::check_fresh(&n.topology, &host, &allowed) {
                Ok(()) => (n.topology, n.locality, allowed, "topology from the cache"),
                Err(e) => {
                    note = Some(e);
                    probe(devices)?
                }
            }
        }
        None => probe(devices)?,
    };
    let cpus = match cpus {
        None => allowed,
        Some(list) => {
            let mut want = lama::idset::parse_list(list)
                .map_err(|e| format!("--cpus '{}': {e}", lama::quote::cut(list)))?;
            let outside: Vec<u32> = want
                .iter()
                .copied()
                .filter(|c| allowed.binary_search(c).is_err())
                .collect();
            if !outside.is_empty() {
                return Err(format!(
                    "--cpus {}: CPUs {} are not among those this job may use here ({})",
                    lama::quote::cut(list),
                    lama::idset::format_list(&outside),
                    lama::idset::format_list(&allowed)
                ));
            }
            want.sort_unstable();
            want.dedup();
            want
        }
    };
    Ok(Machine {
        topology,
        locality,
        cpus,
        bind,
        source,
        note,
    })
}

type Probed = (NodeTopology, Option<Locality>, Vec<u32>, &'static str);

/// The machine read by hwloc: the whole node (schedulers count cores over it) and the CPUs its
/// cgroup allows.
fn probe(devices: bool) -> Result<Probed, String> {
    if devices {
        let (t, allowed, l) =
            NodeTopology::this_machine_with_devices(true).map_err(|e| e.to_string())?;
        Ok((t, Some(l), allowed, "topology (hwloc)"))
    } else {
        let (t, allowed) = NodeTopology::this_machine_whole().map_err(|e| e.to_string())?;
        Ok((t, None, allowed, "topology (hwloc)"))
    }
}

/// The GPUs the job may use: those the scheduler's variables name (`CUDA_VISIBLE_DEVICES` and
/// the like, with Slurm's `SLURM_STEP_GPUS` beside them), none inside a Slurm job that names
/// none (or under Flux's `-1`), else every GPU of the node (`None`).
pub fn job_gpus(loc: &Locality) -> Result<Option<AllowedGpus>, String> {
    let get = |k: &str| crate::env(k);
    let none = AllowedGpus {
        devices: Vec::new(),
        entries: Vec::new(),
    };
    if [
        "CUDA_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "ZE_AFFINITY_MASK",
    ]
    .iter()
    .any(|v| get(v).is_some_and(|x| x.trim() == "-1"))
    {
        return Ok(Some(none));
    }
    match allowed_gpus(loc, get).map_err(|e| lama::exec::exec_words(&e.to_string()))? {
        Some(g) => Ok(Some(g)),
        None if get("SLURM_JOB_ID").is_some() => Ok(Some(none)),
        None => Ok(None),
    }
}
