//! The task distribution Slurm names (`SLURM_DISTRIBUTION`): block, cyclic, plane and
//! arbitrary, as far as it concerns which node a task runs on.

use super::hostlist::{read_hostfile, LayoutError};

fn bad(msg: impl Into<String>) -> LayoutError {
    LayoutError(msg.into())
}

/// How Slurm spreads tasks over nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Consecutive tasks fill a node before the next.
    Block,
    /// One task per node per round.
    Cyclic,
    /// Blocks of this many tasks per node per round.
    Plane(u32),
    /// Task i runs on the host of line i of the host file.
    Arbitrary(Vec<String>),
}

impl Distribution {
    /// Reads a `SLURM_DISTRIBUTION` value. Only the part before the first `:` concerns nodes;
    /// `plane` takes its size from `plane_size` (or `plane=N`), `arbitrary` its hosts from the file
    /// contents given.
    pub fn parse(
        value: &str,
        plane_size: Option<u32>,
        hostfile: Option<&str>,
    ) -> Result<Distribution, LayoutError> {
        let node_part = value.split(':').next().unwrap_or("").trim();
        let node_part = node_part.split(',').next().unwrap_or("").trim();
        let (name, arg) = match node_part.split_once('=') {
            Some((n, a)) => (n, Some(a)),
            None => (node_part, None),
        };
        match name {
            "block" | "" | "*" => Ok(Distribution::Block),
            "cyclic" => Ok(Distribution::Cyclic),
            "plane" => {
                let size = match arg {
                    Some(a) => a.parse().ok(),
                    None => plane_size,
                };
                match size {
                    Some(n) if n >= 1 => Ok(Distribution::Plane(n)),
                    _ => Err(bad("plane distribution needs a plane size of at least 1 (SLURM_DIST_PLANESIZE or plane=N)")),
                }
            }
            "arbitrary" => {
                let text = hostfile.ok_or_else(|| {
                    bad("arbitrary distribution needs a host file (SLURM_HOSTFILE)")
                })?;
                Ok(Distribution::Arbitrary(read_hostfile(text)?))
            }
            other => Err(bad(format!(
                "unknown distribution '{other}' (valid: block, cyclic, plane, arbitrary)"
            ))),
        }
    }
}
