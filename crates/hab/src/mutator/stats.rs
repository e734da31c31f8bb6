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
use crate::platform::counter::{percent, Counter};
use crate::platform::topology::Level;

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct AllocationStats {
    /// The size the thread's next TLAB will have (for totals: the sum over threads).
    pub desired_size_bytes: u64,
    /// TLABs taken.
    pub refills: u64,
    /// Bytes of all TLABs taken.
    pub tlab_bytes: u64,
    /// Bytes of objects allocated inside TLABs, counted when each TLAB is retired.
    pub tlab_allocated_bytes: u64,
    /// Objects allocated outside a TLAB (every object in `shared` mode).
    pub slow_allocs: u64,
    /// Bytes of the objects allocated outside a TLAB.
    pub slow_alloc_bytes: u64,
    /// Free bytes of TLABs retired to take a new one.
    pub refill_waste_bytes: u64,
    /// Free bytes of TLABs retired by collections or when the thread detached.
    pub gc_waste_bytes: u64,
    /// TLABs retired with free memory left (by refills and collections).
    pub partial_tlabs: u64,
    /// Bytes of the fillers left before objects allocated with a larger alignment
    /// ([`Mutator::alloc_aligned`](crate::Mutator::alloc_aligned)), in TLABs and outside.
    pub alignment_gap_bytes: u64,
    /// Middle-level figures, indexed by [`Level::index`] (all zero for unconfigured levels).
    pub levels: [LevelStats; Level::ALL.len()],
    /// TLABs carved straight from the global heap because every middle level's buffers were
    /// busy (other threads refilling them) or too small: the TLABs no level counts.
    pub tlabs_past_levels: u64,
    /// Per-CPU LABs of the `cpu-lab` and `flip` modes.
    pub cpu_lab: CpuLabStats,
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

    /// The counts accumulated since `earlier`, a snapshot of the same counters taken before
    /// (the desired size is this snapshot's).
    pub fn since(&self, earlier: &AllocationStats) -> AllocationStats {
        AllocationStats {
            desired_size_bytes: self.desired_size_bytes,
            refills: self.refills.saturating_sub(earlier.refills),
            tlab_bytes: self.tlab_bytes.saturating_sub(earlier.tlab_bytes),
            tlab_allocated_bytes: self
                .tlab_allocated_bytes
                .saturating_sub(earlier.tlab_allocated_bytes),
            slow_allocs: self.slow_allocs.saturating_sub(earlier.slow_allocs),
            slow_alloc_bytes: self
                .slow_alloc_bytes
                .saturating_sub(earlier.slow_alloc_bytes),
            refill_waste_bytes: self
                .refill_waste_bytes
                .saturating_sub(earlier.refill_waste_bytes),
            gc_waste_bytes: self.gc_waste_bytes.saturating_sub(earlier.gc_waste_bytes),
            partial_tlabs: self.partial_tlabs.saturating_sub(earlier.partial_tlabs),
            alignment_gap_bytes: self
                .alignment_gap_bytes
                .saturating_sub(earlier.alignment_gap_bytes),
            levels: std::array::from_fn(|i| self.levels[i].since(&earlier.levels[i])),
            tlabs_past_levels: self
                .tlabs_past_levels
                .saturating_sub(earlier.tlabs_past_levels),
            cpu_lab: self.cpu_lab.since(&earlier.cpu_lab),
        }
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

impl AddAssign for AllocationStats {
    fn add_assign(&mut self, other: AllocationStats) {
        self.desired_size_bytes += other.desired_size_bytes;
        self.refills += other.refills;
        self.tlab_bytes += other.tlab_bytes;
        self.tlab_allocated_bytes += other.tlab_allocated_bytes;
        self.slow_allocs += other.slow_allocs;
        self.slow_alloc_bytes += other.slow_alloc_bytes;
        self.refill_waste_bytes += other.refill_waste_bytes;
        self.gc_waste_bytes += other.gc_waste_bytes;
        self.partial_tlabs += other.partial_tlabs;
        self.alignment_gap_bytes += other.alignment_gap_bytes;
        self.tlabs_past_levels += other.tlabs_past_levels;
        self.cpu_lab += other.cpu_lab;
        for (mine, theirs) in self.levels.iter_mut().zip(other.levels) {
            *mine += theirs;
        }
    }
}

impl fmt::Display for AllocationStats {
    /// `desired_size: 1MiB slow allocs: 0 refill waste: 0B alloc: 800MiB refills: 800
    /// waste 0.0% gc: 0B slow: 0B`
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
        for (level, stats) in Level::ALL.iter().zip(&self.levels) {
            if stats.allocs + stats.refills > 0 {
                write!(
                    f,
                    " {level}: {} allocs ({:.1}% foreign) {} refills {} waste",
                    stats.allocs,
                    stats.foreign_percent(),
                    stats.refills,
                    size.of(stats.waste_bytes)
                )?;
                if stats.out_of_range_cpus > 0 {
                    write!(f, " {} from cpus beyond the array", stats.out_of_range_cpus)?;
                }
            }
        }
        if self.tlabs_past_levels > 0 {
            write!(f, " past every level: {} TLABs", self.tlabs_past_levels)?;
        }
        let labs = &self.cpu_lab;
        if labs.labs + labs.fallback_allocs > 0 {
            write!(
                f,
                " cpu-lab: {} labs {} transactions ({} failed, {} invalid) {} sidelined {} partial {} unused {} aborts {} fallback allocs",
                labs.labs,
                labs.transactions,
                labs.failed_transactions,
                labs.invalid_transactions,
                labs.sidelined_labs,
                labs.partial_labs,
                size.of(labs.unused_bytes()),
                labs.rseq_aborts,
                labs.fallback_allocs
            )?;
            if labs.out_of_range_cpus > 0 {
                write!(
                    f,
                    " ({} from cpus beyond the array)",
                    labs.out_of_range_cpus
                )?;
            }
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

/// One mutator's live counters (see the module documentation for who writes them).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) desired_size_bytes: Counter,
    pub(crate) refills: Counter,
    pub(crate) tlab_bytes: Counter,
    pub(crate) tlab_allocated_bytes: Counter,
    pub(crate) slow_allocs: Counter,
    pub(crate) slow_alloc_bytes: Counter,
    pub(crate) refill_waste_bytes: Counter,
    pub(crate) gc_waste_bytes: Counter,
    pub(crate) partial_tlabs: Counter,
    pub(crate) alignment_gap_bytes: Counter,
    pub(crate) levels: [LevelCounters; Level::ALL.len()],
    pub(crate) tlabs_past_levels: Counter,
    pub(crate) cpu_lab: CpuLabCounters,
}

impl Counters {
    /// Counts a retired TLAB: its objects, and its tail as waste of the kind `waste`.
    pub(crate) fn count_retired(&self, retired: Option<Retired>, waste: Waste) {
        let Some(Retired {
            used_bytes,
            gap_bytes,
            tail_bytes,
        }) = retired
        else {
            return;
        };
        self.tlab_allocated_bytes.add(used_bytes as u64);
        self.alignment_gap_bytes.add(gap_bytes as u64);
        if tail_bytes > 0 {
            self.partial_tlabs.add(1);
        }
        match waste {
            Waste::Refill => self.refill_waste_bytes.add(tail_bytes as u64),
            Waste::Collection => self.gc_waste_bytes.add(tail_bytes as u64),
        }
    }

    pub(crate) fn snapshot(&self) -> AllocationStats {
        AllocationStats {
            desired_size_bytes: self.desired_size_bytes.get(),
            refills: self.refills.get(),
            tlab_bytes: self.tlab_bytes.get(),
            tlab_allocated_bytes: self.tlab_allocated_bytes.get(),
            slow_allocs: self.slow_allocs.get(),
            slow_alloc_bytes: self.slow_alloc_bytes.get(),
            refill_waste_bytes: self.refill_waste_bytes.get(),
            gc_waste_bytes: self.gc_waste_bytes.get(),
            partial_tlabs: self.partial_tlabs.get(),
            alignment_gap_bytes: self.alignment_gap_bytes.get(),
            cpu_lab: self.cpu_lab.snapshot(),
            levels: std::array::from_fn(|i| self.levels[i].snapshot()),
            tlabs_past_levels: self.tlabs_past_levels.get(),
        }
    }
}
