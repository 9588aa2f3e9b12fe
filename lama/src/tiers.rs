//! Memory tiers: which of a node's NUMA nodes are its default memory, the placement domains.
//!
//! Nodes now carry NUMA nodes that hold memory and no CPUs of their own: persistent memory and
//! CXL expanders (slow, large), HBM and MCDRAM (fast, small), GPU memory. hwloc attaches each to
//! the object whose CPUs initiate it, so its CPU set repeats those of the DRAM nodes beside it,
//! often a whole package above several sub-NUMA clusters. Counting them as domains lists CPUs
//! twice and halves the machine; binding memory "locally" to them puts pages on the wrong tier.
//!
//! The rule ([`default_nodes`]): the domains are a set of NUMA nodes with disjoint CPU sets,
//! chosen greedily, plain memory (hwloc subtype `DRAM` or none) before any other kind, then
//! the narrowest CPU set first, then the lowest OS index. So a DRAM node per sub-NUMA cluster
//! wins over the PMem node of its package, DRAM over the MCDRAM or HBM of the same CPUs, and a
//! CPU-less node hwloc gave no subtype (hwloc 2.9 in a guest with HMAT) loses to the node of the
//! same CPUs with the lower OS index, which Linux gives the nodes that have CPUs. Where a kind
//! of memory is all the CPUs have (HBM-only Xeon Max, KNL in cache mode), it is the domain.

/// What kind of memory a NUMA node holds, from hwloc's subtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryKind {
    /// Ordinary memory: subtype `DRAM`, or none.
    Plain,
    /// High-bandwidth memory: `HBM`, `MCDRAM`.
    Fast,
    /// Slower, larger memory: `NVM` (persistent memory), `SPM` (specific-purpose), `CXL-*`.
    Slow,
    /// Memory of an accelerator that the CPUs can address: `GPUMemory`.
    Device,
}

impl MemoryKind {
    /// The kind of a NUMA node whose hwloc subtype is `subtype`. An unknown subtype is
    /// [`MemoryKind::Slow`]: not plain memory, never preferred over it.
    pub fn of(subtype: Option<&str>) -> MemoryKind {
        match subtype.map(str::trim).filter(|s| !s.is_empty()) {
            None => MemoryKind::Plain,
            Some(s) if s.eq_ignore_ascii_case("DRAM") => MemoryKind::Plain,
            Some(s) if s.eq_ignore_ascii_case("HBM") || s.eq_ignore_ascii_case("MCDRAM") => {
                MemoryKind::Fast
            }
            Some(s) if s.eq_ignore_ascii_case("GPUMemory") => MemoryKind::Device,
            Some(_) => MemoryKind::Slow,
        }
    }

    /// The name lama writes in its cache and shows: `plain`, `fast`, `slow`, `device`.
    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::Plain => "plain",
            MemoryKind::Fast => "fast",
            MemoryKind::Slow => "slow",
            MemoryKind::Device => "device",
        }
    }

    /// The kind [`MemoryKind::name`] names.
    pub fn from_name(name: &str) -> Option<MemoryKind> {
        [
            MemoryKind::Plain,
            MemoryKind::Fast,
            MemoryKind::Slow,
            MemoryKind::Device,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
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
        (n.kind != MemoryKind::Plain, n.cpus.len(), n.os_index)
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
}
