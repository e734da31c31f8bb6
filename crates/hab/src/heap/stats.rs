//! Heap-wide figures.

use std::fmt;

use crate::mutator::stats::{AllocationStats, Approximate};

/// Heap-wide figures.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct HeapStats {
    /// Sum over every mutator that ever attached (live and detached).
    pub totals: AllocationStats,
    /// Mutators attached now.
    pub live_mutators: usize,
    /// Collections finished.
    pub collections: u64,
    /// Of those, collections that ended a cycle in which mutators allocated in per-CPU LABs
    /// (`cpu-lab` mode, or `flip` mode in its per-CPU phase).
    pub cpu_lab_collections: u64,
    /// Bytes of the allocation range handed out now (objects, TLABs and fillers).
    pub used_bytes: usize,
    /// Bytes of the current allocation range.
    pub capacity_bytes: usize,
}

impl fmt::Display for HeapStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "heap: {} of {} used, {} mutators, {} collections; TLAB totals: {}",
            Approximate.of(self.used_bytes as u64),
            Approximate.of(self.capacity_bytes as u64),
            self.live_mutators,
            self.collections,
            self.totals
        )
    }
}
