//! The node cache: what a step needs to know about its machine (the topology and its devices, in
//! lama's own model rather than hwloc's), written by slurmd once at start and read by every
//! step. Reading it needs no hwloc at all: initializing hwloc costs milliseconds per process
//! (it opens every plugin it has: OpenCL, PCI, GL, libxml), and each step is a new process.
//!
//! The file is JSON, written atomically (a temporary file renamed over it). A file that cannot
//! be read, is of another format, or does not describe a sane machine is an error, never a
//! panic; the caller then probes the machine.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::level::Level;
use crate::locality::{Device, Locality, Numa, Place};
use crate::topology::{NodeTopology, Span};

/// The file format; a file of another format is not read.
pub const FORMAT: u32 = 1;

/// Highest CPU number a cache may name (hwloc's own limit is far below).
const MAX_CPU: u32 = 1 << 20;

/// A cache that cannot be written or used.
#[derive(Debug, Error)]
pub enum CacheError {
    /// The file cannot be read or written.
    #[error("topology cache {path}: {reason}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The file does not describe a usable node.
    #[error("topology cache {path} is not usable: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

#[derive(Serialize, Deserialize)]
struct File {
    lama_node_cache: u32,
    name: String,
    pus: Vec<u32>,
    /// Spans per level, in [`Level::ALL`] order.
    levels: Vec<Vec<Span>>,
    places: Vec<Place>,
    numa: Vec<Numa>,
    latency: Option<Vec<Vec<u64>>>,
    devices: Vec<Device>,
}

/// Writes `node` and its devices `loc` to `path`, readable by everyone, replacing any older file
/// in one step (a step starting meanwhile reads the old file or the new one, never a mix).
pub fn write(path: &Path, node: &NodeTopology, loc: &Locality) -> Result<(), CacheError> {
    let io = |reason: String| CacheError::Io {
        path: path.display().to_string(),
        reason,
    };
    let file = File {
        lama_node_cache: FORMAT,
        name: node.name().to_string(),
        pus: node.pus().to_vec(),
        levels: Level::ALL
            .iter()
            .map(|&l| node.objects(l).to_vec())
            .collect(),
        places: loc.places().to_vec(),
        numa: loc.numa().to_vec(),
        latency: loc.latency().map(<[Vec<u64>]>::to_vec),
        devices: loc.devices().to_vec(),
    };
    let text = serde_json::to_vec(&file).map_err(|e| io(e.to_string()))?;
    let dir = path
        .parent()
        .ok_or_else(|| io("no parent directory".into()))?;
    let name = path
        .file_name()
        .ok_or_else(|| io("no file name".into()))?
        .to_string_lossy();
    // Written as root: a folder others may write to would let them swap the file under us.
    let mode = std::os::unix::fs::MetadataExt::mode(
        &std::fs::metadata(dir).map_err(|e| io(e.to_string()))?,
    );
    if mode & 0o022 != 0 {
        return Err(io(format!(
            "the folder {} is writable by others than its owner (mode {:o}); lama writes its cache only into a folder they cannot change",
            dir.display(),
            mode & 0o7777
        )));
    }
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let written = (|| {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e.to_string())
    })
}

/// Reads a cache written by [`write`], checking that it describes a sane machine.
pub fn read(path: &Path) -> Result<(NodeTopology, Locality), CacheError> {
    let p = path.display().to_string();
    let invalid = |reason: String| CacheError::Invalid {
        path: p.clone(),
        reason,
    };
    let text =
        crate::limits::read_text(path, crate::limits::MAX_CACHE_BYTES).map_err(|reason| {
            CacheError::Io {
                path: p.clone(),
                reason,
            }
        })?;
    let f: File = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    if f.lama_node_cache != FORMAT {
        return Err(invalid(format!(
            "format {} (this lama reads {FORMAT})",
            f.lama_node_cache
        )));
    }
    if f.pus.is_empty() || f.pus.iter().any(|&c| c > MAX_CPU) {
        return Err(invalid("no CPUs, or a CPU number out of range".into()));
    }
    let mut sorted = f.pus.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != f.pus.len() {
        return Err(invalid("a CPU listed twice".into()));
    }
    let levels: [Vec<Span>; 9] = f
        .levels
        .try_into()
        .map_err(|_| invalid("not one span list per level".into()))?;
    let cpus_ok = |cpus: &[u32]| cpus.iter().all(|c| sorted.binary_search(c).is_ok());
    let parents_ok = f
        .places
        .iter()
        .enumerate()
        .all(|(i, pl)| pl.parent.is_none_or(|q| q < i) && cpus_ok(&pl.cpus));
    if f.places.is_empty() || !parents_ok || !f.numa.iter().all(|n| cpus_ok(&n.cpus)) {
        return Err(invalid("places or NUMA nodes do not fit the CPUs".into()));
    }
    if f.devices.iter().any(|d| d.place >= f.places.len()) {
        return Err(invalid(
            "a device hangs off a place that does not exist".into(),
        ));
    }
    let node = NodeTopology::from_parts(&f.name, f.pus, levels);
    Ok((node, Locality::new(f.places, f.numa, f.latency, f.devices)))
}

/// Whether a cache describes the node it is read on: written by this host (a copied file is
/// another machine's), and naming every CPU the reader may use (a CPU brought online since the
/// cache was written is not in it). `allowed` is ascending.
pub fn check_fresh(t: &NodeTopology, host: &str, allowed: &[u32]) -> Result<(), String> {
    if t.name() != host {
        return Err(format!(
            "the topology cache was written by host '{}', not by {host}",
            t.name()
        ));
    }
    let cpus = t.cpus();
    if let Some(c) = allowed.iter().find(|c| cpus.binary_search(c).is_err()) {
        return Err(format!(
            "the topology cache does not know CPU {c}, which this step may use (CPUs changed since slurmd started)"
        ));
    }
    Ok(())
}
