//! The restartable sections, x86_64: one `section!` macro writes the scaffolding (descriptor,
//! re-arm, refusal exits, abort handler with its signature) around each section's body; the
//! bump, install, bump-or-claim and LAB install sections are built from it. The inline LAB
//! bump, which has no retry loop, shares its pieces (`descriptor!`, `abort_signature!`,
//! `injection_point!`).

use std::arch::asm;

use super::layout::{
    BUFFER_WORD_OFFSET, HEADER_BOUND_BELOW, HEADER_INDEX_FIELD_BELOW, LAB_END_OFFSET,
    LAB_LIMIT_OFFSET, LAB_TOP_OFFSET, RSEQ_CS_OFFSET, SIGNATURE, SLOT_SHIFT,
};
use super::outcome::{LabBump, LabInstall, Outcome, MAX_ABORTS};
#[cfg(any(test, feature = "instruction-counting"))]
pub(super) use super::registration::glibc_symbols;
pub(super) use super::registration::{discover, glibc_area, register_at, thread_local_area};
use crate::memory::packed::PackedWord;
pub(super) use one_try::{home_bump, lab_bump};
#[cfg(test)]
pub(super) use one_try::{home_bump_injected, lab_bump_injected};

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

/// A section over a per-CPU array (see `section!`), its body opened by the one index
/// prologue: the index field's offset (the word `index_field_below` bytes before the array at
/// `{base}`), the index the thread runs with (read from `{area}` at that offset), the index's
/// check, then the slot's address in `{slot}`. `bounded`: an index at or beyond the slots
/// (their count is the word `{bound_below}` bytes before the array) exits with status 4
/// before touching memory; `on_cpu`: an index other than `{cpu}` exits with status 3 (the
/// thread moved). In `inject` mode every prologue instruction gets its injection point too.
macro_rules! slot_section {
    ($mode:ident bounded [$($body:literal),* $(,)?], $($rest:tt)*) => {
        slot_section!(
            @open $mode
            ["cmp {slot}, qword ptr [{base} - {bound_below}]", "jae 14f"]
            [$($body),*],
            $($rest)*
        )
    };
    ($mode:ident on_cpu [$($body:literal),* $(,)?], $($rest:tt)*) => {
        slot_section!(@open $mode ["cmp {slot}, {cpu}", "jne 9f"] [$($body),*], $($rest)*)
    };
    (@open $mode:ident [$($check:literal),*] [$($body:literal),*], $($rest:tt)*) => {
        section!(
            $mode [
                "mov {slot}, qword ptr [{base} - {index_field_below}]",
                "mov {slot:e}, dword ptr [{area} + {slot}]",
                $($check,)*
                "shl {slot}, {slot_shift}",
                "add {slot}, {base}",
                $($body,)*
            ],
            $($rest)*
        )
    };
}

/// The bump section; `$widen` are instructions placed between the load and the commit
/// (empty except in tests, which widen the window to make aborts likely). `$delta` is the request's words taken from the upper field and
/// added to the offset, in one subtraction (see `CpuSlots::bump`): with the count read from
/// memory, the section holds two registers fewer than with the count, the words and the
/// shifted words in registers.
macro_rules! bump_section {
    ($mode:ident [$($extra:tt)*], $area:expr, $base:expr, $delta:expr $(, $widen:literal)*) => {{
        let mut aborts: u64 = 0;
        let (status, slot, word): (u64, u64, u64);
        slot_section!(
            $mode bounded [
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
        slot_section!(
            $mode on_cpu [
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

/// The bump-or-claim section. A claim takes the LAB
/// and the rest beyond its end: the commit moves `top` to `limit + reserve`, past everything
/// the slot owned.
macro_rules! claim_section {
    ($mode:ident [$($extra:tt)*], $area:expr, $base:expr, $bytes:expr, $reserve:expr) => {{
        let mut aborts: u64 = 0;
        let (status, slot, top, end, limit): (u64, u64, usize, usize, usize);
        slot_section!(
            $mode bounded [
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
/// owns nothing, and the thread still owns its LAB.
macro_rules! lab_install_section {
    ($mode:ident [$($extra:tt)*], $area:expr, $base:expr, $reserve:expr, $top:expr, $end:expr,
     $limit:expr) => {{
        let mut aborts: u64 = 0;
        let (status, slot): (u64, u64);
        slot_section!(
            $mode bounded [
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

// After the macros, which its sections use.
#[path = "x86_64_one_try.rs"]
mod one_try;

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
