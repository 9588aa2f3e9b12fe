//! A node's NUMA nodes as lama records them: each one's CPUs and kind of memory, whether it
//! is default memory ([`crate::tiers`] decides which), and the CPUs that borrow it: those with
//! no allowed default memory of their own ([`nearest_memory`]).

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

    /// Which kind is a CPU's default memory first ([`crate::tiers`]): plain, fast, slow,
    /// device.
    pub fn rank(self) -> u8 {
        match self {
            MemoryKind::Plain => 0,
            MemoryKind::Fast => 1,
            MemoryKind::Slow => 2,
            MemoryKind::Device => 3,
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

/// A NUMA node: its OS index, CPUs and kind of memory.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Numa {
    /// OS index (the row of the latency matrix is found by position, not by this).
    pub os_index: u32,
    /// OS indexes of its CPUs, ascending (empty for CPU-less memory).
    pub cpus: Vec<u32>,
    /// Its kind of memory (hwloc's subtype).
    pub kind: MemoryKind,
    /// Whether it is the default memory of its CPUs, a domain ([`crate::tiers`]); memory
    /// bound `local` goes to these only.
    pub default: bool,
    /// Its size in bytes (0 when unknown).
    pub capacity: u64,
    /// Its bandwidth from its own CPUs (hwloc's `Bandwidth` memory attribute, MiB/s), when
    /// known: tells a fast tier hwloc gave no subtype from the default memory.
    pub bandwidth: Option<u64>,
    /// Its latency from its own CPUs (hwloc's `Latency`, ns), when known.
    pub latency: Option<u64>,
    /// OS indexes of the CPUs, ascending, whose own NUMA node is missing or not allowed and that
    /// use this one's memory instead ([`nearest_memory`]): they belong to its domain.
    #[serde(default)]
    pub borrowed: Vec<u32>,
}

/// The memory a CPU without allowed default memory of its own uses: of `candidates` (the
/// allowed default-memory nodes of its nearest hwloc ancestor that has any), the one nearest
/// its `own` nodes (present but not allowed) by `distance` (hwloc's NUMA latencies, when
/// known), then the lowest OS index. `None` without candidates.
pub fn nearest_memory(
    candidates: &[u32],
    own: &[u32],
    distance: impl Fn(u32, u32) -> Option<u64>,
) -> Option<u32> {
    candidates.iter().copied().min_by_key(|&c| {
        let far = own.iter().filter_map(|&o| distance(o, c)).min();
        // Known distances first, nearest first; then by OS index.
        (far.is_none(), far, c)
    })
}
