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
        let mut map_str = DEFAULT_MAP.to_string();
        let mut mppr = Vec::new();
        let mut default_np = DefaultNp::Sweep;
        let mut pe: Option<u32> = None;
        let mut oversub = oversubscribe;
        let mut hwthread_cpus = false;
        if let Some(v) = opts.map_by {
            let mut parts = v.split(':');
            let head = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let e = |reason: String| SpecError::new(Input::MapBy, v, reason);
            if head == "ppr" {
                let count = parts.next().unwrap_or("");
                let level = parts.next().unwrap_or("");
                let level = simple_level_token(level).unwrap_or(level);
                let limit = parse_mppr(&format!("{count}:{level}"))
                    .map_err(|m| e(format!("in ppr: {}", m.reason)))?;
                let lim = limit[0];
                mppr.push(lim);
                default_np = DefaultNp::PerObject(lim);
            } else if head == "board" {
                return Err(e("mapping by board is not offered at the simple level; use the expert map, e.g. --map bsNnch (boards, then sockets, then nodes)".into()));
            } else if head == "seq" || head == "sequential" {
                return Err(e("sequential mapping follows a host list, not the hardware; write the host list with `lama hostfile --mapper seq` and run srun -m arbitrary".into()));
            } else {
                let Some((_, m)) = MAP_BY.iter().find(|(n, _)| *n == head) else {
                    return Err(e(format!("unknown mapping '{head}'")).at(1, &head));
                };
                map_str = m.to_string();
                hwthread_cpus = head == "hwthread";
            }
            for modifier in parts {
                let m = modifier.trim().to_ascii_lowercase();
                for m in m.split(',') {
                    if let Some(k) = m.strip_prefix("pe=") {
                        match k.parse::<u32>() {
                            Ok(k) if (1..=999).contains(&k) => pe = Some(k),
                            _ => {
                                return Err(e(format!(
                                    "pe={k}: the number of processing elements must be 1 to 999"
                                )))
                            }
                        }
                    } else if m == "oversubscribe" {
                        oversub = true;
                    } else if m == "nooversubscribe" {
                        oversub = false;
                    } else {
                        return Err(e(format!(
                            "unknown modifier '{m}' (valid: pe=K, oversubscribe, nooversubscribe)"
                        )));
                    }
                }
            }
        }
        let mut bind = Binding {
            width: 1,
            level: Level::Node,
        };
        if let Some(v) = opts.bind_to {
            let head = v.trim().to_ascii_lowercase();
            if head == "board" {
                return Err(SpecError::new(Input::BindTo, v, "binding to a board is not offered at the simple level; use the expert binding --bind 1b"));
            }
            let Some((_, b)) = BIND_TO.iter().find(|(n, _)| *n == head) else {
                return Err(
                    SpecError::new(Input::BindTo, v, format!("unknown binding '{head}'"))
                        .at(1, &head),
                );
            };
            if let Some(level) = b {
                bind.level = *level;
            }
            hwthread_cpus |= head == "hwthread";
        }
        if let Some(k) = pe {
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
        let mut map = map_tokens(Input::Map, &map_str)?;
        if !map.contains(&bind.level) {
            map.insert(1, bind.level);
        }
        let order = match opts.rank_by {
            None => Order::Natural,
            Some(v) => {
                let head = v.trim().to_ascii_lowercase();
                if !RANK_BY.contains(&head.as_str()) {
                    return Err(SpecError::new(
                        Input::RankBy,
                        v,
                        format!("unknown ranking '{head}'"),
                    )
                    .at(1, &head));
                }
                if head == "slot" {
                    Order::Sequential
                } else {
                    Order::Natural
                }
            }
        };
        check_np(np)?;
        Ok(Request {
            map,
            bind,
            mppr,
            order,
            oversubscribe: oversub,
            np,
            default_np,
        })
    }
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
