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
//! commit with a single store: the top (in words from the heap's base) in the low [`TOP_BITS`]
//! bits, the words left in the high bits. Bumping `n` words adds `n` and subtracts `n` shifted
//! into the high bits; that subtraction borrows exactly when fewer than `n` words are left, so
//! the check and the new value cost three instructions.
//!
//! x86_64 Linux only; elsewhere [`mechanism`] reports rseq as unavailable and callers use
//! their compare-and-swap fallback.

// Elsewhere the sections are stubs that always give up, so much of this file is unused there.
#![cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    allow(dead_code)
)]
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

/// Bits of a packed per-CPU word holding the top, in words from the heap's base (room for a
/// 16 TiB heap and the carry of a bump that fills a buffer up to its end).
pub(crate) const TOP_BITS: u32 = 42;
const TOP_MASK: u64 = (1 << TOP_BITS) - 1;
/// The largest per-CPU buffer, in bytes: what is left is counted in the 22 high bits.
pub(crate) const MAX_BUFFER_BYTES: usize = ((1usize << (64 - TOP_BITS)) - 1) * 8;
/// Distance between two CPUs' slots: two cache lines, so that neighbours never share one.
const SLOT_SHIFT: u32 = 7;
pub(crate) const SLOT_BYTES: usize = 1 << SLOT_SHIFT;
/// Aborts in a row after which a thread gives up and takes the fallback (e.g. a debugger
/// single-stepping through the section makes it abort forever).
pub(crate) const MAX_ABORTS: u64 = 64;
/// The signature glibc registers with on x86_64; Hab's own registrations use it too.
pub(crate) const SIGNATURE: u32 = 0x5305_3053;

/// A per-CPU word: words left and top.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Packed(pub(crate) u64);

impl Packed {
    /// A buffer at `top_words` with `left_words` free words.
    pub(crate) fn new(top_words: u64, left_words: u64) -> Packed {
        debug_assert!(top_words <= TOP_MASK && left_words < 1 << (64 - TOP_BITS));
        Packed(left_words << TOP_BITS | top_words)
    }

    pub(crate) fn top_words(self) -> u64 {
        self.0 & TOP_MASK
    }

    pub(crate) fn left_words(self) -> u64 {
        self.0 >> TOP_BITS
    }
}

/// How this process gets an rseq area for its threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RseqMechanism {
    /// glibc registered an area for every thread, at this offset from the thread pointer.
    Glibc {
        /// `__rseq_offset`.
        offset: isize,
    },
    /// Hab registers an area per thread itself (glibc did not: an older or other C library,
    /// or `GLIBC_TUNABLES=glibc.pthread.rseq=0`), and unregisters it when the thread exits.
    Own,
    /// glibc's area used *without* a registration (`HAB_RSEQ=unregistered`, honoured only
    /// when the crate is built with its `instruction-counting` feature), for tools that do
    /// not implement rseq, such as valgrind: the sections run the same instructions but the
    /// kernel never aborts them, so this is correct only while one thread allocates. Used to
    /// count instructions, never to run concurrent work.
    Unregistered {
        /// `__rseq_offset`.
        offset: isize,
    },
    /// No rseq: per-CPU buffers fall back to compare-and-swap.
    Unavailable(String),
}

impl fmt::Display for RseqMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RseqMechanism::Glibc { offset } => write!(f, "glibc's registration (offset {offset})"),
            RseqMechanism::Own => f.write_str("Hab's own registration per thread"),
            RseqMechanism::Unregistered { offset } => write!(
                f,
                "glibc's area unregistered (offset {offset}; single-threaded instruction counting only)"
            ),
            RseqMechanism::Unavailable(why) => write!(f, "unavailable: {why}"),
        }
    }
}

/// The mechanism, decided once per process. `HAB_RSEQ=off` in the environment forces the
/// fallback (for tests of it). With the `instruction-counting` feature, `HAB_RSEQ=unregistered`
/// picks [`RseqMechanism::Unregistered`] where glibc has no registration (under valgrind); a
/// measurement hook, not part of the library's behaviour otherwise.
pub fn mechanism() -> &'static RseqMechanism {
    static MECHANISM: OnceLock<RseqMechanism> = OnceLock::new();
    MECHANISM.get_or_init(|| {
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
    })
}

/// Where glibc's registration put every thread's area: `__rseq_offset` from the thread
/// pointer, or why glibc registered none. The one place the process looks glibc's symbols up.
pub(crate) fn glibc_area_offset() -> Result<isize, String> {
    match imp::glibc_symbols() {
        None => Err(
            "__rseq_offset not found: this C library does not register rseq areas \
             (glibc >= 2.35 does)"
                .to_string(),
        ),
        Some((_, 0)) => Err(
            "glibc did not register rseq areas (__rseq_size is 0: the kernel \
             lacks rseq, or GLIBC_TUNABLES=glibc.pthread.rseq=0)"
                .to_string(),
        ),
        Some((offset, _)) => Ok(offset),
    }
}

/// `__rseq_offset`, whether or not glibc registered areas (for tests of an unregistered area).
#[cfg(test)]
pub(crate) fn glibc_offset_even_unregistered() -> Option<isize> {
    imp::glibc_symbols().map(|(offset, _)| offset)
}

/// The offset of every thread's area from its thread pointer, when it is the same for all
/// threads (glibc's area): the inline `plab` fast path addresses the area through `fs` with it.
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
    match mechanism() {
        RseqMechanism::Glibc { offset } | RseqMechanism::Unregistered { offset } => {
            Some(imp::glibc_area(*offset))
        }
        RseqMechanism::Own => imp::own_area(),
        RseqMechanism::Unavailable(_) => None,
    }
}

/// How a critical section ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Committed on `cpu`; `before` is the slot's word before the commit.
    Done { cpu: usize, before: Packed },
    /// Not committed: the slot of `cpu` had too little left (bump) or no longer held the
    /// expected word (install). `seen` is the slot's word.
    Refused { cpu: usize, seen: Packed },
    /// Not committed: the thread runs on another CPU than the install expected.
    Moved,
    /// Not committed: the thread runs on a CPU at or beyond the slots (a topology that does
    /// not cover every CPU the kernel numbers). The caller takes its compare-and-swap path.
    OutOfRange,
    /// Aborted [`MAX_ABORTS`] times in a row.
    GaveUp,
}

/// Per-CPU slots: one packed word per CPU, [`SLOT_BYTES`] apart.
pub(crate) struct Slots {
    base: *mut u64,
    cpus: usize,
    layout: std::alloc::Layout,
}

// SAFETY: the slots are only read and written through restartable sequences (one writer per
// CPU at a time, guaranteed by the kernel) or by a collection while every mutator is stopped.
unsafe impl Send for Slots {}
// SAFETY: as above.
unsafe impl Sync for Slots {}

impl Slots {
    /// Empty slots for `cpus` CPUs.
    pub(crate) fn new(cpus: usize) -> Slots {
        let cpus = cpus.max(1);
        let layout = std::alloc::Layout::from_size_align(cpus * SLOT_BYTES, SLOT_BYTES)
            .expect("CPU counts are small");
        // SAFETY: the layout has a non-zero size.
        let base = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<u64>();
        if base.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Slots { base, cpus, layout }
    }

    pub(crate) fn cpus(&self) -> usize {
        self.cpus
    }

    /// Reads a slot outside a critical section (a snapshot; only exact while no thread can
    /// run a section on that CPU, e.g. during a collection).
    pub(crate) fn load(&self, cpu: usize) -> Packed {
        assert!(cpu < self.cpus);
        // SAFETY: `cpu` is in bounds; a volatile read of an aligned word that threads write
        // with plain stores cannot tear on x86_64.
        Packed(unsafe { self.slot(cpu).read_volatile() })
    }

    /// Writes a slot outside a critical section. Only while no thread can run a section.
    pub(crate) fn store(&self, cpu: usize, word: Packed) {
        assert!(cpu < self.cpus);
        // SAFETY: `cpu` is in bounds; the caller guarantees no concurrent section.
        unsafe { self.slot(cpu).write_volatile(word.0) };
    }

    fn slot(&self, cpu: usize) -> *mut u64 {
        self.base.wrapping_byte_add(cpu * SLOT_BYTES)
    }

    /// Bumps the current CPU's slot by `words` (at least 1, fewer than 2^22) if it has that
    /// many left.
    ///
    /// # Safety
    /// `area` is the calling thread's registered rseq area ([`current_area`]).
    #[inline]
    /// Also returns how many times the section aborted and restarted.
    pub(crate) unsafe fn bump(&self, area: *mut u8, words: u64) -> (Outcome, u64) {
        // SAFETY: forwarded.
        unsafe { imp::bump(area, self.base, self.cpus, words, words << TOP_BITS) }
    }

    /// [`bump`](Slots::bump) with an abort injected at instruction boundary `inject_at`.
    ///
    /// # Safety
    /// As for [`bump`](Slots::bump).
    #[cfg(test)]
    pub(crate) unsafe fn bump_injected(
        &self,
        area: *mut u8,
        words: u64,
        inject_at: u64,
    ) -> (Outcome, u64) {
        // SAFETY: forwarded.
        unsafe {
            imp::bump_injected(
                area,
                self.base,
                self.cpus,
                words,
                words << TOP_BITS,
                inject_at,
            )
        }
    }

    /// [`bump`](Slots::bump) with a widened window, for tests of the abort path.
    ///
    /// # Safety
    /// As for [`bump`](Slots::bump).
    #[cfg(test)]
    pub(crate) unsafe fn bump_widened(&self, area: *mut u8, words: u64) -> (Outcome, u64) {
        // SAFETY: forwarded.
        unsafe { imp::bump_widened(area, self.base, self.cpus, words, words << TOP_BITS) }
    }

    /// Replaces the slot of `cpu` (< `cpus()`) by `new` if the thread still runs on `cpu` and
    /// the slot still holds `expected`.
    ///
    /// # Safety
    /// As for [`bump`](Slots::bump).
    #[inline]
    /// Also returns how many times the section aborted and restarted.
    pub(crate) unsafe fn install(
        &self,
        area: *mut u8,
        cpu: usize,
        expected: Packed,
        new: Packed,
    ) -> (Outcome, u64) {
        assert!(cpu < self.cpus);
        // SAFETY: forwarded; `cpu` is in bounds.
        unsafe { imp::install(area, self.base, cpu, expected, new) }
    }

    /// [`install`](Slots::install) with an abort injected at instruction boundary
    /// `inject_at`.
    ///
    /// # Safety
    /// As for [`bump`](Slots::bump).
    #[cfg(test)]
    pub(crate) unsafe fn install_injected(
        &self,
        area: *mut u8,
        cpu: usize,
        expected: Packed,
        new: Packed,
        inject_at: u64,
    ) -> (Outcome, u64) {
        assert!(cpu < self.cpus);
        // SAFETY: forwarded; `cpu` is in bounds.
        unsafe { imp::install_injected(area, self.base, cpu, expected, new, inject_at) }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.base.cast(), self.layout) };
    }
}

/// How a `plab`-mode bump-or-claim section ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LabBump {
    /// The object fits: it starts at `address`, in the LAB of `cpu`.
    Object { cpu: usize, address: usize },
    /// It does not fit: the section emptied the LAB of `cpu`, whose state was `{top, end}`;
    /// when `top <= end`, its free tail `[top, end + reserve)` is now the thread's.
    Claimed { cpu: usize, top: usize, end: usize },
    /// The thread runs on a CPU at or beyond the slots: nothing was touched.
    OutOfRange,
    /// Aborted [`MAX_ABORTS`] times in a row.
    GaveUp,
}

/// How a `plab`-mode install section ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LabInstall {
    /// The new LAB is `cpu`'s.
    Done { cpu: usize },
    /// `cpu`'s LAB still has free memory (another thread installed one first): not installed.
    Occupied { cpu: usize },
    /// The thread runs on a CPU at or beyond the slots: not installed.
    OutOfRange,
    /// Aborted [`MAX_ABORTS`] times in a row.
    GaveUp,
}

/// The LAB of an empty slot: `top > end`, so nothing fits and nothing is free. The slot's
/// third word counts the aborts of the inline path on that CPU.
pub(crate) const EMPTY_LAB: (usize, usize) = (1, 0);

/// Per-CPU LABs of the `plab` mode: a `{top, end}` pair of addresses per CPU, [`SLOT_BYTES`]
/// apart. `end` is soft: an object of `n` bytes fits when `top + n <= end`, and a LAB with
/// `top <= end` owns `[top, end + reserve)` (the reserve keeps every tail fillable). A slot
/// with `top > end` owns nothing.
///
/// The array covers the CPU ids of the topology; the sections check the CPU they run on
/// against that count and report [`LabBump::OutOfRange`] beyond it. One more slot, past the
/// last CPU's, stays empty forever: [`slot_of`](LabSlots::slot_of) hands it out for a CPU
/// beyond the array, so the inline path, which trusts its slot, finds nothing fits there and
/// takes the slow path.
pub(crate) struct LabSlots {
    slots: Slots,
    cpus: usize,
}

impl LabSlots {
    /// Empty LABs for CPU ids below `cpus` (at least 1), and the empty slot past them.
    pub(crate) fn new(cpus: usize) -> LabSlots {
        let cpus = cpus.max(1);
        let slots = LabSlots {
            slots: Slots::new(cpus + 1),
            cpus,
        };
        for cpu in 0..=cpus {
            slots.write(cpu, EMPTY_LAB);
        }
        slots
    }

    /// How many CPUs have a LAB.
    pub(crate) fn cpus(&self) -> usize {
        self.cpus
    }

    /// The first slot's address.
    pub(crate) fn base(&self) -> *mut usize {
        self.slots.base.cast()
    }

    /// Reads a LAB outside a section (exact only while no thread can run a section).
    pub(crate) fn load(&self, cpu: usize) -> (usize, usize) {
        assert!(cpu < self.cpus);
        let slot = self.slots.slot(cpu).cast::<usize>();
        // SAFETY: `cpu` is in bounds; the two words are aligned and inside the slot.
        unsafe { (slot.read_volatile(), slot.add(1).read_volatile()) }
    }

    /// The slot of `cpu`, for the inline fast path ([`lab_bump`]): the empty slot past the
    /// array for a CPU beyond it.
    pub(crate) fn slot_of(&self, cpu: u32) -> *mut usize {
        let index = (cpu as usize).min(self.cpus);
        self.slots.slot(index).cast()
    }

    /// Aborts of the inline path counted in the slot at `index` (`0..=cpus()`, the last
    /// being the empty slot of CPUs beyond the array).
    fn inline_aborts_at(&self, index: usize) -> u64 {
        assert!(index <= self.cpus);
        let counter = self.slots.slot(index).cast::<u64>().wrapping_add(2);
        // SAFETY: `index` is in bounds, so the counter is an aligned word inside a live slot;
        // the abort handler updates it only with locked adds, so an atomic load is race-free.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(counter) }.load(Ordering::Relaxed)
    }

    /// Aborts of the inline path, all CPUs.
    pub(crate) fn inline_aborts(&self) -> u64 {
        (0..=self.cpus)
            .map(|index| self.inline_aborts_at(index))
            .sum()
    }

    /// Writes a LAB outside a section: only while no thread can run a section.
    pub(crate) fn store(&self, cpu: usize, lab: (usize, usize)) {
        assert!(cpu < self.cpus);
        self.write(cpu, lab);
    }

    fn write(&self, index: usize, (top, end): (usize, usize)) {
        assert!(index <= self.cpus);
        let slot = self.slots.slot(index).cast::<usize>();
        // SAFETY: `index` is in bounds; as in `load`; the caller guarantees no concurrent
        // section.
        unsafe {
            slot.write_volatile(top);
            slot.add(1).write_volatile(end);
        }
    }

    /// Carves `bytes` from the current CPU's LAB, or, when they do not fit, empties the LAB
    /// and hands its free tail to the caller. Also returns the aborts.
    ///
    /// # Safety
    /// `area` is the calling thread's registered area ([`current_area`]); `bytes` is below
    /// 2^40.
    pub(crate) unsafe fn bump_or_claim(
        &self,
        area: *mut u8,
        bytes: usize,
        reserve: usize,
    ) -> (LabBump, u64) {
        // SAFETY: forwarded; the section checks the CPU against `cpus`.
        unsafe { imp::lab_bump_or_claim(area, self.base(), self.cpus, bytes, reserve) }
    }

    /// [`bump_or_claim`](LabSlots::bump_or_claim) with an abort injected at instruction
    /// boundary `inject_at` (1 for the first; 0 injects none).
    ///
    /// # Safety
    /// As for [`bump_or_claim`](LabSlots::bump_or_claim).
    #[cfg(test)]
    pub(crate) unsafe fn bump_or_claim_injected(
        &self,
        area: *mut u8,
        bytes: usize,
        reserve: usize,
        inject_at: u64,
    ) -> (LabBump, u64) {
        // SAFETY: forwarded.
        unsafe {
            imp::lab_bump_or_claim_injected(area, self.base(), self.cpus, bytes, reserve, inject_at)
        }
    }

    /// Installs the LAB `{top, end}` as the current CPU's if that CPU's LAB owns no free
    /// memory. Also returns the aborts.
    ///
    /// # Safety
    /// As for [`bump_or_claim`](LabSlots::bump_or_claim).
    pub(crate) unsafe fn install(
        &self,
        area: *mut u8,
        reserve: usize,
        top: usize,
        end: usize,
    ) -> (LabInstall, u64) {
        // SAFETY: forwarded; the section checks the CPU against `cpus`.
        unsafe { imp::lab_install(area, self.base(), self.cpus, reserve, top, end) }
    }

    /// [`install`](LabSlots::install) with an abort injected at instruction boundary
    /// `inject_at`.
    ///
    /// # Safety
    /// As for [`bump_or_claim`](LabSlots::bump_or_claim).
    #[cfg(test)]
    pub(crate) unsafe fn install_injected(
        &self,
        area: *mut u8,
        reserve: usize,
        top: usize,
        end: usize,
        inject_at: u64,
    ) -> (LabInstall, u64) {
        // SAFETY: forwarded.
        unsafe {
            imp::lab_install_injected(area, self.base(), self.cpus, reserve, top, end, inject_at)
        }
    }
}

/// The `plab` fast path: carves `bytes` from the LAB `slot` of CPU `cpu`, in one restartable
/// section addressed through `fs` (nine instructions), if the thread runs on `cpu`; 0 when it
/// runs elsewhere, the object does not fit, or the section was interrupted (the caller then
/// looks up its CPU again, or takes its slow path). Keeping the CPU and its slot in registers
/// across allocations, instead of indexing the array by the CPU id each time, keeps the slot's
/// address constant, so the processor forwards each stored `top` to the next load at once.
///
/// # Safety
/// `area_offset` is [`fixed_area_offset`]; `slot` is the slot of CPU `cpu` in live
/// [`LabSlots`].
#[inline(always)]
pub(crate) unsafe fn lab_bump(
    area_offset: isize,
    slot: *mut usize,
    cpu: u32,
    bytes: usize,
) -> usize {
    // SAFETY: forwarded.
    unsafe { imp::lab_bump(area_offset, slot, cpu, bytes) }
}

/// [`lab_bump`] with an abort injected at instruction boundary `inject_at`.
///
/// # Safety
/// As for [`lab_bump`].
#[cfg(test)]
pub(crate) unsafe fn lab_bump_injected(
    area_offset: isize,
    slot: *mut usize,
    cpu: u32,
    bytes: usize,
    inject_at: u64,
) -> usize {
    // SAFETY: forwarded.
    unsafe { imp::lab_bump_injected(area_offset, slot, cpu, bytes, inject_at) }
}

/// The CPU the thread ran on when the kernel last returned to it: a hint for [`lab_bump`]'s
/// `cpu`, checked again inside the section.
///
/// # Safety
/// `area_offset` is [`fixed_area_offset`].
#[inline]
pub(crate) unsafe fn cpu_hint(area_offset: isize) -> u32 {
    // SAFETY: forwarded.
    unsafe { imp::cpu_hint(area_offset) }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod imp {
    use std::arch::asm;
    use std::cell::{Cell, UnsafeCell};

    use super::{
        LabBump, LabInstall, Outcome, Packed, RseqMechanism, MAX_ABORTS, SIGNATURE, SLOT_SHIFT,
    };

    const SYS_RSEQ: libc::c_long = 334;
    const UNREGISTER: libc::c_int = 1;
    /// `struct rseq` as registered by Hab: 32 bytes, 32-byte aligned.
    const AREA_BYTES: u32 = 32;

    #[repr(C, align(32))]
    struct Area([u32; 8]);

    /// glibc's `__rseq_offset` and `__rseq_size`, when this C library exports them.
    pub(super) fn glibc_symbols() -> Option<(isize, u32)> {
        let (offset, size) = (symbol(c"__rseq_offset")?, symbol(c"__rseq_size")?);
        // SAFETY: glibc defines `const ptrdiff_t __rseq_offset` and `const unsigned int
        // __rseq_size`, set before user code runs and never written again.
        Some(unsafe { (*offset.cast::<isize>(), *size.cast::<u32>()) })
    }

    pub(super) fn discover() -> RseqMechanism {
        if let Ok(offset) = super::glibc_area_offset() {
            return RseqMechanism::Glibc { offset };
        }
        match own_area() {
            Some(_) => RseqMechanism::Own,
            None => RseqMechanism::Unavailable(format!(
                "the kernel refused to register an rseq area: {}",
                std::io::Error::last_os_error()
            )),
        }
    }

    fn symbol(name: &std::ffi::CStr) -> Option<*const libc::c_void> {
        // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the global scope.
        let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        (!address.is_null()).then_some(address.cast_const())
    }

    #[inline]
    pub(super) fn glibc_area(offset: isize) -> *mut u8 {
        let thread_pointer: *mut u8;
        // SAFETY: on x86_64 Linux `fs:0` holds the thread pointer itself (the TCB's self
        // pointer); reading it has no side effect.
        unsafe {
            asm!("mov {}, qword ptr fs:0", out(reg) thread_pointer, options(nostack, readonly, preserves_flags))
        };
        thread_pointer.wrapping_offset(offset)
    }

    /// A thread's own area and whether it is registered (0 not tried, 1 registered, 2 failed).
    struct Own {
        area: UnsafeCell<Area>,
        state: Cell<u8>,
    }

    impl Drop for Own {
        fn drop(&mut self) {
            if self.state.get() == 1 {
                // SAFETY: unregisters the area this thread registered, before its memory goes.
                unsafe {
                    libc::syscall(SYS_RSEQ, self.area.get(), AREA_BYTES, UNREGISTER, SIGNATURE)
                };
            }
        }
    }

    thread_local! {
        static OWN: Own = const { Own { area: UnsafeCell::new(Area([0; 8])), state: Cell::new(0) } };
    }

    pub(super) fn own_area() -> Option<*mut u8> {
        OWN.try_with(|own| {
            if own.state.get() == 0 {
                // SAFETY: the area is 32 bytes, 32-byte aligned, lives as long as the thread
                // (it is unregistered by `Drop` before it is freed), and is registered for the
                // calling thread only.
                let area = own.area.get();
                // SAFETY: see above.
                let result = unsafe { libc::syscall(SYS_RSEQ, area, AREA_BYTES, 0, SIGNATURE) };
                own.state.set(if result == 0 { 1 } else { 2 });
            }
            (own.state.get() == 1).then(|| own.area.get().cast::<u8>())
        })
        .ok()
        .flatten()
    }

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
    /// injection point before every instruction of the body, for tests: the `k`-th point
    /// (from 1, counted across tries) jumps to the abort handler exactly as the kernel does
    /// after a preemption there. The points change no flag and no register but `rcx`; `k = 0`
    /// never injects.
    macro_rules! section {
        (plain [$($body:literal),* $(,)?], [$($extra:tt)*], $($operands:tt)*) => {
            section!(@emit [$($body,)*], [$($extra)*], $($operands)*)
        };
        (inject [$($body:literal),* $(,)?], [$($extra:tt)*], $($operands:tt)*) => {
            section!(@emit [$(
                "lea rcx, [rcx - 1]", "jrcxz 21f", "jmp 22f", "21:", "jmp 6f", "22:", $body,
            )*], [$($extra)*], $($operands)*)
        };
        (@emit [$($line:literal,)*], [$($extra:tt)*], $($operands:tt)*) => {
            asm!(
                ".pushsection __rseq_cs, \"aw\"",
                ".balign 32",
                "3:",
                ".long 0, 0",
                ".quad 4f, (5f - 4f), 6f",
                ".popsection",
                "mov {status:e}, 1",
                "2:",
                "lea {scratch}, [rip + 3b]",
                "mov qword ptr [{area} + 8], {scratch}",
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
                ".byte 0x0f, 0xb9, 0x3d",
                ".long {signature}",
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
                $($extra)*
                options(nostack),
            )
        };
    }

    /// The bump section; `$widen` are instructions placed between the load and the commit
    /// (empty except in tests, which widen the window to make aborts likely). A CPU at or
    /// beyond `$cpus` exits with status 4 before touching memory.
    macro_rules! bump_section {
        ($mode:ident [$($extra:tt)*], $area:expr, $base:expr, $cpus:expr, $words:expr, $high:expr
         $(, $widen:literal)*) => {{
            let mut aborts: u64 = 0;
            let (status, slot, word): (u64, u64, u64);
            section!(
                $mode [
                    "mov {slot:e}, dword ptr [{area}]",
                    "cmp {slot}, {cpus}",
                    "jae 14f",
                    "shl {slot}, {slot_shift}",
                    "add {slot}, {base}",
                    "mov {word}, qword ptr [{slot}]",
                    $($widen,)*
                    "lea {scratch}, [{word} + {words}]",
                    "sub {scratch}, {high}",
                    "jb 7f",
                    "mov qword ptr [{slot}], {scratch}",
                ],
                [$($extra)*],
                area = in(reg) $area,
                base = in(reg) $base,
                cpus = in(reg) $cpus,
                words = in(reg) $words,
                high = in(reg) $high,
                aborts = inout(reg) aborts,
                status = out(reg) status,
                slot = out(reg) slot,
                word = out(reg) word,
                scratch = out(reg) _,
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
        /// See `Slots::bump`: `high` is `words` shifted into the high bits. Registers: the
        /// inputs are never written (the kernel restarts at the abort handler with the
        /// registers as they are); the outputs are early-clobber temporaries.
        ///
        /// # Safety
        /// `area` is the calling thread's registered area; `base` points to `cpus` slots.
        #[inline]
        fn bump / bump_injected(area: *mut u8, base: *mut u64, cpus: usize, words: u64, high: u64)
            -> (Outcome, u64) = bump_section;
        "The caller guarantees `area` is registered and `base` holds `cpus` slots; the section \
         writes only the slot of the CPU it runs on, after checking that CPU is below `cpus`, \
         with its last instruction."
    }

    /// `bump` with a window of a few microseconds between the load and the commit, so that
    /// signals and preemptions land inside the section and abort it.
    ///
    /// # Safety
    /// As for [`bump`].
    #[cfg(test)]
    pub(super) unsafe fn bump_widened(
        area: *mut u8,
        base: *mut u64,
        cpus: usize,
        words: u64,
        high: u64,
    ) -> (Outcome, u64) {
        // SAFETY: as in `bump`; the widening loop touches only the scratch register, before
        // its first use in the section body.
        unsafe {
            bump_section!(
                plain [],
                area,
                base,
                cpus,
                words,
                high,
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
                    "mov {slot:e}, dword ptr [{area}]",
                    "cmp {slot}, {cpu}",
                    "jne 9f",
                    "shl {slot}, {slot_shift}",
                    "add {slot}, {base}",
                    "mov {scratch}, qword ptr [{slot}]",
                    "cmp {scratch}, {expected}",
                    "jne 7f",
                    "mov qword ptr [{slot}], {new}",
                ],
                [$($extra)*],
                area = in(reg) $area,
                base = in(reg) $base,
                cpu = in(reg) $cpu,
                expected = in(reg) $expected.0,
                new = in(reg) $new.0,
                aborts = inout(reg) aborts,
                status = out(reg) status,
                slot = out(reg) slot,
                scratch = out(reg) word,
            );
            (outcome(status, slot, $base, word), aborts)
        }};
    }

    section_fns! {
        /// See `Slots::install`.
        ///
        /// # Safety
        /// `area` is the calling thread's registered area; `cpu` is below the number of slots
        /// at `base`.
        #[inline]
        fn install / install_injected(
            area: *mut u8,
            base: *mut u64,
            cpu: usize,
            expected: Packed,
            new: Packed,
        ) -> (Outcome, u64) = install_section;
        "As in `bump`; the section commits with its single store of `new`, to the slot of \
         `cpu` (in bounds, by the caller), only when the thread runs on `cpu`."
    }

    /// The bump-or-claim section. A CPU at or beyond `$cpus` exits with status 4 before
    /// touching memory.
    macro_rules! claim_section {
        ($mode:ident [$($extra:tt)*], $area:expr, $base:expr, $cpus:expr, $bytes:expr,
         $reserve:expr) => {{
            let mut aborts: u64 = 0;
            let (status, slot, top, end): (u64, u64, usize, usize);
            section!(
                $mode [
                    "mov {slot:e}, dword ptr [{area}]",
                    "cmp {slot}, {cpus}",
                    "jae 14f",
                    "shl {slot}, {slot_shift}",
                    "add {slot}, {base}",
                    "mov {top}, qword ptr [{slot}]",
                    "mov {end}, qword ptr [{slot} + 8]",
                    "lea {scratch}, [{top} + {bytes}]",
                    "lea {claim}, [{end} + {reserve}]",
                    "cmp {scratch}, {end}",
                    "cmova {scratch}, {claim}",
                    "mov qword ptr [{slot}], {scratch}",
                ],
                [$($extra)*],
                area = in(reg) $area,
                base = in(reg) $base,
                cpus = in(reg) $cpus,
                bytes = in(reg) $bytes,
                reserve = in(reg) $reserve,
                aborts = inout(reg) aborts,
                status = out(reg) status,
                slot = out(reg) slot,
                top = out(reg) top,
                end = out(reg) end,
                claim = out(reg) _,
                scratch = out(reg) _,
            );
            let cpu = ((slot as usize).wrapping_sub($base as usize)) >> SLOT_SHIFT;
            let outcome = match status {
                1 if top + $bytes <= end => LabBump::Object { cpu, address: top },
                1 => LabBump::Claimed { cpu, top, end },
                4 => LabBump::OutOfRange,
                _ => LabBump::GaveUp,
            };
            (outcome, aborts)
        }};
    }

    section_fns! {
        /// See `LabSlots::bump_or_claim`. One store commits either the bumped top or, when the
        /// object does not fit, `end + reserve` (a conditional move picks which).
        ///
        /// # Safety
        /// `area` is the calling thread's registered area; `base` points to `cpus` LAB slots.
        fn lab_bump_or_claim / lab_bump_or_claim_injected(
            area: *mut u8,
            base: *mut usize,
            cpus: usize,
            bytes: usize,
            reserve: usize,
        ) -> (LabBump, u64) = claim_section;
        "The section writes only the slot of the CPU it runs on, after checking that CPU is \
         below `cpus`, with its last instruction."
    }

    /// The LAB install section: first closes the slot (`end = 0`: nothing fits), then writes
    /// `top`, then commits `end`: a section interrupted half-way leaves a slot that owns
    /// nothing, and the thread still owns its LAB. A CPU at or beyond `$cpus` exits with
    /// status 4 before touching memory.
    macro_rules! lab_install_section {
        ($mode:ident [$($extra:tt)*], $area:expr, $base:expr, $cpus:expr, $reserve:expr,
         $top:expr, $end:expr) => {{
            let mut aborts: u64 = 0;
            let (status, slot): (u64, u64);
            section!(
                $mode [
                    "mov {slot:e}, dword ptr [{area}]",
                    "cmp {slot}, {cpus}",
                    "jae 14f",
                    "shl {slot}, {slot_shift}",
                    "add {slot}, {base}",
                    "mov {scratch}, qword ptr [{slot} + 8]",
                    "add {scratch}, {reserve}",
                    "cmp qword ptr [{slot}], {scratch}",
                    "jb 7f",
                    "mov qword ptr [{slot} + 8], 0",
                    "mov qword ptr [{slot}], {top}",
                    "mov qword ptr [{slot} + 8], {end}",
                ],
                [$($extra)*],
                area = in(reg) $area,
                base = in(reg) $base,
                cpus = in(reg) $cpus,
                reserve = in(reg) $reserve,
                top = in(reg) $top,
                end = in(reg) $end,
                aborts = inout(reg) aborts,
                status = out(reg) status,
                slot = out(reg) slot,
                scratch = out(reg) _,
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
        /// See `LabSlots::install`.
        ///
        /// # Safety
        /// As for `lab_bump_or_claim`.
        fn lab_install / lab_install_injected(
            area: *mut u8,
            base: *mut usize,
            cpus: usize,
            reserve: usize,
            top: usize,
            end: usize,
        ) -> (LabInstall, u64) = lab_install_section;
        "As in `lab_bump_or_claim`; the stores before the commit only make the slot own \
         nothing."
    }

    /// The inline LAB bump. Moving, refusal and abort all return 0; there is no retry loop
    /// and no status register. The abort handler counts the abort in the third word of
    /// `slot` with one locked add (only aborts pay for it), which readers load atomically.
    macro_rules! inline_bump_section {
        ([$($injection:literal),*], [$($extra:tt)*], $area_offset:expr, $slot:expr, $cpu:expr,
         $bytes:expr) => {{
            let object: usize;
            asm!(
                ".pushsection __rseq_cs, \"aw\"",
                ".balign 32",
                "3:",
                ".long 0, 0",
                ".quad 4f, (5f - 4f), 6f",
                ".popsection",
                "lea {scratch}, [rip + 3b]",
                "mov qword ptr fs:[{area} + 8], {scratch}",
                "4:",
                $($injection,)*
                "cmp dword ptr fs:[{area}], {cpu:e}",
                $($injection,)*
                "jne 7f",
                $($injection,)*
                "mov {object}, qword ptr [{slot}]",
                $($injection,)*
                "lea {scratch}, [{object} + {bytes}]",
                $($injection,)*
                "cmp {scratch}, qword ptr [{slot} + 8]",
                $($injection,)*
                "ja 7f",
                $($injection,)*
                "mov qword ptr [{slot}], {scratch}",
                "5:",
                ".pushsection .text.hab_rseq_abort, \"ax\"",
                "7:",
                "xor {object:e}, {object:e}",
                "jmp 5b",
                ".byte 0x0f, 0xb9, 0x3d",
                ".long {signature}",
                "6:",
                "lock add qword ptr [{slot} + 16], 1",
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
        // SAFETY: `fs:[area_offset]` is the calling thread's area; the section writes only
        // `slot`, the slot of the CPU it checked it runs on, with its last instruction; inputs
        // are never written.
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
                ["lea rcx, [rcx - 1]", "jrcxz 21f", "jmp 22f", "21:", "jmp 6f", "22:"],
                [inout("rcx") inject_at => _,],
                area_offset,
                slot,
                cpu,
                bytes
            )
        }
    }

    /// See `super::cpu_hint`.
    ///
    /// # Safety
    /// As for `super::cpu_hint`.
    #[inline]
    pub(super) unsafe fn cpu_hint(area_offset: isize) -> u32 {
        let cpu: u32;
        // SAFETY: `fs:[area_offset]` is the calling thread's area; a 4-byte read.
        unsafe {
            asm!(
                "mov {cpu:e}, dword ptr fs:[{area}]",
                area = in(reg) area_offset,
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
                before: Packed(word),
            },
            0 => Outcome::Refused {
                cpu,
                seen: Packed(word),
            },
            3 => Outcome::Moved,
            4 => Outcome::OutOfRange,
            _ => Outcome::GaveUp,
        }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod imp {
    use super::{LabBump, LabInstall, Outcome, Packed, RseqMechanism};

    pub(super) fn discover() -> RseqMechanism {
        RseqMechanism::Unavailable("restartable sequences are implemented for x86_64 Linux".into())
    }

    pub(super) fn glibc_area(_: isize) -> *mut u8 {
        std::ptr::null_mut()
    }

    pub(super) fn glibc_symbols() -> Option<(isize, u32)> {
        None
    }

    pub(super) fn own_area() -> Option<*mut u8> {
        None
    }

    pub(super) unsafe fn bump(_: *mut u8, _: *mut u64, _: usize, _: u64, _: u64) -> (Outcome, u64) {
        (Outcome::GaveUp, 0)
    }

    pub(super) unsafe fn install(
        _: *mut u8,
        _: *mut u64,
        _: usize,
        _: Packed,
        _: Packed,
    ) -> (Outcome, u64) {
        (Outcome::GaveUp, 0)
    }

    pub(super) unsafe fn lab_bump_or_claim(
        _: *mut u8,
        _: *mut usize,
        _: usize,
        _: usize,
        _: usize,
    ) -> (LabBump, u64) {
        (LabBump::GaveUp, 0)
    }

    pub(super) unsafe fn lab_install(
        _: *mut u8,
        _: *mut usize,
        _: usize,
        _: usize,
        _: usize,
        _: usize,
    ) -> (LabInstall, u64) {
        (LabInstall::GaveUp, 0)
    }

    pub(super) unsafe fn lab_bump(_: isize, _: *mut usize, _: u32, _: usize) -> usize {
        0
    }

    pub(super) unsafe fn cpu_hint(_: isize) -> u32 {
        0
    }

    #[cfg(test)]
    pub(super) unsafe fn bump_injected(
        _: *mut u8,
        _: *mut u64,
        _: usize,
        _: u64,
        _: u64,
        _: u64,
    ) -> (Outcome, u64) {
        (Outcome::GaveUp, 0)
    }

    #[cfg(test)]
    pub(super) unsafe fn bump_widened(
        _: *mut u8,
        _: *mut u64,
        _: usize,
        _: u64,
        _: u64,
    ) -> (Outcome, u64) {
        (Outcome::GaveUp, 0)
    }

    #[cfg(test)]
    pub(super) unsafe fn install_injected(
        _: *mut u8,
        _: *mut u64,
        _: usize,
        _: Packed,
        _: Packed,
        _: u64,
    ) -> (Outcome, u64) {
        (Outcome::GaveUp, 0)
    }

    #[cfg(test)]
    pub(super) unsafe fn lab_bump_or_claim_injected(
        _: *mut u8,
        _: *mut usize,
        _: usize,
        _: usize,
        _: usize,
        _: u64,
    ) -> (LabBump, u64) {
        (LabBump::GaveUp, 0)
    }

    #[cfg(test)]
    pub(super) unsafe fn lab_install_injected(
        _: *mut u8,
        _: *mut usize,
        _: usize,
        _: usize,
        _: usize,
        _: usize,
        _: u64,
    ) -> (LabInstall, u64) {
        (LabInstall::GaveUp, 0)
    }

    #[cfg(test)]
    pub(super) unsafe fn lab_bump_injected(
        _: isize,
        _: *mut usize,
        _: u32,
        _: usize,
        _: u64,
    ) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    fn area() -> Option<*mut u8> {
        let area = current_area();
        if area.is_none() {
            eprintln!("rseq unavailable here: {}", mechanism());
        }
        area
    }

    fn pin(cpu: usize) -> bool {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        }
    }

    fn online_cpus() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    #[test]
    fn packed_words_split_top_and_left() {
        let word = Packed::new(12345, 678);
        assert_eq!((word.top_words(), word.left_words()), (12345, 678));
        let max = Packed::new(TOP_MASK, (MAX_BUFFER_BYTES / 8) as u64);
        assert_eq!(max.left_words() * 8, MAX_BUFFER_BYTES as u64);
    }

    /// On one pinned CPU: bumps take words in order, refuse when too few are left, and an
    /// install replaces the slot only if it still holds what the thread saw.
    #[test]
    fn bump_and_install_on_one_cpu() {
        std::thread::spawn(|| {
            let Some(area) = area() else { return };
            assert!(pin(0));
            let slots = Slots::new(online_cpus());
            // SAFETY (both): `area` is this thread's registered area.
            let bump = |words| unsafe { slots.bump(area, words) }.0;
            let install = |cpu, old, new| unsafe { slots.install(area, cpu, old, new) }.0;
            let done = |top, left| Outcome::Done {
                cpu: 0,
                before: Packed::new(top, left),
            };
            let refused = |top, left| Outcome::Refused {
                cpu: 0,
                seen: Packed::new(top, left),
            };

            assert_eq!(bump(2), refused(0, 0), "an empty slot refuses");
            assert!(matches!(
                install(0, Packed(0), Packed::new(100, 5)),
                Outcome::Done { cpu: 0, .. }
            ));
            assert_eq!(bump(2), done(100, 5));
            assert_eq!(bump(3), done(102, 3));
            assert_eq!(bump(1), refused(105, 0), "too few words left");
            // A stale expectation does not install.
            assert_eq!(
                install(0, Packed::new(100, 5), Packed::new(200, 9)),
                refused(105, 0)
            );
            // Nor does the wrong CPU.
            if online_cpus() > 1 {
                assert_eq!(install(1, Packed(0), Packed::new(200, 9)), Outcome::Moved);
            }
            assert_eq!(slots.load(0), Packed::new(105, 0));
        })
        .join()
        .unwrap();
    }

    extern "C" fn ignore(_: libc::c_int) {}

    /// Many more threads than CPUs bump and refill per-CPU slots while they keep moving
    /// between CPUs and a storm of signals hits them: every word handed out is handed out
    /// once, and the sections did abort.
    #[test]
    fn migrations_and_signal_storms_never_hand_out_a_word_twice() {
        if area().is_none() {
            return;
        }
        const THREADS: usize = 128;
        const BUMPS: usize = 4000;
        const CHUNK_WORDS: u64 = 64;
        // SAFETY: installs a handler that does nothing, with SA_RESTART.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut());
        }
        let cpus = online_cpus();
        let slots = Arc::new(Slots::new(cpus));
        let next_chunk = Arc::new(AtomicU64::new(0));
        let aborts = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        // Workers stay alive until the storm has stopped: signalling an exited thread is UB.
        let finished = Arc::new(AtomicU64::new(0));
        let released = Arc::new(AtomicBool::new(false));
        let threads = Arc::new(Mutex::new(Vec::new()));
        let storm = {
            let (threads, done) = (threads.clone(), done.clone());
            std::thread::spawn(move || {
                let mut signals = 0u64;
                while !done.load(Ordering::Relaxed) {
                    for &thread in threads.lock().unwrap().iter() {
                        // SAFETY: the thread id belongs to a live worker (workers are only
                        // joined after `done` is set and this thread stopped).
                        unsafe { libc::pthread_kill(thread, libc::SIGUSR1) };
                        signals += 1;
                    }
                    std::thread::yield_now();
                }
                signals
            })
        };
        let workers: Vec<_> = (0..THREADS)
            .map(|index| {
                let (slots, next_chunk, aborts, threads) = (
                    slots.clone(),
                    next_chunk.clone(),
                    aborts.clone(),
                    threads.clone(),
                );
                let (finished, released) = (finished.clone(), released.clone());
                std::thread::spawn(move || {
                    // SAFETY: pthread_self has no preconditions.
                    let me = unsafe { libc::pthread_self() };
                    threads.lock().unwrap().push(me);
                    let area = current_area().expect("registered");
                    let mut words = Vec::with_capacity(BUMPS);
                    let mut sidelined = Vec::new();
                    let mut bumps = 0;
                    while bumps < BUMPS {
                        if bumps % 64 == 0 {
                            pin((index + bumps / 64) % cpus);
                        }
                        // SAFETY: `area` is this thread's registered area.
                        let widened = |words| unsafe { slots.bump_widened(area, words) };
                        // SAFETY: as above.
                        let plain = |words| unsafe { slots.bump(area, words) };
                        let (outcome, aborted) = if bumps % 8 == 0 { widened(2) } else { plain(2) };
                        aborts.fetch_add(aborted, Ordering::Relaxed);
                        match outcome {
                            Outcome::Done { before, .. } => {
                                words.push(before.top_words());
                                bumps += 1;
                            }
                            Outcome::Refused { cpu, seen } => {
                                let start = next_chunk.fetch_add(CHUNK_WORDS, Ordering::Relaxed);
                                let new = Packed::new(start, CHUNK_WORDS);
                                // SAFETY: as above.
                                let (installed, aborted) =
                                    unsafe { slots.install(area, cpu, seen, new) };
                                aborts.fetch_add(aborted, Ordering::Relaxed);
                                if !matches!(installed, Outcome::Done { .. }) {
                                    sidelined.push(start);
                                }
                            }
                            Outcome::Moved | Outcome::OutOfRange | Outcome::GaveUp => {}
                        }
                    }
                    finished.fetch_add(1, Ordering::Release);
                    while !released.load(Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                    (words, sidelined)
                })
            })
            .collect();
        while finished.load(Ordering::Acquire) < THREADS as u64 {
            std::thread::yield_now();
        }
        done.store(true, Ordering::Relaxed);
        let signals = storm.join().unwrap();
        released.store(true, Ordering::Release);
        let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        let mut words: Vec<u64> = results
            .iter()
            .flat_map(|(w, _)| w.iter().copied())
            .collect();
        let sidelined: Vec<u64> = results
            .iter()
            .flat_map(|(_, s)| s.iter().copied())
            .collect();
        words.sort_unstable();
        for pair in words.windows(2) {
            assert!(
                pair[1] >= pair[0] + 2,
                "words {} and {} overlap",
                pair[0],
                pair[1]
            );
        }
        for chunk in &sidelined {
            let inside = words.partition_point(|&w| w < *chunk);
            assert!(
                words.get(inside).is_none_or(|&w| w >= chunk + CHUNK_WORDS),
                "a sidelined chunk was used"
            );
        }
        assert_eq!(words.len(), THREADS * BUMPS);
        let total_aborts = aborts.load(Ordering::Relaxed);
        eprintln!(
            "{signals} signals, {total_aborts} aborts, {} sidelined chunks",
            sidelined.len()
        );
        assert!(
            total_aborts > 0,
            "the storm should have aborted some sections"
        );
    }

    /// The `plab` sections with an abort forced at an instruction boundary of every
    /// bump-or-claim (each boundary in turn), while 64 threads move between CPUs and carve objects, claim tails and
    /// install LABs: every call aborts once and retries, and no byte is handed out twice.
    #[test]
    fn lab_sections_with_injected_aborts_never_hand_out_a_byte_twice() {
        if area().is_none() {
            return;
        }
        const THREADS: usize = 64;
        const CALLS: usize = 3000;
        const LAB_BYTES: usize = 512;
        let cpus = online_cpus();
        let slots = Arc::new(LabSlots::new(cpus));
        // Fake heap addresses: LABs are carved upwards from here, never dereferenced.
        let next_lab = Arc::new(AtomicU64::new(1 << 20));
        let workers: Vec<_> = (0..THREADS)
            .map(|index| {
                let (slots, next_lab) = (slots.clone(), next_lab.clone());
                std::thread::spawn(move || {
                    let area = current_area().expect("registered");
                    // (start, bytes) of every piece this thread was handed.
                    let mut pieces = Vec::new();
                    let mut aborts = 0;
                    for call in 0..CALLS {
                        if call % 32 == 0 {
                            pin((index + call / 32) % cpus);
                        }
                        let bytes = 8 * (1 + call % 7);
                        // SAFETY: `area` is this thread's registered area.
                        let inject_at = 1 + (call % CLAIM_POINTS) as u64;
                        let (outcome, aborted) =
                            unsafe { slots.bump_or_claim_injected(area, bytes, 0, inject_at) };
                        aborts += aborted;
                        match outcome {
                            LabBump::Object { address, .. } => pieces.push((address, bytes)),
                            LabBump::Claimed { top, end, .. } => {
                                if top < end {
                                    pieces.push((top, end - top));
                                }
                                let lab = next_lab.fetch_add(LAB_BYTES as u64, Ordering::Relaxed)
                                    as usize;
                                pieces.push((lab, bytes));
                                // SAFETY: as above.
                                let (installed, _) =
                                    unsafe { slots.install(area, 0, lab + bytes, lab + LAB_BYTES) };
                                if matches!(installed, LabInstall::Occupied { .. }) {
                                    pieces.push((lab + bytes, LAB_BYTES - bytes));
                                }
                            }
                            LabBump::GaveUp | LabBump::OutOfRange => {
                                panic!("{outcome:?} after one injected abort")
                            }
                        }
                    }
                    (pieces, aborts)
                })
            })
            .collect();
        let mut pieces = Vec::new();
        for worker in workers {
            let (mine, aborts) = worker.join().unwrap();
            assert!(aborts >= CALLS as u64, "every call aborts at least once");
            pieces.extend(mine);
        }
        for cpu in 0..cpus {
            let (top, end) = slots.load(cpu);
            if top < end {
                pieces.push((top, end - top));
            }
        }
        pieces.sort_unstable();
        for pair in pieces.windows(2) {
            let ((a, a_len), (b, _)) = (pair[0], pair[1]);
            assert!(
                a + a_len <= b,
                "pieces at {a:#x}+{a_len} and {b:#x} overlap"
            );
        }
        let handed: usize = pieces.iter().map(|&(_, len)| len).sum();
        let carved = next_lab.load(Ordering::Relaxed) as usize - (1 << 20);
        assert_eq!(handed, carved, "every byte of every LAB is accounted for");
    }

    /// The inline `plab` bump carves from the LAB of the CPU it was given only while the thread
    /// runs on that CPU, and refuses an object that does not fit.
    #[test]
    fn the_inline_lab_bump_checks_the_cpu_and_the_end() {
        std::thread::spawn(|| {
            let Some(offset) = fixed_area_offset() else {
                eprintln!("no fixed rseq area offset here: {}", mechanism());
                return;
            };
            if !matches!(mechanism(), RseqMechanism::Glibc { .. }) {
                return;
            }
            assert!(pin(0));
            let slots = LabSlots::new(online_cpus().max(2));
            slots.store(0, (1000, 1064));
            // SAFETY: `offset` is glibc's area offset; the slots are live.
            let bump = |cpu, bytes| unsafe { lab_bump(offset, slots.slot_of(cpu), cpu, bytes) };
            assert_eq!(bump(0, 16), 1000);
            assert_eq!(bump(0, 48), 1016);
            assert_eq!(bump(0, 8), 0, "full");
            assert_eq!(slots.load(0), (1064, 1064));
            if online_cpus() > 1 {
                slots.store(1, (2000, 3000));
                assert_eq!(bump(1, 16), 0, "the thread is not on CPU 1");
                assert_eq!(slots.load(1), (2000, 3000));
            }
        })
        .join()
        .unwrap();
    }

    /// Instructions in each section's body, from the arming store to the commit: an abort
    /// can land before each of them. A refusal leaves at its branch, before the commit: the
    /// `_REFUSED` counts end there.
    const BUMP_POINTS: usize = 10;
    const BUMP_REFUSED_POINTS: usize = 9;
    const INSTALL_POINTS: usize = 9;
    const INSTALL_REFUSED_POINTS: usize = 8;
    const CLAIM_POINTS: usize = 12;
    const LAB_INSTALL_POINTS: usize = 12;
    const LAB_INSTALL_REFUSED_POINTS: usize = 9;
    const INLINE_POINTS: usize = 7;

    /// Runs `section(k)` from a fresh state for every injection point `k` (0: none) and one
    /// beyond the last, retrying a point whose abort count a real preemption may have raised.
    /// Checks that a section with an injected abort ends exactly as one without: `outcome`
    /// gives what the section returned and the state it left.
    fn at_every_boundary<T: PartialEq + std::fmt::Debug>(
        name: &str,
        points: usize,
        mut section: impl FnMut(u64) -> (T, u64),
    ) {
        let (expected, _) = section(0);
        for k in 1..=points as u64 + 1 {
            let (outcome, aborts) = (0..3)
                .map(|_| section(k))
                .min_by_key(|(_, aborts)| *aborts)
                .expect("three tries");
            assert_eq!(outcome, expected, "{name}: abort injected at boundary {k}");
            let injected = u64::from(k <= points as u64);
            assert_eq!(
                aborts, injected,
                "{name}: aborts with an injection at boundary {k}"
            );
        }
    }

    /// An abort at every instruction boundary of every restartable section (the per-CPU
    /// level's bump and install, the `plab` bump-or-claim and install, and the inline `plab`
    /// bump), in the spirit of librseq's injection points: each section restarts (or, inline,
    /// returns 0 for the slow path) and ends with the same result and the same memory as
    /// without the abort. Every byte is accounted for.
    #[test]
    fn an_abort_at_every_instruction_boundary_changes_nothing() {
        std::thread::spawn(|| {
            let Some(area) = area() else { return };
            assert!(pin(0));
            let cpus = online_cpus();

            // Per-CPU level: a bump that fits, one that is refused, an install.
            for (words, points) in [(2, BUMP_POINTS), (6, BUMP_REFUSED_POINTS)] {
                at_every_boundary("bump", points, |k| {
                    let slots = Slots::new(cpus);
                    slots.store(0, Packed::new(100, 5));
                    // SAFETY: `area` is this thread's registered area.
                    let (outcome, aborts) = unsafe { slots.bump_injected(area, words, k) };
                    ((outcome, slots.load(0)), aborts)
                });
            }
            for (expected, points) in [
                (Packed::new(100, 5), INSTALL_POINTS),
                (Packed::new(100, 4), INSTALL_REFUSED_POINTS),
            ] {
                at_every_boundary("install", points, |k| {
                    let slots = Slots::new(cpus);
                    slots.store(0, Packed::new(100, 5));
                    let new = Packed::new(300, 9);
                    // SAFETY: as above; CPU 0 is in bounds.
                    let (outcome, aborts) =
                        unsafe { slots.install_injected(area, 0, expected, new, k) };
                    ((outcome, slots.load(0)), aborts)
                });
            }

            // `plab` LABs: an object that fits, one that claims the tail, an install into an
            // empty slot and one refused by an occupied slot.
            for bytes in [16, 64] {
                at_every_boundary("bump_or_claim", CLAIM_POINTS, |k| {
                    let slots = LabSlots::new(cpus);
                    slots.store(0, (1000, 1040));
                    // SAFETY: as above.
                    let (outcome, aborts) =
                        unsafe { slots.bump_or_claim_injected(area, bytes, 8, k) };
                    ((outcome, slots.load(0)), aborts)
                });
            }
            for (occupant, points) in [
                // Claimed: `top` is `end + reserve`, the LAB owns nothing.
                ((1048, 1040), LAB_INSTALL_POINTS),
                ((1000, 1040), LAB_INSTALL_REFUSED_POINTS),
            ] {
                at_every_boundary("lab install", points, |k| {
                    let slots = LabSlots::new(cpus);
                    slots.store(0, occupant);
                    // SAFETY: as above.
                    let (outcome, aborts) =
                        unsafe { slots.install_injected(area, 8, 2000, 2992, k) };
                    ((outcome, slots.load(0)), aborts)
                });
            }

            // The inline bump gives up at once on an abort: the caller's slow path retries.
            let Some(offset) = fixed_area_offset() else {
                eprintln!("no fixed rseq area offset here: {}", mechanism());
                return;
            };
            if !matches!(mechanism(), RseqMechanism::Glibc { .. }) {
                return;
            }
            for k in 1..=INLINE_POINTS as u64 + 1 {
                let (object, lab, counted) = (0..3)
                    .map(|_| {
                        let slots = LabSlots::new(cpus);
                        slots.store(0, (1000, 1040));
                        // SAFETY: `offset` is glibc's area offset; the slots are live.
                        let object =
                            unsafe { lab_bump_injected(offset, slots.slot_of(0), 0, 16, k) };
                        (object, slots.load(0), slots.inline_aborts())
                    })
                    .min_by_key(|&(_, _, counted)| counted)
                    .expect("three tries");
                if k <= INLINE_POINTS as u64 {
                    assert_eq!((object, lab, counted), (0, (1000, 1040), 1), "boundary {k}");
                } else {
                    assert_eq!(
                        (object, lab, counted),
                        (1000, (1016, 1040), 0),
                        "boundary {k}"
                    );
                }
            }
        })
        .join()
        .unwrap();
    }

    /// The highest CPU other than 0 this thread may run on, if any.
    fn a_cpu_beyond_zero() -> Option<usize> {
        // SAFETY: a zeroed cpu_set_t is a valid empty set, filled by the kernel.
        let set = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
            set
        };
        // SAFETY: reads bits inside the set.
        (1..libc::CPU_SETSIZE as usize)
            .rev()
            .find(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
    }

    /// A thread on a CPU beyond the slots (a topology smaller than the machine): every
    /// section says so and writes nothing; the inline path finds the empty slot past the
    /// array and returns 0.
    #[test]
    fn a_cpu_beyond_the_slots_touches_no_slot() {
        std::thread::spawn(|| {
            let Some(area) = area() else { return };
            let Some(cpu) = a_cpu_beyond_zero() else {
                eprintln!("skipped: this thread may only run on cpu 0");
                return;
            };
            assert!(pin(cpu));
            let slots = Slots::new(1);
            slots.store(0, Packed::new(100, 5));
            // SAFETY: `area` is this thread's registered area.
            let (outcome, _) = unsafe { slots.bump(area, 2) };
            assert_eq!(outcome, Outcome::OutOfRange);
            assert_eq!(slots.load(0), Packed::new(100, 5));

            let labs = LabSlots::new(1);
            labs.store(0, (1000, 1040));
            // SAFETY: as above.
            let (claimed, _) = unsafe { labs.bump_or_claim(area, 16, 8) };
            assert_eq!(claimed, LabBump::OutOfRange);
            labs.store(0, EMPTY_LAB);
            // SAFETY: as above.
            let (installed, _) = unsafe { labs.install(area, 8, 2000, 2992) };
            assert_eq!(installed, LabInstall::OutOfRange);
            assert_eq!(labs.load(0), EMPTY_LAB, "nothing installed");
            labs.store(0, (1000, 1040));
            assert_eq!(
                labs.slot_of(cpu as u32),
                labs.slot_of(1),
                "the empty slot past the array"
            );
            if let (Some(offset), RseqMechanism::Glibc { .. }) = (fixed_area_offset(), mechanism())
            {
                // SAFETY: `offset` is glibc's area offset; `slot_of` gives a live slot.
                let object = unsafe { lab_bump(offset, labs.slot_of(cpu as u32), cpu as u32, 16) };
                assert_eq!(object, 0);
                assert_eq!(labs.load(0), (1000, 1040), "CPU 0's LAB untouched");
            }
        })
        .join()
        .unwrap();
    }

    /// A child process made by fork keeps a working registration.
    #[test]
    fn a_forked_child_can_bump() {
        if area().is_none() {
            return;
        }
        let slots = Slots::new(online_cpus());
        // SAFETY: the child only runs async-signal-safe code (rseq sections, plain memory,
        // _exit) before exiting.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = (|| {
                let area = current_area()?;
                for cpu in 0..slots.cpus() {
                    slots.store(cpu, Packed::new(0, 1000));
                }
                // SAFETY: the child inherited this thread's registration.
                let (outcome, _) = unsafe { slots.bump(area, 4) };
                matches!(outcome, Outcome::Done { .. }).then_some(())
            })();
            // SAFETY: ends the child without running the parent's destructors.
            unsafe { libc::_exit(if ok.is_some() { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child status {status}"
        );
    }
}
