//! The node cache: what a step needs to know about its machine (the topology and its devices, in
//! lama's own model rather than hwloc's), written by slurmd once at start and read by every
//! step. Reading it needs no hwloc at all: initializing hwloc costs milliseconds per process
//! (it opens every plugin it has: OpenCL, PCI, GL, libxml), and each step is a new process.
//!
//! The text is two lines of compact JSON: the topology, then the devices (places, NUMA nodes,
//! distances, NICs and GPUs). A step that uses no devices reads the first line only. Both lines
//! describe alike objects as runs over the machine's PUs in logical order, so a 384-PU machine
//! with 1,200 places is a few dozen numbers and a step reads it in microseconds. The plugin's
//! hwloc helper answers in the same text ([`encode`], [`decode`]).
//!
//! The file is written atomically (a temporary file renamed over it). A file that cannot be
//! read, is of another format, or does not describe a sane machine is an error, never a panic;
//! the caller then probes the machine. This module is the text; [`files`] the files, who may
//! have written them, and their names.

use serde::{Deserialize, Serialize};
use thiserror::Error;

mod files;
mod places;

pub use files::{check_fresh, file_key, prepare_folder, read, source_key, write, xml_key, Writer};
use places::{decode_places, place_runs};

use crate::idset::{format_list, in_table, join_commas, table_of};
use crate::level::Level;
use crate::locality::MemoryKind;
use crate::locality::{Device, Locality, Numa};
use crate::topology::AbstractCores;
use crate::topology::{NodeTopology, Span};

/// The file format; a file of another format is not read.
pub const FORMAT: u32 = 5;

/// Highest CPU number a cache may name (hwloc's own limit is far below).
const MAX_CPU: u32 = 1 << 20;

/// Most places a PU may be in (its depth in the tree); real machines have about ten.
const MAX_DEPTH: u64 = 32;

/// Most NUMA nodes a cache may list (Linux's default limit on x86-64 is 1,024).
const MAX_NUMA: usize = 1024;

/// A cache that cannot be written or used.
#[derive(Debug, Error)]
pub enum CacheError {
    /// No cache there yet (nor, perhaps, its folder): normal before the first writer ran.
    #[error("topology cache {path} does not exist")]
    Missing {
        /// The file.
        path: String,
    },
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

// Both lines are compact, because steps parse them: a level's spans and the places as runs, CPU
// sets as cpulists (a 384-PU machine's topology is 1.6 kB, its devices 3 kB).
#[derive(Serialize, Deserialize)]
struct File {
    lama_node_cache: u32,
    name: String,
    /// The PUs' OS indexes in logical order, as decimal numbers joined by commas: read by
    /// [`numbers`], several times faster than a JSON array of as many numbers.
    pus: String,
    /// Per level, in [`Level::ALL`] order, its spans as runs `[start, width, count]`: `count`
    /// adjacent spans of `width` PUs from position `start`.
    levels: Vec<Vec<[u32; 3]>>,
    /// In a probe's answer only: the CPUs the probing process may use, a cpulist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    allowed: Option<String>,
    /// In slurmd's cache only: what the node's steps would otherwise read from the system in
    /// every step. A cache without it (written before it existed) still serves; its steps then
    /// read them themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    system: Option<SystemRecord>,
}

#[derive(Serialize, Deserialize)]
struct SystemRecord {
    /// `/sys/devices/system/cpu/online` when slurmd started, a cpulist.
    online: String,
    /// The cpuset hierarchy; `None` where none is mounted.
    cpusets: Option<crate::cpuset::Hierarchy>,
    /// Slurm's abstract cores: `[threads, stride, cores]`, or empty where they are hwloc's.
    /// Absent from a cache written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    slurm_cores: Option<Vec<u32>>,
}

/// What slurmd learns of its node once, at start, so that its steps need not read it again:
/// the CPUs online and where the cgroup hierarchy with the cpusets is mounted. A step still
/// reads its own cpuset, which belongs to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct System {
    /// The CPUs online (OS indexes, ascending).
    pub online: Vec<u32>,
    /// The cpuset hierarchy; `None` where none is mounted (every online CPU is usable).
    pub cpusets: Option<crate::cpuset::Hierarchy>,
    /// Which threads Slurm means by the node's cores, as slurmd decided from `slurm.conf`:
    /// `Some(None)` where they are hwloc's cores, `None` where the cache does not say.
    pub slurm_cores: Option<Option<AbstractCores>>,
}

#[derive(Serialize, Deserialize)]
struct Devices {
    /// The places' kind names.
    kinds: Vec<String>,
    /// The places as runs `[kind, index, parent, per_parent, start, width, count]`: `count`
    /// places of kind `kinds[kind]`, the k-th with hwloc index `index + k`, parent place
    /// `parent - 1 + k / per_parent` (`parent` 0: none), and the PUs at positions
    /// `start + k × width` to `start + (k + 1) × width` of the first line's `pus`.
    places: Vec<[u32; 7]>,
    numa: Vec<NumaRecord>,
    /// The NUMA latency matrix row by row, one number per pair of NUMA nodes, joined by commas.
    latency: Option<String>,
    devices: Vec<Device>,
}

/// Spans as runs of equal, adjacent spans.
fn runs(spans: &[Span]) -> Vec<[u32; 3]> {
    let mut out: Vec<[u32; 3]> = Vec::new();
    for s in spans {
        let width = s.end - s.start;
        match out.last_mut() {
            Some([start, w, count]) if *w == width && *start + *w * *count == s.start => {
                *count += 1
            }
            _ => out.push([s.start, width, 1]),
        }
    }
    out
}

/// The spans of runs, which may name at most `pus` spans (more cannot be disjoint).
fn spans(runs: &[[u32; 3]], pus: usize) -> Result<Vec<Span>, String> {
    let total: u64 = runs.iter().map(|r| u64::from(r[2])).sum();
    if total > pus as u64 || runs.iter().any(|r| r[1] == 0) {
        return Err("a level with more objects than PUs, or an empty one".into());
    }
    let mut out = Vec::with_capacity(total as usize);
    for &[start, width, count] in runs {
        for k in 0..u64::from(count) {
            let a = u64::from(start) + k * u64::from(width);
            let b = a + u64::from(width);
            if b > pus as u64 {
                return Err("an object beyond the last PU".into());
            }
            out.push(Span {
                start: a as u32,
                end: b as u32,
            });
        }
    }
    Ok(out)
}

/// A cpulist of the machine's CPUs (`known[c]` for each of them): at most as many as it has,
/// each one of them; ascending.
fn cpus(list: &str, known: &[bool]) -> Result<Vec<u32>, String> {
    let ranges = crate::idset::parse_ranges(list).map_err(|e| e.to_string())?;
    let total: u64 = ranges.iter().map(|&(a, b)| u64::from(b - a) + 1).sum();
    if total > known.len() as u64 {
        return Err(format!("more CPUs than the machine has in '{list}'"));
    }
    let mut out: Vec<u32> = Vec::with_capacity(total as usize);
    for (a, b) in ranges {
        out.extend(a..=b);
    }
    if !out.is_sorted() {
        out.sort_unstable();
    }
    out.dedup();
    if out.iter().any(|&c| !in_table(known, c)) {
        return Err(format!("a CPU the machine does not have in '{list}'"));
    }
    Ok(out)
}

/// The numbers of a list written by [`join_commas`]: at most `most`, each at most `max` (which
/// `T` holds).
fn numbers<T: TryFrom<u64>>(text: &str, most: usize, max: u64) -> Result<Vec<T>, String> {
    let bad = || {
        let start: String = text.chars().take(40).collect();
        format!("a list of numbers that is not one: '{start}'")
    };
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(most.min(text.len() / 2 + 1));
    // One pass over the bytes and a final comma: `n` is the number being read, `digits` how
    // many digits it has.
    let (mut n, mut digits) = (0u64, 0u32);
    for &b in text.as_bytes().iter().chain(b",") {
        if b == b',' {
            if digits == 0 || out.len() >= most {
                return Err(bad());
            }
            out.push(T::try_from(n).map_err(|_| bad())?);
            (n, digits) = (0, 0);
            continue;
        }
        let d = b.wrapping_sub(b'0');
        n = match n.checked_mul(10).and_then(|n| n.checked_add(u64::from(d))) {
            Some(v) if d <= 9 && v <= max => v,
            _ => return Err(bad()),
        };
        digits += 1;
    }
    Ok(out)
}

/// Flag of the plugin's hwloc helper (`lama_probe`): read the node's devices too.
pub const PROBE_DEVICES: u32 = 1;
/// Flag of the plugin's hwloc helper: keep the CPUs the caller may not use (Slurm numbers cores
/// over the whole node).
pub const PROBE_WHOLE: u32 = 2;

/// How much of a node to read: the topology alone (every step), with its NUMA nodes
/// (`--lama-mem=local`: a few numbers of the devices line, whose places and devices are skipped
/// unread), or with all its devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// The first line only.
    Topology,
    /// The topology and its NUMA nodes.
    Numa,
    /// The topology, its places, NUMA nodes and distances, and its devices.
    Devices,
}

impl From<bool> for Detail {
    /// `true`: with the devices.
    fn from(devices: bool) -> Detail {
        if devices {
            Detail::Devices
        } else {
            Detail::Topology
        }
    }
}

/// The devices line's NUMA nodes alone; serde skips the rest of the line without building it.
#[derive(Deserialize)]
struct NumaOnly {
    numa: Vec<NumaRecord>,
}

/// One NUMA node in the devices line ([`crate::tiers`]): short names, since steps parse them.
#[derive(Serialize, Deserialize)]
struct NumaRecord {
    /// OS index.
    os: u32,
    /// Its CPUs, a cpulist.
    cpus: String,
    /// Its kind of memory.
    kind: MemoryKind,
    /// Whether it is default memory.
    #[serde(rename = "def")]
    default: bool,
    /// Bytes.
    #[serde(rename = "cap", default, skip_serializing_if = "is_zero")]
    capacity: u64,
    /// Bandwidth from its own CPUs, MiB/s, when hwloc knows it.
    #[serde(rename = "bw", default, skip_serializing_if = "Option::is_none")]
    bandwidth: Option<u64>,
    /// Latency from its own CPUs, ns, when hwloc knows it.
    #[serde(rename = "lat", default, skip_serializing_if = "Option::is_none")]
    latency: Option<u64>,
    /// The CPUs without memory of their own that use this node's, a cpulist (absent when none,
    /// and in caches written before lama knew of them).
    #[serde(rename = "lent", default, skip_serializing_if = "String::is_empty")]
    borrowed: String,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A node as the cache and the hwloc probe describe it.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Its hardware.
    pub topology: NodeTopology,
    /// Its places, NUMA distances and devices, when they were read.
    pub locality: Option<Locality>,
    /// Its NUMA nodes, when they were read ([`Detail::Numa`] or [`Detail::Devices`]).
    pub numa: Option<Vec<Numa>>,
    /// The CPUs the process that read it may use, when it says.
    pub allowed: Option<Vec<u32>>,
    /// What slurmd learned of the node's system at start, when it says.
    pub system: Option<System>,
}

/// The text of a node: what [`write`] saves, and what the plugin's hwloc probe returns. Fails
/// when a place of `loc` does not hold consecutive PUs of the machine (hwloc's never do).
pub fn encode(
    node: &NodeTopology,
    loc: Option<&Locality>,
    allowed: Option<&[u32]>,
    system: Option<&System>,
) -> Result<String, String> {
    let devices = loc
        .map(|loc| place_runs(loc, node.pus()).map(|places| (loc, places)))
        .transpose()?;
    let devices = devices.map(|(loc, places)| Devices {
        kinds: loc.places.kinds.clone(),
        places,
        numa: loc
            .numa()
            .iter()
            .map(|n| NumaRecord {
                os: n.os_index,
                cpus: format_list(&n.cpus),
                kind: n.kind,
                default: n.default,
                capacity: n.capacity,
                bandwidth: n.bandwidth,
                latency: n.latency,
                borrowed: format_list(&n.borrowed),
            })
            .collect(),
        latency: loc
            .latency()
            .map(|rows| join_commas(rows.iter().flatten().map(u64::to_string))),
        devices: loc.devices().to_vec(),
    });
    let file = File {
        lama_node_cache: FORMAT,
        name: node.name().to_string(),
        pus: join_commas(node.pus().iter().map(u32::to_string)),
        // Cores that stand for hardware threads are made again on reading (topology.rs).
        levels: Level::ALL
            .iter()
            .map(|&l| match l {
                Level::Core if node.threads_as_cores() => runs(&[]),
                l => runs(node.objects(l)),
            })
            .collect(),
        allowed: allowed.map(format_list),
        system: system.map(|s| SystemRecord {
            online: format_list(&s.online),
            cpusets: s.cpusets.clone(),
            slurm_cores: s
                .slurm_cores
                .map(|c| c.map_or_else(Vec::new, |c| vec![c.threads, c.stride, c.cores])),
        }),
    };
    // Plain data with string keys: serialising it cannot fail.
    let mut text = serde_json::to_string(&file).unwrap_or_default();
    if let Some(d) = devices {
        text.push('\n');
        text.push_str(&serde_json::to_string(&d).unwrap_or_default());
    }
    Ok(text)
}

/// Reads the text of a node (from [`encode`]), checking that it describes a sane machine;
/// `source` names it in errors. Its devices are read only when `devices` (then they must be
/// there); otherwise they are skipped, unread.
pub fn decode(text: &str, source: &str, detail: impl Into<Detail>) -> Result<Node, CacheError> {
    let detail = detail.into();
    let invalid = |reason: String| CacheError::Invalid {
        path: source.to_string(),
        reason,
    };
    let (text, devices_text) = match text.split_once('\n') {
        Some((t, d)) => (t, Some(d)),
        None => (text, None),
    };
    let f: File = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
    if f.lama_node_cache != FORMAT {
        return Err(invalid(format!(
            "format {} (this lama reads {FORMAT})",
            f.lama_node_cache
        )));
    }
    let pus: Vec<u32> = numbers(&f.pus, MAX_CPU as usize + 1, u64::from(MAX_CPU))
        .map_err(|e| invalid(format!("PUs: {e}")))?;
    if pus.is_empty() {
        return Err(invalid("no CPUs".into()));
    }
    // Which CPU numbers the machine has, by number: each step checks every list against it.
    let known = table_of(&pus);
    if known.iter().filter(|&&k| k).count() != pus.len() {
        return Err(invalid("a CPU listed twice".into()));
    }
    let n = pus.len();
    let levels: Vec<Vec<Span>> = f
        .levels
        .iter()
        .map(|r| spans(r, n))
        .collect::<Result<_, _>>()
        .map_err(invalid)?;
    let levels: [Vec<Span>; 9] = levels
        .try_into()
        .map_err(|_| invalid("not one span list per level".into()))?;
    let allowed = f
        .allowed
        .map(|a| cpus(&a, &known))
        .transpose()
        .map_err(|e| invalid(format!("allowed CPUs: {e}")))?;
    let system = f
        .system
        .map(|r| {
            let slurm_cores = match r.slurm_cores.as_deref() {
                None => None,
                Some([]) => Some(None),
                Some(&[threads, stride, cores]) if threads > 0 && cores > 0 => {
                    Some(Some(AbstractCores {
                        threads,
                        stride,
                        cores,
                    }))
                }
                Some(other) => return Err(format!("Slurm's cores as {other:?}")),
            };
            cpus(&r.online, &known)
                .map_err(|e| format!("online CPUs: {e}"))
                .map(|online| System {
                    online,
                    cpusets: r.cpusets,
                    slurm_cores,
                })
        })
        .transpose()
        .map_err(invalid)?;
    let numa_of = |list: Vec<NumaRecord>| {
        if list.len() > MAX_NUMA {
            return Err(invalid(format!("more than {MAX_NUMA} NUMA nodes")));
        }
        list.into_iter()
            .map(|r| {
                Ok(Numa {
                    os_index: r.os,
                    cpus: cpus(&r.cpus, &known)?,
                    kind: r.kind,
                    default: r.default,
                    capacity: r.capacity,
                    bandwidth: r.bandwidth,
                    latency: r.latency,
                    borrowed: match r.borrowed.as_str() {
                        "" => Vec::new(),
                        list => cpus(list, &known)?,
                    },
                })
            })
            .collect::<Result<Vec<Numa>, String>>()
            .map_err(|e| invalid(format!("NUMA nodes: {e}")))
    };
    let devices_text = devices_text.filter(|_| detail != Detail::Topology);
    if detail != Detail::Topology && devices_text.is_none() {
        return Err(invalid("it has no devices".into()));
    }
    let mut numa_only = None;
    let locality = match devices_text {
        None => None,
        Some(raw) if detail == Detail::Numa => {
            let d: NumaOnly = serde_json::from_str(raw).map_err(|e| invalid(e.to_string()))?;
            numa_only = Some(numa_of(d.numa)?);
            None
        }
        Some(raw) => {
            let d: Devices = serde_json::from_str(raw).map_err(|e| invalid(e.to_string()))?;
            let places = decode_places(&d, &pus).map_err(|e| invalid(format!("places: {e}")))?;
            let numa = numa_of(d.numa)?;
            if d.devices.iter().any(|dev| dev.place >= places.parent.len()) {
                return Err(invalid(
                    "a device hangs off a place that does not exist".into(),
                ));
            }
            let latency = match &d.latency {
                Some(text) => {
                    let k = numa.len();
                    let all: Vec<u64> = numbers(text, k * k, u64::MAX)
                        .map_err(|e| invalid(format!("NUMA latencies: {e}")))?;
                    if all.len() != k * k {
                        return Err(invalid(format!(
                            "{} NUMA latencies for {k} NUMA nodes",
                            all.len()
                        )));
                    }
                    Some(all.chunks(k.max(1)).map(<[u64]>::to_vec).collect())
                }
                None => None,
            };
            Some(Locality::from_table(places, numa, latency, d.devices))
        }
    };
    let numa = numa_only.or_else(|| locality.as_ref().map(|l| l.numa().to_vec()));
    Ok(Node {
        topology: NodeTopology::from_parts(&f.name, pus, levels),
        locality,
        numa,
        allowed,
        system,
    })
}
