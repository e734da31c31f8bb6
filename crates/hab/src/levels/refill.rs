//! How a refill travels up the levels: the thread's side of the middle-level protocol (which
//! CPU it runs on, where waste and foreign allocations are counted), for `middle::carve`.

use crate::config::MiddleLevelSpec;
use crate::levels::chunk::{Above, CarveFor, Chunk, LevelEvent, RefillThread};
use crate::levels::cpu_buffers;
use crate::levels::middle::{self, LevelsAbove, MiddleLevel, SharedHome};
use crate::levels::stats::LevelCounters;
use crate::memory::space::Space;
use crate::platform::counter::Counter;
use crate::platform::cpu_id::{CpuIdReader, CpuIdSource, SimulatedCpu};
use crate::platform::rseq::{self, RseqMechanism};
use crate::platform::topology::{Level, Topology, TopologySource};

/// What a refill reads around the levels: the heap's space (the global heap above the levels,
/// the fillers for retired tails), the machine's topology, where the CPU id comes from, and
/// whether buffers shrink at the end of a cycle
/// ([`HeapConfig::end_of_cycle`](crate::HeapConfig::end_of_cycle)).
#[derive(Clone, Copy)]
pub(crate) struct RefillContext<'a> {
    pub(crate) space: &'a Space,
    pub(crate) topology: &'a Topology,
    pub(crate) cpu_id: &'a CpuIdReader,
    pub(crate) end_of_cycle: bool,
}

/// One thread's counters of every level, indexed by [`Level::index`].
pub(crate) type LevelCountersByLevel = [LevelCounters; Level::ALL.len()];

/// A heap's space as the levels' [`Above`]: its global heap, which says what is left of the
/// allocation range where the end of a cycle is on.
struct HeapAbove<'a> {
    space: &'a Space,
    end_of_cycle: bool,
}

impl Above for HeapAbove<'_> {
    fn carve(&self, min: usize, desired: usize) -> Option<Chunk> {
        let (start, len) = self.space.global().carve_between(min, desired)?;
        Some(Chunk { start, len })
    }

    fn free_bytes(&self) -> Option<usize> {
        self.end_of_cycle.then(|| self.space.global().free_bytes())
    }

    unsafe fn write_filler(&self, start: usize, bytes: usize) {
        // SAFETY: the caller's contract.
        unsafe { self.space.write_filler(start, bytes) }
    }
}

/// One refill by one thread: the thread's side of the protocol.
struct Refill<'a> {
    /// The base of the space above the levels, read once per refill.
    base: usize,
    topology: &'a Topology,
    cpu_id: &'a CpuIdReader,
    counters: &'a LevelCountersByLevel,
    simulated: &'a SimulatedCpu,
    /// Where TLABs that pass every level are counted, if anywhere.
    tlabs_past_levels: Option<&'a Counter>,
    /// The CPU the thread ran on when the refill began.
    cpu: usize,
}

/// Carves a chunk of `desired` bytes (at least `min`) from `levels`, or the global heap when
/// they are exhausted. The simulated CPU source may migrate the thread first. The chunk may be
/// larger than desired by less than one filler, so that no buffer keeps a tail no filler fits.
/// `counters`: the thread's counters of every level and, if any, where it counts the TLABs
/// that passed every level.
#[inline]
pub(crate) fn carve_chunk(
    context: RefillContext<'_>,
    levels: &[MiddleLevel],
    counters: (&LevelCountersByLevel, Option<&Counter>),
    simulated: &mut SimulatedCpu,
    min: usize,
    desired: usize,
) -> Option<Chunk> {
    let above = HeapAbove {
        space: context.space,
        end_of_cycle: context.end_of_cycle,
    };
    carve_chunk_from(
        (&above, context.space.base()),
        context.topology,
        context.cpu_id,
        levels,
        counters,
        simulated,
        min,
        desired,
    )
}

/// [`carve_chunk`] from levels over any space `above` whose offsets count from `base`;
/// `counters` are the thread's counters of every level and, if any, where it counts the TLABs
/// that passed every level.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn carve_chunk_from(
    (above, base): (&dyn Above, usize),
    topology: &Topology,
    cpu_id: &CpuIdReader,
    levels: &[MiddleLevel],
    (counters, tlabs_past_levels): (&LevelCountersByLevel, Option<&Counter>),
    simulated: &mut SimulatedCpu,
    min: usize,
    desired: usize,
) -> Option<Chunk> {
    cpu_id.on_slow_path(simulated);
    if let Some(chunk) =
        carve_at_home_counted(base, topology, cpu_id, levels, counters, simulated, desired)
    {
        return Some(chunk);
    }
    let cpu = cpu_id.current(simulated);
    let refill = Refill {
        base,
        topology,
        cpu_id,
        counters,
        simulated,
        tlabs_past_levels,
        cpu,
    };
    let from = LevelsAbove {
        levels,
        space: above,
        thread: &refill,
        request: CarveFor::Tlab,
    };
    middle::carve(from, min, desired)
}

/// The slow path's short refill through the levels: exactly `bytes` from the thread's own
/// buffer at the lowest level ([`carve_at_home_counted`]), counted in `counters`. `None` when
/// that buffer cannot serve it. Not where the CPU id is simulated: a simulated thread's
/// migrations belong to [`carve_chunk`].
#[inline(always)]
pub(crate) fn carve_at_home(
    context: RefillContext<'_>,
    levels: &[MiddleLevel],
    counters: &LevelCountersByLevel,
    simulated: &SimulatedCpu,
    bytes: usize,
) -> Option<Chunk> {
    debug_assert!(!matches!(
        context.cpu_id.source(),
        CpuIdSource::Simulated { .. }
    ));
    carve_at_home_counted(
        context.space.base(),
        context.topology,
        context.cpu_id,
        levels,
        counters,
        simulated,
        bytes,
    )
}

/// The common case at the lowest level, counted: the allocation, a foreign one when the
/// thread left the domain of the compare-and-swap buffer that served it (the CPU id is read
/// again after the commit), and the restarts of a restartable section. A restartable level
/// bumps its CPU's buffer ([`cpu_buffers::carve_at_home`]), a compare-and-swap level its
/// domain's ([`middle::carve_at_shared_home`]).
#[inline(always)]
fn carve_at_home_counted(
    base: usize,
    topology: &Topology,
    cpu_id: &CpuIdReader,
    levels: &[MiddleLevel],
    counters: &LevelCountersByLevel,
    simulated: &SimulatedCpu,
    bytes: usize,
) -> Option<Chunk> {
    let level = levels.first()?;
    let counters = &counters[level.level().index()];
    if let Some(buffers) = level.cpu_buffers() {
        let (chunk, aborts) = cpu_buffers::carve_at_home(buffers, base, bytes);
        if aborts > 0 {
            counters.count(LevelEvent::RseqAborts(aborts));
        }
        let chunk = chunk?;
        counters.count(LevelEvent::Served { foreign: false });
        return Some(chunk);
    }
    let SharedHome { chunk, home, cpu } =
        middle::carve_at_shared_home(level, base, topology, || cpu_id.current(simulated), bytes)?;
    // The domain is looked up only when the CPU changed.
    let foreign = cpu_id
        .moved_from(cpu, simulated)
        .is_some_and(|now| level.is_foreign(home, topology.domain_of(now, level.level())));
    counters.count(LevelEvent::Served { foreign });
    Some(chunk)
}

/// A configured middle level. The `cpu` level uses restartable sequences where `restartable`
/// allows them, where they work, where its domains are the CPUs the kernel numbers (a real
/// topology and CPU-id source) and where its buffers fit a per-CPU word; else compare-and-swap
/// buffers. Neither leaves a tail shorter than `reserve_bytes`.
pub(crate) fn middle_level(
    spec: &MiddleLevelSpec,
    reserve_bytes: usize,
    topology: &Topology,
    cpu_id: &CpuIdReader,
    restartable: bool,
) -> MiddleLevel {
    let level = MiddleLevel::new(
        spec.level,
        spec.buffer_bytes,
        topology.domains(spec.level),
        reserve_bytes,
    )
    .with_homes(topology);
    // The restartable buffers keep a reserve past their end where the smallest filler is
    // longer than a word (see `cpu_buffers`), so that every tail can hold one.
    if restartable
        && spec.level == Level::Cpu
        && spec.buffer_bytes <= rseq::MAX_BUFFER_BYTES
        && per_cpu_works(topology, cpu_id)
    {
        level.with_cpu_buffers(topology.cpu_slots())
    } else {
        level
    }
}

/// Restartable per-CPU buffers need rseq, and CPUs numbered as the kernel numbers them.
pub(crate) fn per_cpu_works(topology: &Topology, cpu_id: &CpuIdReader) -> bool {
    topology.source() == TopologySource::Sysfs
        && !matches!(cpu_id.source(), CpuIdSource::Simulated { .. })
        && !matches!(rseq::mechanism(), RseqMechanism::Unavailable(_))
}

impl RefillThread for Refill<'_> {
    #[inline]
    fn base(&self) -> usize {
        self.base
    }

    #[inline]
    fn current_domain(&self, level: Level) -> usize {
        self.topology.domain_of(self.cpu, level)
    }

    /// The CPU id read again, as the thread may have moved since it chose the domain.
    #[inline]
    fn domain_now(&self, level: Level) -> usize {
        let now = self.cpu_id.current(self.simulated);
        self.topology.domain_of(now, level)
    }

    #[inline]
    fn count(&self, level: Level, event: LevelEvent) {
        self.counters[level.index()].count(event);
    }

    fn tlab_past_every_level(&self) {
        if let Some(counter) = self.tlabs_past_levels {
            counter.add(1);
        }
    }
}
