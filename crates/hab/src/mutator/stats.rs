//! Allocation statistics, per mutator and in total: what HotSpot's `gc+tlab` log shows.
//!
//! Nothing is counted on the fast path. Bytes allocated inside a TLAB are derived when the TLAB
//! is retired (`top - start`), so a live TLAB's objects appear in the figures at its next
//! retire. Counters are written only by the owning thread (or by a collection while the owner
//! is stopped) with plain relaxed load + store, and may be read from any thread at any time.

use std::fmt;
use std::ops::AddAssign;

use crate::labs::stats::{CpuLabCounters, CpuLabStats};
use crate::labs::tlab::{Retired, Waste};
use crate::levels::stats::{LevelCounters, LevelStats};
use crate::platform::counter::{figures, percent};
use crate::platform::topology::Level;

figures! {
    /// A snapshot of allocation counters.
    ///
    /// ```
    /// use hab::{HeapConfig, HeaderWordModel, Heap};
    /// let heap = Heap::new(HeapConfig::builder().build()?, HeaderWordModel)?;
    /// let mut mutator = heap.attach();
    /// mutator.alloc(16)?;
    /// let stats = mutator.stats();
    /// assert_eq!(stats.refills, 1);
    /// println!("{stats}"); // one line, like HotSpot's -Xlog:gc+tlab=trace
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    AllocationStats, Counters {
        /// TLABs taken.
        refills,
        /// Of those, TLABs the full slow path took (a policy that resizes at refills, a large
        /// object, a home buffer empty or busy, a safepoint or sample pending); the others
        /// took the slow path's short refill.
        full_path_refills,
        /// Bytes of all TLABs taken.
        tlab_bytes,
        /// Bytes of objects allocated inside TLABs, counted when each TLAB is retired.
        tlab_allocated_bytes,
        /// Objects allocated outside a TLAB (every object in `shared` mode).
        slow_allocs,
        /// Bytes of the objects allocated outside a TLAB.
        slow_alloc_bytes,
        /// Free bytes of TLABs retired to take a new one.
        refill_waste_bytes,
        /// Free bytes of TLABs retired by collections or when the thread detached.
        gc_waste_bytes,
        /// TLABs retired with free memory left (by refills and collections).
        partial_tlabs,
        /// Bytes of the fillers left before objects allocated with a larger alignment
        /// ([`Mutator::alloc_aligned`](crate::Mutator::alloc_aligned)), in TLABs and outside.
        alignment_gap_bytes,
        /// TLABs carved smaller than desired because the allocation range was running out:
        /// its last TLAB, or, with the end-of-cycle policy, the shares of what was left.
        end_of_cycle_tlabs,
        /// TLABs carved straight from the global heap because every middle level's buffers were
        /// busy (other threads refilling them) or too small: the TLABs no level counts.
        tlabs_past_levels,
    }
    gauges {
        /// The size the thread's next TLAB will have (for totals: the sum over threads).
        desired_size_bytes,
    }
    nested {
        /// Middle-level figures, indexed by [`Level::index`] (all zero for unconfigured levels).
        levels: [LevelStats; Level::ALL.len()] => [LevelCounters; Level::ALL.len()],
        /// Per-CPU LABs of the `cpu-lab` and `flip` modes.
        cpu_lab: CpuLabStats => CpuLabCounters,
    }
}

impl AllocationStats {
    /// Bytes of the objects allocated, in every kind of LAB and outside them: TLABs,
    /// per-CPU LABs ([`CpuLabStats::allocated_bytes`]) and the slow path. For the heap's
    /// totals, once every LAB has been retired (in a collection), this is exactly the bytes
    /// of the objects a walk meets since the heap was made, and [`waste_bytes`] those of the
    /// fillers.
    ///
    /// [`waste_bytes`]: AllocationStats::waste_bytes
    pub fn allocated_bytes(&self) -> u64 {
        self.tlab_and_outside_bytes() + self.cpu_lab.allocated_bytes()
    }

    /// Bytes of the objects allocated in TLABs and outside any LAB (what a thread's TLAB
    /// sizing learns from).
    pub fn tlab_and_outside_bytes(&self) -> u64 {
        self.tlab_allocated_bytes + self.slow_alloc_bytes
    }

    /// Bytes left unused in every kind of LAB and buffer, now covered by fillers: TLABs'
    /// ([`tlab_waste_bytes`](AllocationStats::tlab_waste_bytes)), the middle levels', the
    /// per-CPU LABs' ([`CpuLabStats::unused_bytes`]) and the gaps before aligned objects.
    pub fn waste_bytes(&self) -> u64 {
        self.tlab_waste_bytes()
            + self.middle_waste_bytes()
            + self.cpu_lab.unused_bytes()
            + self.alignment_gap_bytes
    }

    /// Bytes of TLABs left unused: refill waste plus collection waste.
    pub fn tlab_waste_bytes(&self) -> u64 {
        self.refill_waste_bytes + self.gc_waste_bytes
    }

    /// TLAB waste as a percentage of the bytes of all TLABs taken (0 when none were taken),
    /// as HotSpot's `gc+tlab` log shows it.
    pub fn waste_percent(&self) -> f64 {
        percent(self.tlab_waste_bytes(), self.tlab_bytes)
    }

    /// Free bytes of middle-level buffers retired at refills and collections, all levels.
    pub fn middle_waste_bytes(&self) -> u64 {
        self.levels.iter().map(|level| level.waste_bytes).sum()
    }

    /// Chunks handed out by all middle levels, and how many of them were foreign.
    pub fn middle_allocs(&self) -> (u64, u64) {
        self.levels.iter().fold((0, 0), |(all, foreign), level| {
            (all + level.allocs, foreign + level.foreign_allocs)
        })
    }
}

impl fmt::Display for AllocationStats {
    /// `desired_size: 1MiB slow allocs: 0 refill waste: 0B alloc: 800MiB refills: 800
    /// waste 0.0% gc: 0B slow: 0B`, as HotSpot's `gc+tlab` line, then each level's figures
    /// and the per-CPU LABs' that are not zero: `core (allocs: 800 refills: 2 ...)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = Approximate;
        write!(
            f,
            "desired_size: {} slow allocs: {} refill waste: {} alloc: {} refills: {} waste {:.1}% gc: {} slow: {}",
            size.of(self.desired_size_bytes),
            self.slow_allocs,
            size.of(self.refill_waste_bytes),
            size.of(self.allocated_bytes()),
            self.refills,
            self.waste_percent(),
            size.of(self.gc_waste_bytes),
            size.of(self.slow_alloc_bytes),
        )?;
        // The levels' and per-CPU LABs' figures as their declarations name them.
        for (level, stats) in Level::ALL.iter().zip(&self.levels) {
            if *stats != LevelStats::default() {
                write!(f, " {level} (")?;
                stats.write_figures(f)?;
                write!(f, ")")?;
            }
        }
        if self.tlabs_past_levels > 0 {
            write!(f, " past every level: {} TLABs", self.tlabs_past_levels)?;
        }
        if self.cpu_lab != CpuLabStats::default() {
            write!(f, " cpu-lab (")?;
            self.cpu_lab.write_figures(f)?;
            write!(f, ")")?;
        }
        Ok(())
    }
}

/// Byte counts for people: exact below 10 KiB, else one decimal of the largest fitting unit.
pub(crate) struct Approximate;

impl Approximate {
    pub(crate) fn of(&self, bytes: u64) -> String {
        const UNITS: [(&str, u32); 3] = [("GiB", 30), ("MiB", 20), ("KiB", 10)];
        match UNITS.iter().find(|(_, shift)| bytes >= 10 << shift) {
            Some((unit, shift)) => format!("{:.1}{unit}", bytes as f64 / (1u64 << shift) as f64),
            None => format!("{bytes}B"),
        }
    }
}

impl Counters {
    /// [`AllocationStats::tlab_and_outside_bytes`], read live: exact just after a refill
    /// retired the TLAB.
    pub(crate) fn tlab_and_outside_bytes(&self) -> u64 {
        self.tlab_allocated_bytes.get() + self.slow_alloc_bytes.get()
    }

    /// Counts a retired TLAB: its objects, and its tail as waste of the kind `waste`.
    pub(crate) fn count_retired(&self, retired: Option<Retired>, waste: Waste) {
        let Some(Retired {
            used_bytes,
            tail_bytes,
        }) = retired
        else {
            return;
        };
        // What is 0 is not added: a short refill that knows both are 0 counts one figure.
        self.tlab_allocated_bytes.add(used_bytes as u64);
        if tail_bytes != 0 {
            self.partial_tlabs.add(1);
            match waste {
                Waste::Refill => self.refill_waste_bytes.add(tail_bytes as u64),
                Waste::Collection => self.gc_waste_bytes.add(tail_bytes as u64),
            }
        }
    }
}
