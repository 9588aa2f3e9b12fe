//! The simple level: `map-by` (with `ppr:K:level`, `pe=K` and the oversubscribe modifiers),
//! `bind-to` and `rank-by`, translated into an expert [`Request`].

use super::Binding;
use super::{
    check_np, map_tokens, parse_mppr, DefaultNp, Input, Order, Request, SpecError, DEFAULT_MAP,
};
use crate::level::Level;

impl Request {
    /// Builds a request from the simple level (see [`Simple`]).
    pub fn simple(
        opts: &Simple<'_>,
        np: Option<usize>,
        oversubscribe: bool,
    ) -> Result<Request, SpecError> {
        let by = match opts.map_by {
            Some(v) => map_by(v, oversubscribe)?,
            None => MapBy::default_map(oversubscribe),
        };
        let mut hwthread_cpus = by.hwthread_cpus;
        let mut bind = Binding {
            width: 1,
            level: Level::Node,
        };
        if let Some(v) = opts.bind_to {
            let (level, hwthread) = bind_to(v)?;
            if let Some(level) = level {
                bind.level = level;
            }
            hwthread_cpus |= hwthread;
        }
        if let Some(k) = by.pe {
            bind = Binding {
                width: k,
                level: if hwthread_cpus {
                    Level::Hwthread
                } else {
                    Level::Core
                },
            };
        }
        // The simple level inserts a missing binding token right after the first map token, so
        // that map-by socket with bind-to numa spreads NUMA nodes the way sockets are spread.
        let mut map = map_tokens(Input::Map, &by.map)?;
        if !map.contains(&bind.level) {
            map.insert(1, bind.level);
        }
        let order = match opts.rank_by {
            None => Order::Natural,
            Some(v) => rank_by(v)?,
        };
        check_np(np)?;
        Ok(Request {
            map,
            bind,
            mppr: by.mppr,
            order,
            oversubscribe: by.oversubscribe,
            np,
            default_np: by.default_np,
        })
    }
}

/// What `map-by` says: the map, `ppr`'s limit and count, `pe=K`, and the modifiers.
struct MapBy {
    map: String,
    mppr: Vec<super::Limit>,
    default_np: DefaultNp,
    pe: Option<u32>,
    oversubscribe: bool,
    hwthread_cpus: bool,
}

impl MapBy {
    /// No `map-by`: the default map, one full sweep.
    fn default_map(oversubscribe: bool) -> MapBy {
        MapBy {
            map: DEFAULT_MAP.to_string(),
            mppr: Vec::new(),
            default_np: DefaultNp::Sweep,
            pe: None,
            oversubscribe,
            hwthread_cpus: false,
        }
    }
}

fn map_by(v: &str, oversubscribe: bool) -> Result<MapBy, SpecError> {
    let mut by = MapBy::default_map(oversubscribe);
    let mut parts = v.split(':');
    let head = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let e = |reason: String| SpecError::new(Input::MapBy, v, reason);
    if head == "ppr" {
        let count = parts.next().unwrap_or("");
        let level = parts.next().unwrap_or("");
        let level = simple_level_token(level).unwrap_or(level);
        let level = simple_level_token(level).unwrap_or(level);
        let limit = parse_mppr(&format!("{count}:{level}"))
            .map_err(|m| e(format!("in ppr: {}", m.reason)))?;
        let lim = limit[0];
        by.mppr.push(lim);
        by.default_np = DefaultNp::PerObject(lim);
    } else if head == "board" {
        return Err(e("mapping by board is not offered at the simple level; use the expert map, e.g. --map bsNnch (boards, then sockets, then nodes)".into()));
    } else if head == "seq" || head == "sequential" {
        return Err(e("sequential mapping follows a host list, not the hardware; write the host list with `lama hostfile --mapper seq` and run srun -m arbitrary".into()));
    } else {
        let Some((_, m)) = MAP_BY.iter().find(|(n, _)| *n == head) else {
            return Err(e(format!("unknown mapping '{head}'")).at(1, &head));
        };
        by.map = m.to_string();
        by.hwthread_cpus = head == "hwthread";
    }
    for modifier in parts {
        let m = modifier.trim().to_ascii_lowercase();
        for m in m.split(',') {
            if let Some(k) = m.strip_prefix("pe=") {
                match k.parse::<u32>() {
                    Ok(k) if (1..=999).contains(&k) => by.pe = Some(k),
                    _ => {
                        return Err(e(format!(
                            "pe={k}: the number of processing elements must be 1 to 999"
                        )))
                    }
                }
            } else if m == "oversubscribe" {
                by.oversubscribe = true;
            } else if m == "nooversubscribe" {
                by.oversubscribe = false;
            } else {
                return Err(e(format!(
                    "unknown modifier '{m}' (valid: pe=K, oversubscribe, nooversubscribe)"
                )));
            }
        }
    }
    Ok(by)
}

/// `bind-to`'s level (none for `none`), and whether it names hardware threads.
fn bind_to(v: &str) -> Result<(Option<Level>, bool), SpecError> {
    let head = v.trim().to_ascii_lowercase();
    if head == "board" {
        return Err(SpecError::new(Input::BindTo, v, "binding to a board is not offered at the simple level; use the expert binding --bind 1b"));
    }
    let Some((_, b)) = BIND_TO.iter().find(|(n, _)| *n == head) else {
        return Err(
            SpecError::new(Input::BindTo, v, format!("unknown binding '{head}'")).at(1, &head),
        );
    };
    Ok((*b, head == "hwthread"))
}

fn rank_by(v: &str) -> Result<Order, SpecError> {
    let head = v.trim().to_ascii_lowercase();
    if !RANK_BY.contains(&head.as_str()) {
        return Err(
            SpecError::new(Input::RankBy, v, format!("unknown ranking '{head}'")).at(1, &head),
        );
    }
    Ok(if head == "slot" {
        Order::Sequential
    } else {
        Order::Natural
    })
}

/// The level token for a simple-level name (`socket` is `s`); tokens pass through.
fn simple_level_token(name: &str) -> Option<&'static str> {
    let n = name.trim();
    let l = match n.to_ascii_lowercase().as_str() {
        "node" => Level::Node,
        "board" => Level::Board,
        "numa" => Level::Numa,
        "socket" | "package" => Level::Socket,
        "l3cache" => Level::L3,
        "l2cache" => Level::L2,
        "l1cache" => Level::L1,
        "core" => Level::Core,
        "hwthread" => Level::Hwthread,
        _ => return Level::from_token(n).map(|l| l.token()),
    };
    Some(l.token())
}

/// The simple-level options as given.
#[derive(Clone, Debug, Default)]
pub struct Simple<'a> {
    /// `map-by`, with optional `:pe=K`, `:oversubscribe` modifiers, or `ppr:K:level`.
    pub map_by: Option<&'a str>,
    /// `bind-to`.
    pub bind_to: Option<&'a str>,
    /// `rank-by`.
    pub rank_by: Option<&'a str>,
}

/// map-by names and their expert maps.
pub const MAP_BY: [(&str, &str); 9] = [
    ("node", "nbsch"),
    ("numa", "Nbnsch"),
    ("socket", "sbnch"),
    ("l3cache", "L3sNbnL2L1ch"),
    ("l2cache", "L2sNbnL1ch"),
    ("l1cache", "L1sNbnch"),
    ("core", "csbnh"),
    ("slot", "csbnh"),
    ("hwthread", "hcsbn"),
];

/// bind-to names and their levels (`None`: no binding beyond the node).
pub const BIND_TO: [(&str, Option<Level>); 8] = [
    ("hwthread", Some(Level::Hwthread)),
    ("core", Some(Level::Core)),
    ("l1cache", Some(Level::L1)),
    ("l2cache", Some(Level::L2)),
    ("l3cache", Some(Level::L3)),
    ("socket", Some(Level::Socket)),
    ("numa", Some(Level::Numa)),
    ("none", None),
];

/// rank-by names (`slot` is sequential, every other one natural).
pub const RANK_BY: [&str; 10] = [
    "slot", "node", "numa", "socket", "l3cache", "l2cache", "l1cache", "core", "hwthread", "board",
];
