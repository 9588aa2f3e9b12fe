//! The nine LAMA levels and their tokens.

use std::fmt;

/// One level of the LAMA hierarchy, in the contract's fixed list order (outermost first).
///
/// The fixed order only breaks ties: real nesting comes from cpuset containment on each node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Level {
    /// `n`: a whole node (server).
    Node,
    /// `b`: a board (outermost Group above the packages, else the machine).
    Board,
    /// `N`: a NUMA node (NUMA nodes with equal cpusets count once).
    Numa,
    /// `s`: a socket (hwloc Package).
    Socket,
    /// `L3`: a level 3 cache.
    L3,
    /// `L2`: a level 2 cache.
    L2,
    /// `L1`: a level 1 data or unified cache.
    L1,
    /// `c`: a core.
    Core,
    /// `h`: a hardware thread (hwloc PU).
    Hwthread,
}

impl Level {
    /// All levels in the fixed list order.
    pub const ALL: [Level; 9] = [
        Level::Node,
        Level::Board,
        Level::Numa,
        Level::Socket,
        Level::L3,
        Level::L2,
        Level::L1,
        Level::Core,
        Level::Hwthread,
    ];

    /// Index in the fixed list order, 0 for `n` to 8 for `h`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The token used in map, bind and MPPR strings.
    pub fn token(self) -> &'static str {
        match self {
            Level::Node => "n",
            Level::Board => "b",
            Level::Numa => "N",
            Level::Socket => "s",
            Level::L3 => "L3",
            Level::L2 => "L2",
            Level::L1 => "L1",
            Level::Core => "c",
            Level::Hwthread => "h",
        }
    }

    /// A name for people ("socket", "L3 cache").
    pub fn name(self) -> &'static str {
        match self {
            Level::Node => "node",
            Level::Board => "board",
            Level::Numa => "NUMA node",
            Level::Socket => "socket",
            Level::L3 => "L3 cache",
            Level::L2 => "L2 cache",
            Level::L1 => "L1 cache",
            Level::Core => "core",
            Level::Hwthread => "hardware thread",
        }
    }

    /// The level for a token, if it is one.
    pub fn from_token(token: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.token() == token)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.token())
    }
}

/// The tokens, as shown in error messages.
pub const VALID_TOKENS: &str = "n b N s L3 L2 L1 c h";
