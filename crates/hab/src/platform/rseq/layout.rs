//! The layouts the restartable sections share with the kernel and with compiled code, defined
//! once: the rseq area (fields named as the kernel's `struct rseq` and librseq name them), a
//! per-CPU LAB slot, a per-CPU buffer slot, and the line before an array of slots. The
//! sections take every offset from here as a `const` operand; the LAB slot's offsets are
//! public ([`CPU_LAB_TOP_OFFSET`](crate::CPU_LAB_TOP_OFFSET) and its siblings), and `hab.h`
//! publishes the same numbers (`crates/hab-capi/tests/header.rs` checks that they agree).

use std::mem::{offset_of, size_of};

/// The kernel's `struct rseq` as Linux 6.3 and later lay it out (32 bytes, 32-byte aligned):
/// what a thread registers, and what glibc registers for every thread.
#[repr(C, align(32))]
pub(crate) struct RseqArea {
    /// The CPU the thread runs on, always a valid number once registered.
    pub(crate) cpu_id_start: u32,
    /// The same, or a negative value while the area is not registered.
    pub(crate) cpu_id: u32,
    /// The descriptor of the critical section in progress, or 0; the kernel clears it when
    /// it aborts the section.
    pub(crate) rseq_cs: u64,
    pub(crate) flags: u32,
    pub(crate) node_id: u32,
    /// The thread's concurrency id (Linux 6.3 and later).
    pub(crate) mm_cid: u32,
    _reserved: u32,
}

impl RseqArea {
    /// An area not yet registered: `cpu_id` −1 (as the kernel writes when it unregisters one).
    pub(crate) const UNREGISTERED: RseqArea = RseqArea {
        cpu_id_start: 0,
        cpu_id: u32::MAX,
        rseq_cs: 0,
        flags: 0,
        node_id: 0,
        mm_cid: 0,
        _reserved: 0,
    };
}

/// Where a section stores its descriptor's address before it starts.
pub(crate) const RSEQ_CS_OFFSET: usize = offset_of!(RseqArea, rseq_cs);
/// The index field of [`SlotIndex::Cpu`](super::SlotIndex::Cpu).
pub(crate) const CPU_ID_START_OFFSET: usize = offset_of!(RseqArea, cpu_id_start);
/// The index field of [`SlotIndex::ConcurrencyId`](super::SlotIndex::ConcurrencyId).
pub(crate) const MM_CID_OFFSET: usize = offset_of!(RseqArea, mm_cid);
/// The field the kernel writes the CPU to, negative while the area is not registered.
pub(crate) const CPU_ID_OFFSET: usize = offset_of!(RseqArea, cpu_id);
/// The size Hab registers its own areas with.
pub(crate) const RSEQ_AREA_BYTES: usize = size_of::<RseqArea>();

/// A per-CPU LAB of the `cpu-lab` mode: one per CPU (or concurrency id), two cache lines each
/// so that neighbours never share a line. An object of `n` bytes fits when `top + n <= end`;
/// a slot with `top > end` owns nothing.
#[repr(C, align(128))]
pub(crate) struct CpuLabSlot {
    /// The next object's address.
    pub(crate) top: usize,
    /// The soft end: objects go up to here (the memory beyond is not zeroed yet).
    pub(crate) end: usize,
    /// Aborts of the inline path on this slot, counted by its abort handler (locked adds).
    pub(crate) inline_aborts: u64,
    /// Offset from the thread pointer of the index field the inline path checks, so that it
    /// needs no register for it.
    pub(crate) index_field_offset: isize,
    /// The end of the memory the LAB owns, less the reserve that keeps every tail fillable.
    pub(crate) limit: usize,
}

/// The bytes between two slots, and `log2` of them (every array of slots is strided so).
pub(crate) const SLOT_SHIFT: u32 = 7;
pub(crate) const SLOT_BYTES: usize = 1 << SLOT_SHIFT;

pub(crate) const LAB_TOP_OFFSET: usize = offset_of!(CpuLabSlot, top);
pub(crate) const LAB_END_OFFSET: usize = offset_of!(CpuLabSlot, end);
pub(crate) const LAB_INLINE_ABORTS_OFFSET: usize = offset_of!(CpuLabSlot, inline_aborts);
pub(crate) const LAB_INDEX_FIELD_OFFSET: usize = offset_of!(CpuLabSlot, index_field_offset);
pub(crate) const LAB_LIMIT_OFFSET: usize = offset_of!(CpuLabSlot, limit);

/// A per-CPU buffer of the `cpu` level: one [`PackedWord`](super::PackedWord) (top and words
/// left), so that a bump and an install each commit with one store.
#[repr(C, align(128))]
pub(crate) struct CpuBufferSlot {
    pub(crate) word: u64,
}

pub(crate) const BUFFER_WORD_OFFSET: usize = offset_of!(CpuBufferSlot, word);

/// The line before the first slot of an array: read by every section before it touches a
/// slot, never written after the array is made.
#[repr(C, align(128))]
pub(crate) struct SlotsHeader {
    _unused: [u64; 14],
    /// How many slots the sections may use: an index at or beyond it exits before touching
    /// memory.
    pub(crate) bound: u64,
    /// Offset of the index field in the rseq area ([`CPU_ID_START_OFFSET`] or
    /// [`MM_CID_OFFSET`]).
    pub(crate) index_field_offset: u64,
}

/// How far below the first slot the header's `bound` is.
pub(crate) const HEADER_BOUND_BELOW: usize =
    size_of::<SlotsHeader>() - offset_of!(SlotsHeader, bound);
/// How far below the first slot the header's `index_field_offset` is.
pub(crate) const HEADER_INDEX_FIELD_BELOW: usize =
    size_of::<SlotsHeader>() - offset_of!(SlotsHeader, index_field_offset);

const _: () = {
    assert!(size_of::<CpuLabSlot>() == SLOT_BYTES);
    assert!(size_of::<CpuBufferSlot>() == SLOT_BYTES);
    assert!(size_of::<SlotsHeader>() == SLOT_BYTES);
    assert!(RSEQ_AREA_BYTES == 32);
    // What the kernel's ABI fixes.
    assert!(CPU_ID_START_OFFSET == 0 && RSEQ_CS_OFFSET == 8 && MM_CID_OFFSET == 24);
};

/// The signature glibc registers with on x86_64; Hab's own registrations use it too.
pub(crate) const SIGNATURE: u32 = 0x5305_3053;
