//! LAMA (Locality Aware Mapping Algorithm) task placement on hwloc topologies, task maps
//! (Flux RFC 34, raw, PMI), Slurm step layouts and host files for Slurm's arbitrary distribution.
//!
//! Placement is a pure function: [`mapper::plan`] takes node topologies and a [`spec::Request`]
//! and returns a [`mapper::Plan`]. hwloc is read only in [`topology`]; nothing here binds,
//! logs or touches the environment.

#![warn(missing_docs)]

pub mod hostfile;
pub mod idset;
pub mod level;
pub mod locality;
pub mod topology;

pub use level::Level;
pub use topology::{NodeTopology, Span, TopologyError};
pub mod mapper;
pub mod openmp;
pub mod spec;

pub use mapper::{plan, Placement, PlacementError, Plan};
pub use spec::{Request, SpecError};
pub mod slurm_layout;
pub mod slurm_step;
pub mod taskmap;
