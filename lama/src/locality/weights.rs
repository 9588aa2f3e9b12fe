//! An administrator's device weights, in the notation of Open MPI's on-host topology proposal:
//!
//! ```text
//! # object          weight    device
//! Socket 0 (Core*) ----1---> mlx5_0
//!               |------4---> mlx5_1     # "|" continues with the object above
//! NUMANode 1 ------2-------> cuda0
//! ```
//!
//! Objects are `Machine`, `Group N`, `Package N` (or `Socket N`), `NUMANode N` (or `NUMA N`),
//! `Die N`, `L3 N`, `L2 N`, `L1 N`, `Core N`, `PU N`, with hwloc's logical index N; anything in
//! parentheses after it is a comment. Devices are named by any of their OS names. A device named in
//! the file is reached only through its lines there: from a task, the weight of the path up and
//! down the tree to the object ([`super::HOP`] per edge, plus NUMA latency) plus the line's weight.

use thiserror::Error;

use super::Locality;

/// A weights file that does not parse or does not fit the node; `line` is 1-based.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("weights file line {line}: {reason}")]
pub struct WeightsError {
    /// Line number.
    pub line: usize,
    /// What is wrong and what is valid.
    pub reason: String,
}

/// Edges per device: `(place, weight)`; `None` where the file does not name the device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Weights {
    edges: Vec<Option<Vec<(usize, u64)>>>,
}

const TYPES: &str = "Machine, Group N, Package N (Socket N), NUMANode N (NUMA N), Die N, L3 N, L2 N, L1 N, Core N, PU N";

impl Weights {
    /// The file's edges for device `d`, if it names it.
    pub fn edges(&self, d: usize) -> Option<&[(usize, u64)]> {
        self.edges.get(d).and_then(|e| e.as_deref())
    }

    /// Parses `text` against a node's places and devices.
    pub fn parse(text: &str, loc: &Locality) -> Result<Weights, WeightsError> {
        let mut edges: Vec<Option<Vec<(usize, u64)>>> = vec![None; loc.devices().len()];
        let mut previous: Option<usize> = None;
        for (i, raw) in text.lines().enumerate() {
            let bad = |reason: String| WeightsError {
                line: i + 1,
                reason,
            };
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let shape = || {
                bad(format!(
                    "'{line}' is not OBJECT ----WEIGHT---> DEVICE (or | ----WEIGHT---> DEVICE to continue the object above)"
                ))
            };
            let (left, device) = line.rsplit_once('>').ok_or_else(shape)?;
            let cut = left
                .char_indices()
                .rev()
                .find(|&(_, c)| c != '-' && !c.is_ascii_digit())
                .map_or(0, |(p, c)| p + c.len_utf8());
            let (object, edge) = left.split_at(cut);
            let weight = edge
                .strip_prefix('-')
                .and_then(|e| e.strip_suffix('-'))
                .map(|e| e.trim_matches('-'))
                .filter(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(shape)?;
            let weight: u64 = weight
                .parse()
                .ok()
                .filter(|&w| w <= 1_000_000)
                .ok_or_else(|| bad(format!("weight {weight} is too large (at most 1000000)")))?;
            let object = object.trim();
            let place = if object == "|" || object.is_empty() {
                previous.ok_or_else(|| {
                    bad("'|' continues an object, but no line above names one".into())
                })?
            } else {
                resolve_object(object, loc).map_err(bad)?
            };
            previous = Some(place);
            let device = device.trim();
            let d = loc
                .devices()
                .iter()
                .position(|d| {
                    d.names.iter().any(|n| n == device) || d.ucx.as_deref() == Some(device)
                })
                .ok_or_else(|| {
                    let all: Vec<&str> = loc.devices().iter().map(|d| d.name.as_str()).collect();
                    bad(format!(
                        "no device '{device}' on this node (devices: {})",
                        if all.is_empty() {
                            "none".to_string()
                        } else {
                            all.join(", ")
                        }
                    ))
                })?;
            edges[d].get_or_insert_with(Vec::new).push((place, weight));
        }
        Ok(Weights { edges })
    }
}

fn resolve_object(text: &str, loc: &Locality) -> Result<usize, String> {
    let plain = match text.find('(') {
        Some(p) if text.ends_with(')') => text[..p].trim(),
        Some(_) => return Err(format!("'{text}': unclosed '('")),
        None => text,
    };
    let mut words = plain.split_whitespace();
    let ty = words.next().unwrap_or("");
    let index = words.next();
    if let Some(extra) = words.next() {
        return Err(format!(
            "unexpected '{extra}' after the object (objects: {TYPES})"
        ));
    }
    let kind = match ty.to_ascii_lowercase().as_str() {
        "machine" => "Machine",
        "group" => "Group",
        "package" | "socket" => "Package",
        "numanode" | "numa" => "NUMANode",
        "die" => "Die",
        "l3" | "l3cache" => "L3",
        "l2" | "l2cache" => "L2",
        "l1" | "l1cache" => "L1",
        "core" => "Core",
        "pu" | "hwthread" => "PU",
        _ => return Err(format!("unknown object '{ty}' (objects: {TYPES})")),
    };
    if kind == "Machine" {
        return match index {
            None | Some("0") => Ok(0),
            Some(i) => Err(format!("Machine has no index {i}")),
        };
    }
    let n: usize = index
        .ok_or_else(|| format!("'{ty}' needs an index, e.g. {kind} 0"))?
        .parse()
        .map_err(|_| format!("'{plain}': the index must be a number"))?;
    if kind == "NUMANode" {
        let count = loc.numa.len();
        let numa = loc
            .numa
            .get(n)
            .ok_or_else(|| format!("no NUMANode {n} (this node has {count})"))?;
        return Ok(loc.place_of(&numa.cpus));
    }
    let count = loc.places().filter(|p| p.kind == kind).count();
    loc.places()
        .position(|p| p.kind == kind && p.index == n)
        .ok_or_else(|| format!("no {kind} {n} (this node has {count})"))
}
