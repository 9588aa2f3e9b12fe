//! Open MPI's ranking of the mapped ranks (PRRTE's rmaps_base_ranking.c): by slot, node, fill
//! or span, then the plan in rank order.

use super::Mapper;
use crate::mapper::Plan;
use crate::spec::open_mpi::{Mapping, Obj, Ranking};

impl Mapper<'_> {
    /// Open MPI's ranking of the mapped ranks, then the plan in rank order.
    pub(super) fn ranked(&self) -> Plan {
        let mut seq: Vec<usize> = Vec::with_capacity(self.procs.len());
        let mut done = vec![false; self.procs.len()];
        let take = |p: usize, seq: &mut Vec<usize>, done: &mut Vec<bool>| {
            if !done[p] {
                done[p] = true;
                seq.push(p);
            }
        };
        let obj_count = |n: usize| match self.r.map {
            Mapping::Object(o) | Mapping::Ppr(_, o) if o != Obj::Node => {
                self.nodes[n].topo.objects(o.level()).len()
            }
            _ => 1,
        };
        match self.r.rank {
            Ranking::Slot => {
                for &n in &self.order {
                    for &p in &self.nodes[n].procs {
                        take(p, &mut seq, &mut done);
                    }
                }
            }
            Ranking::Node => {
                while seq.len() < self.procs.len() {
                    let before = seq.len();
                    for &n in &self.order {
                        if let Some(&p) = self.nodes[n].procs.iter().find(|&&p| !done[p]) {
                            take(p, &mut seq, &mut done);
                        }
                    }
                    if seq.len() == before {
                        break;
                    }
                }
            }
            Ranking::Fill => {
                for &n in &self.order {
                    for k in 0..obj_count(n) {
                        for &p in &self.nodes[n].procs {
                            if self.procs[p].obj == Some(k) {
                                take(p, &mut seq, &mut done);
                            }
                        }
                    }
                }
            }
            Ranking::Span => {
                while seq.len() < self.procs.len() {
                    let before = seq.len();
                    for &n in &self.order {
                        for k in 0..obj_count(n) {
                            let next = self.nodes[n]
                                .procs
                                .iter()
                                .find(|&&p| !done[p] && self.procs[p].obj == Some(k));
                            if let Some(&p) = next {
                                take(p, &mut seq, &mut done);
                            }
                        }
                    }
                    if seq.len() == before {
                        break;
                    }
                }
            }
        }
        // Ranks no rule reached (none in Open MPI's own mappings) follow in mapping order.
        for p in 0..self.procs.len() {
            take(p, &mut seq, &mut done);
        }
        let level = match self.r.map {
            Mapping::Object(o) | Mapping::Ppr(_, o) => o.level(),
            _ => crate::Level::Node,
        };
        let placed = seq.iter().map(|&p| {
            let pr = &self.procs[p];
            let span = pr.span.unwrap_or(self.whole(pr.node));
            (pr.node as u32, span, pr.obj.unwrap_or(0) as u32)
        });
        Plan::from_open_mpi(level, placed)
    }
}
