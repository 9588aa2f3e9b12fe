//! The simple level as Open MPI 5 (PRRTE 3.0) reads it: `map-by`, `bind-to` and `rank-by` with
//! its defaults, its modifiers and its refusals, placed rule for rule as its round-robin and
//! `ppr` mappers place them (`docs/open-mpi.md` names the few places lama departs, and why).
//!
//! [`OpenMpi`] is what the user said, before any default; [`OpenMpi::resolve`] applies Open MPI's
//! defaults for a job of `np` ranks; `crate::mapper` places it. Slots are a node's cores
//! (hardware threads with `:hwtcpus`) unless the caller gives them, as the plugin does with the
//! tasks Slurm put on the node.

use serde::Serialize;

use super::{Input, SpecError};
use crate::level::Level;

/// An object Open MPI maps by or binds to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Obj {
    /// The whole node (`--map-by node`, `ppr:K:node`).
    Node,
    /// A package (`socket` is its older name).
    Package,
    /// A NUMA domain.
    Numa,
    /// An L3 cache.
    L3,
    /// An L2 cache.
    L2,
    /// An L1 cache.
    L1,
    /// A core.
    Core,
    /// A hardware thread.
    Hwthread,
}

impl Obj {
    /// The LAMA level holding these objects.
    pub fn level(self) -> Level {
        match self {
            Obj::Node => Level::Node,
            Obj::Package => Level::Socket,
            Obj::Numa => Level::Numa,
            Obj::L3 => Level::L3,
            Obj::L2 => Level::L2,
            Obj::L1 => Level::L1,
            Obj::Core => Level::Core,
            Obj::Hwthread => Level::Hwthread,
        }
    }
    /// Open MPI's name.
    pub fn name(self) -> &'static str {
        match self {
            Obj::Node => "node",
            Obj::Package => "package",
            Obj::Numa => "numa",
            Obj::L3 => "l3cache",
            Obj::L2 => "l2cache",
            Obj::L1 => "l1cache",
            Obj::Core => "core",
            Obj::Hwthread => "hwthread",
        }
    }
    fn parse(name: &str) -> Option<Obj> {
        Some(match name {
            "package" | "socket" => Obj::Package,
            "numa" => Obj::Numa,
            "l3cache" => Obj::L3,
            "l2cache" => Obj::L2,
            "l1cache" => Obj::L1,
            "core" => Obj::Core,
            "hwthread" => Obj::Hwthread,
            _ => return None,
        })
    }
}

/// How ranks are mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Mapping {
    /// Each node's slots in turn (`slot`).
    Slot,
    /// Round robin over the nodes (`node`).
    Node,
    /// Round robin over the objects of a node, the node's slots filled before the next.
    Object(Obj),
    /// `count` ranks on every object (`ppr:count:obj`).
    Ppr(u32, Obj),
}

impl Mapping {
    /// Open MPI's word for it.
    pub fn describe(self) -> String {
        match self {
            Mapping::Slot => "slot".into(),
            Mapping::Node => "node".into(),
            Mapping::Object(o) => o.name().into(),
            Mapping::Ppr(k, o) => format!("ppr:{k}:{}", o.name()),
        }
    }
}

/// How ranks are numbered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Ranking {
    /// Each node's ranks in the order they were mapped, node after node.
    Slot,
    /// One rank per node in turn.
    Node,
    /// Every rank of one object, then the next object.
    Fill,
    /// One rank per object across all nodes, round after round.
    Span,
}

/// The simple level as given, before Open MPI's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OpenMpi {
    /// `map-by`'s policy, when given.
    pub map: Option<Mapping>,
    /// `:span`: spread over the nodes instead of filling each node first.
    pub span: bool,
    /// `:pe=K`, when given.
    pub pe: Option<u32>,
    /// `:hwtcpus`: hardware threads are the CPUs.
    pub hwtcpus: bool,
    /// `:oversubscribe` (`Some(true)`) or `:nooversubscribe` (`Some(false)`).
    pub oversubscribe: Option<bool>,
    /// `bind-to`, when given: `Some(None)` is `none`.
    pub bind: Option<Option<Obj>>,
    /// `bind-to ...:overload-allowed`: more ranks than CPUs on one object.
    pub overload: bool,
    /// `rank-by`, when given.
    pub rank: Option<Ranking>,
    /// Slots per node, when the caller knows them (the tasks Slurm put on a node); else cores.
    pub slots: Option<u32>,
}

/// [`OpenMpi`] with every default applied for one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The mapping.
    pub map: Mapping,
    /// Spread over nodes.
    pub span: bool,
    /// CPUs per rank.
    pub pe: u32,
    /// Hardware threads are the CPUs.
    pub hwt: bool,
    /// Oversubscription allowed.
    pub oversubscribe: bool,
    /// The binding object (`None`: unbound).
    pub bind: Option<Obj>,
    /// Whether the user gave the binding (Open MPI drops a default binding on overloaded nodes).
    pub bind_given: bool,
    /// Overload allowed.
    pub overload: bool,
    /// The ranking.
    pub rank: Ranking,
}

impl Resolved {
    /// The placement in Open MPI's words, every default spelt out: `map-by package:pe=2
    /// bind-to core rank-by slot`.
    pub fn describe(&self) -> String {
        let mut map = self.map.describe();
        if self.pe > 1 {
            map.push_str(&format!(":pe={}", self.pe));
        }
        if self.span {
            map.push_str(":span");
        }
        if self.oversubscribe {
            map.push_str(":oversubscribe");
        }
        let rank = match self.rank {
            Ranking::Slot => "slot",
            Ranking::Node => "node",
            Ranking::Fill => "fill",
            Ranking::Span => "span",
        };
        format!(
            "map-by {map}  bind-to {}{}  rank-by {rank}",
            self.bind.map_or("none", |b| b.name()),
            if self.overload {
                ":overload-allowed"
            } else {
                ""
            }
        )
    }
}

fn err(input: Input, value: &str, reason: String) -> SpecError {
    SpecError::new(input, value, reason)
}

impl OpenMpi {
    /// Reads the three options; `None` for those not given.
    pub fn parse(
        map_by: Option<&str>,
        bind_to: Option<&str>,
        rank_by: Option<&str>,
    ) -> Result<OpenMpi, SpecError> {
        let mut o = OpenMpi::default();
        if let Some(v) = map_by {
            o.parse_map_by(v)?;
        }
        if let Some(v) = bind_to {
            o.parse_bind_to(v)?;
        }
        if let Some(v) = rank_by {
            o.rank = Some(parse_rank_by(v)?);
        }
        Ok(o)
    }

    fn parse_map_by(&mut self, v: &str) -> Result<(), SpecError> {
        let lower = v.trim().to_ascii_lowercase();
        let mut parts = lower.split(':');
        let head = parts.next().unwrap_or("");
        let e = |reason: String| err(Input::MapBy, v, reason);
        self.map = Some(match head {
            "slot" => Mapping::Slot,
            "node" => Mapping::Node,
            "ppr" => {
                let count = parts.next().unwrap_or("");
                let obj = parts.next().unwrap_or("");
                let k = match count.parse::<u32>() {
                    Ok(k) if (1..=crate::limits::MAX_TASKS as u32).contains(&k) => k,
                    _ => return Err(e(format!("ppr:{count}: the count must be a whole number from 1 (ppr:K:object, e.g. ppr:2:package)"))),
                };
                let o = if obj == "node" {
                    Obj::Node
                } else {
                    Obj::parse(obj).ok_or_else(|| {
                        e(format!(
                            "ppr:{k}:{obj}: unknown object{} (valid: node, package, numa, l3cache, l2cache, l1cache, core, hwthread)",
                            did_you_mean(obj, OBJECT_NAMES)
                        ))
                    })?
                };
                Mapping::Ppr(k, o)
            }
            "board" => return Err(e("mapping by board is not offered at the simple level; use the expert map, e.g. --map bsNnch (boards, then sockets, then nodes)".into())),
            "seq" | "sequential" => return Err(e("sequential mapping follows a host list, not the hardware; write the host list with `lama hostfile --mapper seq` and run srun -m arbitrary".into())),
            h => match Obj::parse(h) {
                Some(o) => Mapping::Object(o),
                None => {
                    return Err(e(format!(
                        "unknown mapping '{h}'{}",
                        did_you_mean(h, MAP_NAMES)
                    ))
                    .at(1, h))
                }
            },
        });
        for m in parts.flat_map(|p| p.split(',')) {
            match m {
                "span" => self.span = true,
                "hwtcpus" => self.hwtcpus = true,
                "oversubscribe" => self.oversubscribe = Some(true),
                "nooversubscribe" => self.oversubscribe = Some(false),
                "" => {}
                m if m.starts_with("pe=") => match m[3..].parse::<u32>() {
                    Ok(k) if (1..=999).contains(&k) => self.pe = Some(k),
                    _ => {
                        return Err(e(format!(
                            "{m}: the number of processing elements must be 1 to 999"
                        )))
                    }
                },
                m => {
                    return Err(e(format!(
                        "unknown modifier '{m}'{} (valid: pe=K, span, hwtcpus, oversubscribe, nooversubscribe)",
                        did_you_mean(m, MAP_MODIFIERS)
                    )))
                }
            }
        }
        Ok(())
    }

    fn parse_bind_to(&mut self, v: &str) -> Result<(), SpecError> {
        let lower = v.trim().to_ascii_lowercase();
        let mut parts = lower.split(':');
        let head = parts.next().unwrap_or("");
        let e = |reason: String| err(Input::BindTo, v, reason);
        self.bind = Some(match head {
            "none" => None,
            "board" => return Err(e("binding to a board is not offered at the simple level; use the expert binding --bind 1b".into())),
            h => Some(Obj::parse(h).ok_or_else(|| {
                e(format!("unknown binding '{h}'{}", did_you_mean(h, BIND_NAMES))).at(1, h)
            })?),
        });
        for m in parts.flat_map(|p| p.split(',')) {
            match m {
                "overload-allowed" => self.overload = true,
                // Open MPI's default already: a binding it cannot make is reported, not dropped.
                "if-supported" | "" => {}
                m => {
                    return Err(e(format!(
                        "unknown modifier '{m}'{} (valid: overload-allowed, if-supported)",
                        did_you_mean(m, &["overload-allowed", "if-supported"])
                    )))
                }
            }
        }
        Ok(())
    }

    /// Open MPI's defaults for a job of `np` ranks (the given count, or the default one), and
    /// its refusals of combinations.
    pub fn resolve(&self, np: usize) -> Result<Resolved, SpecError> {
        let pe = self.pe.unwrap_or(1);
        let mut hwt = self.hwtcpus;
        // PRRTE decides the default mapping before it counts the ranks: with no hint it maps by
        // core (hardware thread with :hwtcpus) whatever the count.
        let map = match (self.map, self.bind) {
            (Some(m), _) => m,
            (None, _) if pe > 1 => Mapping::Slot,
            (None, Some(None)) => Mapping::Slot,
            (None, Some(Some(o))) => Mapping::Object(o),
            (None, None) if hwt => Mapping::Object(Obj::Hwthread),
            (None, None) => Mapping::Object(Obj::Core),
        };
        // Mapping by hardware thread makes them the CPUs (Open MPI's "Cpu Type: HWT").
        if let Mapping::Object(Obj::Hwthread) | Mapping::Ppr(_, Obj::Hwthread) = map {
            hwt = true;
        }
        let oversubscribe = self.oversubscribe.unwrap_or(false);
        let map_value = self.map.map(|m| m.describe()).unwrap_or_default();
        if pe > 1 {
            if let Mapping::Object(o @ (Obj::Core | Obj::Hwthread)) = map {
                if !(o == Obj::Core && hwt) {
                    return Err(err(Input::MapBy, &map_value, format!(
                        "pe={pe} asks for {pe} CPUs per rank, but a {} holds one; map by a wider object (package, numa, l3cache, slot) or bind wider with --bind 2c style expert options",
                        o.name()
                    )));
                }
            }
        }
        let rank = match (self.rank, map) {
            (Some(r), _) => r,
            (None, Mapping::Node | Mapping::Ppr(_, Obj::Node)) => Ranking::Node,
            (None, Mapping::Slot | Mapping::Ppr(..)) => Ranking::Slot,
            (None, Mapping::Object(_)) if self.span => Ranking::Span,
            (None, Mapping::Object(_)) => Ranking::Fill,
        };
        if matches!(rank, Ranking::Fill | Ranking::Span)
            && matches!(
                map,
                Mapping::Slot | Mapping::Node | Mapping::Ppr(_, Obj::Node)
            )
        {
            return Err(err(
                Input::RankBy,
                if rank == Ranking::Fill { "fill" } else { "span" },
                format!(
                    "ranking by {} needs a mapping by an object (package, numa, l3cache, l2cache, l1cache, core, hwthread), not by {}",
                    if rank == Ranking::Fill { "fill" } else { "span" },
                    map.describe()
                ),
            ));
        }
        // pe=K sets the binding as firmly as --bind-to does (PRRTE marks it given).
        let bind_given = self.bind.is_some() || pe > 1;
        let mut bind = match self.bind {
            Some(b) => b,
            None if oversubscribe => None,
            None if pe > 1 => Some(if hwt { Obj::Hwthread } else { Obj::Core }),
            None => match map {
                Mapping::Object(o) | Mapping::Ppr(_, o) if o != Obj::Node => Some(o),
                _ if np <= 2 => Some(if hwt { Obj::Hwthread } else { Obj::Core }),
                _ => Some(Obj::Numa),
            },
        };
        let map_obj = match map {
            Mapping::Object(o) | Mapping::Ppr(_, o) => o,
            _ => Obj::Node,
        };
        if let Some(b) = bind {
            if b < map_obj {
                return Err(err(Input::BindTo, &bind_value(self.bind), format!(
                    "binding to a {} is wider than the {} each rank is mapped to; bind to the mapped object or a smaller one (Open MPI refuses this too)",
                    b.name(),
                    map_obj.name()
                )));
            }
        }
        if pe > 1 {
            match bind {
                Some(Obj::Core) if self.bind.is_some() => hwt = false,
                Some(Obj::Hwthread) if self.bind.is_some() => hwt = true,
                _ if self.bind.is_some() => {
                    return Err(err(Input::BindTo, &bind_value(self.bind), format!(
                        "pe={pe} binds each rank to {pe} CPUs (cores, or hardware threads with :hwtcpus); it cannot be combined with --bind-to {}: give core or hwthread, or leave --bind-to out",
                        bind_value(self.bind)
                    )))
                }
                _ => bind = Some(if hwt { Obj::Hwthread } else { Obj::Core }),
            }
        }
        Ok(Resolved {
            map,
            span: self.span,
            pe,
            hwt,
            oversubscribe,
            bind,
            bind_given,
            overload: self.overload,
            rank,
        })
    }

    /// How many ranks Open MPI starts when none is given, on nodes of `cores` cores (or PUs
    /// with `:hwtcpus`) and `objects` objects of the `ppr` level each.
    pub fn default_np(&self, per_node: &[(usize, usize)]) -> usize {
        let pe = self.pe.unwrap_or(1) as usize;
        let slots: usize = per_node
            .iter()
            .map(|&(c, _)| self.slots.map_or(c, |s| s as usize))
            .sum();
        match self.map {
            Some(Mapping::Ppr(k, Obj::Node)) => k as usize * per_node.len(),
            Some(Mapping::Ppr(k, _)) => per_node.iter().map(|&(_, o)| o * k as usize).sum(),
            _ if pe > 1 => {
                let n: usize = per_node.iter().map(|&(c, _)| c / pe).sum();
                n.clamp(1, slots.max(1))
            }
            _ => slots,
        }
    }
}

fn bind_value(b: Option<Option<Obj>>) -> String {
    match b {
        Some(Some(o)) => o.name().into(),
        Some(None) => "none".into(),
        None => String::new(),
    }
}

fn parse_rank_by(v: &str) -> Result<Ranking, SpecError> {
    let lower = v.trim().to_ascii_lowercase();
    let head = lower.split(':').next().unwrap_or("");
    Ok(match head {
        "slot" => Ranking::Slot,
        "node" => Ranking::Node,
        "fill" => Ranking::Fill,
        "span" => Ranking::Span,
        h if Obj::parse(h).is_some() => {
            return Err(err(Input::RankBy, v, format!(
                "ranking by a level name ('{h}') was Open MPI 4's; Open MPI 5 ranks by slot, node, fill or span: fill numbers every rank of one {h} before the next when you map by {h}, span deals one per {h} in turn"
            )).at(1, h))
        }
        h => {
            return Err(err(
                Input::RankBy,
                v,
                format!(
                    "unknown ranking '{h}'{} (valid: slot, node, fill, span)",
                    did_you_mean(h, RANK_NAMES)
                ),
            )
            .at(1, h))
        }
    })
}

/// `map-by` names.
pub const MAP_NAMES: &[&str] = &[
    "slot", "node", "package", "socket", "numa", "l3cache", "l2cache", "l1cache", "core",
    "hwthread", "ppr",
];
/// `bind-to` names.
pub const BIND_NAMES: &[&str] = &[
    "none", "package", "socket", "numa", "l3cache", "l2cache", "l1cache", "core", "hwthread",
];
/// `rank-by` names.
pub const RANK_NAMES: &[&str] = &["slot", "node", "fill", "span"];
const OBJECT_NAMES: &[&str] = &[
    "node", "package", "socket", "numa", "l3cache", "l2cache", "l1cache", "core", "hwthread",
];
const MAP_MODIFIERS: &[&str] = &["pe=", "span", "hwtcpus", "oversubscribe", "nooversubscribe"];

/// `; did you mean 'x'?` for the nearest valid word within two edits (or a plural's singular),
/// empty otherwise.
pub fn did_you_mean(word: &str, valid: &[&str]) -> String {
    let best = valid
        .iter()
        .map(|v| (edits(word, v), *v))
        .min()
        .filter(|(d, v)| *d <= 2 && *d < v.len());
    match best {
        Some((_, v)) => format!("; did you mean '{v}'?"),
        None => String::new(),
    }
}

/// Levenshtein distance of two short words.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for j in 0..b.len() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != b[j]))
                .min(row[j] + 1)
                .min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}
