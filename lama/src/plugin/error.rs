//! Why a front end cannot place a node's tasks, in words for the user.

use thiserror::Error;

use crate::mapper::PlacementError;

/// Why a step cannot be placed, in words for the user.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum StepError {
    /// A bad `--lama-*` value or combination.
    #[error("{0}")]
    Option(String),
    /// A bad `plugstack.conf` argument.
    #[error("plugstack.conf: {0}")]
    Setting(String),
    /// The CPUs Slurm gave the step do not fit the topology.
    #[error("{0}")]
    Cpus(String),
    /// The layout read from the step's environment disagrees with Slurm's items.
    #[error("{0}")]
    Layout(String),
    /// Placement failed (oversubscribed, no resources).
    #[error("{0}")]
    Placement(#[from] PlacementError),
    /// Devices could not be read or chosen.
    #[error("{0}")]
    Devices(String),
    /// The automatic policy could not place the node's tasks.
    #[error("{0}")]
    Policy(#[from] crate::policy::PolicyError),
}
