//! The `cpu-lab` mode: objects carved straight from the LAB of the CPU the thread runs on, with no
//! TLAB (Garthwaite et al.'s per-processor LABs, over Linux restartable sequences).
//!
//! Fast path (inline, in [`Mutator::alloc_sized`](crate::Mutator::alloc_sized) through the
//! mutator's LAB cursor): one restartable bump of the `{top, end}` pair of the CPU the thread
//! last ran on, which the section checks it still runs on ([`rseq::lab_bump`]); without
//! restartable sections the TLAB path fails and the slow path carves here. Slow path (here): a bump-or-claim section either
//! carves the object or empties the CPU's LAB and hands its tail to the thread; the thread then
//! takes a new LAB (a sidelined one first, else from the global heap) *outside* any section,
//! carves its object from the LAB's start, and installs the rest as the CPU's LAB in a second
//! section. That install succeeds on whatever CPU the thread now runs on if that CPU's LAB
//! owns no free memory (the interference was benign: the transaction is reopened); otherwise
//! another thread refilled it first, and the rest is sidelined for later refills (§5.1).
//!
//! Zeroing ahead ([`ZeroMemory::Ahead`], in reused memory): a LAB is ready for objects up to
//! its `end` and owns memory up to its `limit` (plus the reserve). A new LAB is zeroed only
//! through its first object and [`CPU_LAB_ZERO_STEP_BYTES`] more; an object that passes `end`
//! but fits below `limit` claims the LAB as any miss does, and the thread zeroes the next step
//! and installs the LAB back (`continue_lab`). A claim takes everything up to `limit`; a
//! collection retires it all. A rest sidelined is zeroed whole first.
//!
//! Threads that cannot use rseq (no registration, a section that keeps aborting, a simulated
//! machine) allocate each object from per-CPU compare-and-swap buffers instead; counted.
//!
//! LAB sizes follow the TLAB policy: a fixed policy's size, else (adaptive, growing) the
//! allocation range shared by the CPUs over the target number of refills per collection (50
//! for a 1 % waste target), within the smallest and largest TLAB, recomputed at each
//! collection. The largest TLAB is "the maximum LAB size" of the flip policy. Cost: the inline
//! path is ten instructions; a refill is two sections, a global CAS and, when interference
//! happens, a sideline scan; a zeroing step two sections and the zeroing.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::config::{HeapConfig, ZeroMemory};
use crate::labs::sizing;
use crate::labs::stats::CpuLabCounters;
use crate::levels::middle::MiddleLevel;
use crate::levels::refill::{self, LevelCountersByLevel, RefillContext};
use crate::levels::sideline::Sideline;
use crate::levels::stats::LevelCounters;
use crate::memory::space::Space;
use crate::platform::cpu_id::SimulatedCpu;
use crate::platform::rseq::cpu_slots::{CpuLabSlots, EMPTY_LAB};
use crate::platform::rseq::{self, LabBump, LabInstall};
use crate::platform::topology::{Level, Topology};

/// How far a per-CPU LAB in reused memory is zeroed ahead of its objects at each step, when the
/// heap zeroes ahead ([`ZeroMemory::Ahead`]): at most this much is zeroed at once, instead of
/// a whole LAB, and it is still in the first-level cache (48 KiB on this project's machines)
/// when the objects are written. A step costs a miss of the inline path and two restartable
/// sections (a claim and an install), so it zeroes more at once than a TLAB's (1 KiB): with
/// 8 KiB steps, 16-byte objects took 1.08× the time of LABs zeroed whole; with 32 KiB, 1.03×
/// (`hab run --workload alloc-object --mode cpu-lab`, pinned, best of 5).
pub(crate) const CPU_LAB_ZERO_STEP_BYTES: usize = 32 << 10;

/// A heap's per-CPU LABs.
pub(crate) struct CpuLabs {
    /// Restartable LABs, where rseq works on the real machine.
    slots: Option<CpuLabSlots>,
    /// Rests of LABs that could not be installed.
    sideline: Sideline,
    /// Compare-and-swap buffers, one per CPU, for threads that cannot use `slots`.
    fallback: [MiddleLevel; 1],
    /// The size of the next LABs taken (see the module documentation).
    lab_bytes: AtomicUsize,
    /// The largest LAB: objects up to this size (less the reserve) go in LABs.
    max_lab_bytes: usize,
    /// Bytes every LAB keeps beyond its soft end so its tail can hold a filler.
    reserve_bytes: usize,
    /// Whether LABs in reused memory are zeroed a step at a time (else whole when taken).
    zero_ahead: bool,
}

impl CpuLabs {
    /// LABs sized for `config`; restartable ones when `restartable` (the topology is the real
    /// machine's, which numbers every possible CPU).
    pub(crate) fn new(
        config: &HeapConfig,
        reserve_bytes: usize,
        topology: &Topology,
        restartable: bool,
    ) -> Self {
        let max_lab_bytes = config.max_tlab_bytes();
        let cpus = topology.online_cpus().len();
        CpuLabs {
            slots: restartable.then(|| CpuLabSlots::new(topology.cpu_slots(), rseq::slot_index())),
            sideline: Sideline::new(),
            fallback: [MiddleLevel::new(
                Level::Cpu,
                max_lab_bytes,
                topology.domains(Level::Cpu),
                reserve_bytes,
            )],
            lab_bytes: AtomicUsize::new(sizing::cpu_lab_bytes(
                config,
                config.capacity_bytes(),
                cpus,
            )),
            max_lab_bytes,
            reserve_bytes,
            zero_ahead: config.zero() == ZeroMemory::Ahead,
        }
    }

    /// Sizes the LABs taken from now on for an allocation range of `range_bytes` (called at
    /// the end of each collection).
    pub(crate) fn resize(&self, config: &HeapConfig, range_bytes: usize, cpus: usize) {
        self.lab_bytes.store(
            sizing::cpu_lab_bytes(config, range_bytes, cpus),
            Ordering::Relaxed,
        );
    }

    /// The size of the LABs taken now.
    pub(crate) fn lab_bytes(&self) -> usize {
        self.lab_bytes.load(Ordering::Relaxed)
    }

    /// Whether the LABs use restartable sequences.
    pub(crate) fn is_restartable(&self) -> bool {
        self.slots.is_some()
    }

    /// The restartable LABs, if rseq works here.
    pub(crate) fn lab_slots(&self) -> Option<&CpuLabSlots> {
        self.slots.as_ref()
    }

    /// Aborts of the inline path, all CPUs.
    pub(crate) fn inline_aborts(&self) -> u64 {
        self.slots.as_ref().map_or(0, CpuLabSlots::inline_aborts)
    }

    /// The largest object a LAB holds.
    pub(crate) fn max_object_bytes(&self) -> usize {
        self.max_lab_bytes - self.reserve_bytes
    }

    /// Empties every LAB and discards the sidelined ones at a collection: fillers over their
    /// free memory, counted in `counters`; the compare-and-swap buffers' tails count in
    /// `fallback_level` (the `cpu` level's counters), as when a refill retires one.
    pub(crate) fn retire_all(
        &self,
        space: &Space,
        counters: &CpuLabCounters,
        fallback_level: &LevelCounters,
    ) {
        let reserve = self.reserve_bytes;
        if let Some(slots) = &self.slots {
            for cpu in 0..slots.cpus() {
                let ((top, end), limit) = (slots.load(cpu), slots.limit(cpu));
                check_lab(space, (top, end, limit), reserve);
                if top <= end {
                    counters.labs_in_use_at_collections.add(1);
                    retire_tail(space, counters, top, limit + reserve);
                }
                slots.store(cpu, EMPTY_LAB);
            }
        }
        let base = space.base();
        self.sideline.drain(base, |chunk| {
            // SAFETY: every mutator is stopped and the sideline no longer holds the chunk: the
            // collection owns it.
            unsafe { space.write_filler(chunk.start, chunk.len) };
            counters.discarded_sidelined_labs.add(1);
            counters.discarded_sidelined_bytes.add(chunk.len as u64);
        });
        self.fallback[0].retire_all(base, |start, end| {
            // SAFETY: every mutator is stopped, so no thread carves from the buffer whose tail
            // this is; the collection owns it.
            unsafe { space.write_filler(start, end - start) };
            fallback_level.waste_bytes.add((end - start) as u64);
        });
    }
}

/// The invariant of a per-CPU LAB `{top, end, limit}` (a slot's, or one about to be
/// installed), checked in builds with debug assertions: it owns nothing (`top > end`, or
/// `top == limit + reserve`: a claim leaves `{limit + reserve, end}`), or it owns
/// `[top, limit + reserve)` with `end <= limit`, word-aligned and inside the heap's
/// reservation.
fn check_lab(space: &Space, (top, end, limit): (usize, usize, usize), reserve: usize) {
    if !cfg!(debug_assertions) || top > end || top == limit + reserve {
        return;
    }
    let (first, last) = space.global().reserved();
    debug_assert!(
        first <= top && end <= limit && limit + reserve <= last,
        "a per-CPU LAB [{top:#x}, {end:#x} ({limit:#x}) + {reserve}) outside the heap \
         [{first:#x}, {last:#x})"
    );
    debug_assert!(
        (top | end | limit | reserve).is_multiple_of(size_of::<usize>()),
        "a per-CPU LAB [{top:#x}, {end:#x} ({limit:#x}) + {reserve}) is not word-aligned"
    );
}

/// Covers a LAB's free tail `[start, end)` with a filler and counts it.
fn retire_tail(space: &Space, counters: &CpuLabCounters, start: usize, end: usize) {
    if end > start {
        // SAFETY: the caller emptied the LAB (a committed claim, or a collection with every
        // mutator stopped), so it owns the tail.
        unsafe { space.write_filler(start, end - start) };
        counters.partial_labs.add(1);
        counters.partial_waste_bytes.add((end - start) as u64);
    }
}

/// The thread asking the per-CPU LABs for an object: what its refills read, and where its
/// events are counted.
pub(crate) struct Requester<'a> {
    pub(crate) context: RefillContext<'a>,
    pub(crate) stats: &'a CpuLabCounters,
    /// For the compare-and-swap fallback, which carves through the `cpu` middle level.
    pub(crate) level_counters: &'a LevelCountersByLevel,
    pub(crate) simulated: &'a mut SimulatedCpu,
}

/// The slow path: allocates `bytes` (at most [`CpuLabs::max_object_bytes`]) in a per-CPU LAB.
/// `None` when the heap has no room for a new LAB.
pub(crate) fn alloc(cpu_labs: &CpuLabs, thread: Requester<'_>, bytes: usize) -> Option<usize> {
    let (space, stats) = (thread.context.space, thread.stats);
    if let (Some(slots), Some(area)) = (&cpu_labs.slots, rseq::current_area()) {
        // SAFETY: `area` is this thread's registered area; `bytes` is below the heap's
        // capacity, far below 2^40.
        let (outcome, aborts) = unsafe { slots.bump_or_claim(area, bytes, cpu_labs.reserve_bytes) };
        stats.rseq_aborts.add(aborts);
        match outcome {
            LabBump::Object { address, .. } => return Some(address),
            LabBump::Claimed {
                cpu,
                top,
                end,
                limit,
            } => {
                let reserve = cpu_labs.reserve_bytes;
                check_lab(space, (top, end, limit), reserve);
                let claim = Claim {
                    space,
                    cpu_labs,
                    slots,
                    area,
                    cpu,
                    stats,
                };
                if top <= end {
                    // The object fits the rest not zeroed yet: zero the next step.
                    if top + bytes <= limit {
                        return Some(continue_lab(&claim, (top, end, limit), bytes));
                    }
                    retire_tail(space, stats, top, limit + reserve);
                }
                return refill(&claim, bytes);
            }
            LabBump::OutOfRange => stats.out_of_range_cpus.add(1),
            LabBump::GaveUp => {}
        }
    }
    alloc_in_fallback(cpu_labs, thread, bytes)
}

/// A thread that claimed the LAB of a CPU's slot: what its refill and its put-back read.
struct Claim<'a> {
    space: &'a Space,
    cpu_labs: &'a CpuLabs,
    slots: &'a CpuLabSlots,
    /// The thread's registered rseq area.
    area: *mut u8,
    /// The slot the thread claimed (it may run elsewhere by the put-back).
    cpu: usize,
    stats: &'a CpuLabCounters,
}

/// The LAB `{top, end, limit}` the thread claimed (it owns `[top, limit + reserve)`, ready
/// for objects up to `end`) continues: zeroes its next step (past the object, which did not
/// fit below its end but fits below its limit), carves the object at its top, and puts the
/// rest back.
#[cold]
fn continue_lab(
    claim: &Claim<'_>,
    (top, end, limit): (usize, usize, usize),
    bytes: usize,
) -> usize {
    let object_end = top + bytes;
    debug_assert!(object_end > end && object_end <= limit);
    let ready = (object_end + CPU_LAB_ZERO_STEP_BYTES).min(limit);
    claim.space.global().zero_reused(end, ready - end);
    claim.stats.zeroing_steps.add(1);
    put_back(claim, (object_end, ready, limit));
    top
}

/// Takes a LAB, carves the object from its start and installs the rest as the CPU's LAB, or
/// sidelines it when another thread installed one first. A LAB in reused memory is zeroed
/// whole, or, zeroing ahead, its first step.
#[cold]
fn refill(claim: &Claim<'_>, bytes: usize) -> Option<usize> {
    let Claim {
        space,
        cpu_labs,
        stats,
        ..
    } = *claim;
    let reserve = cpu_labs.reserve_bytes;
    let min = bytes + reserve;
    let global = space.global();
    // A sidelined LAB is ready whole (what was not zeroed yet was, before it went there).
    let (start, len, ready_bytes) = match cpu_labs.sideline.take(space.base(), min) {
        Some(chunk) => {
            stats.sideline_reused.add(1);
            (chunk.start, chunk.len, chunk.len - reserve)
        }
        None => {
            let (start, len) = global.carve_between(min, cpu_labs.lab_bytes().max(min))?;
            let ready_bytes = if cpu_labs.zero_ahead && global.needs_zeroing(start) {
                (bytes + CPU_LAB_ZERO_STEP_BYTES).min(len - reserve)
            } else {
                len - reserve
            };
            global.zero_reused(start, ready_bytes);
            (start, len, ready_bytes)
        }
    };
    stats.labs.add(1);
    stats.lab_bytes.add(len as u64);
    put_back(
        claim,
        (start + bytes, start + ready_bytes, start + len - reserve),
    );
    Some(start)
}

/// Installs the rest `{top, end, limit}` of a LAB the thread holds (ready up to `end`) as the
/// CPU's LAB, or sidelines it (zeroed whole first) when another thread installed one first;
/// a rest too short for any object is retired. `claim.cpu` is where the thread found the
/// LAB it replaces.
fn put_back(claim: &Claim<'_>, (top, end, limit): (usize, usize, usize)) {
    let Claim {
        space,
        cpu_labs,
        slots,
        area,
        cpu: claimed_cpu,
        stats,
    } = *claim;
    let reserve = cpu_labs.reserve_bytes;
    if top == limit {
        // Nothing left to bump through: the rest is waste.
        retire_tail(space, stats, top, limit + reserve);
        return;
    }
    check_lab(space, (top, end, limit), reserve);
    // SAFETY: `area` is this thread's registered area.
    let (installed, aborts) = unsafe { slots.install(area, reserve, top, end, limit) };
    stats.rseq_aborts.add(aborts);
    match installed {
        LabInstall::Done { cpu } => {
            stats.transactions.add(1);
            if aborts > 0 || cpu != claimed_cpu {
                stats.failed_transactions.add(1);
            }
        }
        LabInstall::OutOfRange | LabInstall::Occupied { .. } | LabInstall::GaveUp => {
            if installed == LabInstall::OutOfRange {
                stats.out_of_range_cpus.add(1);
            }
            stats.failed_transactions.add(1);
            stats.invalid_transactions.add(1);
            // The LAB is this thread's: keep it for later refills, or retire it.
            space.global().zero_reused(end, limit - end);
            if cpu_labs.sideline.put(space.base(), top, limit + reserve) {
                stats.sidelined_labs.add(1);
                stats.sidelined_bytes.add((limit + reserve - top) as u64);
            } else {
                retire_tail(space, stats, top, limit + reserve);
            }
        }
    }
}

/// Allocates the object from the per-CPU compare-and-swap buffers. A request carries the
/// filler reserve, so what the buffer adds beyond the object can always be filled.
#[cold]
fn alloc_in_fallback(cpu_labs: &CpuLabs, thread: Requester<'_>, bytes: usize) -> Option<usize> {
    let request = bytes + cpu_labs.reserve_bytes;
    let Requester {
        context,
        stats,
        level_counters,
        simulated,
    } = thread;
    let chunk = refill::carve_chunk(
        context,
        &cpu_labs.fallback,
        (level_counters, None),
        simulated,
        request,
        request,
    )?;
    stats.fallback_allocs.add(1);
    stats.fallback_bytes.add(bytes as u64);
    let rest = chunk.len - bytes;
    if rest > 0 {
        // SAFETY: the chunk is this thread's; its part beyond the object is unused.
        unsafe { context.space.write_filler(chunk.start + bytes, rest) };
        stats.fallback_waste_bytes.add(rest as u64);
    }
    context.space.global().zero_reused(chunk.start, bytes);
    Some(chunk.start)
}
