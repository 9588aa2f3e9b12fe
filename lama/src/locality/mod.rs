//! Which network and accelerator devices are nearest to a task, and which each task gets.
//!
//! A node is a weighted graph (Open MPI's on-host topology proposal): the CPU-side objects of
//! hwloc's tree (machine, groups, packages, caches, cores, PUs), with every device attached to its
//! locality (the first non-I/O ancestor). The distance from a task to a device is the least total
//! weight of a path from the task's place (the smallest object holding all its CPUs) to the
//! device: [`HOP`] per tree edge, plus, when the machine has a NUMA latency matrix, `HOP` times the
//! relative extra latency between the task's NUMA nodes and the device's (`10 × (lat(a,b) /
//! lat(a,a) − 1)`, so a node twice as far costs one more hop). An administrator's weights file
//! ([`weights`]) replaces a device's attachment by explicit edges.
//!
//! Assignment gives each task the nearest devices of a kind; among equally near devices the
//! least loaded wins (so tasks go round-robin over them), and a final pass moves a task off a
//! shared device onto an idle one that is as near for it.

mod choice;
pub mod driver;
mod env;
mod numa;
pub mod weights;

pub use choice::{assign, choose, TaskDevices};
pub use env::{
    allowed_gpus, gpu_bind_mode, gpus_per_task, may_name_gpus, named_gpus, task_env, AllowedGpus,
    GPU_VARIABLES,
};

use thiserror::Error;

pub use numa::{nearest_memory, MemoryKind, Numa};
pub use weights::Weights;

/// Weight of one tree edge.
pub const HOP: u64 = 10;

/// A CPU-side object of the node.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Place {
    /// Index of the parent place; `None` for the machine.
    pub parent: Option<usize>,
    /// hwloc type name: `Machine`, `Group`, `Package`, `L3`, `Core`, `PU`, ...
    pub kind: String,
    /// hwloc logical index within its type.
    pub index: usize,
    /// OS indexes of its CPUs, ascending.
    pub cpus: Vec<u32>,
}

/// What a device is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    /// Network interface or OpenFabrics (InfiniBand, RoCE, Omni-Path) device.
    Nic,
    /// GPU or other accelerator (co-processor, vector engine).
    Gpu,
}

/// Who made an accelerator: decides which runtime variable names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Vendor {
    /// `CUDA_VISIBLE_DEVICES`.
    Nvidia,
    /// `ROCR_VISIBLE_DEVICES`.
    Amd,
    /// `ZE_AFFINITY_MASK`.
    Intel,
    /// No runtime variable (NEC vector engines, others): `LAMA_GPUS` only.
    Other,
}

/// One device: a PCI function (or an OS device without one), with every name hwloc gives it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Device {
    /// The name shown and exported in `LAMA_NICS` / `LAMA_GPUS`: `mlx5_0`, `eth0`, `cuda1`, `ve3`.
    pub name: String,
    /// Every OS device name of this device (`ib0`, `mlx5_0`; `cuda0`, `nvml0`, `opencl0d0`).
    pub names: Vec<String>,
    /// NIC or GPU.
    pub kind: Kind,
    /// Vendor (accelerators; `Other` for NICs).
    pub vendor: Vendor,
    /// The runtime's index (`CUDA_VISIBLE_DEVICES` and the like), for GPUs.
    pub index: Option<u32>,
    /// What UCX calls it (`mlx5_0:1`, `eth0`), for NICs.
    pub ucx: Option<String>,
    /// PCI bus id, `0000:84:00.0`.
    pub pci: Option<String>,
    /// Index of the place it hangs off.
    pub place: usize,
    /// OpenFabrics devices: true when there are ports; prefers these over plain Ethernet.
    pub fabric: bool,
    /// The GPU's UUID as its runtime and Slurm write it (`GPU-8932f937-...`, from hwloc's
    /// `NVIDIAUUID`; an AMD GPU's unique id, from `AMDUUID`), when hwloc reports one: how a GPU
    /// named by UUID in `CUDA_VISIBLE_DEVICES` is found. Absent from caches written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The NVIDIA driver lists MIG instances on this GPU (`/proc/driver/nvidia/capabilities`).
    /// Slurm and CUDA then number the instances with the whole GPUs, so an index no longer names
    /// this GPU. Absent (false) from caches written before it, and from topology files.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mig: bool,
}

/// Device locality could not be read or used.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum LocalityError {
    /// hwloc failed.
    #[error("cannot read devices of {source_name}: {reason}")]
    Load {
        /// File or "this machine".
        source_name: String,
        /// Why.
        reason: String,
    },
    /// More devices per task than the node has (or the job was given).
    #[error("{wanted} {kind} per task asked for, but {what}")]
    TooFew {
        /// "NIC(s)" or "GPU(s)".
        kind: &'static str,
        /// Per task.
        wanted: usize,
        /// What there is.
        what: String,
    },
    /// A GPU list from the environment that cannot be used.
    #[error("{0}")]
    Allowed(String),
}

/// A node's places, NUMA nodes, latencies and devices.
///
/// Places are kept as one table (parents, kinds, indexes, and every place's CPUs in one shared
/// pool) rather than one allocation each: a step that reads the node's devices from the cache
/// builds about 1,200 places on a 384-PU machine, and allocating them one by one was most of
/// its time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Locality {
    pub(crate) places: PlaceTable,
    numa: Vec<Numa>,
    latency: Option<Vec<Vec<u64>>>,
    pub(crate) devices: Vec<Device>,
    /// OS CPU index -> index of its PU place.
    pu_place: Vec<Option<usize>>,
    depth: Vec<u32>,
    /// Per OS CPU index, `numa_words` words of a bit set of its NUMA nodes (indexes into
    /// `numa`). A place's set is the union over its CPUs, computed when a distance needs it
    /// (for the few places devices hang off) rather than for every place of the machine.
    cpu_numa: Vec<u64>,
    numa_words: usize,
}

/// The members of a bit set kept in words.
#[derive(Clone)]
struct Bits<'a> {
    words: &'a [u64],
    at: usize,
    word: u64,
}

impl<'a> Bits<'a> {
    fn new(words: &'a [u64]) -> Bits<'a> {
        Bits {
            words,
            at: 0,
            word: words.first().copied().unwrap_or(0),
        }
    }
}

impl Iterator for Bits<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        while self.word == 0 {
            self.at += 1;
            self.word = *self.words.get(self.at)?;
        }
        let b = self.word.trailing_zeros() as usize;
        self.word &= self.word - 1;
        Some(self.at * 64 + b)
    }
}

/// Working space for the distances of many tasks in a row: consecutive tasks mostly share their
/// NUMA nodes, so the memory part of each device's distance is computed once per NUMA set.
#[derive(Default)]
struct Scratch {
    /// The task's place and its ancestors, by depth.
    chain: Vec<usize>,
    /// The task's NUMA nodes.
    numa: Vec<u64>,
    /// A place's NUMA nodes.
    theirs: Vec<u64>,
    /// The NUMA set `memo` was computed for, and per place, its NUMA extra.
    memo_numa: Vec<u64>,
    memo: Vec<(usize, u64)>,
}

/// A place of a [`Locality`], borrowed from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlaceRef<'a> {
    /// Index of the parent place; `None` for the machine.
    pub parent: Option<usize>,
    /// hwloc type name.
    pub kind: &'a str,
    /// hwloc logical index within its type.
    pub index: usize,
    /// OS indexes of its CPUs: as [`Place::cpus`] gave them, or in the machine's logical order
    /// for a node read from its cache (not sorted there: every step would pay for it).
    pub cpus: &'a [u32],
}

/// A [`Locality`]'s places: what [`Locality::new`] makes of a list of [`Place`]s, and what the
/// node cache decodes directly.
#[derive(Clone, Debug, Default)]
pub(crate) struct PlaceTable {
    /// Distinct kind names; `kind` indexes into it.
    pub(crate) kinds: Vec<String>,
    pub(crate) parent: Vec<Option<usize>>,
    pub(crate) kind: Vec<u16>,
    pub(crate) index: Vec<usize>,
    /// Per place, its CPUs as a range of `pool` (OS indexes, in no required order).
    pub(crate) range: Vec<(u32, u32)>,
    pub(crate) pool: Vec<u32>,
}

// Places are equal when they hold the same CPUs, in whatever order each table keeps them.
impl PartialEq for PlaceTable {
    fn eq(&self, other: &PlaceTable) -> bool {
        let cpus = |t: &PlaceTable, i: usize| {
            let (a, b) = t.range[i];
            let mut v = t.pool[a as usize..b as usize].to_vec();
            v.sort_unstable();
            v
        };
        fn kind(t: &PlaceTable, i: usize) -> &str {
            &t.kinds[usize::from(t.kind[i])]
        }
        self.parent == other.parent
            && self.index == other.index
            && (0..self.parent.len())
                .all(|i| kind(self, i) == kind(other, i) && cpus(self, i) == cpus(other, i))
    }
}

impl Eq for PlaceTable {}

impl PlaceTable {
    /// An empty table with room for `places` places holding `cpus` CPUs in all.
    pub(crate) fn with_capacity(kinds: Vec<String>, places: usize, cpus: usize) -> PlaceTable {
        PlaceTable {
            kinds,
            parent: Vec::with_capacity(places),
            kind: Vec::with_capacity(places),
            index: Vec::with_capacity(places),
            range: Vec::with_capacity(places),
            pool: Vec::with_capacity(cpus),
        }
    }

    /// The id of a kind name, added when new.
    pub(crate) fn kind_id(&mut self, name: &str) -> u16 {
        match self.kinds.iter().position(|k| k == name) {
            Some(i) => i as u16,
            None => {
                self.kinds.push(name.to_string());
                (self.kinds.len() - 1) as u16
            }
        }
    }

    /// Appends a place whose CPUs are the last ones pushed onto `pool`, from `from` on.
    pub(crate) fn push(&mut self, parent: Option<usize>, kind: u16, index: usize, from: usize) {
        self.parent.push(parent);
        self.kind.push(kind);
        self.index.push(index);
        self.range.push((from as u32, self.pool.len() as u32));
    }
}

impl Locality {
    /// Builds a node from plain data. Places must list parents before children (place 0 is the
    /// machine); `latency`, when given, is square with one row per NUMA node in `numa` order.
    pub fn new(
        places: Vec<Place>,
        numa: Vec<Numa>,
        latency: Option<Vec<Vec<u64>>>,
        devices: Vec<Device>,
    ) -> Locality {
        let mut t = PlaceTable::default();
        for p in places {
            let kind = t.kind_id(&p.kind);
            let from = t.pool.len();
            t.pool.extend_from_slice(&p.cpus);
            t.push(p.parent, kind, p.index, from);
        }
        Locality::from_table(t, numa, latency, devices)
    }

    pub(crate) fn from_table(
        t: PlaceTable,
        numa: Vec<Numa>,
        latency: Option<Vec<Vec<u64>>>,
        devices: Vec<Device>,
    ) -> Locality {
        let n = t.parent.len();
        let mut depth = vec![0u32; n];
        for i in 0..n {
            depth[i] = match t.parent[i] {
                Some(p) if p < i => depth[p] + 1,
                _ => 0,
            };
        }
        let cpus = |i: usize| &t.pool[t.range[i].0 as usize..t.range[i].1 as usize];
        let max = (0..n).filter_map(|i| cpus(i).last()).max().copied();
        let mut pu_place = vec![None; max.map_or(0, |m| m as usize + 1)];
        // The deepest place holding a single CPU stands for that CPU.
        for i in 0..n {
            if let [cpu] = cpus(i) {
                let slot = &mut pu_place[*cpu as usize];
                if slot.is_none_or(|s| depth[s] < depth[i]) {
                    *slot = Some(i);
                }
            }
        }
        let latency =
            latency.filter(|m| m.len() == numa.len() && m.iter().all(|r| r.len() == numa.len()));
        // Each CPU's NUMA nodes as a bit set.
        let words = numa.len().div_ceil(64).max(1);
        let mut cpu_numa = vec![0u64; pu_place.len() * words];
        for (k, nd) in numa.iter().enumerate() {
            for &c in &nd.cpus {
                if let Some(w) = cpu_numa.get_mut(c as usize * words + k / 64) {
                    *w |= 1 << (k % 64);
                }
            }
        }
        Locality {
            places: t,
            numa,
            latency,
            devices,
            pu_place,
            depth,
            cpu_numa,
            numa_words: words,
        }
    }

    /// The NUMA nodes, in hwloc's logical order.
    pub fn numa(&self) -> &[Numa] {
        &self.numa
    }

    /// The NUMA latency matrix, one row per NUMA node, when hwloc has one.
    pub fn latency(&self) -> Option<&[Vec<u64>]> {
        self.latency.as_deref()
    }

    /// The node's devices, in discovery order (PCI order within each locality).
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// How many CPU-side places the node has.
    pub fn place_count(&self) -> usize {
        self.places.parent.len()
    }

    /// Place `i` (parents come before their children; place 0 is the machine).
    pub fn place(&self, i: usize) -> Option<PlaceRef<'_>> {
        (i < self.place_count()).then(|| self.place_at(i))
    }

    /// The CPU-side places, in order.
    pub fn places(&self) -> impl ExactSizeIterator<Item = PlaceRef<'_>> + '_ {
        (0..self.place_count()).map(|i| self.place_at(i))
    }

    /// Place `i`, which exists.
    fn place_at(&self, i: usize) -> PlaceRef<'_> {
        PlaceRef {
            parent: self.places.parent[i],
            kind: &self.places.kinds[usize::from(self.places.kind[i])],
            index: self.places.index[i],
            cpus: self.cpus_of(i),
        }
    }

    fn cpus_of(&self, i: usize) -> &[u32] {
        let (a, b) = self.places.range[i];
        &self.places.pool[a as usize..b as usize]
    }

    /// The parent of place `p`, one level up; `None` at a root (a place whose parent does not
    /// come before it counts as a root, as its depth says).
    fn up(&self, p: usize) -> Option<usize> {
        self.places.parent[p].filter(|_| self.depth[p] > 0)
    }

    /// The root above place `p`.
    fn root(&self, mut p: usize) -> usize {
        while let Some(q) = self.up(p) {
            p = q;
        }
        p
    }

    /// The nearest common ancestor of places `a` and `b`; `None` when they are in two trees.
    fn common(&self, mut a: usize, mut b: usize) -> Option<usize> {
        while self.depth[a] > self.depth[b] {
            a = self.up(a)?;
        }
        while self.depth[b] > self.depth[a] {
            b = self.up(b)?;
        }
        while a != b {
            a = self.up(a)?;
            b = self.up(b)?;
        }
        Some(a)
    }

    /// The smallest place holding every CPU of `cpus` (the machine when none fits better): in a
    /// tree, the nearest common ancestor of their PUs' places. A CPU without a place of its own
    /// gives the top of the tree.
    pub fn place_of(&self, cpus: &[u32]) -> usize {
        let pu = |c: u32| self.pu_place.get(c as usize).copied().flatten();
        let Some(mut at) = cpus.first().and_then(|&c| pu(c)) else {
            return 0;
        };
        for &c in &cpus[1..] {
            match pu(c).and_then(|p| self.common(at, p)) {
                Some(p) => at = p,
                None => return self.root(at),
            }
        }
        at
    }

    /// `chain[d]`: the ancestor of `place` at depth `d`, up to `place` itself.
    fn chain(&self, mut place: usize, chain: &mut Vec<usize>) {
        chain.clear();
        chain.resize(self.depth[place] as usize + 1, 0);
        chain[self.depth[place] as usize] = place;
        while let Some(p) = self.up(place) {
            place = p;
            chain[self.depth[place] as usize] = place;
        }
    }

    /// Tree edges between the place whose ancestors are `chain` and `place`: up from `place` to
    /// the first common ancestor, then down (both to their roots when there is none).
    fn hops(&self, chain: &[usize], mut place: usize) -> u64 {
        let below = chain.len() as u64 - 1;
        let mut up = 0;
        loop {
            let d = self.depth[place] as usize;
            if chain.get(d) == Some(&place) {
                return up + below - d as u64;
            }
            match self.up(place) {
                Some(p) => {
                    place = p;
                    up += 1;
                }
                None => return up + below + d as u64,
            }
        }
    }

    /// Extra weight for memory distance between the task's NUMA nodes (a bit set) and a
    /// place's (`theirs`): the least over the task's nodes `a` of `10 × (lat(a,b) / lat(a,a) −
    /// 1)`, `b` the place's nearest node to `a` (the weight grows with the latency, so the
    /// nearest gives the least).
    fn numa_extra(&self, task_numa: &[u64], theirs: &[u64]) -> u64 {
        let Some(lat) = &self.latency else { return 0 };
        let mut best: Option<u64> = None;
        for a in Bits::new(task_numa) {
            let row = &lat[a];
            let Some(near) = Bits::new(theirs).map(|b| row[b]).min() else {
                continue;
            };
            let local = row[a].max(1);
            let extra =
                (HOP.saturating_mul(near).saturating_add(local / 2) / local).saturating_sub(HOP);
            best = Some(best.map_or(extra, |x| x.min(extra)));
        }
        best.unwrap_or(0)
    }

    /// The NUMA nodes sharing a CPU with `cpus`, as a bit set in `set`.
    fn numa_bits(&self, cpus: &[u32], set: &mut Vec<u64>) {
        let w = self.numa_words;
        set.clear();
        set.resize(w, 0);
        for &c in cpus {
            if let Some(theirs) = self.cpu_numa.get(c as usize * w..(c as usize + 1) * w) {
                for (a, b) in set.iter_mut().zip(theirs) {
                    *a |= b;
                }
            }
        }
    }

    /// Distance from a task running on `cpus` to every device (indexed like [`Locality::devices`]).
    pub fn distances(&self, cpus: &[u32], weights: Option<&Weights>) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.devices.len());
        self.distances_into(cpus, weights, &mut Scratch::default(), &mut out);
        out
    }

    /// [`Locality::distances`], appended to `out`, reusing `s` from the task before.
    fn distances_into(
        &self,
        cpus: &[u32],
        weights: Option<&Weights>,
        s: &mut Scratch,
        out: &mut Vec<u64>,
    ) {
        self.chain(self.place_of(cpus), &mut s.chain);
        self.numa_bits(cpus, &mut s.numa);
        if s.numa != s.memo_numa {
            s.memo.clear();
            s.memo_numa.clone_from(&s.numa);
        }
        let mut path = |place: usize| {
            let extra = match s.memo.iter().find(|&&(p, _)| p == place) {
                Some(&(_, e)) => e,
                None => {
                    self.numa_bits(self.cpus_of(place), &mut s.theirs);
                    let e = self.numa_extra(&s.numa, &s.theirs);
                    s.memo.push((place, e));
                    e
                }
            };
            HOP * self.hops(&s.chain, place) + extra
        };
        // Devices of one place come one after another (PCI order): one path serves them all.
        let mut last: Option<(usize, u64)> = None;
        for (d, dev) in self.devices.iter().enumerate() {
            out.push(match weights.and_then(|w| w.edges(d)) {
                Some(edges) => edges
                    .iter()
                    .map(|&(place, w)| path(place) + w)
                    .min()
                    .unwrap_or(u64::MAX),
                None => match last {
                    Some((p, v)) if p == dev.place => v,
                    _ => {
                        let v = path(dev.place);
                        last = Some((dev.place, v));
                        v
                    }
                },
            });
        }
    }

    /// The devices of `kind` that may be handed out: for NICs the OpenFabrics devices when the
    /// node has any, else every network interface; for GPUs those `allowed` keeps (all when `None`).
    pub fn candidates(&self, kind: Kind, allowed: Option<&[usize]>) -> Vec<usize> {
        let of_kind: Vec<usize> = (0..self.devices.len())
            .filter(|&d| self.devices[d].kind == kind)
            .filter(|d| allowed.is_none_or(|a| a.contains(d)))
            .collect();
        if kind == Kind::Nic && of_kind.iter().any(|&d| self.devices[d].fabric) {
            return of_kind
                .into_iter()
                .filter(|&d| self.devices[d].fabric)
                .collect();
        }
        of_kind
    }

    /// The GPUs numbered `ids` among the node's GPUs in hwloc's order (0 for the first), as Flux
    /// and `lama plan --step-gpus` number them; the first id beyond the node's GPUs is the error.
    pub fn gpus_numbered(&self, ids: &[u32]) -> Result<Vec<usize>, u32> {
        let gpus = self.candidates(Kind::Gpu, None);
        ids.iter()
            .map(|&id| gpus.get(id as usize).copied().ok_or(id))
            .collect()
    }
}
