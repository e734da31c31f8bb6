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
/// fallback (for tests of it). With the `instruction-counting` feature, `HAB_RSEQ=unregistered`
/// picks [`RseqMechanism::Unregistered`] where glibc has no registration (under valgrind); a
/// measurement hook, not part of the library's behaviour otherwise.
pub fn mechanism() -> &'static RseqMechanism {
    static MECHANISM: OnceLock<RseqMechanism> = OnceLock::new();
    MECHANISM.get_or_init(|| {
        let mechanism = decide_mechanism();
        if let RseqMechanism::Glibc { offset } | RseqMechanism::Unregistered { offset } = mechanism
        {
            FIXED_AREA_OFFSET.store(offset, Ordering::Relaxed);
        }
        mechanism
    })
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
    let discovered = imp::discover();
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

/// Where glibc's registration put every thread's area: `__rseq_offset` from the thread
/// pointer, or why glibc registered none. The one place the process looks glibc's symbols up.
pub(crate) fn glibc_area_offset() -> Result<isize, String> {
    mechanism::glibc_offset_from(imp::glibc_symbols())
}

/// `__rseq_offset`, whether or not glibc registered areas (for tests of an unregistered area).
#[cfg(test)]
pub(crate) fn glibc_offset_even_unregistered() -> Option<isize> {
    imp::glibc_symbols().map(|(offset, _)| offset)
}

/// The offset of every thread's area from its thread pointer, when it is the same for all
/// threads (glibc's area): the inline `cpu-lab` fast path addresses the area through `fs` with it.
#[inline]
pub(crate) fn fixed_area_offset() -> Option<isize> {
    match mechanism() {
        RseqMechanism::Glibc { offset } | RseqMechanism::Unregistered { offset } => Some(*offset),
        _ => None,
    }
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
        RseqMechanism::Own => imp::own_area(),
        RseqMechanism::Unavailable(_) => None,
    }
}

pub(crate) mod cpu_slots;
mod layout;
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
