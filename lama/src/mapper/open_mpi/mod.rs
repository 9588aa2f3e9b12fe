//! Open MPI 5's mappers on lama's topologies: the round-robin mappers (slot, node, object), the
//! `ppr` mapper, binding (`bind_generic`, `bind_multiple`) and ranking, step for step as PRRTE
//! 3.0.14 takes them, so that the same words give the same ranks on the same CPUs. Binding is in
//! `bind`, ranking in `rank`.
//!
//! State is Open MPI's: each node's available CPUs (a binding takes one core, or one hardware
//! thread with `:hwtcpus`, from them), its slots and the ranks mapped there in order.

use super::{PlacementError, Plan};
use crate::spec::open_mpi::{Mapping, Obj, OpenMpi, Resolved};
use crate::topology::{NodeTopology, Span};

mod bind;
mod rank;

/// Places `np` ranks (Open MPI's default count when `None`) on `nodes` as Open MPI 5 would.
pub fn plan(
    nodes: &[&NodeTopology],
    spec: &OpenMpi,
    np: Option<usize>,
) -> Result<(Plan, Resolved), PlacementError> {
    if nodes.is_empty() {
        return Err(none("the job has no nodes".into()));
    }
    let ppr_level = match spec.map {
        Some(Mapping::Ppr(_, o)) => o.level(),
        _ => crate::Level::Node,
    };
    let units = |t: &NodeTopology| {
        if spec.hwtcpus {
            t.num_pus()
        } else {
            t.objects(crate::Level::Core).len()
        }
    };
    let per_node: Vec<(usize, usize)> = nodes
        .iter()
        .map(|t| (units(t), t.objects(ppr_level).len()))
        .collect();
    let np = np.unwrap_or_else(|| spec.default_np(&per_node));
    let r = spec
        .resolve(np)
        .map_err(|e| none(e.message("--").replacen("invalid --", "--", 1)))?;
    let mut m = Mapper {
        r,
        np,
        nodes: nodes
            .iter()
            .zip(&per_node)
            .map(|(t, &(c, _))| Node {
                topo: t,
                avail: vec![true; t.num_pus()],
                slots: spec.slots.map_or(c, |s| s as usize),
                procs: Vec::new(),
                dropped: false,
                mapped: false,
            })
            .collect(),
        procs: Vec::new(),
        order: Vec::new(),
    };
    let total: usize = m.nodes.iter().map(|n| n.slots).sum();
    if np > total {
        if !r.oversubscribe {
            return Err(PlacementError::Oversubscribed {
                placed: 0,
                requested: np,
                limit: format!(
                    "the job has {total} slots ({}) for {np} ranks; add :oversubscribe to --map-by to share them, or ask for fewer ranks",
                    if spec.slots.is_some() { "the tasks placed on its nodes" } else if spec.hwtcpus { "one per hardware thread" } else { "one per core" }
                ),
            });
        }
        if !r.bind_given {
            m.r.bind = None;
        }
    }
    match r.map {
        Mapping::Slot => m.by_slot()?,
        Mapping::Node => m.by_node()?,
        Mapping::Object(o) => m.by_object(o)?,
        Mapping::Ppr(k, o) => m.ppr(k, o)?,
    }
    Ok((m.ranked(), m.r))
}

fn none(reason: String) -> PlacementError {
    PlacementError::NoResources { reason }
}

struct Node<'a> {
    topo: &'a NodeTopology,
    /// Per PU position: not yet taken by a binding.
    avail: Vec<bool>,
    slots: usize,
    /// Ranks mapped here, in mapping order (indexes into `Mapper::procs`).
    procs: Vec<usize>,
    /// Left out of further rounds (full, or without the mapped object).
    dropped: bool,
    /// In `Mapper::order` already (a scan of it per rank cost O(nodes) on large jobs).
    mapped: bool,
}

struct Proc {
    node: usize,
    /// The mapped object's index on its node, for object mappings.
    obj: Option<usize>,
    /// Bound PUs; `None`: unbound.
    span: Option<Span>,
}

struct Mapper<'a> {
    r: Resolved,
    np: usize,
    nodes: Vec<Node<'a>>,
    procs: Vec<Proc>,
    /// Nodes in the order they were first used (Open MPI's job map).
    order: Vec<usize>,
}

/// Whether every PU of `s` is set in `set`.
fn all_in(set: &[bool], s: Span) -> bool {
    (s.start..s.end).all(|i| set[i as usize])
}

impl Mapper<'_> {
    /// The CPUs (cores, or PUs with hwtcpus) of node `n`.
    fn units(&self, n: usize) -> &[Span] {
        let t = self.nodes[n].topo;
        t.objects(if self.r.hwt {
            crate::Level::Hwthread
        } else {
            crate::Level::Core
        })
    }

    /// The available CPUs of node `n` inside `within` (and inside `target` when given).
    fn free_units(&self, n: usize, within: Span, target: Option<&[bool]>) -> Vec<Span> {
        self.free_in(self.units(n), n, within, target)
    }

    /// The objects of `units` (cores or PUs) of node `n` free inside `within` and `target`.
    fn free_in(
        &self,
        units: &[Span],
        n: usize,
        within: Span,
        target: Option<&[bool]>,
    ) -> Vec<Span> {
        let avail = &self.nodes[n].avail;
        units
            .iter()
            .filter(|u| within.contains(u) && all_in(avail, **u))
            .filter(|u| target.is_none_or(|t| all_in(t, **u)))
            .copied()
            .collect()
    }

    fn whole(&self, n: usize) -> Span {
        Span {
            start: 0,
            end: self.nodes[n].topo.num_pus() as u32,
        }
    }

    fn obj_span(&self, n: usize, o: Obj, j: usize) -> Span {
        self.nodes[n].topo.objects(o.level())[j]
    }

    /// Open MPI's `check_avail`: whether node `n` (object `obj`) takes `want` more ranks, how
    /// many it takes, and the binding target (its available CPUs) when binding.
    fn check_avail(
        &mut self,
        n: usize,
        obj: Option<Span>,
        want: usize,
        ppr: Option<u32>,
        bind: Option<Obj>,
    ) -> Option<(usize, Option<Vec<bool>>)> {
        let node = &self.nodes[n];
        if !self.r.oversubscribe && node.slots <= node.procs.len() {
            return None;
        }
        let mut take = want;
        let mut target = None;
        if bind.is_some() {
            let within = obj.unwrap_or(self.whole(n));
            let free = self.free_units(n, within, None);
            let fit = free.len() / self.r.pe as usize;
            let ok = match ppr {
                Some(k) => k as usize <= fit,
                None if want <= fit || self.r.overload => true,
                None if fit > 0 => {
                    take = fit;
                    true
                }
                None => false,
            };
            if !ok {
                return None;
            }
            let mut t = vec![false; node.avail.len()];
            for u in free {
                for i in u.start..u.end {
                    t[i as usize] = true;
                }
            }
            target = Some(t);
        }
        if !self.nodes[n].mapped {
            self.nodes[n].mapped = true;
            self.order.push(n);
        }
        Some((take, target))
    }

    /// Whether node `n` is full (no oversubscription and every slot used).
    fn full(&self, n: usize) -> bool {
        !self.r.oversubscribe && self.nodes[n].slots == self.nodes[n].procs.len()
    }

    /// Open MPI's `setup_proc`: maps one rank on node `n` (object `obj`) and binds it.
    fn add(
        &mut self,
        n: usize,
        obj: Option<usize>,
        bind: Option<Obj>,
        target: &mut Option<Vec<bool>>,
    ) -> Result<(), PlacementError> {
        let obj_span = match (obj, self.r.map) {
            (Some(j), Mapping::Object(o) | Mapping::Ppr(_, o)) => Some(self.obj_span(n, o, j)),
            _ => None,
        };
        let span = match (bind, target.as_mut()) {
            (Some(_), Some(t)) if self.r.pe > 1 => Some(self.bind_multiple(n, obj_span, t)?),
            (Some(b), Some(t)) => self.bind_generic(n, obj_span, b, t)?,
            _ => None,
        };
        self.nodes[n].procs.push(self.procs.len());
        self.procs.push(Proc { node: n, obj, span });
        Ok(())
    }

    /// Binding for node `n` when `want` ranks go there: Open MPI leaves ranks unbound on a node
    /// with more of them than CPUs (but within its slots) unless the user asked for a binding.
    /// `cpus` is what those ranks need (the ppr mapper counts pe, the round-robin ones not).
    fn bind_for(&self, n: usize, want: usize, cpus: usize) -> Option<Obj> {
        let free = self.free_units(n, self.whole(n), None).len();
        let node = &self.nodes[n];
        let slots_free = node.slots.saturating_sub(node.procs.len());
        if cpus > free && want <= slots_free && !self.r.bind_given {
            None
        } else {
            self.r.bind
        }
    }

    /// Up to `want` ranks on node `n` for the slot and node mappers: how many the node took
    /// (`None` when it takes none). A rank that cannot be bound there moves on to the next node,
    /// as in PRRTE, and the node is left once full.
    fn on_node(&mut self, n: usize, want: usize) -> Option<usize> {
        let bind = self.bind_for(n, want, want);
        let (take, mut target) = self.check_avail(n, None, want, None, bind)?;
        for _ in 0..take {
            if self.procs.len() >= self.np
                || self.add(n, None, bind, &mut target).is_err()
                || self.full(n)
            {
                break;
            }
        }
        Some(take)
    }

    fn by_slot(&mut self) -> Result<(), PlacementError> {
        let nn = self.nodes.len();
        let (mut second, mut extra, mut nxtra) = (false, 0usize, 0usize);
        loop {
            for n in 0..nn {
                let slots_free = self.nodes[n]
                    .slots
                    .saturating_sub(self.nodes[n].procs.len());
                let mut want = if second {
                    let w = extra;
                    if nxtra > 0 {
                        nxtra -= 1;
                        if nxtra == 0 {
                            extra = extra.saturating_sub(1);
                        }
                    }
                    w
                } else {
                    slots_free
                };
                if !self.r.oversubscribe {
                    want = want.min(slots_free);
                }
                self.on_node(n, want);
                if self.procs.len() == self.np {
                    return Ok(());
                }
            }
            if second {
                return Err(self.short("slot"));
            }
            let left = self.np - self.procs.len();
            extra = left / nn;
            if !left.is_multiple_of(nn) {
                nxtra = left - extra * nn;
                extra += 1;
            }
            second = true;
        }
    }

    fn by_node(&mut self) -> Result<(), PlacementError> {
        let nn = self.nodes.len();
        let mut second = false;
        loop {
            // As Open MPI does, a count capped on one node stays capped for the nodes after it.
            let mut want = ((self.np - self.procs.len()) / nn).max(1);
            for n in 0..nn {
                let slots_free = self.nodes[n]
                    .slots
                    .saturating_sub(self.nodes[n].procs.len());
                if !self.r.oversubscribe {
                    want = want.min(slots_free);
                }
                if let Some(take) = self.on_node(n, want) {
                    want = take;
                }
                if self.procs.len() == self.np {
                    return Ok(());
                }
            }
            if second {
                return Err(self.short("node"));
            }
            second = true;
        }
    }

    fn by_object(&mut self, o: Obj) -> Result<(), PlacementError> {
        let pe = self.r.pe as usize;
        let mut out_of_cpus = false;
        loop {
            let mut all_full = true;
            for n in 0..self.nodes.len() {
                if self.nodes[n].dropped {
                    continue;
                }
                out_of_cpus = false;
                let nobjs = self.nodes[n].topo.objects(o.level()).len();
                if nobjs == 0 {
                    self.nodes[n].dropped = true;
                    continue;
                }
                let mut node_full = false;
                loop {
                    let before = self.procs.len();
                    for j in 0..nobjs {
                        if self.procs.len() >= self.np || node_full {
                            break;
                        }
                        let span = self.obj_span(n, o, j);
                        let bind = self.r.bind;
                        if bind.is_some()
                            && self.free_units(n, span, None).len() < pe
                            && !self.r.overload
                        {
                            out_of_cpus = true;
                            continue;
                        }
                        let Some((_, mut target)) = self.check_avail(n, Some(span), 1, None, bind)
                        else {
                            continue;
                        };
                        self.add(n, Some(j), bind, &mut target)?;
                        if self.full(n) {
                            self.nodes[n].dropped = true;
                            node_full = true;
                            break;
                        }
                        all_full = false;
                    }
                    // (A round that maps nothing would repeat for ever in PRRTE; it ends here.)
                    let again = self.procs.len() < self.np
                        && !all_full
                        && !node_full
                        && !out_of_cpus
                        && !self.r.span
                        && self.procs.len() > before;
                    if !again {
                        break;
                    }
                }
            }
            if self.procs.len() >= self.np || all_full {
                break;
            }
        }
        if self.procs.len() == self.np {
            return Ok(());
        }
        if out_of_cpus {
            return Err(PlacementError::Oversubscribed {
                placed: self.procs.len(),
                requested: self.np,
                limit: format!(
                    "every {} has had its {} taken (more {} bound than exist); add :overload-allowed to --bind-to, or ask for fewer ranks",
                    o.name(),
                    if self.r.hwt { "hardware threads" } else { "cores" },
                    if self.r.hwt { "hardware threads" } else { "cores" },
                ),
            });
        }
        Err(self.short(o.name()))
    }

    fn ppr(&mut self, k: u32, o: Obj) -> Result<(), PlacementError> {
        let pe = self.r.pe as usize;
        for n in 0..self.nodes.len() {
            let objs = if o == Obj::Node {
                vec![None]
            } else {
                let spans = self.nodes[n].topo.objects(o.level());
                if spans.is_empty() {
                    continue;
                }
                (0..spans.len()).map(Some).collect()
            };
            let want = k as usize * objs.len();
            let bind = self.bind_for(n, want, want * pe);
            for j in objs {
                if self.procs.len() >= self.np {
                    break;
                }
                let span = j.map(|j| self.obj_span(n, o, j));
                let Some((_, mut target)) = self.check_avail(n, span, k as usize, Some(k), bind)
                else {
                    continue;
                };
                // Open MPI 5.0 maps K per object past -n; the count given is kept here.
                for _ in 0..k {
                    if self.procs.len() >= self.np {
                        break;
                    }
                    self.add(n, j, bind, &mut target)?;
                    if self.full(n) {
                        break;
                    }
                }
            }
            if self.procs.len() == self.np {
                return Ok(());
            }
        }
        if self.procs.len() == self.np {
            return Ok(());
        }
        Err(PlacementError::Oversubscribed {
            placed: self.procs.len(),
            requested: self.np,
            limit: format!(
                "ppr:{k}:{} placed {} ranks on the job's nodes, fewer than the {} asked for; ask for fewer ranks, more per {}, or more nodes",
                o.name(),
                self.procs.len(),
                self.np,
                o.name()
            ),
        })
    }

    fn short(&self, what: &str) -> PlacementError {
        PlacementError::Oversubscribed {
            placed: self.procs.len(),
            requested: self.np,
            limit: format!(
                "mapping by {what} found no {} for the remaining ranks (pe={}); ask for fewer ranks or a smaller pe, or add :overload-allowed to --bind-to",
                if self.r.hwt { "free hardware threads" } else { "free cores" },
                self.r.pe
            ),
        }
    }
}
