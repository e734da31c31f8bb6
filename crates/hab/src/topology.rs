//! The machine's shape: which logical CPUs share a core, a cluster, a last-level cache, a
//! package, a NUMA node. Read from sysfs, or simulated from a spec such as `4x10x2`.
//!
//! (Being written: see the API below.)

use std::fmt;
use std::str::FromStr;

/// A level of the hierarchy between TLABs and the global heap, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// One buffer per logical CPU (hardware thread).
    Cpu,
    /// One buffer per core, shared by its hardware threads (the seed's CLAB).
    Core,
    /// One buffer per last-level cache.
    Llc,
    /// One buffer per processor package (the seed's PLAB).
    Package,
    /// One buffer per NUMA node.
    Node,
}

impl Level {
    /// Every level, lowest first.
    pub const ALL: [Level; 5] = [Level::Cpu, Level::Core, Level::Llc, Level::Package, Level::Node];

    /// The level's name as configurations spell it: `cpu`, `core`, `llc`, `package`, `node`.
    pub const fn name(self) -> &'static str {
        match self {
            Level::Cpu => "cpu",
            Level::Core => "core",
            Level::Llc => "llc",
            Level::Package => "package",
            Level::Node => "node",
        }
    }

    /// Position in [`Level::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Level {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Level::ALL
            .into_iter()
            .find(|level| level.name() == text)
            .ok_or_else(|| format!("{text:?} is not a level; expected cpu, core, llc, package or node"))
    }
}
