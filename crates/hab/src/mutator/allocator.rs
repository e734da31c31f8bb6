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
use crate::levels::heap_levels::{HeapLevels, HomeKind};
use crate::levels::middle::MiddleLevel;
use crate::levels::refill::{per_cpu_works, RefillContext};
use crate::memory::space::Space;
use crate::mutator::cell::MutatorCell;
use crate::mutator::safepoint::Safepoints;
use crate::mutator::sampling::Sampling;
use crate::platform::cpu_id::CpuIdReader;
use crate::platform::topology::Topology;

/// A heap's short line: the slow path's common misses for its mode
/// (`short_line.rs`); the object's address, or 0 to take the full slow path.
pub(crate) type ShortLine = fn(&Allocator, &MutatorCell, usize) -> usize;

/// Where a mutator's TLABs come from.
pub(crate) enum TlabSource {
    /// Carved from the global heap with a compare-and-swap.
    Global,
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
    /// The middle levels (none unless TLABs come from them), and how a refill reaches the
    /// thread's own buffer at the lowest.
    pub(crate) levels: HeapLevels,
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
    /// TLABs from the middle levels (`hab`) on the CPUs the kernel numbers: zeroing steps and
    /// refills from the thread's own buffer at the lowest level, found as the levels' home
    /// says.
    RefillFromLevels(HomeKind),
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
        let cpu_labs = || {
            let restartable = per_cpu_works(&topology, &cpu_id);
            CpuLabs::new(&config, reserve_bytes, &topology, restartable)
        };
        let flip = || FlipPolicy::new(config.max_tlab_bytes(), topology.online_cpus().len());
        let (tlab_source, cpu_labs, flip, in_cpu_labs) = match config.mode() {
            Mode::Shared => (None, None, None, false),
            Mode::Tlab => (Some(TlabSource::Global), None, None, false),
            Mode::Hab => (Some(TlabSource::Levels), None, None, false),
            Mode::CpuLab => (Some(TlabSource::Global), Some(cpu_labs()), None, true),
            Mode::Flip => (
                Some(TlabSource::Global),
                Some(cpu_labs()),
                Some(flip()),
                false,
            ),
        };
        let levels = match tlab_source {
            Some(TlabSource::Levels) => {
                let reserve_bytes = space.lab_reserve_bytes();
                HeapLevels::new(config.middle(), reserve_bytes, &topology, &cpu_id)
            }
            _ => HeapLevels::none(),
        };
        let common = match (&tlab_source, &cpu_labs, levels.home()) {
            (None, None, _) => CommonMiss::SharedObject,
            (Some(TlabSource::Global), None, _) => CommonMiss::RefillFromGlobal,
            (Some(TlabSource::Levels), None, Some(home)) => CommonMiss::RefillFromLevels(home),
            _ => CommonMiss::ZeroingStep,
        };
        let sampling = Sampling::new(config.alignment_bytes());
        Allocator {
            short_line: line_for(common),
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
        self.levels.levels()
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
