//! Memory tiers: which of a node's NUMA nodes are its default memory, the placement domains.
//!
//! Nodes now carry NUMA nodes that hold memory and no CPUs of their own: persistent memory and
//! CXL expanders (slow, large), HBM and MCDRAM (fast, small), GPU memory. hwloc attaches each to
//! the object whose CPUs initiate it, so its CPU set repeats those of the DRAM nodes beside it,
//! often a whole package above several sub-NUMA clusters. Counting them as domains lists CPUs
//! twice and halves the machine; binding memory "locally" to them puts pages on the wrong tier.
//!
//! The rule ([`default_nodes`]): the domains are a set of NUMA nodes with disjoint CPU sets,
//! chosen greedily, plain memory (hwloc subtype `DRAM` or none) first, then HBM, then slow
//! memory, then GPU memory, within a kind the narrowest CPU set first, then the lowest OS
//! index. So a DRAM node per sub-NUMA cluster
//! wins over the PMem node of its package, DRAM over the MCDRAM or HBM of the same CPUs, and a
//! CPU-less node hwloc gave no subtype (hwloc 2.9 in a guest with HMAT) loses to the node of the
//! same CPUs with the lower OS index, which Linux gives the nodes that have CPUs. Where a kind
//! of memory is all the CPUs have (HBM-only Xeon Max, KNL in cache mode), it is the domain.

pub use crate::locality::MemoryKind;
use crate::locality::Numa;
use crate::memory::MemPolicy;

/// How a task's memory is bound, by tier: `--lama-mem=`, the Flux `lama.mem=`, `lama plan
/// --mem`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemMode {
    /// The task's default-memory nodes, `MPOL_BIND` (as Slurm's `--mem-bind=local`).
    #[default]
    Local,
    /// The task's nearest high-bandwidth nodes ([`fast_nodes`]), `MPOL_BIND`.
    Hbm,
    /// The same, preferred (`MPOL_PREFERRED_MANY`): the task spills to other memory when
    /// they are full, instead of failing.
    PreferHbm,
    /// The task's default-memory nodes, pages spread over them (`MPOL_INTERLEAVE`).
    Interleave,
}

impl MemMode {
    /// Every mode, in the order the reference lists them.
    pub const ALL: [MemMode; 4] = [
        MemMode::Local,
        MemMode::Hbm,
        MemMode::PreferHbm,
        MemMode::Interleave,
    ];

    /// Its name in options: `local`, `hbm`, `prefer-hbm`, `interleave`.
    pub fn name(self) -> &'static str {
        match self {
            MemMode::Local => "local",
            MemMode::Hbm => "hbm",
            MemMode::PreferHbm => "prefer-hbm",
            MemMode::Interleave => "interleave",
        }
    }

    /// The mode `name` names.
    pub fn parse(name: &str) -> Option<MemMode> {
        MemMode::ALL.into_iter().find(|m| m.name() == name.trim())
    }

    /// The memory policy a task is bound with.
    pub fn policy(self) -> MemPolicy {
        match self {
            MemMode::Local | MemMode::Hbm => MemPolicy::Bind,
            MemMode::PreferHbm => MemPolicy::PreferredMany,
            MemMode::Interleave => MemPolicy::Interleave,
        }
    }
}

/// A task's memory cannot be bound as asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TierError {
    /// No NUMA node of the asked tier is local to the task's CPUs.
    #[error("memory mode {mode}: no memory faster than the default memory (NUMA nodes {default}) is local to cpus {cpus} (this node's NUMA nodes, OS index:kind: {nodes}); local or interleave bind here")]
    NoFaster {
        /// The mode asked.
        mode: &'static str,
        /// The task's CPUs, a cpulist.
        cpus: String,
        /// Its default-memory nodes.
        default: String,
        /// Every NUMA node of the machine, `OS:kind`.
        nodes: String,
    },
    /// No default-memory node is local to the task's CPUs.
    #[error("memory mode {mode}: no NUMA node is local to cpus {cpus}")]
    NoLocal {
        /// The mode asked.
        mode: &'static str,
        /// The task's CPUs, a cpulist.
        cpus: String,
    },
}

/// The NUMA nodes (OS indexes, ascending) and policy a task on `cpus` (OS indexes) is bound
/// with under `mode`; `allowed` keeps only the nodes the process may use.
pub fn task_memory(
    numa: &[Numa],
    cpus: &[u32],
    mode: MemMode,
    allowed: Option<&[u32]>,
) -> Result<(Vec<u32>, MemPolicy), TierError> {
    let list = || crate::idset::format_list(cpus);
    let mut default = crate::memory::local_nodes(numa, cpus, allowed);
    if let (true, Some(allowed)) = (default.is_empty(), allowed) {
        // The step's cgroup withholds the CPUs' own memory: the nearest it allows, as a CPU
        // without memory of its own borrows (crate::locality::nearest_memory).
        let own = crate::memory::local_nodes(numa, cpus, None);
        let lenders: Vec<u32> = numa
            .iter()
            .filter(|n| n.default && allowed.contains(&n.os_index))
            .map(|n| n.os_index)
            .collect();
        default.extend(crate::locality::nearest_memory(&lenders, &own, |_, _| None));
    }
    if default.is_empty() {
        return Err(TierError::NoLocal {
            mode: mode.name(),
            cpus: list(),
        });
    }
    let nodes = match mode {
        MemMode::Local | MemMode::Interleave => default,
        MemMode::Hbm | MemMode::PreferHbm => {
            let fast = fast_nodes(numa, cpus, allowed);
            if fast.is_empty() {
                let all: Vec<String> = numa
                    .iter()
                    .map(|n| format!("{}:{}", n.os_index, n.kind.name()))
                    .collect();
                return Err(TierError::NoFaster {
                    mode: mode.name(),
                    cpus: list(),
                    default: crate::idset::format_list(&default),
                    nodes: all.join(","),
                });
            }
            fast
        }
    };
    Ok((nodes, mode.policy()))
}

/// The high-bandwidth NUMA nodes near a task on `cpus`: the nodes of kind
/// [`MemoryKind::Fast`] (`HBM`, `MCDRAM`) attached to CPUs the task has; where hwloc gave no
/// such subtype (hwloc before 2.10, a guest), the other plain nodes attached to the task's CPUs
/// whose bandwidth from them is above that of every default-memory node the task has. OS
/// indexes, ascending.
pub fn fast_nodes(numa: &[Numa], cpus: &[u32], allowed: Option<&[u32]>) -> Vec<u32> {
    let meets = |n: &Numa| n.cpus.iter().any(|c| cpus.contains(c));
    let ok = |n: &&Numa| meets(n) && allowed.is_none_or(|a| a.contains(&n.os_index));
    let mut fast: Vec<u32> = numa
        .iter()
        .filter(ok)
        .filter(|n| n.kind == MemoryKind::Fast)
        .map(|n| n.os_index)
        .collect();
    if fast.is_empty() {
        let floor = numa
            .iter()
            .filter(ok)
            .filter(|n| n.default)
            .map(|n| n.bandwidth)
            .max()
            .flatten();
        if let Some(floor) = floor {
            fast = numa
                .iter()
                .filter(ok)
                .filter(|n| !n.default && n.kind == MemoryKind::Plain)
                .filter(|n| n.bandwidth.is_some_and(|b| b > floor))
                .map(|n| n.os_index)
                .collect();
        }
    }
    fast.sort_unstable();
    fast.dedup();
    fast
}

/// One NUMA node as [`default_nodes`] weighs it.
#[derive(Clone, Copy, Debug)]
pub struct NodeMemory<'a> {
    /// Its OS index.
    pub os_index: u32,
    /// The CPUs it is attached to (hwloc's CPU set, any order; empty for a node hwloc left
    /// without).
    pub cpus: &'a [u32],
    /// Its kind.
    pub kind: MemoryKind,
}

/// Which of `nodes` are the node's default memory (same order): a set with disjoint CPU sets,
/// chosen as the module says. A node without CPUs is never one.
pub fn default_nodes(nodes: &[NodeMemory<'_>]) -> Vec<bool> {
    let mut order: Vec<usize> = (0..nodes.len())
        .filter(|&i| !nodes[i].cpus.is_empty())
        .collect();
    order.sort_by_key(|&i| {
        let n = &nodes[i];
        (n.kind.rank(), n.cpus.len(), n.os_index)
    });
    let mut taken: std::collections::HashSet<u32> = std::collections::HashSet::new();
    let mut chosen = vec![false; nodes.len()];
    for i in order {
        let cpus = nodes[i].cpus;
        if cpus.iter().all(|c| !taken.contains(c)) {
            taken.extend(cpus.iter().copied());
            chosen[i] = true;
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(os_index: u32, cpus: &[u32], kind: MemoryKind) -> NodeMemory<'_> {
        NodeMemory {
            os_index,
            cpus,
            kind,
        }
    }

    #[test]
    fn kinds_from_hwloc_subtypes() {
        assert_eq!(MemoryKind::of(None), MemoryKind::Plain);
        assert_eq!(MemoryKind::of(Some("DRAM")), MemoryKind::Plain);
        assert_eq!(MemoryKind::of(Some("MCDRAM")), MemoryKind::Fast);
        assert_eq!(MemoryKind::of(Some("HBM")), MemoryKind::Fast);
        assert_eq!(MemoryKind::of(Some("NVM")), MemoryKind::Slow);
        assert_eq!(MemoryKind::of(Some("CXL-DRAM")), MemoryKind::Slow);
        assert_eq!(MemoryKind::of(Some("GPUMemory")), MemoryKind::Device);
        for k in [
            MemoryKind::Plain,
            MemoryKind::Fast,
            MemoryKind::Slow,
            MemoryKind::Device,
        ] {
            assert_eq!(MemoryKind::from_name(k.name()), Some(k));
        }
    }

    #[test]
    fn dram_per_cluster_over_the_packages_pmem() {
        // hwloc's fakememinitiators-1np2c+1npp+gi: DRAM nodes 5, 6 (package 0's clusters),
        // 8, 9 (package 1's), NVM nodes 7 and 10 attached to each package.
        let nodes = [
            node(7, &[0, 1, 4, 5], MemoryKind::Slow),
            node(5, &[0, 1], MemoryKind::Plain),
            node(6, &[4, 5], MemoryKind::Plain),
            node(10, &[2, 3, 6, 7], MemoryKind::Slow),
            node(8, &[2, 3], MemoryKind::Plain),
            node(9, &[6, 7], MemoryKind::Plain),
        ];
        assert_eq!(
            default_nodes(&nodes),
            vec![false, true, true, false, true, true]
        );
    }

    #[test]
    fn dram_over_mcdram_and_the_lower_index_without_subtypes() {
        // KNL SNC4 hybrid: DRAM and MCDRAM of each quadrant on the same CPUs.
        let nodes = [
            node(0, &[0, 1], MemoryKind::Plain),
            node(4, &[0, 1], MemoryKind::Fast),
            node(1, &[2, 3], MemoryKind::Plain),
            node(5, &[2, 3], MemoryKind::Fast),
        ];
        assert_eq!(default_nodes(&nodes), vec![true, false, true, false]);
        // A guest's CPU-less nodes without subtypes (hwloc 2.9): the CPUs' own node first.
        let nodes = [
            node(2, &[0, 1], MemoryKind::Plain),
            node(0, &[0, 1], MemoryKind::Plain),
            node(4, &[0, 1, 2, 3], MemoryKind::Plain),
            node(1, &[2, 3], MemoryKind::Plain),
        ];
        assert_eq!(default_nodes(&nodes), vec![false, true, false, true]);
    }

    #[test]
    fn a_kind_that_is_all_the_cpus_have_is_their_domain() {
        // HBM-only Xeon Max; a GPU-memory node on CPUs no other node has; a node hwloc left
        // without CPUs.
        let nodes = [
            node(0, &[0, 1], MemoryKind::Fast),
            node(1, &[2, 3], MemoryKind::Device),
            node(2, &[], MemoryKind::Plain),
        ];
        assert_eq!(default_nodes(&nodes), vec![true, true, false]);
    }

    fn numa(os_index: u32, cpus: &[u32], kind: MemoryKind, default: bool, bw: Option<u64>) -> Numa {
        Numa {
            os_index,
            cpus: cpus.to_vec(),
            kind,
            default,
            capacity: 0,
            bandwidth: bw,
            latency: None,
            borrowed: Vec::new(),
        }
    }

    #[test]
    fn modes_by_name() {
        for m in MemMode::ALL {
            assert_eq!(MemMode::parse(m.name()), Some(m));
        }
        assert_eq!(MemMode::parse("fast"), None);
        assert_eq!(MemMode::PreferHbm.policy(), MemPolicy::PreferredMany);
    }

    #[test]
    fn each_mode_on_a_knl_quadrant_pair() {
        // Two KNL quadrants: DRAM 0,1 and MCDRAM 4,5 on the same CPUs.
        let nodes = [
            numa(0, &[0, 1], MemoryKind::Plain, true, None),
            numa(1, &[2, 3], MemoryKind::Plain, true, None),
            numa(4, &[0, 1], MemoryKind::Fast, false, None),
            numa(5, &[2, 3], MemoryKind::Fast, false, None),
        ];
        let on = |cpus: &[u32], m| task_memory(&nodes, cpus, m, None).unwrap();
        assert_eq!(on(&[0], MemMode::Local), (vec![0], MemPolicy::Bind));
        assert_eq!(on(&[0], MemMode::Hbm), (vec![4], MemPolicy::Bind));
        assert_eq!(
            on(&[1, 2], MemMode::PreferHbm),
            (vec![4, 5], MemPolicy::PreferredMany)
        );
        assert_eq!(
            on(&[1, 2], MemMode::Interleave),
            (vec![0, 1], MemPolicy::Interleave)
        );
        // A node the cgroup withholds is not bound.
        assert_eq!(
            task_memory(&nodes, &[1, 2], MemMode::Hbm, Some(&[0, 1, 5])).unwrap(),
            (vec![5], MemPolicy::Bind)
        );
        // The CPUs' own memory withheld: the nearest the cgroup allows, never one it withholds.
        assert_eq!(
            task_memory(&nodes, &[0], MemMode::Local, Some(&[1, 4, 5])).unwrap(),
            (vec![1], MemPolicy::Bind)
        );
        assert!(task_memory(&nodes, &[0], MemMode::Local, Some(&[4])).is_err());
    }

    #[test]
    fn a_faster_node_without_subtype_by_its_bandwidth() {
        // A guest with HMAT under hwloc 2.9: CPU node 0, CPU-less 2 (faster) and 4 (slower).
        let nodes = [
            numa(0, &[0, 1], MemoryKind::Plain, true, Some(10240)),
            numa(2, &[0, 1], MemoryKind::Plain, false, Some(40960)),
            numa(4, &[0, 1], MemoryKind::Plain, false, Some(5120)),
        ];
        assert_eq!(fast_nodes(&nodes, &[1], None), vec![2]);
        // No bandwidths known: no faster tier, refused, naming the nodes.
        let blind = [
            numa(0, &[0, 1], MemoryKind::Plain, true, None),
            numa(2, &[0, 1], MemoryKind::Plain, false, None),
        ];
        let e = task_memory(&blind, &[0], MemMode::Hbm, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "memory mode hbm: no memory faster than the default memory (NUMA nodes 0) is local to cpus 0 (this node's NUMA nodes, OS index:kind: 0:plain,2:plain); local or interleave bind here"
        );
    }

    #[test]
    fn pmem_is_never_a_fast_tier() {
        let nodes = [
            numa(5, &[0, 1], MemoryKind::Plain, true, Some(131072)),
            numa(7, &[0, 1, 4, 5], MemoryKind::Slow, false, Some(78644)),
        ];
        assert!(fast_nodes(&nodes, &[0], None).is_empty());
        assert_eq!(
            task_memory(&nodes, &[0, 1], MemMode::Interleave, None).unwrap(),
            (vec![5], MemPolicy::Interleave)
        );
    }
}
