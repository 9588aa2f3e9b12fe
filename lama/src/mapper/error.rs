//! Why a request cannot be placed, in words for the user.

use thiserror::Error;

use crate::spec::Request;

/// Why a request cannot be placed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PlacementError {
    /// Nothing can be placed at all.
    #[error("no resources: {reason}")]
    NoResources {
        /// Why.
        reason: String,
    },
    /// Some processes were placed, then a limit was hit.
    #[error("oversubscribed after placing {placed} of {requested} processes: {limit}")]
    Oversubscribed {
        /// Processes placed before the limit.
        placed: usize,
        /// Processes requested.
        requested: usize,
        /// The limit that was hit.
        limit: String,
    },
}

impl PlacementError {
    /// A short machine-readable kind: `no-resources` or `oversubscribed`.
    pub fn kind(&self) -> &'static str {
        match self {
            PlacementError::NoResources { .. } => "no-resources",
            PlacementError::Oversubscribed { .. } => "oversubscribed",
        }
    }
}

pub(super) fn no_resources(reason: String) -> PlacementError {
    PlacementError::NoResources { reason }
}

/// The error of a sweep that left ranks unplaced, naming the MPPR limits that were reached.
pub(super) fn oversubscribed(
    req: &Request,
    hit: &[bool],
    placed: usize,
    target: usize,
) -> PlacementError {
    let limits: Vec<String> = req
        .mppr
        .iter()
        .zip(hit)
        .filter(|(_, &h)| h)
        .map(|(l, _)| format!("'{l}' (at most {} per {})", l.count, l.level.name()))
        .collect();
    let limit = if limits.is_empty() {
        "every position of the map is used; allow oversubscription, add nodes or ask for fewer processes".to_string()
    } else {
        format!(
            "the MPPR limit {} was reached; allow oversubscription, relax the limit or ask for fewer processes",
            limits.join(" and ")
        )
    };
    PlacementError::Oversubscribed {
        placed,
        requested: target,
        limit,
    }
}
