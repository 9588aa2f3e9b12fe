//! Memory binding (`--lama-mem=local`, `lama.mem=local`) without hwloc at task launch: which
//! NUMA nodes are local to a task's CPUs: the default-memory nodes ([`crate::tiers`]) whose
//! CPU set meets the task's, as Slurm's `--mem-bind=local` and libnuma count them (hwloc's
//! `hwloc_cpuset_to_nodeset` would add the PMem, HBM or GPU memory attached to the same CPUs),
//! computed from the NUMA nodes hwloc recorded in the node's [`crate::cache`] or probe answer. The binding itself (one
//! `set_mempolicy` call) is the front ends'.

use crate::locality::Numa;

/// How a task's memory is held to its NUMA nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemPolicy {
    /// Only those nodes (`MPOL_BIND`): `--lama-mem=local`, Slurm's `--mem-bind=local`.
    #[default]
    Bind,
    /// The first of them preferred, the others used when it is full (`MPOL_PREFERRED`), as
    /// Slurm's `--mem-bind=prefer` does.
    Preferred,
    /// All of them preferred, any other node used when they are full (`MPOL_PREFERRED_MANY`,
    /// Linux 5.15; `MPOL_PREFERRED` on the first where the kernel lacks it): `prefer-hbm`.
    PreferredMany,
    /// Pages spread over them in turn (`MPOL_INTERLEAVE`): `interleave`.
    Interleave,
}

impl MemPolicy {
    /// The policy's name in `--lama-verbose` lines and the reference.
    pub fn name(self) -> &'static str {
        match self {
            MemPolicy::Bind => "bind",
            MemPolicy::Preferred => "preferred",
            MemPolicy::PreferredMany => "preferred-many",
            MemPolicy::Interleave => "interleave",
        }
    }
}

/// The OS indexes of the default-memory NUMA nodes local to `cpus` (OS indexes), ascending: a
/// node is local to its own CPUs and to those that borrow it ([`Numa::borrowed`]); with `allowed`,
/// only those the process may use (the nodes a cgroup withholds are absent from the topology
/// hwloc loads, so hwloc never names them).
pub fn local_nodes(numa: &[Numa], cpus: &[u32], allowed: Option<&[u32]>) -> Vec<u32> {
    // A task's CPUs are in the node's logical order, which need not be ascending.
    let sorted;
    let cpus = if cpus.is_sorted() {
        cpus
    } else {
        sorted = {
            let mut c = cpus.to_vec();
            c.sort_unstable();
            c
        };
        &sorted
    };
    let mut nodes: Vec<u32> = numa
        .iter()
        .filter(|n| n.default && (meets(&n.cpus, cpus) || meets(&n.borrowed, cpus)))
        .map(|n| n.os_index)
        .filter(|i| allowed.is_none_or(|a| a.contains(i)))
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

/// Whether two ascending lists share an element ([`Numa::cpus`] are ascending).
fn meets(a: &[u32], b: &[u32]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(os_index: u32, cpus: &[u32]) -> Numa {
        Numa {
            os_index,
            cpus: cpus.to_vec(),
            kind: crate::locality::MemoryKind::Plain,
            default: true,
            capacity: 0,
            bandwidth: None,
            latency: None,
            borrowed: Vec::new(),
        }
    }

    #[test]
    fn a_node_is_local_when_its_cpus_meet_the_tasks() {
        let numa = [node(1, &[4, 5, 6, 7]), node(0, &[0, 1, 2, 3]), node(2, &[])];
        assert_eq!(local_nodes(&numa, &[1], None), vec![0]);
        assert_eq!(local_nodes(&numa, &[3, 4], None), vec![0, 1]);
        assert_eq!(local_nodes(&numa, &[8], None), Vec::<u32>::new());
        assert_eq!(local_nodes(&numa, &[3, 4], Some(&[1])), vec![1]);
        assert_eq!(local_nodes(&numa, &[7, 0], None), vec![0, 1]);
    }

    #[test]
    fn a_borrowed_cpu_is_local_to_the_node_it_borrows() {
        let mut lender = node(3, &[0, 1]);
        lender.borrowed = vec![4, 5];
        let numa = [lender, node(1, &[2, 3])];
        assert_eq!(local_nodes(&numa, &[4], None), vec![3]);
        assert_eq!(local_nodes(&numa, &[3, 5], None), vec![1, 3]);
        assert_eq!(local_nodes(&numa, &[6], None), Vec::<u32>::new());
    }

    #[test]
    fn only_default_memory_is_local() {
        // A PMem node attached to both DRAM nodes' CPUs is never bound as local memory.
        let pmem = Numa {
            os_index: 2,
            cpus: vec![0, 1, 2, 3],
            kind: crate::locality::MemoryKind::Slow,
            default: false,
            capacity: 0,
            bandwidth: None,
            latency: None,
            borrowed: Vec::new(),
        };
        let numa = [node(0, &[0, 1]), node(1, &[2, 3]), pmem];
        assert_eq!(local_nodes(&numa, &[1, 2], None), vec![0, 1]);
        assert_eq!(local_nodes(&numa, &[0], None), vec![0]);
    }
}
