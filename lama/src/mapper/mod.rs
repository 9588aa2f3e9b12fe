//! The LAMA odometer: topologies + request in, plan out.
//!
//! Levels are nested by containment on each node (H, outermost first). A position is one
//! coordinate per level of H; the map string says which coordinate turns fastest. Each position
//! that exists yields a binding window; MPPR limits may skip it. See `docs/placement.md`.

use std::collections::HashMap;

use crate::level::Level;
use crate::spec::{DefaultNp, Order, Request};
use crate::topology::{NodeTopology, Span};

mod error;
pub mod open_mpi;

pub use error::PlacementError;
use error::{no_resources, oversubscribed};

/// Where one rank goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Node index in allocation order.
    pub node: u32,
    /// Bound PUs, as positions in the node's PU order.
    pub span: Span,
    /// The position's hardware thread (PU position), which sequential order sorts by.
    pub pu: u32,
}

/// A whole placement: one [`Placement`] per rank, in rank order.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Mapped levels in nesting order (H), outermost first.
    pub nesting: Vec<Level>,
    /// The map, in the request's order.
    pub map: Vec<Level>,
    placements: Vec<Placement>,
    /// Coordinates per rank, `nesting.len()` values each, in nesting order.
    coords: Vec<u32>,
}

impl Plan {
    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.placements.len()
    }
    /// Whether no rank was placed.
    pub fn is_empty(&self) -> bool {
        self.placements.is_empty()
    }
    /// All placements in rank order.
    pub fn placements(&self) -> &[Placement] {
        &self.placements
    }
    /// The coordinate of a rank, one value per level of [`Plan::nesting`].
    pub fn coord(&self, rank: usize) -> &[u32] {
        let w = self.nesting.len();
        &self.coords[rank * w..(rank + 1) * w]
    }
    /// The coordinate of a rank as (level, value) pairs in map order.
    pub fn coord_by_map(&self, rank: usize) -> Vec<(Level, u32)> {
        let c = self.coord(rank);
        self.map
            .iter()
            .filter_map(|l| self.nesting.iter().position(|x| x == l).map(|j| (*l, c[j])))
            .collect()
    }
    /// Bound CPUs of a rank as OS indexes, ascending.
    pub fn cpus(&self, rank: usize, nodes: &[&NodeTopology]) -> Vec<u32> {
        let p = &self.placements[rank];
        nodes[p.node as usize].span_cpus(p.span)
    }
    /// Node of every rank, in rank order.
    pub fn node_of_ranks(&self) -> Vec<u32> {
        self.placements.iter().map(|p| p.node).collect()
    }
}

impl Plan {
    /// A plan made by Open MPI's mapper ([`open_mpi`]): per rank its node, bound span and
    /// the index of the object it was mapped to (the coordinate at `level`).
    pub(crate) fn from_open_mpi(
        level: Level,
        ranks: impl Iterator<Item = (u32, Span, u32)>,
    ) -> Plan {
        let nesting = if level == Level::Node {
            vec![Level::Node]
        } else {
            vec![Level::Node, level]
        };
        let mut out = Plan {
            map: nesting.iter().rev().copied().collect(),
            nesting,
            placements: Vec::new(),
            coords: Vec::new(),
        };
        for (node, span, obj) in ranks {
            out.placements.push(Placement {
                node,
                span,
                pu: span.start,
            });
            out.coords.push(node);
            if level != Level::Node {
                out.coords.push(obj);
            }
        }
        out
    }
}

/// Per distinct node model: the objects of each level of H and how they nest.
struct Prepared {
    /// Objects per H level (a collapsed level copies its parent's objects).
    objs: Vec<Vec<Span>>,
    /// Per H level j >= 1, per object of level j-1: first child index and child count.
    first: Vec<Vec<u32>>,
    count: Vec<Vec<u32>>,
    /// H index of the binding window's enclosing level.
    enclosing: usize,
    /// Per enclosing object: first binding object and how many there are.
    win_first: Vec<u32>,
    win_count: Vec<u32>,
}

/// For sorted parents and children, the first child and number of children inside each parent.
fn children(parents: &[Span], kids: &[Span]) -> (Vec<u32>, Vec<u32>) {
    let mut first = Vec::with_capacity(parents.len());
    let mut count = Vec::with_capacity(parents.len());
    for p in parents {
        let f = kids.partition_point(|k| k.start < p.start);
        let mut n = 0;
        while f + n < kids.len() && p.contains(&kids[f + n]) {
            n += 1;
        }
        first.push(f as u32);
        count.push(n as u32);
    }
    (first, count)
}

/// Whether every object of `inner` lies inside one object of `outer` (both sorted): each inner
/// object is checked against the last outer one starting at or before it, found by one walk over
/// both, as this runs for pairs of mapped levels in every step.
fn contains(outer: &[Span], inner: &[Span]) -> bool {
    let mut i = 0;
    inner.iter().all(|b| {
        while i < outer.len() && outer[i].start <= b.start {
            i += 1;
        }
        i > 0 && outer[i - 1].contains(b)
    })
}

/// Nesting order of the given levels on one node; an error names two levels that cross.
fn node_order(node: &NodeTopology, levels: &[Level]) -> Result<Vec<Level>, (Level, Level)> {
    // Each pair's containment is checked once: the selection below asks for it repeatedly.
    let mut inside = [[None::<bool>; 9]; 9];
    let mut within = |a: Level, b: Level| {
        *inside[a.index()][b.index()]
            .get_or_insert_with(|| contains(node.objects(a), node.objects(b)))
    };
    let mut before = |a: Level, b: Level| within(a, b) && (!within(b, a) || a.index() < b.index());
    let mut rest: Vec<Level> = levels.to_vec();
    let mut out = Vec::new();
    while !rest.is_empty() {
        let pick = (0..rest.len()).find(|&i| {
            let l = rest[i];
            rest.iter().all(|&m| m == l || before(l, m))
        });
        match pick {
            Some(i) => out.push(rest.remove(i)),
            None => {
                for &a in &rest {
                    for &b in &rest {
                        if a != b && !before(a, b) && !before(b, a) {
                            return Err((a, b));
                        }
                    }
                }
                // Unreachable in practice: containment is transitive. Keep list order.
                rest.sort();
                out.append(&mut rest);
            }
        }
    }
    Ok(out)
}

/// The job-wide nesting order H of the mapped levels.
fn nesting(
    nodes: &[&NodeTopology],
    distinct: &[usize],
    map: &[Level],
) -> Result<Vec<Level>, PlacementError> {
    // For each ordered pair (a, b): the first node that puts a above b.
    let mut above = [[None::<usize>; 9]; 9];
    let mut present = [false; 9];
    for &i in distinct {
        let node = nodes[i];
        let here: Vec<Level> = map.iter().copied().filter(|&l| node.has(l)).collect();
        let order = node_order(node, &here).map_err(|(a, b)| {
            no_resources(format!(
                "on node {i} ({}) the {} and {} objects overlap without nesting, so the map cannot order them",
                node.name(),
                a.name(),
                b.name()
            ))
        })?;
        for (x, &a) in order.iter().enumerate() {
            present[a.index()] = true;
            for &b in &order[x + 1..] {
                if let Some(j) = above[b.index()][a.index()] {
                    return Err(no_resources(format!(
                        "nodes {j} ({}) and {i} ({}) nest {} and {} differently ({} inside {} on one, {} inside {} on the other); run them as separate jobs or drop one level from the map",
                        nodes[j].name(),
                        node.name(),
                        a.name(),
                        b.name(),
                        a.name(),
                        b.name(),
                        b.name(),
                        a.name()
                    )));
                }
                above[a.index()][b.index()].get_or_insert(i);
            }
        }
    }
    let mut rest: Vec<Level> = map.iter().copied().filter(|l| present[l.index()]).collect();
    rest.sort();
    let mut h = Vec::new();
    while !rest.is_empty() {
        let i = rest
            .iter()
            .position(|&l| !rest.iter().any(|&m| above[m.index()][l.index()].is_some()))
            .ok_or_else(|| {
                no_resources(
                    "the nodes nest the mapped levels in a cycle; run them as separate jobs".into(),
                )
            })?;
        h.push(rest.remove(i));
    }
    // Levels no node has are transparent; put them where the fixed list would.
    let mut absent: Vec<Level> = map
        .iter()
        .copied()
        .filter(|l| !present[l.index()])
        .collect();
    absent.sort();
    for l in absent {
        let at = h
            .iter()
            .position(|x| x.index() > l.index())
            .unwrap_or(h.len());
        h.insert(at, l);
    }
    Ok(h)
}

fn prepare(node: &NodeTopology, h: &[Level], jb: usize) -> Prepared {
    let mut objs: Vec<Vec<Span>> = Vec::with_capacity(h.len());
    let mut first = vec![Vec::new()];
    let mut count = vec![Vec::new()];
    for (j, &l) in h.iter().enumerate() {
        let o = if j == 0 {
            node.objects(Level::Node).to_vec()
        } else if node.has(l) {
            node.objects(l).to_vec()
        } else {
            objs[j - 1].clone()
        };
        if j > 0 {
            let (f, c) = children(&objs[j - 1], &o);
            first.push(f);
            count.push(c);
        }
        objs.push(o);
    }
    let coincides =
        |outer: &[Span], inner: &[Span]| outer.iter().all(|s| inner.binary_search(s).is_ok());
    let enclosing = (0..jb)
        .rev()
        .find(|&j| !coincides(&objs[j], &objs[jb]))
        .unwrap_or(0);
    let (win_first, win_count) = children(&objs[enclosing], &objs[jb]);
    Prepared {
        objs,
        first,
        count,
        enclosing,
        win_first,
        win_count,
    }
}

/// MPPR bookkeeping: a counter per object of each limited level on each node.
struct Counters {
    /// Per limit: per node, the offset of its objects in `counts`.
    offsets: Vec<Vec<usize>>,
    counts: Vec<Vec<u32>>,
}

impl Counters {
    fn new(nodes: &[&NodeTopology], req: &Request) -> Counters {
        let mut offsets = Vec::new();
        let mut counts = Vec::new();
        for lim in &req.mppr {
            let mut off = Vec::with_capacity(nodes.len());
            let mut total = 0;
            for n in nodes {
                off.push(total);
                total += n.objects(lim.level).len();
            }
            offsets.push(off);
            counts.push(vec![0; total]);
        }
        Counters { offsets, counts }
    }

    /// Counts the process if no limit would be exceeded; otherwise returns the first limit hit.
    fn admit(
        &mut self,
        req: &Request,
        nodes: &[&NodeTopology],
        node: usize,
        span: Span,
    ) -> Result<(), usize> {
        let range = |objs: &[Span]| {
            let lo = objs.partition_point(|o| o.end <= span.start);
            let hi = objs.partition_point(|o| o.start < span.end);
            lo..hi.max(lo)
        };
        for (k, lim) in req.mppr.iter().enumerate() {
            let base = self.offsets[k][node];
            for o in range(nodes[node].objects(lim.level)) {
                if self.counts[k][base + o] >= lim.count {
                    return Err(k);
                }
            }
        }
        for (k, lim) in req.mppr.iter().enumerate() {
            let base = self.offsets[k][node];
            for o in range(nodes[node].objects(lim.level)) {
                self.counts[k][base + o] += 1;
            }
        }
        Ok(())
    }
}

/// Places `req` on `nodes` (in allocation order).
pub fn plan(nodes: &[&NodeTopology], req: &Request) -> Result<Plan, PlacementError> {
    if let Some(o) = &req.open_mpi {
        return open_mpi::plan(nodes, o, req.np).map(|(p, _)| p);
    }
    if nodes.is_empty() {
        return Err(no_resources("the job has no nodes".into()));
    }
    let (model_of, distinct) = distinct_models(nodes);
    let bl = req.bind.level;
    if !distinct.iter().any(|&i| nodes[i].has(bl)) {
        return Err(no_resources(format!(
            "the binding level '{}' ({}) exists on no node of the job",
            bl,
            bl.name()
        )));
    }
    let h = nesting(nodes, &distinct, &req.map)?;
    let jb = h.iter().position(|&l| l == bl).unwrap_or(0);
    let prepared: Vec<Prepared> = distinct
        .iter()
        .map(|&i| prepare(nodes[i], &h, jb))
        .collect();

    let mut ranges = vec![nodes.len() as u32; h.len()];
    for (j, r) in ranges.iter_mut().enumerate().skip(1) {
        *r = prepared
            .iter()
            .flat_map(|p| p.count[j].iter().copied())
            .max()
            .unwrap_or(0);
    }
    let order: Vec<usize> = req
        .map
        .iter()
        .filter_map(|l| h.iter().position(|x| x == l))
        .collect();

    let target = target_np(nodes, req);

    // Sized once when the count is known: growing by doubling would hold up to three times the
    // plan while a large job's vectors are copied.
    let expected = if target <= crate::limits::MAX_TASKS {
        target
    } else {
        0
    };
    let mut out = Plan {
        nesting: h.clone(),
        map: req.map.clone(),
        placements: Vec::with_capacity(expected),
        coords: Vec::with_capacity(expected * h.len()),
    };
    let mut counters = Counters::new(nodes, req);
    let mut hit = vec![false; req.mppr.len()];
    let mut sweep_no = 0;
    while out.placements.len() < target {
        let before = out.placements.len();
        let enforce = sweep_no == 0;
        sweep(&mut SweepCtx {
            nodes,
            req,
            prepared: &prepared,
            model_of: &model_of,
            ranges: &ranges,
            order: &order,
            jb,
            target,
            enforce,
            counters: &mut counters,
            hit: &mut hit,
            out: &mut out,
        });
        let placed = out.placements.len() - before;
        if placed == 0 {
            return Err(no_resources(explain_empty(&prepared, &h, jb, req)));
        }
        if target == usize::MAX {
            break; // the default: one full sweep
        }
        if out.placements.len() < target && !req.oversubscribe {
            return Err(oversubscribed(req, &hit, out.placements.len(), target));
        }
        sweep_no += 1;
    }
    if req.order == Order::Sequential {
        in_sequence(&mut out);
    }
    Ok(out)
}

/// Each node's model (identical models, by address, are prepared once), and the first node of
/// each distinct model.
fn distinct_models(nodes: &[&NodeTopology]) -> (Vec<usize>, Vec<usize>) {
    let mut model_of = Vec::with_capacity(nodes.len());
    let mut distinct: Vec<usize> = Vec::new();
    let mut seen: HashMap<*const NodeTopology, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        let m = *seen.entry(*n as *const NodeTopology).or_insert_with(|| {
            distinct.push(i);
            distinct.len() - 1
        });
        model_of.push(m);
    }
    (model_of, distinct)
}

/// How many ranks to place: np, else one full sweep, else the `ppr` count per object.
fn target_np(nodes: &[&NodeTopology], req: &Request) -> usize {
    match (req.np, req.default_np) {
        (Some(n), _) => n,
        (None, DefaultNp::Sweep) => usize::MAX,
        (None, DefaultNp::PerObject(lim)) => nodes
            .iter()
            .map(|n| n.objects(lim.level).len().max(1) * lim.count as usize)
            .sum(),
    }
}

/// Sequential rank order: ranks renumbered by node, then hardware thread.
fn in_sequence(out: &mut Plan) {
    let w = out.nesting.len();
    let mut idx: Vec<usize> = (0..out.placements.len()).collect();
    idx.sort_by_key(|&i| (out.placements[i].node, out.placements[i].pu));
    let placements = idx.iter().map(|&i| out.placements[i]).collect();
    let coords = idx
        .iter()
        .flat_map(|&i| out.coords[i * w..(i + 1) * w].iter().copied())
        .collect();
    out.placements = placements;
    out.coords = coords;
}

struct SweepCtx<'a> {
    nodes: &'a [&'a NodeTopology],
    req: &'a Request,
    prepared: &'a [Prepared],
    model_of: &'a [usize],
    ranges: &'a [u32],
    order: &'a [usize],
    jb: usize,
    target: usize,
    enforce: bool,
    counters: &'a mut Counters,
    hit: &'a mut [bool],
    out: &'a mut Plan,
}

fn sweep(cx: &mut SweepCtx<'_>) {
    let hl = cx.ranges.len();
    if cx.ranges.contains(&0) {
        return;
    }
    let width = cx.req.bind.width;
    let mut c = vec![0u32; hl];
    let mut idx = vec![0u32; hl];
    'positions: loop {
        if cx.out.placements.len() >= cx.target {
            return;
        }
        // Resolve the position down the nesting; skip coordinates the node lacks.
        let node = c[0] as usize;
        let p = &cx.prepared[cx.model_of[node]];
        let mut exists = true;
        for j in 1..hl {
            let parent = idx[j - 1] as usize;
            if c[j] >= p.count[j][parent] {
                exists = false;
                break;
            }
            idx[j] = p.first[j][parent] + c[j];
        }
        if exists {
            let e = idx[p.enclosing] as usize;
            let b = idx[cx.jb];
            let i = b - p.win_first[e];
            if i.is_multiple_of(width) && i + width <= p.win_count[e] {
                let objs = &p.objs[cx.jb];
                let span = Span {
                    start: objs[b as usize].start,
                    end: objs[(b + width - 1) as usize].end,
                };
                let admitted = if cx.enforce && !cx.req.mppr.is_empty() {
                    match cx.counters.admit(cx.req, cx.nodes, node, span) {
                        Ok(()) => true,
                        Err(k) => {
                            cx.hit[k] = true;
                            false
                        }
                    }
                } else {
                    true
                };
                if admitted {
                    cx.out.placements.push(Placement {
                        node: node as u32,
                        span,
                        pu: p.objs[hl - 1][idx[hl - 1] as usize].start,
                    });
                    cx.out.coords.extend_from_slice(&c);
                }
            }
        }
        for &j in cx.order {
            c[j] += 1;
            if c[j] < cx.ranges[j] {
                continue 'positions;
            }
            c[j] = 0;
        }
        return;
    }
}

/// Why a sweep placed nothing: the window never fits.
fn explain_empty(prepared: &[Prepared], h: &[Level], jb: usize, req: &Request) -> String {
    let most = prepared
        .iter()
        .flat_map(|p| p.win_count.iter().copied())
        .max()
        .unwrap_or(0);
    let enclosing = prepared
        .first()
        .map(|p| h[p.enclosing])
        .unwrap_or(Level::Node);
    format!(
        "binding width {} is larger than any {} holds (at most {} {} objects in one {}); use a smaller width or a wider binding level",
        req.bind.width,
        enclosing.name(),
        most,
        h[jb].name(),
        enclosing.name()
    )
}
