//! The middle levels on their own, for a runtime that keeps its own TLABs and global space (as
//! Kirsch et al. put them inside HotSpot): the runtime supplies the upstream (carve a chunk
//! from its space, write a filler over a gap) and asks for TLABs; Hab carves them through the
//! per-CPU, per-core, per-package… buffers with the same protocol as in its own heaps
//! (restartable or compare-and-swap, foreign allocations, sidelining), and empties every
//! buffer at the runtime's collections.
//!
//! Cost: a TLAB is one carve at the lowest level (a restartable section or one CAS); refills
//! of the levels call the upstream.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::config::{check_levels, ConfigError, MiddleLevelSpec};
use crate::levels::chunk::Above;
use crate::levels::chunk::Chunk;
use crate::levels::middle::MiddleLevel;
use crate::levels::refill::{self, middle_level, LevelCountersByLevel};
use crate::levels::stats::LevelStats;
use crate::levels::{buffer_end_of_cycle, buffer_sizing};
use crate::memory::packed::{MAX_OFFSET_WORDS, OFFSET_BITS};
use crate::memory::size::ByteSize;
use crate::memory::words::WORD_BYTES;
use crate::platform::counter::Counter;
use crate::platform::cpu_id::{CpuIdReader, CpuIdSource, SimulatedCpu};
use crate::platform::per_cpu::per_cpu_support;
use crate::platform::rseq;
use crate::platform::topology::{Level, Topology};

/// Bits of a per-CPU buffer's word that hold its top ([`CpuBufferPath`]); the bits above
/// hold the words left.
pub const CPU_BUFFER_TOP_BITS: u32 = OFFSET_BITS;

/// What compiled code needs to bump the lowest level's restartable per-CPU buffers itself, for
/// an object (a per-CPU LAB allocation, as Garthwaite et al. emit it) or a TLAB, on x86_64
/// Linux with glibc's rseq registration ([`MiddleLevels::cpu_buffer_path`]).
///
/// Index `c`'s buffer is one `u64` at `slots_address + c * CPU_LAB_SLOT_BYTES`: its low
/// [`CPU_BUFFER_TOP_BITS`] bits the buffer's top in words from `base_address`, the bits above
/// the words left (0: an empty buffer). In a restartable section whose descriptor is stored at
/// `fs:[rseq_area_offset + RSEQ_CS_OFFSET]` and whose abort handler follows
/// [`RSEQ_SIGNATURE`](crate::RSEQ_SIGNATURE): read the `u32` index at `fs:[rseq_index_offset]`;
/// an index at or beyond `slots` misses; load the word; subtract `(n << CPU_BUFFER_TOP_BITS) -
/// n` for `n` words, and a borrow (fewer than `n` words left) misses; commit by storing the
/// difference. The object is at `base_address + 8 * (old word's top)`. A miss takes the
/// levels' out-of-line carve ([`LevelsThread::carve_tlab`] of exactly the object's size), which
/// refills the buffer. A bump leaves any tail: the buffers keep a reserve past their ends where
/// the smallest filler is longer than a word, and [`MiddleLevels::retire_all`] covers each
/// tail with a filler as it does for TLAB carves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuBufferPath {
    /// Offset of the thread's rseq area from the thread pointer (glibc's `__rseq_offset`).
    pub rseq_area_offset: isize,
    /// Offset from the thread pointer of the `u32` the buffers are indexed by (the CPU, or the
    /// concurrency id).
    pub rseq_index_offset: isize,
    /// Address of index 0's buffer word.
    pub slots_address: usize,
    /// Indices below this have a buffer.
    pub slots: u32,
    /// The address the buffers' tops count from (the levels' base).
    pub base_address: usize,
}

/// The runtime's side of [`MiddleLevels`]: where buffers come from, and how a gap is covered.
/// Called from any thread that carves, concurrently.
pub trait Upstream: Send + Sync {
    /// Carves `desired_bytes`, or what is left if that is at least `min_bytes` (both multiples
    /// of 8), from the runtime's space (its eden); `None` when it has no room. The range must
    /// start at a multiple of 8 at or above the levels' base address, and its length must lie
    /// between the two.
    fn carve(&self, min_bytes: usize, desired_bytes: usize) -> Option<Range<usize>>;

    /// Makes the unused gap `[start, start + bytes)` parseable: a filler object (a buffer's tail
    /// at a refill or at [`MiddleLevels::retire_all`]). `bytes` is a multiple of 8, at least
    /// the smallest filler the levels were given.
    fn write_filler(&self, start: usize, bytes: usize);

    /// The bytes the runtime's space has left to carve before its next collection (eden's
    /// end less its top; an estimate is fine), or `None` (the default) where it does not say.
    /// Where it says, a buffer refilled near the end takes only its share of what is left
    /// (a quarter of it over the level's buffers) instead of a whole buffer, so that the
    /// buffers hold little when the space runs out; and once it has less left than a
    /// request, a refill of a restartable `cpu` level takes another CPU's buffer tail (a
    /// foreign carve) before the request fails, so that little of it is retired by the
    /// collection. Those refills are counted as `short_refills`.
    fn free_bytes(&self) -> Option<usize> {
        None
    }
}

/// The upstream as the levels' protocol sees it, checking what it hands out.
struct Checked {
    upstream: Box<dyn Upstream>,
    base: usize,
    /// One past the highest address word offsets can reach from `base`.
    limit: usize,
}

impl Above for Checked {
    fn carve(&self, min: usize, desired: usize) -> Option<Chunk> {
        let range = self.upstream.carve(min, desired)?;
        let len = range.end.wrapping_sub(range.start);
        assert!(
            range.start >= self.base
                && range.end <= self.limit
                && range.start <= range.end
                && range.start.is_multiple_of(WORD_BYTES)
                && (min..=desired).contains(&len),
            "Upstream::carve({min}, {desired}) returned {range:#x?}: the range must lie at or \
             above the base address {:#x}, start at a multiple of 8 and hold between {min} and \
             {desired} bytes",
            self.base
        );
        Some(Chunk {
            start: range.start,
            len,
        })
    }

    fn free_bytes(&self) -> Option<usize> {
        self.upstream.free_bytes()
    }

    unsafe fn write_filler(&self, start: usize, bytes: usize) {
        self.upstream.write_filler(start, bytes);
    }
}

/// The smallest filler is a positive multiple of 8, and the largest TLAB holds at least
/// `FILLERS_PER_TLAB` of them: a filler larger than that would be most of every tail the
/// levels leave, and one of 0 (or of a size that does not fit a word) cannot cover a gap.
/// `lowest` is the level whose buffer the largest TLAB is, where the caller gave none.
fn check_filler(
    min_filler_bytes: usize,
    max_tlab_bytes: usize,
    lowest: Option<&MiddleLevelSpec>,
) -> Result<(), ConfigError> {
    if min_filler_bytes == 0 || !min_filler_bytes.is_multiple_of(WORD_BYTES) {
        return Err(ConfigError::new(
            "min_filler",
            format!("{min_filler_bytes} bytes is not a positive multiple of 8"),
        ));
    }
    if min_filler_bytes <= max_tlab_bytes / FILLERS_PER_TLAB {
        return Ok(());
    }
    let held = format!("at least {FILLERS_PER_TLAB} smallest fillers ({min_filler_bytes} bytes)");
    Err(match lowest {
        Some(lowest) => ConfigError::new(
            "middle",
            format!(
                "{}:{}: the lowest buffer is the largest TLAB (max_tlab 0), and must hold {held}",
                lowest.level,
                ByteSize::new(lowest.buffer_bytes)
            ),
        ),
        None => ConfigError::new(
            "min_filler",
            format!("the largest TLAB ({max_tlab_bytes} bytes) must hold {held}"),
        ),
    })
}

/// How many smallest fillers the largest TLAB holds at least.
const FILLERS_PER_TLAB: usize = 4;

/// Middle levels serving a runtime's own TLABs. Give each thread a [`LevelsThread`] with
/// [`thread`](MiddleLevels::thread); empty every buffer at collections with
/// [`retire_all`](MiddleLevels::retire_all).
///
/// ```
/// use std::ops::Range;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use hab::{MiddleLevels, Upstream};
///
/// /// A bump-pointer eden over memory the runtime owns.
/// struct Eden { top: AtomicUsize, end: usize }
/// impl Upstream for Eden {
///     fn carve(&self, min: usize, desired: usize) -> Option<Range<usize>> {
///         let mut top = self.top.load(Ordering::Relaxed);
///         loop {
///             let len = desired.min(self.end.checked_sub(top)?);
///             if len < min { return None; }
///             match self.top.compare_exchange(top, top + len, Ordering::AcqRel, Ordering::Relaxed) {
///                 Ok(_) => return Some(top..top + len),
///                 Err(now) => top = now,
///             }
///         }
///     }
///     fn write_filler(&self, _start: usize, _bytes: usize) { /* the runtime's filler object */ }
///     // Optional: near eden's end, buffers then take a share of what is left.
///     fn free_bytes(&self) -> Option<usize> {
///         Some(self.end - self.top.load(Ordering::Relaxed))
///     }
/// }
///
/// let memory = vec![0u64; 1 << 20]; // 8 MiB
/// let base = memory.as_ptr() as usize;
/// let eden = Eden { top: AtomicUsize::new(base), end: base + (8 << 20) };
/// let levels = MiddleLevels::new("core:1MiB", 64 << 10, 8, base, eden)?;
/// let mut thread = levels.thread();
/// let tlab = thread.carve_tlab(4096, 16 << 10).expect("room");
/// assert_eq!(tlab.len(), 16 << 10);
/// // At a collection, with no thread carving:
/// // SAFETY: this thread is the only one using the levels, and it is not carving.
/// unsafe { levels.retire_all() };
/// assert_eq!(levels.stats()[0].1.allocs, 1);
/// # Ok::<(), hab::ConfigError>(())
/// ```
pub struct MiddleLevels {
    levels: Box<[MiddleLevel]>,
    above: Checked,
    topology: Topology,
    cpu_id: CpuIdReader,
    /// The largest TLAB the levels were built for.
    max_tlab_bytes: usize,
    /// Every thread handle's counters, for the totals.
    threads: Mutex<Vec<Arc<ThreadCounters>>>,
    /// What [`resize_buffers`](MiddleLevels::resize_buffers) remembers between calls.
    resizing: Mutex<Resizing>,
    /// What `retire_all` counted.
    retired: LevelCountersByLevel,
}

impl MiddleLevels {
    /// Levels from a list like `core:1MiB` or `cpu:256KiB,package:32MiB` (the grammar of
    /// [`HeapConfigBuilder::middle`](crate::HeapConfigBuilder::middle)), on this machine's
    /// topology, handing out TLABs of at most `max_tlab_bytes` (0: the lowest level's buffer),
    /// never leaving a tail shorter
    /// than `min_filler_bytes` (the runtime's smallest filler), over an upstream whose chunks
    /// lie at or above `base_address` (within 32 TiB of it).
    ///
    /// Errors: the list does not parse, the levels are not lowest first, a buffer is not a
    /// multiple of the chunks the level below takes (the largest TLAB for the lowest level),
    /// or the smallest filler is not a positive multiple of 8 that the largest TLAB holds four
    /// times.
    pub fn new(
        levels: &str,
        max_tlab_bytes: usize,
        min_filler_bytes: usize,
        base_address: usize,
        upstream: impl Upstream + 'static,
    ) -> Result<Arc<MiddleLevels>, ConfigError> {
        Self::build(
            levels,
            None,
            max_tlab_bytes,
            min_filler_bytes,
            base_address,
            upstream,
        )
    }

    /// [`new`](MiddleLevels::new) with the current CPU read from `cpu_id` (`new` reads
    /// restartable sequences' `cpu_id` where it can, else `sched_getcpu`). With
    /// [`CpuIdSource::Rseq`] the `cpu` level's buffers are restartable (where rseq works); with
    /// any other source no restartable sequence runs and they are compare-and-swap buffers,
    /// which is how the two are compared.
    ///
    /// Errors: those of `new`, and a source this machine lacks (rseq or RDPID).
    pub fn with_cpu_id(
        levels: &str,
        cpu_id: CpuIdSource,
        max_tlab_bytes: usize,
        min_filler_bytes: usize,
        base_address: usize,
        upstream: impl Upstream + 'static,
    ) -> Result<Arc<MiddleLevels>, ConfigError> {
        Self::build(
            levels,
            Some(cpu_id),
            max_tlab_bytes,
            min_filler_bytes,
            base_address,
            upstream,
        )
    }

    fn build(
        levels: &str,
        cpu_id: Option<CpuIdSource>,
        max_tlab_bytes: usize,
        min_filler_bytes: usize,
        base_address: usize,
        upstream: impl Upstream + 'static,
    ) -> Result<Arc<MiddleLevels>, ConfigError> {
        let specs = MiddleLevelSpec::parse_list(levels)?;
        // 0 is the documented default (the lowest buffer, which `check_levels` checks first);
        // only a size the caller gave is blamed on `max_tlab`.
        if !max_tlab_bytes.is_multiple_of(WORD_BYTES) {
            return Err(ConfigError::new(
                "max_tlab",
                format!("{max_tlab_bytes} bytes is not a multiple of 8"),
            ));
        }
        let derived_from = specs.first().filter(|_| max_tlab_bytes == 0);
        let max_tlab_bytes = derived_from.map_or(max_tlab_bytes, |lowest| lowest.buffer_bytes);
        check_levels(&specs, max_tlab_bytes, WORD_BYTES)?;
        if max_tlab_bytes == 0 {
            return Err(ConfigError::new("max_tlab", "0 bytes with no level"));
        }
        check_filler(min_filler_bytes, max_tlab_bytes, derived_from)?;
        let topology = Topology::discover();
        let explicit = cpu_id;
        let cpu_id = match cpu_id {
            Some(source) => CpuIdReader::new(source, topology.cpu_slots()),
            None => per_cpu_support().cpu_id_reader(topology.cpu_slots()),
        }
        .map_err(|problem| ConfigError::new("cpu_id", problem))?;
        let min_tail_bytes = min_filler_bytes;
        let restartable = cpu_id.source() == CpuIdSource::Rseq || explicit.is_none();
        let levels = specs
            .iter()
            .map(|spec| middle_level(spec, min_tail_bytes, &topology, &cpu_id, restartable))
            .collect();
        let reach = usize::try_from(MAX_OFFSET_WORDS).unwrap_or(usize::MAX) * WORD_BYTES;
        Ok(Arc::new(MiddleLevels {
            levels,
            above: Checked {
                upstream: Box::new(upstream),
                base: base_address,
                limit: base_address.saturating_add(reach),
            },
            topology,
            cpu_id,
            max_tlab_bytes,
            threads: Mutex::default(),
            resizing: Mutex::default(),
            retired: LevelCountersByLevel::default(),
        }))
    }

    /// A handle for one thread to carve TLABs with (it counts that thread's events).
    pub fn thread(self: &Arc<Self>) -> LevelsThread {
        let counters = Arc::new(ThreadCounters::default());
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        let simulated = SimulatedCpu::new(&self.cpu_id, threads.len() as u64);
        threads.push(counters.clone());
        LevelsThread {
            levels: self.clone(),
            counters,
            simulated,
        }
    }

    /// Empties every buffer of every level: a filler over each free tail (through
    /// [`Upstream::write_filler`], counted as the level's waste). After it, nothing the levels
    /// handed out is shared with them, and the runtime may reset its space.
    ///
    /// # Safety
    /// No thread carves meanwhile (the runtime's threads are stopped, as at a collection), and
    /// no other `retire_all` runs.
    pub unsafe fn retire_all(&self) {
        let above = &self.above;
        for level in self.levels.iter() {
            let waste = &self.retired[level.level().index()].waste_bytes;
            level.retire_all(above.base, |start, end| {
                above.upstream.write_filler(start, end - start);
                waste.add((end - start) as u64);
            });
        }
    }

    /// Resizes every level's buffers for the next cycle to follow the allocation, as a heap
    /// whose levels `auto` picked does at each collection (`levels/buffer_sizing.rs`): each
    /// domain that allocates refills its buffer about 16 times per cycle, all of a level's
    /// buffers hold at most a quarter of `space_bytes` (the runtime's next eden), the lowest
    /// level's buffer at least the average TLAB of the last cycle that carved any (a level
    /// above, four buffers of the level below), and a buffer halves at most per call. For
    /// a runtime that wants sizes to follow (HotSpot does with `-XX:HABLevels=auto`); call it
    /// at a collection, after [`retire_all`](MiddleLevels::retire_all) (a TLAB carved
    /// meanwhile takes either size). Returns the sizes, lowest first.
    pub fn resize_buffers(&self, space_bytes: usize) -> Vec<usize> {
        self.resize_buffers_within(space_bytes, None)
    }

    /// [`resize_buffers`](MiddleLevels::resize_buffers) with no buffer above
    /// `max_buffer_bytes` (the largest piece the runtime's space hands out, such as a G1
    /// region; `None`: no such bound), unless that is below a level's floor (the floor wins).
    pub fn resize_buffers_within(
        &self,
        space_bytes: usize,
        max_buffer_bytes: Option<usize>,
    ) -> Vec<usize> {
        let threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        let sum = |count: &dyn Fn(&ThreadCounters) -> u64| -> u64 {
            threads.iter().map(|counters| count(counters)).sum()
        };
        // Refills cut short at the end of a cycle measure the end, not the allocation.
        let refills = |level: Level| {
            sum(&|counters| {
                let level = &counters.levels[level.index()];
                level
                    .refills
                    .get()
                    .saturating_sub(level.short_refills.get())
            })
        };
        let (tlabs, tlab_bytes) = (
            sum(&|counters| counters.tlabs.get()),
            sum(&|counters| counters.tlab_bytes.get()),
        );
        let mut resizing = self.resizing.lock().unwrap_or_else(|e| e.into_inner());
        // The lowest level's floor: the average TLAB of the last cycle that carved any.
        if tlabs > resizing.tlabs {
            let average = tlab_bytes.saturating_sub(resizing.tlab_bytes) / (tlabs - resizing.tlabs);
            resizing.floor_bytes = usize::try_from(average).unwrap_or(usize::MAX);
        }
        let sizes = buffer_sizing::resize(
            &self.levels,
            |level| refills(level).saturating_sub(resizing.refills[level.index()]),
            threads.len(),
            space_bytes,
            max_buffer_bytes,
            resizing.floor_bytes.max(WORD_BYTES),
        );
        for level in self.levels.iter() {
            resizing.refills[level.level().index()] = refills(level.level());
        }
        (resizing.tlabs, resizing.tlab_bytes) = (tlabs, tlab_bytes);
        sizes
    }

    /// Each configured level with its figures: every thread's, the tails retired by
    /// [`retire_all`](MiddleLevels::retire_all), and its buffers' size.
    pub fn stats(&self) -> Vec<(Level, LevelStats)> {
        let threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        self.levels
            .iter()
            .map(|level| {
                let index = level.level().index();
                let mut stats = self.retired[index].snapshot();
                for counters in threads.iter() {
                    stats += counters.levels[index].snapshot();
                }
                stats.buffer_bytes = level.buffer_bytes() as u64;
                (level.level(), stats)
            })
            .collect()
    }

    /// TLABs carved straight from the upstream, every level's buffers being busy (another
    /// thread refilling them) or too small for them; every other TLAB is counted in the
    /// lowest level's `allocs`, or a higher level's when the levels below were busy. Over
    /// every thread.
    pub fn tlabs_past_levels(&self) -> u64 {
        let threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        threads
            .iter()
            .map(|counters| counters.tlabs_past_levels.get())
            .sum()
    }

    /// The largest TLAB the levels were built for: the `max_tlab_bytes` given, or the lowest
    /// level's buffer where that was 0. A runtime carves larger TLABs straight from its space
    /// (Kirsch et al. do the same).
    pub fn max_tlab_bytes(&self) -> usize {
        self.max_tlab_bytes
    }

    /// The largest TLAB [`LevelsThread::carve_tlab`] hands out now, beside the minimum it is
    /// asked for: near the end of the space above, the lowest level's buffers' share of what
    /// that space has left (a quarter of it over the buffers); `usize::MAX` where the space does
    /// not say what it has left. A runtime that also carves TLABs from the buffers itself
    /// (HotSpot's compiled refills) keeps them within it, so that its TLABs shrink with the
    /// buffers too. Cost: the upstream's `free_bytes` and a division.
    pub fn tlab_limit_bytes(&self) -> usize {
        let lowest_buffers = self.levels.first().map_or(1, |level| level.domains());
        buffer_end_of_cycle::tlab_limit_bytes(lowest_buffers, self.above.free_bytes())
    }

    /// The most memory the levels' buffers hold at once: each level's buffer size times its
    /// domains, summed. A runtime whose space is not several times this leaves much of it in
    /// buffers between collections.
    pub fn buffered_bytes(&self) -> usize {
        self.levels
            .iter()
            .map(|level| level.buffer_bytes().saturating_mul(level.domains()))
            .fold(0, usize::saturating_add)
    }

    /// Whether the lowest level's buffers are restartable per-CPU buffers (a `cpu` level where
    /// restartable sequences work).
    pub fn is_restartable(&self) -> bool {
        self.levels.first().is_some_and(MiddleLevel::is_restartable)
    }

    /// Where compiled code bumps the lowest level's per-CPU buffers itself: `None` unless that
    /// level is restartable and every thread's rseq area sits at one offset from its thread
    /// pointer (glibc's registration, or Hab's own at a fixed offset: then each thread calls
    /// [`rseq_register_current_thread`](crate::rseq_register_current_thread) before its first
    /// bump). See [`CpuBufferPath`].
    pub fn cpu_buffer_path(&self) -> Option<CpuBufferPath> {
        let buffers = self.levels.first()?.cpu_buffers()?;
        let rseq_area_offset = rseq::area_offset()?;
        let slots = &buffers.slots;
        Some(CpuBufferPath {
            rseq_area_offset,
            rseq_index_offset: rseq_area_offset + slots.index().field_offset() as isize,
            slots_address: slots.address(),
            slots: u32::try_from(slots.bound()).unwrap_or(u32::MAX),
            base_address: self.above.base,
        })
    }
}

impl std::fmt::Debug for MiddleLevels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiddleLevels")
            .field(
                "levels",
                &self.levels.iter().map(|l| l.level()).collect::<Vec<_>>(),
            )
            .field("base", &self.above.base)
            .finish_non_exhaustive()
    }
}

/// What one thread counted: every level's figures, the TLABs that passed every level, and
/// every TLAB it carved and their bytes.
#[derive(Default)]
struct ThreadCounters {
    levels: LevelCountersByLevel,
    tlabs_past_levels: Counter,
    tlabs: Counter,
    tlab_bytes: Counter,
}

/// What [`MiddleLevels::resize_buffers`] keeps between calls: each level's refills (indexed
/// by [`Level::index`]) and the TLABs carved and their bytes at the last call, so that a
/// cycle's are the difference, and the lowest level's floor (the average TLAB of the last
/// cycle that carved any).
#[derive(Default)]
struct Resizing {
    refills: [u64; Level::ALL.len()],
    tlabs: u64,
    tlab_bytes: u64,
    floor_bytes: usize,
}

/// One thread's handle on [`MiddleLevels`]: `Send`, not `Sync` (its counters have one writer).
pub struct LevelsThread {
    levels: Arc<MiddleLevels>,
    counters: Arc<ThreadCounters>,
    simulated: SimulatedCpu,
}

impl LevelsThread {
    /// A TLAB of `desired_bytes`, or at least `min_bytes`, from the buffer of the domain the
    /// thread runs in (then the other domains, the level above, the upstream). It may be
    /// larger than desired by less than the smallest filler, so that no buffer keeps a tail no
    /// filler covers. `None` when the levels and the upstream are exhausted, or for sizes that
    /// are 0, not multiples of 8, or with `min_bytes > desired_bytes`.
    ///
    /// # Panics
    /// When the upstream breaks its contract (a range below the base address, misaligned, or
    /// of a length outside what was asked): the levels would otherwise hand out memory that is
    /// not the runtime's to give. The message names the range.
    pub fn carve_tlab(&mut self, min_bytes: usize, desired_bytes: usize) -> Option<Range<usize>> {
        if min_bytes == 0
            || min_bytes > desired_bytes
            || !(min_bytes | desired_bytes).is_multiple_of(WORD_BYTES)
        {
            return None;
        }
        let levels = &*self.levels;
        // Near the end of the space, a TLAB takes its share of what is left.
        let desired_bytes = desired_bytes.min(levels.tlab_limit_bytes()).max(min_bytes);
        let chunk = refill::carve_chunk_from(
            (&levels.above, levels.above.base),
            &levels.topology,
            &levels.cpu_id,
            &levels.levels,
            (
                &self.counters.levels,
                Some(&self.counters.tlabs_past_levels),
            ),
            &mut self.simulated,
            min_bytes,
            desired_bytes,
        )?;
        self.counters.tlabs.add(1);
        self.counters.tlab_bytes.add(chunk.len as u64);
        Some(chunk.start..chunk.start + chunk.len)
    }
}

impl std::fmt::Debug for LevelsThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelsThread").finish_non_exhaustive()
    }
}
