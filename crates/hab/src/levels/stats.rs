//! What the middle levels did, counted per mutator (see `platform::counter`).

use std::ops::AddAssign;

use crate::levels::chunk::LevelEvent;
use crate::platform::counter::{figures, percent};

figures! {
    /// What one middle level did. `#[repr(C)]`, every field a `u64`: the C API hands it out
    /// as it is (`hab_level_stats` in `hab.h`, where its fields follow the level's name).
    #[repr(C)]
    LevelStats,
    // A refill finds its level's counters in an array by level: at 128 bytes (13 counters,
    // padded) the index is one shift, where 96 took two instructions.
    #[repr(align(128))]
    LevelCounters {
        /// Chunks the level handed out: TLABs (lowest level) or buffers of the level below.
        allocs,
        /// Those served by a domain other than the one the thread ran on when the carve
        /// committed.
        foreign_allocs,
        /// Buffers of this level claimed for a refill.
        refills,
        /// Bytes of the chunks the level's buffers took from the level above at refills (a
        /// sidelined chunk once, when carved). Less `waste_bytes`, once every buffer is
        /// retired (as at a collection): the bytes the level handed out.
        taken_bytes,
        /// Claims of an exhausted buffer that another thread won (it refilled or carved
        /// first): the contention of the level's compare-and-swap buffers.
        claims_lost,
        /// Free bytes of this level's buffers retired at refills and collections.
        waste_bytes,
        /// Restartable sections of this level that aborted and restarted.
        rseq_aborts,
        /// Requests that took the compare-and-swap path of a restartable level (no rseq
        /// registration for the thread, a section that kept aborting, or a CPU beyond the
        /// per-CPU array).
        rseq_fallbacks,
        /// Of those, requests from a CPU number at or beyond the per-CPU array (a topology
        /// that does not cover every CPU the kernel numbers).
        out_of_range_cpus,
        /// Chunks a refill could not install and kept for later refills.
        sidelined,
        /// Refills served by a sidelined chunk.
        sideline_reused,
        /// Refills cut short at the end of a cycle: the buffer asked for its share of what
        /// the space above had left, less than a whole buffer (`buffer_end_of_cycle.rs`).
        short_refills,
    }
    gauges {
        /// The size of the chunk each of the level's buffers takes from above, as the heap
        /// last set it (at its creation, and at each collection where the sizes follow the
        /// allocation): in the heap's totals, 0 in a mutator's own figures.
        buffer_bytes,
    }
}

impl LevelStats {
    /// Foreign allocations as a percentage of the level's allocations.
    pub fn foreign_percent(&self) -> f64 {
        percent(self.foreign_allocs, self.allocs)
    }
}

impl LevelCounters {
    /// Counts what the level's protocol met: the one place where a level's events become its
    /// figures.
    #[inline(always)]
    pub(crate) fn count(&self, event: LevelEvent) {
        match event {
            LevelEvent::Served { foreign } => {
                self.allocs.add(1);
                if foreign {
                    self.foreign_allocs.add(1);
                }
            }
            LevelEvent::Refilled { waste_bytes } => {
                self.refills.add(1);
                self.waste_bytes.add(waste_bytes as u64);
            }
            LevelEvent::Took { bytes } => self.taken_bytes.add(bytes as u64),
            LevelEvent::ShortRefill => self.short_refills.add(1),
            LevelEvent::ClaimLost => self.claims_lost.add(1),
            LevelEvent::RseqAborts(aborts) => self.rseq_aborts.add(aborts),
            LevelEvent::RseqFallback => self.rseq_fallbacks.add(1),
            LevelEvent::OutOfRangeCpu => self.out_of_range_cpus.add(1),
            LevelEvent::Sidelined => self.sidelined.add(1),
            LevelEvent::SidelineReused => self.sideline_reused.add(1),
        }
    }
}
