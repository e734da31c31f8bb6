//! Restartable sequences: per-CPU buffers updated with no atomic instruction.
//!
//! A thread registers a `struct rseq` area with the kernel (glibc ≥ 2.35 does it for every
//! thread; otherwise Hab registers its own). Before a critical section the thread stores the
//! address of the section's descriptor in the area's `rseq_cs`; if the kernel preempts,
//! migrates or signals the thread between the section's start and its commit, it resumes it at
//! the section's abort handler instead. A section that reads `cpu_id_start`, works on that
//! CPU's slot and commits with one store is therefore atomic with respect to every other
//! thread that touches the slot only from inside such sections on that CPU.
//!
//! A per-CPU buffer here is one word, so that both the bump and the install of a new buffer
//! commit with a single store: a [`PackedWord`] with the top (in words from the heap's base) as its
//! offset and the words left as its upper field. Bumping `n` words adds `n` and subtracts `n` shifted
//! into the high bits; that subtraction borrows exactly when fewer than `n` words are left, so
//! the check and the new value cost three instructions.
//!
//! x86_64 Linux only; elsewhere [`mechanism`] reports rseq as unavailable and callers use
//! their compare-and-swap fallback.
//!
//! Here: the kernel-facing constants, the packed word and the mechanism. Beside it:
//! `layout.rs` (the rseq area and the slots, as `#[repr(C)]` types whose offsets the sections
//! use), `registration.rs` (where a thread's area is: glibc's, or Hab's own), `x86_64.rs` (the
//! sections, all from one `section!` macro), `portable.rs` (other platforms), `cpu_slots.rs` (the
//! per-CPU arrays the sections work on) and `tests.rs`.

// Elsewhere the sections are stubs that always give up, so much of this file is unused there.
#![cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    allow(dead_code)
)]
use std::fmt;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::OnceLock;

pub(crate) use crate::memory::packed::PackedWord;
use crate::memory::packed::MAX_UPPER;

/// The largest per-CPU buffer, in bytes: a slot's [`PackedWord`] counts the words left in its
/// upper field.
pub(crate) const MAX_BUFFER_BYTES: usize = MAX_UPPER as usize * crate::memory::words::WORD_BYTES;

/// The mechanism, decided once per process. `HAB_RSEQ=off` in the environment forces the
/// fallback (for tests of it); `HAB_RSEQ=thread-local` makes Hab's own registration, where
/// glibc registered none, use thread-local areas even where an area at a fixed offset exists
/// (for tests of the path a C library without one takes, on a machine whose glibc has one).
/// With the `instruction-counting` feature, `HAB_RSEQ=unregistered` picks
/// [`RseqMechanism::Unregistered`] where glibc has no registration (under valgrind); a
/// measurement hook, not part of the library's behaviour otherwise.
pub fn mechanism() -> &'static RseqMechanism {
    MECHANISM.get_or_init(|| {
        let mechanism = decide_mechanism();
        if let RseqMechanism::Glibc { offset } | RseqMechanism::Unregistered { offset } = mechanism
        {
            FIXED_AREA_OFFSET.store(offset, Ordering::Relaxed);
        }
        mechanism
    })
}

static MECHANISM: OnceLock<RseqMechanism> = OnceLock::new();

/// An area a runtime provides for Hab's own registration, [`provide_area`]'s offset.
static PROVIDED_AREA: OnceLock<isize> = OnceLock::new();

/// Offers the rseq area at `offset` from every thread's pointer for Hab's own registration,
/// where glibc registers none: a runtime that runs restartable sections through a fixed offset
/// in its generated code, on a C library that keeps no area of its own (glibc before 2.35),
/// provides one this way, typically a 32-byte thread-local in its static TLS (the
/// `initial-exec` model), whose initial image reads `cpu_id` −1 and `cpu_id_start` and `mm_cid`
/// 0xffffffff (so that a section run by a thread not yet registered misses). It is preferred
/// to glibc's unused area where both exist. Takes effect only before the registration is
/// decided (the first call of any of Hab's rseq functions): an error says it came too late.
///
/// ```
/// // Once anything of Hab's has decided the registration, an area comes too late.
/// let decided = hab::rseq_mechanism();
/// // SAFETY: refused, so nothing ever uses the offset.
/// let late = unsafe { hab::rseq_provide_area(64) };
/// assert!(late.unwrap_err().contains(&decided.to_string()));
/// ```
///
/// # Safety
/// Every thread of the process, present and future, has at `offset` from its thread pointer
/// 32 bytes aligned to 32, alive as long as the thread, used by nothing else.
pub unsafe fn provide_area(offset: isize) -> Result<(), String> {
    if PROVIDED_AREA.set(offset).is_err() {
        return Err("an rseq area was provided before".to_string());
    }
    match MECHANISM.get() {
        None => Ok(()),
        Some(decided) => Err(format!(
            "the rseq registration was decided before the area was provided: {decided}"
        )),
    }
}

/// What the restartable per-CPU arrays (the `cpu` level's buffers, the `cpu-lab` mode's LABs)
/// are indexed by: the field of the rseq area a section reads first, and checks again at its
/// commit (the kernel aborts a section whenever either can change under it: a preemption, a
/// migration, a signal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotIndex {
    /// `cpu_id_start`: the CPU the thread runs on. A process uses as many slots as the CPUs
    /// its threads visit.
    Cpu,
    /// `mm_cid` (Linux 6.3 and later): the thread's *concurrency id*, unique among the
    /// process's threads running at the moment, and kept compact near 0 (below the number
    /// of threads and of CPUs the process may use). A process with few threads, or allowed
    /// few CPUs on a large machine, uses as many slots as it runs threads at once.
    ConcurrencyId,
}

impl SlotIndex {
    /// The index field's offset in `struct rseq`.
    pub(crate) const fn field_offset(self) -> usize {
        match self {
            SlotIndex::Cpu => CPU_ID_START_OFFSET,
            SlotIndex::ConcurrencyId => MM_CID_OFFSET,
        }
    }
}

impl fmt::Display for SlotIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SlotIndex::Cpu => "CPU number (cpu_id_start)",
            SlotIndex::ConcurrencyId => "concurrency id (mm_cid)",
        })
    }
}

/// `AT_RSEQ_FEATURE_SIZE`: the bytes of `struct rseq` the kernel fills (auxiliary vector).
#[cfg(target_os = "linux")]
const AT_RSEQ_FEATURE_SIZE: libc::c_ulong = 27;
/// The feature size of a kernel that fills `mm_cid` (the field ends at byte 28).
const MM_CID_FEATURE_SIZE: u64 = 28;

/// What this process's restartable arrays are indexed by, decided once: the concurrency id
/// where the kernel fills it (its rseq feature size covers `mm_cid`; every registration, glibc's
/// or Hab's, is 32 bytes, which holds it), else the CPU number. `HAB_RSEQ_INDEX=cpu` in the
/// environment picks the CPU number anyway, for comparisons.
pub fn slot_index() -> SlotIndex {
    static INDEX: OnceLock<SlotIndex> = OnceLock::new();
    *INDEX.get_or_init(|| {
        let requested_cpu = std::env::var_os("HAB_RSEQ_INDEX").is_some_and(|value| value == "cpu");
        if kernel_fills_mm_cid() && !requested_cpu {
            SlotIndex::ConcurrencyId
        } else {
            SlotIndex::Cpu
        }
    })
}

/// Whether the kernel fills `mm_cid` in the rseq areas: its rseq feature size (in the
/// auxiliary vector) covers the field.
pub(crate) fn kernel_fills_mm_cid() -> bool {
    #[cfg(target_os = "linux")]
    // SAFETY: getauxval reads the process's auxiliary vector; 0 when the entry is absent.
    let feature_bytes = unsafe { libc::getauxval(AT_RSEQ_FEATURE_SIZE) };
    #[cfg(not(target_os = "linux"))]
    let feature_bytes = 0;
    feature_bytes >= MM_CID_FEATURE_SIZE
}

/// [`fixed_area_offset`] once the mechanism is decided, else 0 (never glibc's offset: the
/// area is not the thread control block at the thread pointer), for
/// [`current_area`]'s one load.
static FIXED_AREA_OFFSET: AtomicIsize = AtomicIsize::new(0);

/// Decides the mechanism (see [`mechanism`]).
fn decide_mechanism() -> RseqMechanism {
    let requested = std::env::var_os("HAB_RSEQ");
    if requested.as_ref().is_some_and(|value| value == "off") {
        return RseqMechanism::Unavailable("turned off by HAB_RSEQ=off".into());
    }
    let thread_local = requested
        .as_ref()
        .is_some_and(|value| value == "thread-local");
    let discovered = imp::discover(PROVIDED_AREA.get().copied(), thread_local);
    #[cfg(feature = "instruction-counting")]
    if requested.is_some_and(|value| value == "unregistered")
        && matches!(discovered, RseqMechanism::Unavailable(_))
    {
        if let Some((offset, _)) = imp::glibc_symbols() {
            return RseqMechanism::Unregistered { offset };
        }
    }
    discovered
}

/// `__rseq_offset`, whether or not glibc registered areas (for tests of an unregistered area).
#[cfg(test)]
pub(crate) fn glibc_offset_even_unregistered() -> Option<isize> {
    imp::glibc_symbols().map(|(offset, _)| offset)
}

/// The offset of every thread's area from its thread pointer where every thread is registered
/// without asking (glibc's area): the inline `cpu-lab` fast path and the short refill address
/// the area through `fs` with it, with no registration check.
#[inline]
pub(crate) fn fixed_area_offset() -> Option<isize> {
    match mechanism() {
        RseqMechanism::Glibc { offset } | RseqMechanism::Unregistered { offset } => Some(*offset),
        _ => None,
    }
}

/// The offset of every thread's area from its thread pointer wherever it is the same for every
/// thread: glibc's area, or Hab's own at a fixed offset (then a thread must
/// [`register_current_thread`] before it runs a section through the offset).
#[inline]
pub(crate) fn area_offset() -> Option<isize> {
    match mechanism() {
        RseqMechanism::Glibc { offset }
        | RseqMechanism::Unregistered { offset }
        | RseqMechanism::Own {
            offset: Some(offset),
            ..
        } => Some(*offset),
        RseqMechanism::Own { offset: None, .. } | RseqMechanism::Unavailable(_) => None,
    }
}

/// Registers the calling thread's rseq area where Hab owns the registrations (glibc did not
/// register one): true when the thread has a registered area, under either registration; false
/// where rseq is unavailable or the kernel refused this thread (its sections then miss and
/// its per-CPU buffers take compare-and-swap). Cheap once registered: a load and a compare.
/// Code that runs restartable sections through the area's offset itself (a JIT's, `hab.h`'s)
/// calls it once in every thread before the first one.
///
/// ```
/// let registered = std::thread::spawn(hab::rseq_register_current_thread).join().unwrap();
/// assert_eq!(registered, hab::per_cpu_support().restartable());
/// ```
pub fn register_current_thread() -> bool {
    current_area().is_some()
}

/// The calling thread's registered area, registering it first if Hab owns registrations; `None`
/// when rseq is unavailable or this thread's registration failed.
#[inline]
pub(crate) fn current_area() -> Option<*mut u8> {
    // One load and an add where every thread's area sits at the same offset (glibc's).
    let offset = FIXED_AREA_OFFSET.load(Ordering::Relaxed);
    if offset != 0 {
        return Some(imp::glibc_area(offset));
    }
    current_area_decided()
}

/// [`current_area`] before the fast case is known, or without it.
#[inline(never)]
fn current_area_decided() -> Option<*mut u8> {
    match mechanism() {
        RseqMechanism::Glibc { offset } | RseqMechanism::Unregistered { offset } => {
            Some(imp::glibc_area(*offset))
        }
        RseqMechanism::Own {
            offset: Some(offset),
            ..
        } => imp::register_at(*offset).ok(),
        RseqMechanism::Own { offset: None, .. } => imp::thread_local_area().ok(),
        RseqMechanism::Unavailable(_) => None,
    }
}

/// Returns once every thread of the process that was inside a restartable section when the
/// call began has been sent back to its abort handler or has committed: the kernel interrupts
/// every CPU running one of the process's threads and restarts the section it is in
/// (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ)`, Linux 5.10); a thread preempted inside
/// a section restarts it when it resumes, as always. `false` where the kernel refuses it (an
/// older kernel, a seccomp filter): nothing is known then. The process registers its intent
/// once, at the first call (again in a child made by `fork`). Cost: one system call, a few
/// microseconds, and an interrupt to each CPU that runs the process.
pub(crate) fn restart_sections() -> bool {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        static REGISTERED: OnceLock<bool> = OnceLock::new();
        fn membarrier(command: libc::c_int) -> bool {
            // SAFETY: `membarrier` takes a command and two integer arguments and touches no
            // memory of the caller.
            unsafe { libc::syscall(libc::SYS_membarrier, command, 0, 0) == 0 }
        }
        let register = || membarrier(libc::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ);
        *REGISTERED.get_or_init(register)
            && (membarrier(libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ)
                || register() && membarrier(libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ))
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    false
}

pub(crate) mod cpu_slots;
mod layout;
pub(crate) mod take;
pub(crate) use layout::*;
mod mechanism;
pub use mechanism::RseqMechanism;
mod outcome;
pub(crate) use outcome::*;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[path = "x86_64.rs"]
mod imp;
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
#[path = "portable.rs"]
mod imp;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod registration;

#[cfg(test)]
mod tests;
