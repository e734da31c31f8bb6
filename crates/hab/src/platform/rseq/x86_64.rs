//! The restartable sections, x86_64: one `section!` macro writes the scaffolding (descriptor,
//! re-arm, refusal exits, abort handler with its signature) around each section's body; the
//! bump, install, bump-or-claim and LAB install sections are built from it. The inline LAB
//! bump, which has no retry loop, shares its pieces (`descriptor!`, `abort_signature!`,
//! `injection_point!`).

use std::arch::asm;

use crate::memory::packed::OFFSET_BITS;

use super::layout::{
    BUFFER_WORD_OFFSET, HEADER_BOUND_BELOW, HEADER_INDEX_FIELD_BELOW, LAB_END_OFFSET,
    LAB_INDEX_FIELD_OFFSET, LAB_INLINE_ABORTS_OFFSET, LAB_LIMIT_OFFSET, LAB_TOP_OFFSET,
    RSEQ_CS_OFFSET, SIGNATURE, SLOT_SHIFT,
};
use super::outcome::{LabBump, LabInstall, Outcome, MAX_ABORTS};
pub(super) use super::registration::{discover, glibc_area, glibc_symbols, own_area};
use crate::memory::packed::PackedWord;

/// A restartable section: `$body` runs between the start and the commit, ending with the
/// commit store. Around it, this writes the descriptor (in `__rseq_cs`), stores its address
/// in the area's `rseq_cs` before every try (the kernel clears it on abort), and, out of
/// line, the refusal exits `7` (status 0), `9` (status 3: the thread moved) and `14`
/// (status 4: a CPU beyond the slots), and the abort handler (preceded by the signature)
/// that retries from the re-arm step, giving up with status 2 after `MAX_ABORTS` aborts in
/// a row. Status 1: committed. `{area}`, `{status}`, `{aborts}` and `{scratch}` are
/// operands every caller passes; the second bracket holds extra register operands.
///
/// `section!(inject [...], [inout("rcx") k => _,], ...)` is the same section with an
/// [`injection_point!`] before every instruction of the body, for tests: the `k`-th point
/// (from 1, counted across tries) jumps to the abort handler exactly as the kernel does
/// after a preemption there; `k = 0` never injects.
/// The section's descriptor in `__rseq_cs` (label `3`): it starts at `4`, commits at `5`
/// and aborts to `6`.
macro_rules! descriptor {
    () => {
        concat!(
            ".pushsection __rseq_cs, \"aw\"\n",
            ".balign 32\n",
            "3:\n",
            ".long 0, 0\n",
            ".quad 4f, (5f - 4f), 6f\n",
            ".popsection",
        )
    };
}

/// The bytes the kernel checks right before an abort handler: a `ud1` whose last four bytes
/// are the registered signature.
macro_rules! abort_signature {
    () => {
        concat!(".byte 0x0f, 0xb9, 0x3d\n", ".long {signature}")
    };
}

/// A test's injection point: counts `rcx` down and jumps to the abort handler at zero, as
/// the kernel would after a preemption there. Changes no flag and no register but `rcx`.
#[cfg(test)]
macro_rules! injection_point {
    () => {
        concat!(
            "lea rcx, [rcx - 1]\n",
            "jrcxz 21f\n",
            "jmp 22f\n",
            "21:\n",
            "jmp 6f\n",
            "22:",
        )
    };
}

macro_rules! section {
    (plain [$($body:literal),* $(,)?], [$($extra:tt)*], $($operands:tt)*) => {
        section!(@emit [$($body,)*], [$($extra)*], $($operands)*)
    };
    (inject [$($body:literal),* $(,)?], [$($extra:tt)*], $($operands:tt)*) => {
        section!(@emit [$(injection_point!(), $body,)*], [$($extra)*], $($operands)*)
    };
    (@emit [$($line:expr,)*], [$($extra:tt)*], $($operands:tt)*) => {
        asm!(
            descriptor!(),
            "mov {status:e}, 1",
            "2:",
            "lea {scratch}, [rip + 3b]",
            "mov qword ptr [{area} + {rseq_cs}], {scratch}",
            "4:",
            $($line,)*
            "5:",
            ".pushsection .text.hab_rseq_abort, \"ax\"",
            "7:",
            "mov {status:e}, 0",
            "jmp 8f",
            "9:",
            "mov {status:e}, 3",
            "jmp 8f",
            "14:",
            "mov {status:e}, 4",
            "jmp 8f",
            abort_signature!(),
            "6:",
            "add {aborts}, 1",
            "cmp {aborts}, {max_aborts}",
            "jb 2b",
            "mov {status:e}, 2",
            "jmp 8f",
            ".popsection",
            "8:",
            $($operands)*
            signature = const SIGNATURE,
            max_aborts = const MAX_ABORTS,
            slot_shift = const SLOT_SHIFT,
            rseq_cs = const RSEQ_CS_OFFSET,
            index_field_below = const HEADER_INDEX_FIELD_BELOW,
            $($extra)*
            options(nostack),
        )
    };
}

/// The bump section; `$widen` are instructions placed between the load and the commit
/// (empty except in tests, which widen the window to make aborts likely). A CPU at or
/// beyond the slots (their count is the word two before the first slot) exits with status 4
/// before touching memory. `$delta` is the request's words taken from the upper field and
/// added to the offset, in one subtraction (see `CpuSlots::bump`): with the count read from
/// memory, the section holds two registers fewer than with the count, the words and the
/// shifted words in registers.
macro_rules! bump_section {
    ($mode:ident [$($extra:tt)*], $area:expr, $base:expr, $delta:expr $(, $widen:literal)*) => {{
        let mut aborts: u64 = 0;
        let (status, slot, word): (u64, u64, u64);
        section!(
            $mode [
                "mov {slot}, qword ptr [{base} - {index_field_below}]",
                "mov {slot:e}, dword ptr [{area} + {slot}]",
                "cmp {slot}, qword ptr [{base} - {bound_below}]",
                "jae 14f",
                "shl {slot}, {slot_shift}",
                "add {slot}, {base}",
                "mov {word}, qword ptr [{slot} + {word_field}]",
                $($widen,)*
                "mov {scratch}, {word}",
                "sub {scratch}, {delta}",
                "jb 7f",
                "mov qword ptr [{slot} + {word_field}], {scratch}",
            ],
            [$($extra)*],
            area = in(reg) $area,
            base = in(reg) $base,
            delta = in(reg) $delta,
            aborts = inout(reg) aborts,
            status = out(reg) status,
            slot = out(reg) slot,
            word = out(reg) word,
            scratch = out(reg) _,
            bound_below = const HEADER_BOUND_BELOW,
            word_field = const BUFFER_WORD_OFFSET,
        );
        (outcome(status, slot, $base, word), aborts)
    }};
}

/// Declares a section's function and, for tests, its `_injected` twin, which takes the
/// injection point last (see `section!`). `$section` is the section's macro; the twin
/// differs only in the `rcx` operand that drives the injection.
macro_rules! section_fns {
    (
        $(#[$attribute:meta])*
        fn $name:ident / $injected:ident ($($arg:ident: $type:ty),* $(,)?) -> $result:ty
        = $section:ident;
        $safety:literal
    ) => {
        $(#[$attribute])*
        ///
        #[doc = concat!("Why the section is sound: ", $safety)]
        pub(super) unsafe fn $name($($arg: $type),*) -> $result {
            // SAFETY: the caller upholds the contract above, and the paragraph above says
            // why the section is sound under it.
            unsafe { $section!(plain [], $($arg),*) }
        }

        /// The same section with an abort injected at instruction boundary `inject_at`.
        ///
        /// # Safety
        /// As for the section without injection.
        #[cfg(test)]
        pub(super) unsafe fn $injected($($arg: $type,)* inject_at: u64) -> $result {
            // SAFETY: as without injection; the injection points touch only `rcx`.
            unsafe { $section!(inject [inout("rcx") inject_at => _,], $($arg),*) }
        }
    };
}

section_fns! {
    /// See `CpuSlots::bump`: `delta` is the request's words in the upper field less the
    /// words. Registers: the inputs are never written (the kernel restarts at the abort
    /// handler with the registers as they are); the outputs are early-clobber temporaries.
    ///
    /// # Safety
    /// `area` is the calling thread's registered area; `base` points to the slots, preceded
    /// by their count and the index field's offset (`CpuSlots::new`).
    #[inline]
    fn bump / bump_injected(area: *mut u8, base: *mut u64, delta: u64)
        -> (Outcome, u64) = bump_section;
    "The caller guarantees `area` is registered and `base` holds as many slots as the word \
     two before it says; the section writes only the slot of the CPU it runs on, after \
     checking that CPU is below that count, with its last instruction."
}

/// `bump` with a window of a few microseconds between the load and the commit, so that
/// signals and preemptions land inside the section and abort it.
///
/// # Safety
/// As for [`bump`].
#[cfg(test)]
pub(super) unsafe fn bump_widened(area: *mut u8, base: *mut u64, delta: u64) -> (Outcome, u64) {
    // SAFETY: as in `bump`; the widening loop touches only the scratch register, before
    // its first use in the section body.
    unsafe {
        bump_section!(
            plain [],
            area,
            base,
            delta,
            "mov {scratch:e}, 4000",
            "12:",
            "pause",
            "sub {scratch:e}, 1",
            "jnz 12b"
        )
    }
}

/// The per-CPU install section: commits `new` to the slot of `cpu` if the thread runs on
/// `cpu` and the slot holds `expected`.
macro_rules! install_section {
    ($mode:ident [$($extra:tt)*], $area:expr, $base:expr, $cpu:expr, $expected:expr,
     $new:expr) => {{
        let mut aborts: u64 = 0;
        let (status, slot, word): (u64, u64, u64);
        section!(
            $mode [
                "mov {slot}, qword ptr [{base} - {index_field_below}]",
                "mov {slot:e}, dword ptr [{area} + {slot}]",
                "cmp {slot}, {cpu}",
                "jne 9f",
                "shl {slot}, {slot_shift}",
                "add {slot}, {base}",
                "mov {scratch}, qword ptr [{slot} + {word_field}]",
                "cmp {scratch}, {expected}",
                "jne 7f",
                "mov qword ptr [{slot} + {word_field}], {new}",
            ],
            [$($extra)*],
            area = in(reg) $area,
            base = in(reg) $base,
            cpu = in(reg) $cpu,
            expected = in(reg) $expected.raw(),
            new = in(reg) $new.raw(),
            aborts = inout(reg) aborts,
            status = out(reg) status,
            slot = out(reg) slot,
            scratch = out(reg) word,
            word_field = const BUFFER_WORD_OFFSET,
        );
        (outcome(status, slot, $base, word), aborts)
    }};
}

section_fns! {
    /// See `CpuSlots::install`.
    ///
    /// # Safety
    /// `area` is the calling thread's registered area; `cpu` is below the number of slots
    /// at `base`.
    #[inline]
    fn install / install_injected(
        area: *mut u8,
        base: *mut u64,
        cpu: usize,
        expected: PackedWord,
        new: PackedWord,
    ) -> (Outcome, u64) = install_section;
    "As in `bump`; the section commits with its single store of `new`, to the slot of \
     `cpu` (in bounds, by the caller), only when the thread runs on `cpu`."
}

/// The bump-or-claim section. An index at or beyond the LABs (their count is the word two
/// before the first slot) exits with status 4 before touching memory. A claim takes the LAB
/// and the rest beyond its end: the commit moves `top` to `limit + reserve`, past everything
/// the slot owned.
macro_rules! claim_section {
    ($mode:ident [$($extra:tt)*], $area:expr, $base:expr, $bytes:expr, $reserve:expr) => {{
        let mut aborts: u64 = 0;
        let (status, slot, top, end, limit): (u64, u64, usize, usize, usize);
        section!(
            $mode [
                "mov {slot}, qword ptr [{base} - {index_field_below}]",
                "mov {slot:e}, dword ptr [{area} + {slot}]",
                "cmp {slot}, qword ptr [{base} - {bound_below}]",
                "jae 14f",
                "shl {slot}, {slot_shift}",
                "add {slot}, {base}",
                "mov {top}, qword ptr [{slot} + {top_field}]",
                "mov {end}, qword ptr [{slot} + {end_field}]",
                "mov {limit}, qword ptr [{slot} + {limit_field}]",
                "lea {scratch}, [{top} + {bytes}]",
                "lea {claim}, [{limit} + {reserve}]",
                "cmp {scratch}, {end}",
                "cmova {scratch}, {claim}",
                "mov qword ptr [{slot} + {top_field}], {scratch}",
            ],
            [$($extra)*],
            area = in(reg) $area,
            base = in(reg) $base,
            bytes = in(reg) $bytes,
            reserve = in(reg) $reserve,
            aborts = inout(reg) aborts,
            status = out(reg) status,
            slot = out(reg) slot,
            top = out(reg) top,
            end = out(reg) end,
            limit = out(reg) limit,
            claim = out(reg) _,
            scratch = out(reg) _,
            bound_below = const HEADER_BOUND_BELOW,
            top_field = const LAB_TOP_OFFSET,
            end_field = const LAB_END_OFFSET,
            limit_field = const LAB_LIMIT_OFFSET,
        );
        let cpu = ((slot as usize).wrapping_sub($base as usize)) >> SLOT_SHIFT;
        let outcome = match status {
            1 if top + $bytes <= end => LabBump::Object { cpu, address: top },
            1 => LabBump::Claimed { cpu, top, end, limit },
            4 => LabBump::OutOfRange,
            _ => LabBump::GaveUp,
        };
        (outcome, aborts)
    }};
}

section_fns! {
    /// See `CpuLabSlots::bump_or_claim`. One store commits either the bumped top or, when the
    /// object does not fit, `limit + reserve` (a conditional move picks which).
    ///
    /// # Safety
    /// `area` is the calling thread's registered area; `base` points to LAB slots, preceded
    /// by their count and the index field's offset.
    fn lab_bump_or_claim / lab_bump_or_claim_injected(
        area: *mut u8,
        base: *mut usize,
        bytes: usize,
        reserve: usize,
    ) -> (LabBump, u64) = claim_section;
    "The section writes only the slot of the index it runs with, after checking that index \
     is below the count before the slots, with its last instruction."
}

/// The LAB install section: refuses when the slot owns memory (`top <= end` and
/// `top < limit + reserve`); else first closes the slot (`end = 0`: nothing fits), then writes
/// `top` and `limit`, then commits `end`: a section interrupted half-way leaves a slot that
/// owns nothing, and the thread still owns its LAB. An index at or beyond the LABs (their
/// count is the word two before the first slot) exits with status 4 before touching memory.
macro_rules! lab_install_section {
    ($mode:ident [$($extra:tt)*], $area:expr, $base:expr, $reserve:expr, $top:expr, $end:expr,
     $limit:expr) => {{
        let mut aborts: u64 = 0;
        let (status, slot): (u64, u64);
        section!(
            $mode [
                "mov {slot}, qword ptr [{base} - {index_field_below}]",
                "mov {slot:e}, dword ptr [{area} + {slot}]",
                "cmp {slot}, qword ptr [{base} - {bound_below}]",
                "jae 14f",
                "shl {slot}, {slot_shift}",
                "add {slot}, {base}",
                "mov {scratch}, qword ptr [{slot} + {top_field}]",
                "cmp {scratch}, qword ptr [{slot} + {end_field}]",
                "ja 15f",
                "mov {scratch}, qword ptr [{slot} + {limit_field}]",
                "add {scratch}, {reserve}",
                "cmp qword ptr [{slot} + {top_field}], {scratch}",
                "jb 7f",
                "15:",
                "mov qword ptr [{slot} + {end_field}], 0",
                "mov qword ptr [{slot} + {top_field}], {top}",
                "mov qword ptr [{slot} + {limit_field}], {limit}",
                "mov qword ptr [{slot} + {end_field}], {end}",
            ],
            [$($extra)*],
            area = in(reg) $area,
            base = in(reg) $base,
            reserve = in(reg) $reserve,
            top = in(reg) $top,
            end = in(reg) $end,
            limit = in(reg) $limit,
            aborts = inout(reg) aborts,
            status = out(reg) status,
            slot = out(reg) slot,
            scratch = out(reg) _,
            bound_below = const HEADER_BOUND_BELOW,
            top_field = const LAB_TOP_OFFSET,
            end_field = const LAB_END_OFFSET,
            limit_field = const LAB_LIMIT_OFFSET,
        );
        let cpu = ((slot as usize).wrapping_sub($base as usize)) >> SLOT_SHIFT;
        let outcome = match status {
            1 => LabInstall::Done { cpu },
            0 => LabInstall::Occupied { cpu },
            4 => LabInstall::OutOfRange,
            _ => LabInstall::GaveUp,
        };
        (outcome, aborts)
    }};
}

section_fns! {
    /// See `CpuLabSlots::install`.
    ///
    /// # Safety
    /// As for `lab_bump_or_claim`.
    fn lab_install / lab_install_injected(
        area: *mut u8,
        base: *mut usize,
        reserve: usize,
        top: usize,
        end: usize,
        limit: usize,
    ) -> (LabInstall, u64) = lab_install_section;
    "As in `lab_bump_or_claim`; the stores before the commit only make the slot own \
     nothing."
}

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

/// See `super::lab_bump`.
///
/// # Safety
/// As for `super::lab_bump`.
#[inline(always)]
pub(super) unsafe fn lab_bump(
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
pub(super) unsafe fn lab_bump_injected(
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
pub(super) unsafe fn home_bump(
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
pub(super) unsafe fn home_bump_injected(
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

/// See `super::cpu_hint`.
///
/// # Safety
/// As for `super::cpu_hint`.
#[inline]
pub(super) unsafe fn cpu_hint(index_offset: isize) -> u32 {
    let cpu: u32;
    // SAFETY: `fs:[index_offset]` is the calling thread's index field; a 4-byte read.
    unsafe {
        asm!(
            "mov {cpu:e}, dword ptr fs:[{index}]",
            index = in(reg) index_offset,
            cpu = out(reg) cpu,
            options(nostack, readonly, preserves_flags),
        );
    }
    cpu
}

/// Turns the registers a section left into an outcome: for statuses 0 and 1, `slot` is
/// the address of the slot the section used and `word` what it read there.
fn outcome(status: u64, slot: u64, base: *mut u64, word: u64) -> Outcome {
    let cpu = ((slot as usize).wrapping_sub(base as usize)) >> SLOT_SHIFT;
    match status {
        1 => Outcome::Done {
            cpu,
            before: PackedWord::from_raw(word),
        },
        0 => Outcome::Refused {
            cpu,
            seen: PackedWord::from_raw(word),
        },
        3 => Outcome::Moved,
        4 => Outcome::OutOfRange,
        _ => Outcome::GaveUp,
    }
}
