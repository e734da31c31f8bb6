//! Allocation statistics, per mutator and in total: what HotSpot's `gc+tlab` log shows.
//!
//! Nothing is counted on the fast path. Bytes allocated inside a TLAB are derived when the TLAB
//! is retired (`top - start`), so a live TLAB's objects appear in the figures at its next
//! retire. Counters are written only by the owning thread (or by a collection while the owner
//! is stopped) with plain relaxed load + store, and may be read from any thread at any time.

use std::fmt;
use std::ops::AddAssign;
use std::sync::atomic::{AtomicU64, Ordering};

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
pub struct TlabStats {
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
    /// Middle-level figures, indexed by [`Level::index`] (all zero for unconfigured levels).
    pub levels: [LevelStats; Level::ALL.len()],
    /// Per-CPU LABs of the `plab` and `flip` modes.
    pub plab: PlabStats,
}

/// Declares a snapshot struct of `u64` figures and its live counters, with `since`,
/// `snapshot` and `+=` field by field.
macro_rules! figures {
    ($(#[$doc:meta])* $stats:ident, $counters:ident { $($(#[$field_doc:meta])* $field:ident,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $stats {
            $($(#[$field_doc])* pub $field: u64,)*
        }

        /// The live counters behind
        #[doc = concat!("[`", stringify!($stats), "`].")]
        #[derive(Debug, Default)]
        pub(crate) struct $counters {
            $(pub(crate) $field: Counter,)*
        }

        impl $counters {
            pub(crate) fn snapshot(&self) -> $stats {
                $stats { $($field: self.$field.get(),)* }
            }
        }

        impl $stats {
            /// The counts accumulated since `earlier`.
            pub fn since(&self, earlier: &$stats) -> $stats {
                $stats { $($field: self.$field.saturating_sub(earlier.$field),)* }
            }

            /// Every figure divided by `n` (at least 1): a mean over `n` runs.
            pub fn divided_by(&self, n: u64) -> $stats {
                $stats { $($field: self.$field / n.max(1),)* }
            }
        }

        impl AddAssign for $stats {
            fn add_assign(&mut self, other: $stats) {
                $(self.$field += other.$field;)*
            }
        }
    };
}

figures! {
    /// What the per-CPU LABs of the `plab` and `flip` modes did: the rows of Garthwaite et
    /// al.'s Table 2. A *transaction* installs a new LAB as a CPU's; it *fails* when its
    /// section aborted or found the CPU's LAB refilled by another thread, and is *invalid*
    /// when it could not install at all (the LAB is then sidelined).
    PlabStats, PlabCounters {
        /// LABs taken, from the global heap or the sideline.
        labs,
        /// Their bytes.
        lab_bytes,
        /// LABs taken from the sideline.
        sideline_reused,
        /// Transactions that installed a LAB.
        transactions,
        /// Transactions that aborted or found the LAB occupied at least once.
        failed_transactions,
        /// Transactions that could not install their LAB.
        invalid_transactions,
        /// LABs (rests of LABs) sidelined.
        sidelined_labs,
        /// Their bytes.
        sidelined_bytes,
        /// Sidelined LABs nobody took before a collection discarded them.
        discarded_sidelined_labs,
        /// Their bytes.
        discarded_sidelined_bytes,
        /// LABs emptied with free memory left, by refills and collections.
        partial_labs,
        /// That free memory.
        partial_waste_bytes,
        /// Restartable sections that aborted (heap totals include the inline path's).
        rseq_aborts,
        /// Objects allocated in per-CPU compare-and-swap buffers because the thread could not
        /// use rseq (no registration, a section that kept aborting, or a CPU beyond the
        /// per-CPU array).
        fallback_allocs,
        /// Of those, objects allocated from a CPU number at or beyond the per-CPU array (a
        /// topology that does not cover every CPU the kernel numbers).
        out_of_range_cpus,
    }
}

impl PlabStats {
    /// Bytes of LABs left unused: partial waste and discarded sidelined LABs.
    pub fn unused_bytes(&self) -> u64 {
        self.partial_waste_bytes + self.discarded_sidelined_bytes
    }
}

figures! {
    /// What one middle level did.
    LevelStats, LevelCounters {
        /// Chunks the level handed out: TLABs (lowest level) or buffers of the level below.
        allocs,
        /// Those served by a domain other than the one the thread ran on when the carve
        /// committed.
        foreign_allocs,
        /// Buffers of this level claimed for a refill.
        refills,
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
    }
}

impl LevelStats {
    /// Foreign allocations as a percentage of the level's allocations.
    pub fn foreign_percent(&self) -> f64 {
        percent(self.foreign_allocs, self.allocs)
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

impl TlabStats {
    /// Bytes allocated in objects, inside and outside TLABs.
    pub fn allocated_bytes(&self) -> u64 {
        self.tlab_allocated_bytes + self.slow_alloc_bytes
    }

    /// Bytes of TLABs left unused: refill waste plus collection waste.
    pub fn waste_bytes(&self) -> u64 {
        self.refill_waste_bytes + self.gc_waste_bytes
    }

    /// The counts accumulated since `earlier`, a snapshot of the same counters taken before
    /// (the desired size is this snapshot's).
    pub fn since(&self, earlier: &TlabStats) -> TlabStats {
        TlabStats {
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
            levels: std::array::from_fn(|i| self.levels[i].since(&earlier.levels[i])),
            plab: self.plab.since(&earlier.plab),
        }
    }

    /// Waste as a percentage of the bytes of all TLABs taken (0 when none were taken).
    pub fn waste_percent(&self) -> f64 {
        percent(self.waste_bytes(), self.tlab_bytes)
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

impl AddAssign for TlabStats {
    fn add_assign(&mut self, other: TlabStats) {
        self.desired_size_bytes += other.desired_size_bytes;
        self.refills += other.refills;
        self.tlab_bytes += other.tlab_bytes;
        self.tlab_allocated_bytes += other.tlab_allocated_bytes;
        self.slow_allocs += other.slow_allocs;
        self.slow_alloc_bytes += other.slow_alloc_bytes;
        self.refill_waste_bytes += other.refill_waste_bytes;
        self.gc_waste_bytes += other.gc_waste_bytes;
        self.partial_tlabs += other.partial_tlabs;
        self.plab += other.plab;
        for (mine, theirs) in self.levels.iter_mut().zip(other.levels) {
            *mine += theirs;
        }
    }
}

impl fmt::Display for TlabStats {
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
        let plab = &self.plab;
        if plab.labs + plab.fallback_allocs > 0 {
            write!(
                f,
                " plab: {} labs {} transactions ({} failed, {} invalid) {} sidelined {} partial {} unused {} aborts {} fallback allocs",
                plab.labs,
                plab.transactions,
                plab.failed_transactions,
                plab.invalid_transactions,
                plab.sidelined_labs,
                plab.partial_labs,
                size.of(plab.unused_bytes()),
                plab.rseq_aborts,
                plab.fallback_allocs
            )?;
            if plab.out_of_range_cpus > 0 {
                write!(
                    f,
                    " ({} from cpus beyond the array)",
                    plab.out_of_range_cpus
                )?;
            }
        }
        Ok(())
    }
}

/// Byte counts for people: exact below 10 KiB, else one decimal of the largest fitting unit.
struct Approximate;

impl Approximate {
    fn of(&self, bytes: u64) -> String {
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
    pub(crate) levels: [LevelCounters; Level::ALL.len()],
    pub(crate) plab: PlabCounters,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> TlabStats {
        TlabStats {
            desired_size_bytes: self.desired_size_bytes.get(),
            refills: self.refills.get(),
            tlab_bytes: self.tlab_bytes.get(),
            tlab_allocated_bytes: self.tlab_allocated_bytes.get(),
            slow_allocs: self.slow_allocs.get(),
            slow_alloc_bytes: self.slow_alloc_bytes.get(),
            refill_waste_bytes: self.refill_waste_bytes.get(),
            gc_waste_bytes: self.gc_waste_bytes.get(),
            partial_tlabs: self.partial_tlabs.get(),
            plab: self.plab.snapshot(),
            levels: std::array::from_fn(|i| self.levels[i].snapshot()),
        }
    }
}

/// A counter with a single writer: adding is a relaxed load and store, no atomic RMW.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub(crate) fn add(&self, amount: u64) {
        self.0
            .store(self.0.load(Ordering::Relaxed) + amount, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn set(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Heap-wide figures.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HeapStats {
    /// Sum over every mutator that ever attached (live and detached).
    pub totals: TlabStats,
    /// Mutators attached now.
    pub live_mutators: usize,
    /// Collections finished.
    pub collections: u64,
    /// Of those, collections that ended a cycle in which mutators allocated in per-CPU LABs
    /// (`plab` mode, or `flip` mode in its per-CPU phase).
    pub plab_collections: u64,
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
