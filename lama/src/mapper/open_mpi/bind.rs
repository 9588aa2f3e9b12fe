//! Open MPI's binding of one rank (`bind_generic`, `bind_multiple` in PRRTE's
//! rmaps_base_binding.c): the first object of the binding's kind with a free CPU inside what the
//! rank was mapped to, or `pe` free CPUs never across two packages; each takes one CPU (or `pe`)
//! from its node's available CPUs.

use super::{none, Mapper};
use crate::mapper::PlacementError;
use crate::spec::open_mpi::Obj;
use crate::topology::Span;

impl Mapper<'_> {
    pub(super) fn bind_generic(
        &mut self,
        n: usize,
        obj: Option<Span>,
        b: Obj,
        target: &[bool],
    ) -> Result<Option<Span>, PlacementError> {
        let within = obj.unwrap_or(self.whole(n));
        let topo = self.nodes[n].topo;
        let objs = topo.objects(b.level());
        if objs.is_empty() {
            if self.r.bind_given {
                return Err(none(format!(
                    "node {n} ({}) has no {} objects to bind to; bind to another object",
                    topo.name(),
                    b.name()
                )));
            }
            return Ok(None);
        }
        for &o in objs {
            let Some(lo) = overlap(o, within) else {
                continue;
            };
            // Binding to a hardware thread takes one thread, not a whole core (Open MPI 5.0.11
            // looks for a whole core inside one thread and fails: docs/open-mpi.md).
            let free = if b == Obj::Hwthread {
                self.free_in(topo.objects(crate::Level::Hwthread), n, lo, Some(target))
            } else {
                self.free_units(n, lo, Some(target))
            };
            if let Some(first) = free.first() {
                for i in first.start..first.end {
                    self.nodes[n].avail[i as usize] = false;
                }
                self.refill(n);
                return Ok(Some(o));
            }
        }
        if self.r.bind_given {
            return Err(none(format!(
                "node {n} ({}) has no free {} left to bind rank {} to; add :overload-allowed to --bind-to, or ask for fewer ranks",
                topo.name(),
                if self.r.hwt { "hardware thread" } else { "core" },
                self.procs.len()
            )));
        }
        Ok(None)
    }

    pub(super) fn bind_multiple(
        &mut self,
        n: usize,
        obj: Option<Span>,
        target: &mut [bool],
    ) -> Result<Span, PlacementError> {
        let pe = self.r.pe as usize;
        let topo = self.nodes[n].topo;
        let within = match obj {
            Some(s) => s,
            None => {
                // The CPUs of one rank never straddle two packages.
                let pkgs = topo.objects(crate::Level::Socket);
                let pkgs = if pkgs.is_empty() {
                    vec![self.whole(n)]
                } else {
                    pkgs.to_vec()
                };
                *pkgs
                    .iter()
                    .find(|p| self.free_units(n, **p, Some(target)).len() >= pe)
                    .ok_or_else(|| none(format!(
                        "no package of node {n} ({}) has {pe} free {} left for rank {} (pe={pe}); ask for fewer ranks or a smaller pe",
                        topo.name(),
                        if self.r.hwt { "hardware threads" } else { "cores" },
                        self.procs.len()
                    )))?
            }
        };
        let got: Vec<Span> = self
            .free_units(n, within, Some(target))
            .into_iter()
            .take(pe)
            .collect();
        let (Some(first), Some(last)) = (got.first(), got.last()) else {
            return Err(none(format!(
                "node {n} ({}) has no free CPU left for rank {} (pe={pe})",
                topo.name(),
                self.procs.len()
            )));
        };
        let span = Span {
            start: first.start,
            end: last.end,
        };
        let width: usize = got.iter().map(|s| s.len()).sum();
        if width != span.len() {
            return Err(none(format!(
                "Open MPI would bind rank {} of node {n} ({}) to CPUs that are not one run in hwloc's order; lama cannot give that binding",
                self.procs.len(),
                topo.name()
            )));
        }
        for i in span.start..span.end {
            self.nodes[n].avail[i as usize] = false;
            target[i as usize] = false;
        }
        Ok(span)
    }

    /// With overload allowed, a node whose CPUs are all taken starts over.
    fn refill(&mut self, n: usize) {
        let node = &mut self.nodes[n];
        if self.r.overload && node.avail.iter().all(|a| !a) {
            node.avail.iter_mut().for_each(|a| *a = true);
        }
    }
}

/// The part of `a` inside `b`, when they share a PU.
fn overlap(a: Span, b: Span) -> Option<Span> {
    let s = Span {
        start: a.start.max(b.start),
        end: a.end.min(b.end),
    };
    (!s.is_empty()).then_some(s)
}
