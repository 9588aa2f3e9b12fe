//! A node's places (packages, caches, cores, PUs, ...) as the cache writes them: runs of alike
//! places over the machine's PUs in logical order ([`place_runs`]), and read back, checked, into
//! a place table ([`decode_places`]).

use super::{Devices, MAX_DEPTH};
use crate::locality::{Locality, PlaceTable};

/// One run of alike places being encoded; `per_parent` is `None` while every place so far has
/// the first one's parent.
struct Run {
    kind: u32,
    index: u32,
    parent: u32,
    per_parent: Option<u32>,
    start: u32,
    width: u32,
    count: u32,
}

impl Run {
    /// Adds the next place when it continues the run.
    fn extend(&mut self, kind: u32, index: u32, parent: u32, (start, width): (u32, u32)) -> bool {
        let k = u64::from(self.count);
        let fits = kind == self.kind
            && u64::from(index) == u64::from(self.index) + k
            && width == self.width
            && u64::from(start) == u64::from(self.start) + k * u64::from(width);
        let parent_fits = match (self.parent, self.per_parent) {
            (0, _) => parent == 0,
            (p, None) if parent == p => true,
            (p, None) if u64::from(parent) == u64::from(p) + 1 => {
                self.per_parent = Some(self.count);
                true
            }
            (_, None) => false,
            (p, Some(pp)) => u64::from(parent) == u64::from(p) + k / u64::from(pp),
        };
        if fits && parent_fits {
            self.count += 1;
        }
        fits && parent_fits
    }

    fn done(self) -> [u32; 7] {
        let pp = self.per_parent.unwrap_or(self.count);
        [
            self.kind,
            self.index,
            self.parent,
            pp,
            self.start,
            self.width,
            self.count,
        ]
    }
}

/// The places of `loc` as runs over `pus` (the machine's PUs in logical order); every place
/// must hold consecutive PUs of that order, as hwloc's objects do. Kinds are `loc`'s own ids.
pub(super) fn place_runs(loc: &Locality, pus: &[u32]) -> Result<Vec<[u32; 7]>, String> {
    let max = pus.iter().max().map_or(0, |&m| m as usize + 1);
    let mut pos = vec![u32::MAX; max];
    for (i, &c) in pus.iter().enumerate() {
        pos[c as usize] = i as u32;
    }
    let mut out: Vec<[u32; 7]> = Vec::new();
    let mut run: Option<Run> = None;
    for (i, p) in loc.places().enumerate() {
        let at: Vec<u32> = p
            .cpus
            .iter()
            .map(|&c| pos.get(c as usize).copied().unwrap_or(u32::MAX))
            .collect();
        let (lo, hi) = (at.iter().min(), at.iter().max());
        let span = match (lo, hi) {
            (Some(&lo), Some(&hi)) if hi != u32::MAX && (hi - lo) as usize + 1 == at.len() => {
                (lo, hi - lo + 1)
            }
            // A package whose CPUs a cgroup withholds (or are offline) holds none.
            (None, None) => (0, 0),
            _ => {
                return Err(format!(
                    "place {i} ({} {}) does not hold consecutive PUs of the machine",
                    p.kind, p.index
                ))
            }
        };
        let kind = u32::from(loc.places.kind[i]);
        let parent = p.parent.map_or(0, |q| q as u32 + 1);
        let index = p.index as u32;
        if !run
            .as_mut()
            .is_some_and(|r| r.extend(kind, index, parent, span))
        {
            out.extend(run.take().map(|r| r.done()));
            run = Some(Run {
                kind,
                index,
                parent,
                per_parent: None,
                start: span.0,
                width: span.1,
                count: 1,
            });
        }
    }
    out.extend(run.map(|r| r.done()));
    Ok(out)
}

/// The places of a devices line, checked: each inside the machine's PUs and inside its parent,
/// parents before children, and each PU in at most [`MAX_DEPTH`] places (hwloc's trees are
/// far shallower), which bounds the memory a damaged file can ask for by its number of PUs.
pub(super) fn decode_places(d: &Devices, pus: &[u32]) -> Result<PlaceTable, String> {
    let n = pus.len() as u64;
    let total: u64 = d.places.iter().map(|r| u64::from(r[6])).sum();
    let held: u64 = d
        .places
        .iter()
        .map(|r| u64::from(r[5]) * u64::from(r[6]))
        .sum();
    // Places that hold no PU (a package a cgroup withholds whole) count against the bound too.
    if total == 0
        || held > MAX_DEPTH * n
        || total > (MAX_DEPTH + 1) * n
        || d.kinds.len() > usize::from(u16::MAX)
    {
        return Err("no places, or far more than the machine's PUs allow".into());
    }
    // Sized once: both totals are known and bounded above.
    let mut t = PlaceTable::with_capacity(d.kinds.clone(), total as usize, held as usize);
    // Each place's PUs as positions in `pus`, to check it lies inside its parent.
    let mut spans: Vec<(u64, u64)> = Vec::with_capacity(total as usize);
    for &[kind, index, parent, per_parent, start, width, count] in &d.places {
        if kind as usize >= d.kinds.len() || per_parent == 0 {
            return Err("a run of places with an unknown kind".into());
        }
        for k in 0..u64::from(count) {
            let i = spans.len();
            let a = u64::from(start) + k * u64::from(width);
            let b = a + u64::from(width);
            let up = (parent > 0).then(|| u64::from(parent) - 1 + k / u64::from(per_parent));
            let inside = match up {
                Some(q) => {
                    q < i as u64 && {
                        let (pa, pb) = spans[q as usize];
                        width == 0 || pa <= a && b <= pb
                    }
                }
                None => true,
            };
            if b > n || !inside {
                return Err(format!(
                    "place {i} lies outside the machine or outside its parent"
                ));
            }
            spans.push((a, b));
            let from = t.pool.len();
            t.pool.extend_from_slice(&pus[a as usize..b as usize]);
            t.push(
                up.map(|q| q as usize),
                kind as u16,
                index as usize + k as usize,
                from,
            );
        }
    }
    Ok(t)
}
