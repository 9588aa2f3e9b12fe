//! Where a node's topology comes from: `topology=FILE`, slurmd's cache, or a probe of the
//! machine through the hwloc helper; and slurmd writing that cache at start.

use std::borrow::Cow;
use std::path::PathBuf;

use lama::cache::{self, CacheError, Detail, Writer};
use lama::locality::{Locality, Numa};
use lama::plugin::Settings;
use lama::slurm::node_conf::{node_conf, slurmd_cores, Hardware, Numbering};
use lama::topology::AbstractCores;
use lama::Level;
use lama::NodeTopology;
use slurm_spank::LogLevel;

use crate::log;

use crate::{affinity, probe};

/// A node's topology, the CPUs this slurmstepd may use, its devices and NUMA nodes when asked
/// for, and where they came from.
pub struct NodeFound {
    pub topology: NodeTopology,
    /// From the cache, the CPUs this process may run on ([`affinity::allowed`]), which lie
    /// within its cpuset: enough for a step whose CPUs are all among them ([`usable`]).
    /// Otherwise the CPUs its cpuset allows, as hwloc reads them.
    pub usable: Vec<u32>,
    /// What slurmd learned of the node at start (from the cache).
    pub system: Option<lama::cache::System>,
    pub locality: Option<Locality>,
    pub numa: Option<Vec<Numa>>,
    pub source: &'static str,
}

/// The cache of this host. A slurmd told to read a declared machine (`HWLOC_XMLFILE` in its
/// environment, which its slurmstepds inherit) keeps it under a name of its own, so that it is
/// never taken for the real machine's, nor the real machine's for it.
fn cache_file(settings: &Settings, host: &str) -> Option<PathBuf> {
    let dir = settings.cache.as_ref()?;
    let name = match std::env::var_os("HWLOC_XMLFILE") {
        Some(xml) => format!(
            "topology-{host}-{:016x}.json",
            lama::cache::source_key(&xml)
        ),
        None => format!("topology-{host}.json"),
    };
    Some(dir.join(name))
}

/// The node's topology, the CPUs this slurmstepd may use and what `detail` asks of its NUMA
/// nodes and devices: `topology=FILE`, else slurmd's cache of the whole machine (no hwloc at
/// all), else a probe of the machine.
pub fn find(settings: &Settings, host: &str, detail: Detail) -> Result<NodeFound, String> {
    if let Some(path) = &settings.topology {
        let n = probe::node(Some(path), detail)?;
        let usable = n.topology.cpus();
        // The file describes this node: the driver's MIG instances are this node's too.
        let mut locality = n.locality;
        if let Some(loc) = locality.as_mut() {
            lama::locality::driver::mark_mig_here(loc);
        }
        return Ok(NodeFound {
            topology: n.topology,
            usable,
            system: None,
            locality,
            numa: n.numa,
            source: "topology from its file (hwloc)",
        });
    }
    // A missing cache is normal (slurmd not restarted since lama was installed); anything else
    // found there is read, and reported when it cannot be used.
    if let Some(file) = cache_file(settings, host) {
        let read = match cache::read(&file, detail, Writer::Root) {
            Err(CacheError::Missing { .. }) => None,
            read => Some(
                read.map_err(|e| e.to_string())
                    .and_then(|n| from_cache(n, host)),
            ),
        };
        match read {
            Some(Ok(found)) => return Ok(found),
            Some(Err(e)) => log(
                LogLevel::Error,
                &format!("lama: {e}; probing the machine instead"),
            ),
            None => {}
        }
    }
    probed(detail)
}

/// A cache read, checked against this host and the CPUs this process may use.
fn from_cache(n: cache::Node, host: &str) -> Result<NodeFound, String> {
    // One system call; the cpuset's files are read only when the step needs them.
    let allowed = affinity::allowed()?;
    cache::check_fresh(&n.topology, host, &allowed)?;
    Ok(NodeFound {
        topology: n.topology,
        usable: allowed,
        system: n.system,
        locality: n.locality,
        numa: n.numa,
        source: FROM_CACHE,
    })
}

/// Where [`find`] says a topology came from when slurmd's cache served it.
pub const FROM_CACHE: &str = "topology from the cache";

/// The machine as the hwloc helper sees it now: what a step uses when no cache serves it, or
/// when the cache turns out not to describe the cores Slurm gave the step.
pub fn probed(detail: Detail) -> Result<NodeFound, String> {
    let n = probe::node(None, detail)?;
    let usable = n
        .allowed
        .ok_or("lama's hwloc helper did not say which CPUs the step may use")?;
    Ok(NodeFound {
        topology: n.topology,
        usable,
        system: None,
        locality: n.locality,
        numa: n.numa,
        source: "topology probed (hwloc)",
    })
}

/// The CPUs this slurmstepd may use, for a step whose CPUs on the node are `step` (ascending).
/// A process's affinity always lies within its cpuset, so a step whose CPUs it covers needs
/// nothing more; otherwise (slurmd pinned to the specialized cores under `CoreSpecCount`, say)
/// the cpuset decides ([`affinity::cpuset_cpus`]: the step's own cpuset file, where slurmd saw
/// the hierarchy).
pub fn usable<'a>(found: &'a NodeFound, step: &[u32]) -> Result<Cow<'a, [u32]>, String> {
    let covered = step.iter().all(|c| found.usable.binary_search(c).is_ok());
    if covered || found.source != FROM_CACHE {
        return Ok(Cow::Borrowed(&found.usable));
    }
    affinity::cpuset_cpus(found.system.as_ref()).map(Cow::Owned)
}

extern "C" {
    /// `c/slurm_conf.c`: the loaded `slurm.conf`'s path, or NULL.
    fn lama_slurm_conf_path() -> *const std::os::raw::c_char;
    /// `c/slurm_conf.c`: 1 with `SlurmdParameters=config_overrides`, else 0.
    fn lama_config_overrides() -> std::os::raw::c_int;
}

/// How this release numbers a core's hardware threads.
const NUMBERING: Numbering = if cfg!(hw_thread_numbering) {
    Numbering::Hardware
} else {
    Numbering::Configured
};

/// Which threads Slurm means by this node's cores, as slurmd decides from the node's line in the
/// `slurm.conf` Slurm loaded (`lama::slurm::node_conf`): `None` where they are hwloc's cores (a
/// node declared as it is, a node no line names, a machine hwloc shows without cores).
#[cold]
#[inline(never)]
pub fn slurm_cores(topology: &NodeTopology, host: &str) -> Result<Option<AbstractCores>, String> {
    // SAFETY: reads a field of libslurm's loaded configuration; the string lives as long as it.
    let path = unsafe { lama_slurm_conf_path() };
    if path.is_null() {
        return Err("cannot tell where slurm.conf is".into());
    }
    // SAFETY: a NUL-terminated string of libslurm's configuration, copied at once.
    let path = unsafe { std::ffi::CStr::from_ptr(path) }
        .to_string_lossy()
        .into_owned();
    let declared = node_conf(std::path::Path::new(&path), host)?;
    let Some(conf) = declared.node else {
        return Ok(None);
    };
    if !topology.has(Level::Core) {
        return Ok(None);
    }
    // SAFETY: as above, one flag read.
    let overrides = declared.overrides || unsafe { lama_config_overrides() } == 1;
    let hw = Hardware {
        cpus: topology.num_pus() as u32,
        cores: topology.objects(Level::Core).len() as u32,
    };
    Ok(slurmd_cores(&conf, hw, overrides, NUMBERING))
}

/// Slurm's cores of this node for a step: slurmd's record in the cache; else, for a topology
/// probed or read from `topology=FILE`, read now. A cache written before the record existed
/// keeps hwloc's cores (as before, until slurmd restarts): the rule is slurmd's view of its own
/// hardware, and a cache of another machine must still show as one (a core it lacks). What
/// cannot be read is said at `--lama-verbose` / `-v` level, and the cores are taken as hwloc's.
pub fn slurm_cores_of(found: &NodeFound, host: &str) -> Option<AbstractCores> {
    if found.source == FROM_CACHE {
        return found.system.as_ref().and_then(|s| s.slurm_cores).flatten();
    }
    slurm_cores(&found.topology, host).unwrap_or_else(|e| {
        log(
            LogLevel::Verbose,
            &format!("lama: {e}; Slurm's cores of {host} taken as hwloc's"),
        );
        None
    })
}

/// In slurmd at start-up (as root): save the machine's topology for the steps to load.
pub fn write_cache(settings: &Settings) {
    let host = affinity::hostname();
    let Some(file) = cache_file(settings, &host) else {
        return;
    };
    let made = match file.parent() {
        Some(dir) => cache::prepare_folder(dir, Writer::Root).map_err(|e| e.to_string()),
        None => Ok(()),
    };
    let saved = made.and_then(|_| {
        let n = probe::node(None, Detail::Devices)?;
        let loc = n.locality.ok_or("lama's hwloc helper read no devices")?;
        // Learned here once, so that no step reads the mounts or the CPUs online again.
        let mut system = affinity::system()?;
        // Read here once, so that no step reads slurm.conf: on a node declared as hwloc sees
        // it, `Some(None)`.
        system.slurm_cores = Some(slurm_cores(&n.topology, &host).unwrap_or_else(|e| {
            log(
                LogLevel::Error,
                &format!("lama: {e}; steps take Slurm's cores of this node as hwloc's"),
            );
            None
        }));
        let topology = n.topology.with_name(&host);
        cache::write(&file, &topology, &loc, Some(&system), Writer::Root).map_err(|e| e.to_string())
    });
    if let Err(e) = saved {
        log(
            LogLevel::Error,
            &format!(
                "lama: cannot cache the topology in {}: {e}; steps will probe the machine",
                file.display()
            ),
        );
    }
}
