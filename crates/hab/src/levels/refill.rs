//! How a refill travels up the levels: the thread's side of the middle-level protocol (which
//! CPU it runs on, where waste and foreign allocations are counted), for `middle::carve`.

use crate::levels::middle::{self, Chunk, MiddleLevel, RefillThread};
use crate::levels::stats::LevelCounters;
use crate::memory::space::Space;
use crate::platform::cpu_id::{CpuIdReader, SimulatedCpu};
use crate::platform::topology::{Level, Topology};

/// What a refill reads around the levels: the heap's space (the global heap above the levels,
/// the fillers for retired tails), the machine's topology and where the CPU id comes from.
#[derive(Clone, Copy)]
pub(crate) struct RefillContext<'a> {
    pub(crate) space: &'a Space,
    pub(crate) topology: &'a Topology,
    pub(crate) cpu_id: &'a CpuIdReader,
}

/// One thread's counters of every level, indexed by [`Level::index`].
pub(crate) type LevelCountersByLevel = [LevelCounters; Level::ALL.len()];

/// One refill by one mutator.
struct Refill<'a> {
    context: RefillContext<'a>,
    levels: &'a [MiddleLevel],
    counters: &'a LevelCountersByLevel,
    simulated: &'a SimulatedCpu,
    /// The CPU the thread ran on when the refill began.
    cpu: usize,
}

/// Carves a chunk of `desired` bytes (at least `min`) from `levels`, or the global heap when
/// they are exhausted. The simulated CPU source may migrate the thread first. The chunk may be
/// larger than desired by less than one filler, so that no buffer keeps a tail no filler fits.
pub(crate) fn carve_chunk(
    context: RefillContext<'_>,
    levels: &[MiddleLevel],
    counters: &LevelCountersByLevel,
    simulated: &mut SimulatedCpu,
    min: usize,
    desired: usize,
) -> Option<Chunk> {
    context.cpu_id.on_slow_path(simulated);
    let cpu = context.cpu_id.current(simulated);
    let mut refill = Refill {
        context,
        levels,
        counters,
        simulated,
        cpu,
    };
    middle::carve(levels, 0, min, desired, &mut refill)
}

impl Refill<'_> {
    /// This thread's counters of the configured level at `index`.
    fn level_counters(&self, index: usize) -> &LevelCounters {
        &self.counters[self.levels[index].level().index()]
    }
}

impl RefillThread for Refill<'_> {
    fn base(&self) -> usize {
        self.context.space.base()
    }

    fn current_domain(&mut self, level: Level) -> usize {
        self.context.topology.domain_of(self.cpu, level)
    }

    fn carve_global(&mut self, min: usize, desired: usize) -> Option<Chunk> {
        let (start, len) = self.context.space.global().carve_between(min, desired)?;
        Some(Chunk { start, len })
    }

    fn retire_tail(&mut self, index: usize, start: usize, end: usize) {
        let counters = self.level_counters(index);
        counters.refills.add(1);
        if end > start {
            // SAFETY: the tail belongs to a buffer this thread claimed; no other thread carves
            // from a claimed buffer, so the thread owns the gap.
            unsafe { self.context.space.write_filler(start, end - start) };
            counters.waste_bytes.add((end - start) as u64);
        }
    }

    /// Counts the allocation, and whether it is foreign: the CPU id is read again after the
    /// commit, as the thread may have moved since it chose the domain.
    fn served(&mut self, _: usize, level: Level, domain: usize) {
        let counters = &self.counters[level.index()];
        counters.allocs.add(1);
        let now = self.context.cpu_id.current(self.simulated);
        if self.context.topology.domain_of(now, level) != domain {
            counters.foreign_allocs.add(1);
        }
    }

    fn served_without_moving(&mut self, _: usize, level: Level, _: usize) {
        self.counters[level.index()].allocs.add(1);
    }

    fn rseq_aborts(&mut self, index: usize, aborts: u64) {
        if aborts > 0 {
            self.level_counters(index).rseq_aborts.add(aborts);
        }
    }

    fn rseq_fallback(&mut self, index: usize) {
        self.level_counters(index).rseq_fallbacks.add(1);
    }

    fn out_of_range_cpu(&mut self, index: usize) {
        self.level_counters(index).out_of_range_cpus.add(1);
    }

    fn sidelined(&mut self, index: usize) {
        self.level_counters(index).sidelined.add(1);
    }

    fn sideline_reused(&mut self, index: usize) {
        self.level_counters(index).sideline_reused.add(1);
    }
}
