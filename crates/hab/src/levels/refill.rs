//! How a TLAB refill of the `hab` mode travels up the levels: the thread's side of the
//! middle-level protocol (which CPU it runs on, where waste and foreign allocations are
//! counted), for `middle::carve`.

use crate::heap::Heap;
use crate::levels::middle::{self, Chunk, MiddleLevel, Surroundings};
use crate::mutator::stats::{Counters, LevelCounters};
use crate::platform::cpu_id::SimulatedCpu;
use crate::platform::topology::Level;

/// One refill by one mutator.
struct Refill<'a> {
    heap: &'a Heap,
    levels: &'a [MiddleLevel],
    counters: &'a Counters,
    simulated: &'a SimulatedCpu,
    base: usize,
    /// The CPU the thread ran on when the refill began.
    cpu: usize,
}

/// Carves a TLAB of `desired` bytes (at least `min`) from the middle levels, or the global
/// heap when they are exhausted. The simulated CPU source may migrate the thread first. The
/// TLAB may be larger than desired by less than one filler, so that no buffer keeps a tail no
/// filler fits.
pub(crate) fn carve_tlab(
    heap: &Heap,
    counters: &Counters,
    simulated: &mut SimulatedCpu,
    min: usize,
    desired: usize,
) -> Option<Chunk> {
    carve_from(heap, heap.levels(), counters, simulated, min, desired)
}

/// Carves a chunk of `desired` bytes (at least `min`) from `levels`, or the global heap when
/// they are exhausted.
pub(crate) fn carve_from(
    heap: &Heap,
    levels: &[MiddleLevel],
    counters: &Counters,
    simulated: &mut SimulatedCpu,
    min: usize,
    desired: usize,
) -> Option<Chunk> {
    heap.cpu_id().on_slow_path(simulated);
    let cpu = heap.cpu_id().current(simulated);
    let mut refill = Refill {
        heap,
        levels,
        counters,
        simulated,
        base: heap.reserved_range().start,
        cpu,
    };
    middle::carve(levels, 0, min, desired, &mut refill)
}

impl Refill<'_> {
    /// This thread's counters of the configured level at `index`.
    fn level_counters(&self, index: usize) -> &LevelCounters {
        &self.counters.levels[self.levels[index].level().index()]
    }
}

impl Surroundings for Refill<'_> {
    fn base(&self) -> usize {
        self.base
    }

    fn current_domain(&mut self, level: Level) -> usize {
        self.heap.topology().domain_of(self.cpu, level)
    }

    fn carve_global(&mut self, min: usize, desired: usize) -> Option<Chunk> {
        let (start, len) = self.heap.global().carve_between(min, desired)?;
        Some(Chunk { start, len })
    }

    fn retire_tail(&mut self, index: usize, start: usize, end: usize) {
        let counters = self.level_counters(index);
        counters.refills.add(1);
        if end > start {
            // SAFETY: the tail belongs to a buffer this thread claimed; no other thread carves
            // from a claimed buffer, so the thread owns the gap.
            unsafe { self.heap.write_filler(start, end - start) };
            counters.waste_bytes.add((end - start) as u64);
        }
    }

    /// Counts the allocation, and whether it is foreign: the CPU id is read again after the
    /// commit, as the thread may have moved since it chose the domain.
    fn served(&mut self, _: usize, level: Level, domain: usize) {
        let counters = &self.counters.levels[level.index()];
        counters.allocs.add(1);
        let now = self.heap.cpu_id().current(self.simulated);
        if self.heap.topology().domain_of(now, level) != domain {
            counters.foreign_allocs.add(1);
        }
    }

    fn served_without_moving(&mut self, _: usize, level: Level, _: usize) {
        self.counters.levels[level.index()].allocs.add(1);
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
