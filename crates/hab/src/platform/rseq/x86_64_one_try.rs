//! The one-try sections, addressed through `fs` (the rseq area at a fixed offset from the
//! thread pointer): no retry loop and no status register, a refusal, a move and an abort
//! all handed back as 0. The `cpu-lab` fast path's LAB bump ([`lab_bump`], inlined in every
//! allocation) and the short refill's bump of a `cpu` level's buffer ([`home_bump`]). Built
//! with `x86_64.rs`'s `descriptor!`, `abort_signature!` and, in tests, `injection_point!`.

use std::arch::asm;

use crate::memory::packed::OFFSET_BITS;
use crate::platform::rseq::layout::{
    BUFFER_WORD_OFFSET, HEADER_BOUND_BELOW, HEADER_INDEX_FIELD_BELOW, LAB_END_OFFSET,
    LAB_INDEX_FIELD_OFFSET, LAB_INLINE_ABORTS_OFFSET, LAB_TOP_OFFSET, RSEQ_CS_OFFSET, SIGNATURE,
    SLOT_SHIFT,
};

/// The inline LAB bump. Moving, refusal and abort all return 0; there is no retry loop
/// and no status register. The abort handler counts the abort in the third word of
/// `slot` with one locked add (only aborts pay for it), which readers load atomically.
macro_rules! inline_bump_section {
    ([$($injection:expr),*], [$($extra:tt)*], $area_offset:expr, $slot:expr, $cpu:expr,
     $bytes:expr) => {{
        let object: usize;
        asm!(
            descriptor!(),
            "lea {scratch}, [rip + 3b]",
            "mov qword ptr fs:[{area} + {rseq_cs}], {scratch}",
            "4:",
            $($injection,)*
            "mov {scratch}, qword ptr [{slot} + {index_field}]",
            $($injection,)*
            "cmp dword ptr fs:[{scratch}], {cpu:e}",
            $($injection,)*
            "jne 7f",
            $($injection,)*
            "mov {object}, qword ptr [{slot} + {top_field}]",
            $($injection,)*
            "lea {scratch}, [{object} + {bytes}]",
            $($injection,)*
            "cmp {scratch}, qword ptr [{slot} + {end_field}]",
            $($injection,)*
            "ja 7f",
            $($injection,)*
            "mov qword ptr [{slot} + {top_field}], {scratch}",
            "5:",
            ".pushsection .text.hab_rseq_abort, \"ax\"",
            "7:",
            "xor {object:e}, {object:e}",
            "jmp 5b",
            abort_signature!(),
            "6:",
            "lock add qword ptr [{slot} + {aborts_field}], 1",
            "xor {object:e}, {object:e}",
            "jmp 5b",
            ".popsection",
            area = in(reg) $area_offset,
            slot = in(reg) $slot,
            cpu = in(reg) $cpu,
            bytes = in(reg) $bytes,
            object = out(reg) object,
            scratch = out(reg) _,
            signature = const SIGNATURE,
            rseq_cs = const RSEQ_CS_OFFSET,
            index_field = const LAB_INDEX_FIELD_OFFSET,
            top_field = const LAB_TOP_OFFSET,
            end_field = const LAB_END_OFFSET,
            aborts_field = const LAB_INLINE_ABORTS_OFFSET,
            $($extra)*
            options(nostack),
        );
        object
    }};
}

/// See `cpu_slots::lab_bump`.
///
/// # Safety
/// As for `cpu_slots::lab_bump`.
#[inline(always)]
pub(crate) unsafe fn lab_bump(
    area_offset: isize,
    slot: *mut usize,
    cpu: u32,
    bytes: usize,
) -> usize {
    // SAFETY: `fs:[area_offset]` is the calling thread's area, and the slot holds the offset
    // of its index field; the section writes only `slot`, the slot of the index it checked,
    // with its last instruction; inputs are never written.
    unsafe { inline_bump_section!([], [], area_offset, slot, cpu, bytes) }
}

/// `lab_bump` with an abort injected at instruction boundary `inject_at` (as in
/// `section!`).
///
/// # Safety
/// As for `lab_bump`.
#[cfg(test)]
pub(crate) unsafe fn lab_bump_injected(
    area_offset: isize,
    slot: *mut usize,
    cpu: u32,
    bytes: usize,
    inject_at: u64,
) -> usize {
    // SAFETY: as in `lab_bump`; the injection points touch only `rcx`.
    unsafe {
        inline_bump_section!(
            [injection_point!()],
            [inout("rcx") inject_at => _,],
            area_offset,
            slot,
            cpu,
            bytes
        )
    }
}

/// The short refill's bump: the slot of the thread's index (read through `fs`) gives up
/// `words` if it has them, with no retry loop and no status register (eleven instructions,
/// four registers), and turns the word it read into its offset in bytes (two shifts after
/// the commit, outside the section). A refusal (too few words left, an index at or beyond
/// the slots) leaves that offset 0; an abort leaves it 0 and `slot` 0 (the slot's address
/// is never 0). The section never restarts, so it may write its inputs: `slot` becomes the
/// slot's address and `new` (the negated delta, see `CpuSlots::bump_at_home`) the
/// committed word. A committed offset is never 0: an installed buffer starts past the
/// first TLAB of its chunk, and chunks start at or past the base.
macro_rules! home_bump_section {
    ([$($injection:expr),*], [$($extra:tt)*], $area_offset:expr, $base:expr,
     $negated_delta:expr) => {{
        let (before, slot): (u64, usize);
        asm!(
            descriptor!(),
            "lea {before}, [rip + 3b]",
            "mov qword ptr fs:[{area} + {rseq_cs}], {before}",
            "4:",
            $($injection,)*
            "mov {before}, qword ptr [{slot} - {index_field_below}]",
            $($injection,)*
            "mov {before:e}, dword ptr fs:[{area} + {before}]",
            $($injection,)*
            "cmp {before}, qword ptr [{slot} - {bound_below}]",
            $($injection,)*
            "jae 7f",
            $($injection,)*
            "shl {before}, {slot_shift}",
            $($injection,)*
            "add {slot}, {before}",
            $($injection,)*
            "mov {before}, qword ptr [{slot} + {word_field}]",
            $($injection,)*
            "add {new}, {before}",
            $($injection,)*
            "jnc 7f",
            $($injection,)*
            "mov qword ptr [{slot} + {word_field}], {new}",
            "5:",
            "shl {before}, {upper_bits}",
            "shr {before}, {upper_bits} - 3",
            ".pushsection .text.hab_rseq_abort, \"ax\"",
            "7:",
            "xor {before:e}, {before:e}",
            "jmp 5b",
            abort_signature!(),
            "6:",
            "xor {before:e}, {before:e}",
            "xor {slot:e}, {slot:e}",
            "jmp 5b",
            ".popsection",
            area = in(reg) $area_offset,
            slot = inout(reg) $base => slot,
            new = inout(reg) $negated_delta => _,
            before = out(reg) before,
            signature = const SIGNATURE,
            slot_shift = const SLOT_SHIFT,
            upper_bits = const 64 - OFFSET_BITS,
            rseq_cs = const RSEQ_CS_OFFSET,
            index_field_below = const HEADER_INDEX_FIELD_BELOW,
            bound_below = const HEADER_BOUND_BELOW,
            word_field = const BUFFER_WORD_OFFSET,
            $($extra)*
            options(nostack),
        );
        (before, slot)
    }};
}

/// See `CpuSlots::bump_at_home`.
///
/// # Safety
/// `area_offset` is the fixed offset of every thread's registered area from its thread
/// pointer; `base` points to live slots, preceded by their count and the index field's offset.
#[inline(always)]
pub(crate) unsafe fn home_bump(
    area_offset: isize,
    base: *mut u64,
    negated_delta: u64,
) -> (u64, usize) {
    // SAFETY: `fs:[area_offset]` is the calling thread's area; the section writes only the
    // slot of the index it read, after checking it against the count, with its last
    // instruction.
    unsafe { home_bump_section!([], [], area_offset, base, negated_delta) }
}

/// `home_bump` with an abort injected at instruction boundary `inject_at` (as in
/// `section!`).
///
/// # Safety
/// As for `home_bump`.
#[cfg(test)]
pub(crate) unsafe fn home_bump_injected(
    area_offset: isize,
    base: *mut u64,
    negated_delta: u64,
    inject_at: u64,
) -> (u64, usize) {
    // SAFETY: as in `home_bump`; the injection points touch only `rcx`.
    unsafe {
        home_bump_section!(
            [injection_point!()],
            [inout("rcx") inject_at => _,],
            area_offset,
            base,
            negated_delta
        )
    }
}
