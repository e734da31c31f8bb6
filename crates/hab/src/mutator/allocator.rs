//! What the allocation paths read, built once with the heap: its memory, the machine, and
//! the parts its mode is made of. The mode is looked at once, here; after that the paths
//! follow the parts (is there a TLAB source, are there per-CPU LABs, which of the two this
//! cycle uses).
//!
//! | mode | TLABs come from | per-CPU LABs | allocates in per-CPU LABs |
//! | --- | --- | --- | --- |
//! | `shared` | (no TLABs) | no | never |
//! | `tlab` | the global heap | no | never |
//! | `hab` | the middle levels | no | never |
//! | `cpu-lab` | the global heap | yes | always |
//! | `flip` | the global heap | yes | when the flip policy says so |

use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::{HeapConfig, Mode};
use crate::labs::cpu_labs::CpuLabs;
use crate::labs::end_of_cycle::EndOfCycle;
use crate::labs::flip::{CycleWaste, FlipPolicy};
use crate::levels::cpu_buffers::CpuBuffers;
use crate::levels::middle::MiddleLevel;
use crate::levels::refill::{middle_level, per_cpu_works, RefillContext};
use crate::memory::space::Space;
use crate::mutator::cell::MutatorCell;
use crate::mutator::safepoint::Safepoints;
use crate::mutator::sampling::Sampling;
use crate::platform::cpu_id::{CpuIdReader, CpuIdSource};
use crate::platform::rseq;
use crate::platform::topology::Topology;

/// A heap's short line: the slow path's common misses for its mode
/// (`short_line.rs`); the object's address, or 0 to take the full slow path.
pub(crate) type ShortLine = fn(&Allocator, &MutatorCell, usize) -> usize;

/// Where a mutator's TLABs come from.
pub(crate) enum TlabSource {
    /// Carved from the global heap with a compare-and-swap.
    GlobalHeap,
    /// Carved from the middle levels ([`Allocator::levels`]), lowest first, which refill
    /// from the global heap.
    Levels,
}

/// A heap's allocation side (see the module documentation).
pub(crate) struct Allocator {
    pub(crate) config: HeapConfig,
    pub(crate) space: Space,
    pub(crate) topology: Topology,
    pub(crate) cpu_id: CpuIdReader,
    /// `None` in the `shared` mode: every object is carved from the global heap.
    pub(crate) tlab_source: Option<TlabSource>,
    /// The middle levels, lowest first: none unless TLABs come from them. A field of its
    /// own, so that a refill reaches the lowest level with one load.
    levels: Box<[MiddleLevel]>,
    /// The per-CPU LABs of the `cpu-lab` and `flip` modes.
    pub(crate) cpu_labs: Option<CpuLabs>,
    /// The `flip` mode's policy.
    flip: Option<FlipPolicy>,
    /// How TLABs from the global heap shrink as a cycle's range runs out.
    pub(crate) end_of_cycle: EndOfCycle,
    /// Whether mutators allocate in per-CPU LABs this cycle; changes only at collections.
    in_cpu_labs: AtomicBool,
    /// The collection count and requests; where stopped mutators wait.
    pub(crate) safepoints: Safepoints,
    /// The allocation sampler, if any.
    pub(crate) sampling: Sampling,
    /// The offset of every thread's rseq area from its thread pointer where the short line
    /// bumps the lowest level's restartable buffers ([`CommonMiss::RefillFromCpuBuffers`]),
    /// else 0 (never read then).
    home_area_offset: isize,
    /// The offset of `cpu_id` from the thread pointer where the short line carves from the
    /// lowest level's compare-and-swap buffers ([`CommonMiss::RefillFromSharedHome`]), else 0
    /// (never read then).
    home_cpu_id_offset: isize,
    /// The slow path's short line for what it may do in this mode (a [`CommonMiss`]), called
    /// through this pointer: no miss tests the mode.
    pub(crate) short_line: ShortLine,
}

/// The mode's common misses, decided once: what the slow path's short line handles by
/// itself (everything else takes the full slow path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CommonMiss {
    /// `shared`: every object is carved from the global heap.
    SharedObject,
    /// TLABs from the global heap and no per-CPU LABs (`tlab`): zeroing steps and refills.
    RefillFromGlobal,
    /// TLABs from the middle levels (`hab`), on the CPUs the kernel numbers: zeroing steps
    /// and refills.
    RefillFromLevels,
    /// TLABs from the middle levels (`hab`) whose lowest is the restartable `cpu` level, where
    /// every thread's rseq area sits at one offset from its thread pointer: zeroing steps and
    /// refills, the buffer bumped in one try through `fs`.
    RefillFromCpuBuffers,
    /// TLABs from the middle levels (`hab`) whose lowest has compare-and-swap buffers, where
    /// the CPU is read from the rseq area: zeroing steps and refills, the CPU read once and
    /// its buffer found in a table.
    RefillFromSharedHome,
    /// TLABs beside per-CPU LABs (`flip`), or from the levels on simulated CPUs: zeroing
    /// steps only.
    ZeroingStep,
}

impl Allocator {
    /// The allocation side of a heap in `config`'s mode, whose short line is
    /// `line_for(`the mode's common misses`)`.
    pub(crate) fn new(
        config: HeapConfig,
        space: Space,
        topology: Topology,
        cpu_id: CpuIdReader,
        line_for: fn(CommonMiss) -> ShortLine,
    ) -> Self {
        let reserve_bytes = space.lab_reserve_bytes();
        let levels = || {
            let levels = config.middle().iter();
            levels
                .map(|spec| middle_level(spec, reserve_bytes, &topology, &cpu_id, true))
                .collect()
        };
        let cpu_labs = || {
            let restartable = per_cpu_works(&topology, &cpu_id);
            CpuLabs::new(&config, reserve_bytes, &topology, restartable)
        };
        let flip = || FlipPolicy::new(config.max_tlab_bytes(), topology.online_cpus().len());
        let (tlab_source, cpu_labs, flip, in_cpu_labs) = match config.mode() {
            Mode::Shared => (None, None, None, false),
            Mode::Tlab => (Some(TlabSource::GlobalHeap), None, None, false),
            Mode::Hab => (Some(TlabSource::Levels), None, None, false),
            Mode::CpuLab => (Some(TlabSource::GlobalHeap), Some(cpu_labs()), None, true),
            Mode::Flip => (
                Some(TlabSource::GlobalHeap),
                Some(cpu_labs()),
                Some(flip()),
                false,
            ),
        };
        let levels: Box<[MiddleLevel]> = match tlab_source {
            Some(TlabSource::Levels) => levels(),
            _ => Box::default(),
        };
        // Where every thread's rseq area sits at one offset from its thread pointer (glibc's
        // registration), a restartable lowest level is bumped through `fs` in one try.
        let fixed_area_offset = rseq::fixed_area_offset()
            .filter(|_| levels.first().is_some_and(|level| level.is_restartable()));
        // Where the CPU is read from the rseq area, a compare-and-swap lowest level is found
        // by the CPU read there, with one table load.
        let home_cpu_id_offset = cpu_id
            .rseq_cpu_id_offset()
            .filter(|_| levels.first().is_some_and(|level| !level.is_restartable()));
        let common = match (&tlab_source, &cpu_labs) {
            (None, None) => CommonMiss::SharedObject,
            (Some(TlabSource::GlobalHeap), None) => CommonMiss::RefillFromGlobal,
            (Some(TlabSource::Levels), None) if fixed_area_offset.is_some() => {
                CommonMiss::RefillFromCpuBuffers
            }
            (Some(TlabSource::Levels), None) if home_cpu_id_offset.is_some() => {
                CommonMiss::RefillFromSharedHome
            }
            // A simulated thread's migrations belong to the full path's carve.
            (Some(TlabSource::Levels), None)
                if !matches!(cpu_id.source(), CpuIdSource::Simulated { .. }) =>
            {
                CommonMiss::RefillFromLevels
            }
            _ => CommonMiss::ZeroingStep,
        };
        let sampling = Sampling::new(config.alignment_bytes());
        Allocator {
            short_line: line_for(common),
            home_area_offset: fixed_area_offset.unwrap_or(0),
            home_cpu_id_offset: home_cpu_id_offset.unwrap_or(0),
            end_of_cycle: EndOfCycle::new(
                config.end_of_cycle(),
                config.allocation_weight_percent(),
            ),
            config,
            space,
            topology,
            cpu_id,
            tlab_source,
            levels,
            cpu_labs,
            flip,
            in_cpu_labs: AtomicBool::new(in_cpu_labs),
            safepoints: Safepoints::default(),
            sampling,
        }
    }

    /// The middle levels, lowest first (none unless TLABs come from them).
    #[inline]
    pub(crate) fn levels(&self) -> &[MiddleLevel] {
        &self.levels
    }

    /// The lowest level's restartable buffers and the offset of every thread's rseq area
    /// from its thread pointer, for the short line of [`CommonMiss::RefillFromCpuBuffers`]:
    /// two loads, no test.
    ///
    /// # Safety
    /// Only where the heap's common misses are [`CommonMiss::RefillFromCpuBuffers`] (its
    /// short line is the one that calls this), which the heap picks only where both exist.
    #[inline(always)]
    pub(crate) unsafe fn home_cpu_buffers(&self) -> (&CpuBuffers, isize) {
        debug_assert_ne!(self.home_area_offset, 0);
        // SAFETY: the caller's contract: the heap picked that line because the first level
        // has restartable buffers (and the area a fixed offset, stored then).
        let buffers = unsafe {
            let home = self.levels.get_unchecked(0);
            home.cpu_buffers().unwrap_unchecked()
        };
        (buffers, self.home_area_offset)
    }

    /// The lowest level (of compare-and-swap buffers) and the offset of `cpu_id` from the
    /// thread pointer, for the short line of [`CommonMiss::RefillFromSharedHome`]: one load
    /// each, no test.
    ///
    /// # Safety
    /// Only where the heap's common misses are [`CommonMiss::RefillFromSharedHome`], which
    /// the heap picks only where both exist.
    #[inline(always)]
    pub(crate) unsafe fn shared_home(&self) -> (&MiddleLevel, isize) {
        // SAFETY: the caller's contract: the heap picked that line because it has a level.
        let home = unsafe { self.levels.get_unchecked(0) };
        (home, self.home_cpu_id_offset)
    }

    /// What a refill through the levels reads.
    #[inline]
    pub(crate) fn refill_context(&self) -> RefillContext<'_> {
        RefillContext {
            space: &self.space,
            topology: &self.topology,
            cpu_id: &self.cpu_id,
            end_of_cycle: self.config.end_of_cycle(),
        }
    }

    /// Whether mutators allocate in per-CPU LABs in this cycle.
    #[inline]
    pub(crate) fn allocates_in_cpu_labs(&self) -> bool {
        self.in_cpu_labs.load(Ordering::Relaxed)
    }

    /// At the end of a collection (every mutator stopped): the flip policy, if any, picks the
    /// LABs of the next cycle from what this one left unused.
    pub(crate) fn end_cycle(&self, cycle: CycleWaste) {
        if let Some(flip) = &self.flip {
            let next = flip.next_in_cpu_labs(self.allocates_in_cpu_labs(), cycle);
            self.in_cpu_labs.store(next, Ordering::Relaxed);
        }
    }
}
