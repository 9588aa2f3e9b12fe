//! LAMA (Locality Aware Mapping Algorithm) task placement on hwloc topologies, task maps
//! (Flux RFC 34, raw, PMI), and what the Slurm and Flux plugins decide with them.
//!
//! Placement is a pure function: [`mapper::plan`] takes node topologies and a [`spec::Request`]
//! and returns a [`mapper::Plan`]. hwloc is read only in `hwloc`; nothing here binds, logs or
//! touches the environment.
//!
//! The crate is in three layers; each uses only the layers above it in this map.
//!
//! **The placement core** (this folder's top):
//!
//! | module | concept |
//! |---|---|
//! | [`topology`], [`level`] | a node's hardware as plain data; the nine LAMA levels |
//! | [`spec`], [`mapper`] | the user's request; the odometer that places ranks, and the simple level (`map-by`, `bind-to`, `rank-by`) placed as Open MPI 5's own mapper places it |
//! | [`policy`] | the automatic policy: a node's tasks placed with no map (NUMA domains, cores, GPUs) |
//! | [`openmp`] | OpenMP threads inside a task, places drawn from its binding |
//! | [`locality`] | NICs and GPUs, their distances, nearest-device choice |
//! | [`memory`] | memory binding: the NUMA nodes local to a task's CPUs, by hwloc's rule, without hwloc |
//! | [`tiers`] | memory tiers: which NUMA nodes are the default memory (the domains), which are HBM, PMem, CXL or GPU memory |
//! | [`taskmap`] | task maps: RFC 34, raw, PMI |
//! | [`cache`] | the node's topology and devices as text: slurmd's and the Flux shell's caches, the hwloc probe's answer |
//! | [`check`] | a running step judged: shared CPUs, stacked threads, NUMA spans, far GPUs, remote memory, idle CPUs, bindings off the plan |
//! | `hwloc` | reading topologies and devices with hwloc (the only module that calls it; feature `hwloc`) |
//! | [`idset`] | cpulists and idsets |
//! | [`cpuset`] | where a process's cgroup cpuset is (the CPUs a step may use) |
//! | [`environ`] | the room in a task's environment: what fits in one variable and in `execve` |
//! | [`limits`] | the largest sizes accepted from users, files and Slurm; bounded file reading |
//! | [`quote`] | user text in messages: control characters escaped, long values cut |
//!
//! **What both plugins decide on a node**, [`plugin`]: their options and settings, the node's
//! tasks on the CPUs the job was given, their devices.
//!
//! **The front ends' adapters**, each using the two layers above and never each other:
//!
//! | module | what |
//! |---|---|
//! | [`slurm`] | Slurm's hostlists, counts, distributions and layouts; a step's task map; checks against Slurm's items; host files; MPI launchers in an allocation |
//! | [`flux`] | the Flux shell's options and conf, its rank info, the `lama` task-map scheme |
//! | [`exec`] | `lama exec` under any launcher: a rank's place on its node from the launcher's variables, the node placed as the plugins place it |

#![warn(missing_docs)]

pub mod cache;
pub mod check;
pub mod cpuset;
pub mod environ;
pub mod exec;
#[cfg(feature = "hwloc")]
pub mod hwloc;
pub mod idset;
pub mod level;
pub mod limits;
pub mod locality;
pub mod mapper;
pub mod memory;
pub mod openmp;
pub mod policy;
pub mod quote;
pub mod spec;
pub mod taskmap;
pub mod tiers;
pub mod topology;

pub mod plugin;

pub mod flux;
pub mod slurm;

pub use level::Level;
pub use mapper::{plan, Placement, PlacementError, Plan};
pub use spec::{Request, SpecError};
pub use topology::{NodeTopology, Span, TopologyError};
