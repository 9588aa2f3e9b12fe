//! The simple level: `map-by`, `bind-to` and `rank-by` as Open MPI 5 means them. The words are
//! read by [`super::open_mpi`] and placed by [`crate::mapper::open_mpi`]; the [`Request`] made here carries them, with
//! its expert fields set to the nearest expert request for headers and checks.

use super::open_mpi::{Mapping, Obj, OpenMpi};
use super::{check_np, Binding, DefaultNp, Order, Request, SpecError};
use crate::level::Level;

impl Request {
    /// Builds a request from the simple level (see [`Simple`]); `oversubscribe` is the plugin's
    /// own switch, the same as `:oversubscribe`.
    pub fn simple(
        opts: &Simple<'_>,
        np: Option<usize>,
        oversubscribe: bool,
    ) -> Result<Request, SpecError> {
        let mut o = OpenMpi::parse(opts.map_by, opts.bind_to, opts.rank_by)?;
        if oversubscribe && o.oversubscribe.is_none() {
            o.oversubscribe = Some(true);
        }
        check_np(np)?;
        // Refusals that do not depend on the count are made now, before any node is seen.
        o.resolve(np.unwrap_or(3))?;
        let obj = match o.map {
            Some(Mapping::Object(x) | Mapping::Ppr(_, x)) => x,
            Some(_) => Obj::Node,
            None => Obj::Core,
        };
        let level = match o.bind {
            Some(Some(b)) => b.level(),
            Some(None) => Level::Node,
            None => obj.level(),
        };
        let map = MAP_BY
            .iter()
            .find(|(n, _)| *n == obj.name())
            .map_or("csbnh", |(_, m)| m);
        let mut map: Vec<Level> = map
            .chars()
            .filter_map(|c| Level::from_token(&c.to_string()))
            .collect();
        if !map.contains(&level) {
            map.insert(1, level);
        }
        Ok(Request {
            map,
            bind: Binding {
                width: o.pe.unwrap_or(1),
                level,
            },
            mppr: Vec::new(),
            order: Order::Natural,
            oversubscribe: o.oversubscribe.unwrap_or(false),
            np,
            default_np: DefaultNp::Sweep,
            open_mpi: Some(o),
        })
    }
}

impl Request {
    /// `--threads N` beside the simple level: with no binding asked for (no `bind-to`, no
    /// `:pe`) and a mapping wider than one core, each rank gets N cores, as `:pe=N` gives, so
    /// that its threads have places of their own. Other requests are left as they are.
    pub fn with_workers(mut self, workers: Option<u32>) -> Result<Request, SpecError> {
        let Some(n) = workers.filter(|&n| n > 1) else {
            return Ok(self);
        };
        if let Some(o) = self.open_mpi.as_mut() {
            // A rank mapped to one core or thread keeps it: its threads share it, as in Open MPI.
            let one_cpu = matches!(
                o.map,
                Some(
                    Mapping::Object(Obj::Core | Obj::Hwthread)
                        | Mapping::Ppr(_, Obj::Core | Obj::Hwthread)
                )
            );
            if o.pe.is_none() && o.bind.is_none() && !one_cpu {
                o.pe = Some(n.min(999));
                o.resolve(self.np.unwrap_or(3))?;
                self.bind.width = n.min(999);
                self.bind.level = if o.hwtcpus {
                    Level::Hwthread
                } else {
                    Level::Core
                };
            }
        }
        Ok(self)
    }
}

/// The simple-level options as given.
#[derive(Clone, Debug, Default)]
pub struct Simple<'a> {
    /// `map-by`: an object, `slot`, `node` or `ppr:K:object`, with `:pe=K`, `:span`,
    /// `:hwtcpus`, `:oversubscribe`, `:nooversubscribe`.
    pub map_by: Option<&'a str>,
    /// `bind-to`: an object or `none`, with `:overload-allowed`.
    pub bind_to: Option<&'a str>,
    /// `rank-by`: `slot`, `node`, `fill` or `span`.
    pub rank_by: Option<&'a str>,
}

/// map-by names and the expert maps nearest to them (for headers and the contract's examples).
pub const MAP_BY: [(&str, &str); 11] = [
    ("node", "nbsch"),
    ("numa", "Nbnsch"),
    ("package", "sbnch"),
    ("socket", "sbnch"),
    ("l3cache", "L3sNbnL2L1ch"),
    ("l2cache", "L2sNbnL1ch"),
    ("l1cache", "L1sNbnch"),
    ("core", "csbnh"),
    ("slot", "csbnh"),
    ("hwthread", "hcsbn"),
    ("ppr:K:object", "csbnh"),
];

/// bind-to names and their levels (`None`: no binding beyond the node).
pub const BIND_TO: [(&str, Option<Level>); 9] = [
    ("hwthread", Some(Level::Hwthread)),
    ("core", Some(Level::Core)),
    ("l1cache", Some(Level::L1)),
    ("l2cache", Some(Level::L2)),
    ("l3cache", Some(Level::L3)),
    ("package", Some(Level::Socket)),
    ("socket", Some(Level::Socket)),
    ("numa", Some(Level::Numa)),
    ("none", None),
];

/// rank-by names, as Open MPI 5 has them.
pub const RANK_BY: [&str; 4] = ["slot", "node", "fill", "span"];
