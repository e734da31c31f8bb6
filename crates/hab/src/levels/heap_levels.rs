//! A heap's middle levels as its TLAB refills see them: the one door from the mutator layer.
//! Built once with the heap, they know how a refill finds the thread's own buffer at the
//! lowest level (its *home*, a [`HomeKind`]) and carve there in a straight line, counting what
//! they did ([`HeapLevels::carve_at_home`]); everything else takes the whole protocol up the
//! levels ([`HeapLevels::carve`]).
//!
//! Cost: a home carve is one restartable bump or one compare-and-swap, with the loads that
//! find the buffer (two for the `cpu` level, the CPU and a table entry for the others).

use crate::config::MiddleLevelSpec;
use crate::levels::chunk::Chunk;
use crate::levels::cpu_buffers::{self, CpuBuffers};
use crate::levels::middle::{self, MiddleLevel};
use crate::levels::refill::{self, middle_level, LevelCountersByLevel, RefillContext};
use crate::levels::stats::LevelCounters;
use crate::memory::space::Space;
use crate::platform::counter::Counter;
use crate::platform::cpu_id::{read_rseq_cpu, CpuIdReader, CpuIdSource, SimulatedCpu};
use crate::platform::rseq;
use crate::platform::topology::{Level, Topology};

/// How a refill finds the thread's own buffer at the lowest level, decided once per heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HomeKind {
    /// The restartable `cpu` level, where every thread's rseq area sits at one offset from
    /// its thread pointer (glibc's registration): one try of a bump addressed through `fs`.
    CpuBuffersAtFixedArea,
    /// A compare-and-swap level, where the CPU is read from the rseq area: the CPU read once,
    /// its buffer found in the level's table.
    SharedBuffersByRseqCpu,
    /// Either kind, found the general way (another CPU-id source, Hab's own rseq
    /// registrations).
    Any,
}

/// A kind of home as a type, so that a refill is generated once per kind from one routine
/// (`mutator/short_line.rs`). Its carve runs in two steps: what it needs is found before the
/// refill begins ([`find`](Home::find): a few loads, held in registers while the refill
/// retires the old TLAB), then the carve itself.
pub(crate) trait Home {
    /// The kind this type carves from.
    const KIND: HomeKind;

    /// What the carve needs, found before the refill begins.
    type Found<'a>: Copy;

    /// Finds what the carve needs in `levels`, over `space`, with the thread's `counters`.
    ///
    /// # Safety
    /// `levels`' home is of [`KIND`](Home::KIND).
    unsafe fn find<'a>(
        levels: &'a HeapLevels,
        space: &'a Space,
        counters: &'a LevelCountersByLevel,
    ) -> Self::Found<'a>;

    /// `bytes` (whole words) from the thread's own buffer at the lowest level, counted in the
    /// thread's counters, which `counters` finds when they are needed (after the carve,
    /// rather than held in a register across it): the allocation, a foreign one, a section's
    /// restart. `None` when that
    /// buffer cannot serve it (too little left, busy, the thread moved or was interrupted):
    /// nothing was carved, and the whole protocol then decides.
    ///
    /// # Safety
    /// `found` came from [`find`](Home::find) on `levels`, whose home is of
    /// [`KIND`](Home::KIND); `context` is its heap's.
    unsafe fn carve<'c>(
        found: Self::Found<'_>,
        levels: &HeapLevels,
        context: RefillContext<'_>,
        counters: impl FnOnce() -> &'c LevelCountersByLevel,
        simulated: &SimulatedCpu,
        bytes: usize,
    ) -> Option<Chunk>;
}

/// [`HomeKind::CpuBuffersAtFixedArea`] as a type.
pub(crate) struct CpuBuffersAtFixedArea;
/// [`HomeKind::SharedBuffersByRseqCpu`] as a type.
pub(crate) struct SharedBuffersByRseqCpu;
/// [`HomeKind::Any`] as a type.
pub(crate) struct AnyHome;

/// A heap's middle levels, lowest first, and how a refill reaches its home (see the module
/// documentation).
pub(crate) struct HeapLevels {
    /// The levels, lowest first; none unless TLABs come from them. A field of its own, so
    /// that a refill reaches the lowest level with one load.
    levels: Box<[MiddleLevel]>,
    /// `None` without levels, or where CPUs are simulated (a simulated thread's migrations
    /// belong to the whole protocol).
    home: Option<HomeKind>,
    /// The offset of every thread's rseq area from its thread pointer, for
    /// [`HomeKind::CpuBuffersAtFixedArea`] (else 0, never read).
    area_offset: isize,
    /// The offset of `cpu_id` from the thread pointer, for
    /// [`HomeKind::SharedBuffersByRseqCpu`] (else 0, never read).
    cpu_id_offset: isize,
}

impl HeapLevels {
    /// No levels: TLABs come from the global heap, or there are none.
    pub(crate) fn none() -> Self {
        HeapLevels {
            levels: Box::default(),
            home: None,
            area_offset: 0,
            cpu_id_offset: 0,
        }
    }

    /// The levels `specs` name (lowest first), none leaving a tail shorter than
    /// `reserve_bytes`, on `topology` with CPUs read by `cpu_id`; the `cpu` level is
    /// restartable where it can be (see [`middle_level`]).
    pub(crate) fn new(
        specs: &[MiddleLevelSpec],
        reserve_bytes: usize,
        topology: &Topology,
        cpu_id: &CpuIdReader,
    ) -> Self {
        let levels: Box<[MiddleLevel]> = specs
            .iter()
            .map(|spec| middle_level(spec, reserve_bytes, topology, cpu_id, true))
            .collect();
        let Some(lowest) = levels.first() else {
            return HeapLevels::none();
        };
        // Where every thread's rseq area sits at one offset from its thread pointer, a
        // restartable lowest level is bumped through `fs` in one try; where the CPU is read
        // from the rseq area, a compare-and-swap lowest level is found by the CPU read there.
        let area_offset = rseq::fixed_area_offset().filter(|_| lowest.is_restartable());
        let cpu_id_offset = cpu_id
            .rseq_cpu_id_offset()
            .filter(|_| !lowest.is_restartable());
        let simulated = matches!(cpu_id.source(), CpuIdSource::Simulated { .. });
        let home = match (area_offset, cpu_id_offset) {
            (Some(_), _) => Some(HomeKind::CpuBuffersAtFixedArea),
            (None, Some(_)) => Some(HomeKind::SharedBuffersByRseqCpu),
            (None, None) if !simulated => Some(HomeKind::Any),
            (None, None) => None,
        };
        HeapLevels {
            levels,
            home,
            area_offset: area_offset.unwrap_or(0),
            cpu_id_offset: cpu_id_offset.unwrap_or(0),
        }
    }

    /// The levels, lowest first.
    #[inline]
    pub(crate) fn levels(&self) -> &[MiddleLevel] {
        &self.levels
    }

    /// How a refill reaches the thread's own buffer at the lowest level; `None` without
    /// levels, or where the whole protocol must do it (simulated CPUs).
    pub(crate) fn home(&self) -> Option<HomeKind> {
        self.home
    }

    /// What the short refill's carve at home `H` needs, found before the refill begins (see
    /// [`Home`]).
    ///
    /// # Safety
    /// `H` is this heap's [`home`](HeapLevels::home) kind.
    #[inline(always)]
    pub(crate) unsafe fn find_home<'a, H: Home>(
        &'a self,
        space: &'a Space,
        counters: &'a LevelCountersByLevel,
    ) -> H::Found<'a> {
        debug_assert_eq!(self.home, Some(H::KIND));
        // SAFETY: forwarded.
        unsafe { H::find(self, space, counters) }
    }

    /// The short refill's carve: `bytes` from the thread's own buffer at the lowest level,
    /// found as `H` finds it, counted (see [`Home::carve`]).
    ///
    /// # Safety
    /// `found` came from [`find_home`](HeapLevels::find_home) on these levels; `context` is
    /// their heap's.
    #[inline(always)]
    pub(crate) unsafe fn carve_at_home<'c, H: Home>(
        &self,
        found: H::Found<'_>,
        context: RefillContext<'_>,
        counters: impl FnOnce() -> &'c LevelCountersByLevel,
        simulated: &SimulatedCpu,
        bytes: usize,
    ) -> Option<Chunk> {
        // SAFETY: forwarded.
        unsafe { H::carve(found, self, context, counters, simulated, bytes) }
    }

    /// The whole protocol: a chunk of `desired` bytes (at least `min`) from the levels, or
    /// the global heap when they are exhausted (see [`refill::carve_chunk`]). `counters`:
    /// the thread's counters of every level and, if any, where it counts TLABs that passed
    /// every level.
    #[inline]
    pub(crate) fn carve(
        &self,
        context: RefillContext<'_>,
        counters: (&LevelCountersByLevel, Option<&Counter>),
        simulated: &mut SimulatedCpu,
        min: usize,
        desired: usize,
    ) -> Option<Chunk> {
        refill::carve_chunk(context, &self.levels, counters, simulated, min, desired)
    }

    /// The lowest level's restartable buffers.
    ///
    /// # Safety
    /// The home is [`HomeKind::CpuBuffersAtFixedArea`], picked only where both exist.
    #[inline(always)]
    unsafe fn lowest_cpu_buffers(&self) -> &CpuBuffers {
        debug_assert_ne!(self.area_offset, 0);
        // SAFETY: the caller's contract: that home is picked where the lowest level has
        // restartable buffers.
        unsafe {
            let lowest = self.levels.get_unchecked(0);
            lowest.cpu_buffers().unwrap_unchecked()
        }
    }

    /// The lowest level.
    ///
    /// # Safety
    /// The heap has levels (its home is some kind).
    #[inline(always)]
    unsafe fn lowest(&self) -> &MiddleLevel {
        // SAFETY: the caller's contract.
        unsafe { self.levels.get_unchecked(0) }
    }
}

impl Home for CpuBuffersAtFixedArea {
    const KIND: HomeKind = HomeKind::CpuBuffersAtFixedArea;

    /// The buffers, the area's offset, the space and the `cpu` level's counters (only the
    /// `cpu` level is restartable).
    type Found<'a> = (&'a CpuBuffers, isize, &'a Space, &'a LevelCounters);

    #[inline(always)]
    unsafe fn find<'a>(
        levels: &'a HeapLevels,
        space: &'a Space,
        counters: &'a LevelCountersByLevel,
    ) -> Self::Found<'a> {
        // SAFETY: the caller's contract: this is the heap's home.
        let buffers = unsafe { levels.lowest_cpu_buffers() };
        (
            buffers,
            levels.area_offset,
            space,
            &counters[Level::Cpu.index()],
        )
    }

    /// One try of a restartable bump addressed through `fs`
    /// ([`cpu_buffers::carve_at_fixed_home`]); its counters at a fixed place.
    #[inline(always)]
    unsafe fn carve<'c>(
        (buffers, area_offset, space, counters): Self::Found<'_>,
        _: &HeapLevels,
        _: RefillContext<'_>,
        _: impl FnOnce() -> &'c LevelCountersByLevel,
        _: &SimulatedCpu,
        bytes: usize,
    ) -> Option<Chunk> {
        // SAFETY: `area_offset` is the fixed offset the heap found.
        unsafe { cpu_buffers::carve_at_fixed_home(buffers, area_offset, space, counters, bytes) }
    }
}

impl Home for SharedBuffersByRseqCpu {
    const KIND: HomeKind = HomeKind::SharedBuffersByRseqCpu;

    /// The lowest level, the offset of `cpu_id` and the space.
    type Found<'a> = (&'a MiddleLevel, isize, &'a Space);

    #[inline(always)]
    unsafe fn find<'a>(
        levels: &'a HeapLevels,
        space: &'a Space,
        _: &'a LevelCountersByLevel,
    ) -> Self::Found<'a> {
        // SAFETY: the caller's contract: this is the heap's home, so it has a lowest level.
        let lowest = unsafe { levels.lowest() };
        (lowest, levels.cpu_id_offset, space)
    }

    /// The CPU read once, its buffer from the level's table, one compare-and-swap for exactly
    /// the TLAB ([`middle::carve_exact_at_home`]); the carve is counted foreign when the
    /// thread ran on a CPU of another domain by the time it committed (the CPU read again:
    /// one load and a compare). The level, the offset and the counters are found again after
    /// the compare-and-swap rather than held across it.
    #[inline(always)]
    unsafe fn carve<'c>(
        (level, cpu_id_offset, space): Self::Found<'_>,
        levels: &HeapLevels,
        _: RefillContext<'_>,
        counters: impl FnOnce() -> &'c LevelCountersByLevel,
        _: &SimulatedCpu,
        bytes: usize,
    ) -> Option<Chunk> {
        // SAFETY: the offset is the heap's CPU-id reader's.
        let cpu = unsafe { read_rseq_cpu(cpu_id_offset) };
        let (chunk, home) = middle::carve_exact_at_home(level, space, cpu, bytes)?;
        // SAFETY: as in `find`.
        let level = unsafe { levels.lowest() };
        // Counted by hand, in this order (the allocation, then the CPU read again, then the
        // table only when the CPU changed): this is the refill's straight line, and the
        // compiler keeps it shortest so (one `LevelEvent` for both took one instruction
        // more per refill).
        let counters = &counters()[level.level().index()];
        counters.allocs.add(1);
        // SAFETY: as for the first reading.
        let now = unsafe { read_rseq_cpu(levels.cpu_id_offset) };
        if now != cpu && level.is_foreign_home(home, now) {
            counters.foreign_allocs.add(1);
        }
        Some(chunk)
    }
}

impl Home for AnyHome {
    const KIND: HomeKind = HomeKind::Any;

    /// The levels.
    type Found<'a> = &'a [MiddleLevel];

    #[inline(always)]
    unsafe fn find<'a>(
        levels: &'a HeapLevels,
        _: &'a Space,
        _: &'a LevelCountersByLevel,
    ) -> Self::Found<'a> {
        &levels.levels
    }

    /// [`refill::carve_at_home`]: the thread's buffer found through the topology.
    #[inline(always)]
    unsafe fn carve<'c>(
        levels: Self::Found<'_>,
        _: &HeapLevels,
        context: RefillContext<'_>,
        counters: impl FnOnce() -> &'c LevelCountersByLevel,
        simulated: &SimulatedCpu,
        bytes: usize,
    ) -> Option<Chunk> {
        refill::carve_at_home(context, levels, counters(), simulated, bytes)
    }
}
