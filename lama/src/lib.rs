//! LAMA (Locality Aware Mapping Algorithm) task placement on hwloc topologies, task maps
//! (Flux RFC 34, raw, PMI), Slurm step layouts and host files for Slurm's arbitrary distribution.
//!
//! Placement is a pure function: [`mapper::plan`] takes node topologies and a [`spec::Request`]
//! and returns a [`mapper::Plan`]. hwloc is read only in [`hwloc`]; nothing here binds,
//! logs or touches the environment.
//!
//! | module | concept |
//! |---|---|
//! | [`topology`], [`level`] | a node's hardware as plain data; the nine LAMA levels |
//! | `hwloc` | reading topologies and devices with hwloc (the only module that calls it; feature `hwloc`) |
//! | [`spec`], [`mapper`] | the user's request; the odometer that places ranks |
//! | [`openmp`] | OpenMP threads inside a task, places drawn from its binding |
//! | [`policy`] | the automatic policy: a node's tasks placed with no map (NUMA domains, cores, GPUs) |
//! | [`locality`] | NICs and GPUs, their distances, nearest-device choice |
//! | [`memory`] | memory binding: the NUMA nodes local to a task's CPUs, by hwloc's rule, without hwloc |
//! | [`taskmap`], [`slurm_layout`], [`hostfile`] | task maps, Slurm's layouts and host files |
//! | [`step_map`] | a step's task map without one entry per task (what every node computes) |
//! | [`slurm_options`] | the plugin's options and `plugstack.conf` arguments, merged per step |
//! | [`slurm_step`] | what the SPANK plugin decides for a step on a node, as pure functions |
//! | [`launcher`] | MPI launchers in an allocation: their daemon steps, Open MPI rankfiles, Hydra arguments |
//! | [`flux_job`] | what the Flux shell plugin decides for a job: its options, ranks, task map and the `lama` task-map scheme |
//! | [`cache`] | the node's topology and devices as text: slurmd's cache, the hwloc probe's answer |
//! | [`idset`] | cpulists and idsets |
//! | [`environ`] | the room in a task's environment: what fits in one variable and in `execve` |
//! | [`limits`] | the largest sizes accepted from users, files and Slurm; bounded file reading |
//! | [`quote`] | user text in messages: control characters escaped, long values cut |

#![warn(missing_docs)]

pub mod cache;
pub mod environ;
pub mod flux_job;
pub mod hostfile;
#[cfg(feature = "hwloc")]
pub mod hwloc;
pub mod idset;
pub mod launcher;
pub mod level;
pub mod limits;
pub mod locality;
pub mod memory;
pub mod topology;

pub use level::Level;
pub use topology::{NodeTopology, Span, TopologyError};
pub mod mapper;
pub mod openmp;
pub mod policy;
pub mod quote;
pub mod spec;

pub use mapper::{plan, Placement, PlacementError, Plan};
pub use spec::{Request, SpecError};
pub mod slurm_layout;
pub mod slurm_options;
pub mod slurm_step;
pub mod step_map;
pub mod taskmap;
