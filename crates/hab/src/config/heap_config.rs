//! A checked heap configuration ([`HeapConfig`]), as the builder (`builder.rs`) makes it.

use crate::config::levels::{MiddleLevelSpec, TopologySpec};
use crate::config::options::{Mode, TlabPolicy, ZeroMemory};
use crate::platform::cpu_id::CpuIdSource;

/// A checked heap configuration. Build one with [`HeapConfig::builder`].
///
/// ```
/// use hab::{HeapConfig, Mode, TlabPolicy};
/// let config = HeapConfig::builder()
///     .capacity("64MiB")
///     .mode(Mode::Tlab)
///     .tlab(TlabPolicy::Adaptive)
///     .max_tlab("256KiB")
///     .build()
///     .unwrap();
/// assert_eq!(config.capacity_bytes(), 64 << 20);
/// assert_eq!(config.min_tlab_bytes(), 2048);
///
/// let error = HeapConfig::builder().capacity(0).build().unwrap_err();
/// assert_eq!(error.field(), "capacity");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct HeapConfig {
    pub(super) capacity_bytes: usize,
    pub(super) mode: Mode,
    pub(super) tlab: TlabPolicy,
    pub(super) min_tlab_bytes: usize,
    pub(super) max_tlab_bytes: usize,
    pub(super) alignment_bytes: usize,
    pub(super) waste_target_percent: f64,
    pub(super) refill_waste_fraction: usize,
    pub(super) waste_increment_bytes: usize,
    pub(super) allocation_weight_percent: u32,
    pub(super) zero: ZeroMemory,
    pub(super) pretouch: bool,
    pub(super) end_of_cycle: bool,
    pub(super) middle: Vec<MiddleLevelSpec>,
    pub(super) buffers_follow_allocation: bool,
    pub(super) cpu_id: Option<CpuIdSource>,
    pub(super) topology: TopologySpec,
}

impl HeapConfig {
    /// Bytes reserved for the heap.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }
    /// The allocation mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// The TLAB sizing policy.
    pub fn tlab(&self) -> TlabPolicy {
        self.tlab
    }
    /// The smallest TLAB worth taking (`-XX:MinTLABSize`); a smaller remainder of the heap is
    /// used by allocations outside TLABs.
    pub fn min_tlab_bytes(&self) -> usize {
        self.min_tlab_bytes
    }
    /// The largest TLAB (`-XX:MaxTLABSize`); objects bigger than it are allocated outside TLABs.
    pub fn max_tlab_bytes(&self) -> usize {
        self.max_tlab_bytes
    }
    /// Object alignment: every object size must be a multiple of it.
    pub fn alignment_bytes(&self) -> usize {
        self.alignment_bytes
    }
    /// Allowed TLAB waste, in percent of the allocation space (`TLABWasteTargetPercent`).
    pub fn waste_target_percent(&self) -> f64 {
        self.waste_target_percent
    }
    /// The adaptive policy's target number of refills per thread and collection:
    /// `100 / (2 × waste target)`, i.e. 50 for 1 %.
    pub fn target_refills(&self) -> f64 {
        100.0 / (2.0 * self.waste_target_percent)
    }
    /// A TLAB whose free space is at most `desired size / fraction` is retired when an object
    /// does not fit (`TLABRefillWasteFraction`); with more free space the object is allocated
    /// outside it.
    pub fn refill_waste_fraction(&self) -> usize {
        self.refill_waste_fraction
    }
    /// How much the refill waste limit grows at each allocation outside the TLAB
    /// (`TLABWasteIncrement`, 4 words).
    pub fn waste_increment_bytes(&self) -> usize {
        self.waste_increment_bytes
    }
    /// Weight of the newest sample in the decaying averages of the adaptive policy
    /// (`TLABAllocationWeight`, 35 %).
    pub fn allocation_weight_percent(&self) -> u32 {
        self.allocation_weight_percent
    }
    /// Whether reused memory is zeroed when handed out.
    pub fn zero(&self) -> ZeroMemory {
        self.zero
    }
    /// Whether the whole reservation is touched when the heap is created
    /// (`-XX:+AlwaysPreTouch`).
    pub fn pretouch(&self) -> bool {
        self.pretouch
    }
    /// Whether TLABs carved from the global heap shrink at the end of each cycle: once a
    /// full TLAB is more than a thread's part of what is left of the allocation range (its
    /// fraction of the allocation), its next TLAB is that part, and once the part is below
    /// the smallest TLAB its objects are allocated outside TLABs, so that the memory handed
    /// out is used before the collection (Garthwaite et al.'s question of when to stop
    /// handing out LABs). Only in cycles where the full TLABs of the threads that allocate
    /// would hold an eighth of the range or more. Applies to the `tlab` mode and the TLAB
    /// phases of `flip`; in the `hab` mode the middle levels' buffers do the same one level
    /// up: a buffer refilled near the end of the range takes its share of what is left
    /// instead of a whole buffer (a quarter of it over the level's buffers).
    pub fn end_of_cycle(&self) -> bool {
        self.end_of_cycle
    }
    /// The middle levels, lowest first (empty unless the mode is [`Mode::Hab`]), with the
    /// buffer sizes they start with.
    pub fn middle(&self) -> &[MiddleLevelSpec] {
        &self.middle
    }
    /// Whether the middle levels' buffers are resized at each collection to follow the
    /// allocation: when `auto` picked the levels (given levels keep their sizes). See
    /// `levels/buffer_sizing.rs`; [`Heap::middle_levels`](crate::Heap::middle_levels) gives
    /// the sizes now.
    pub fn buffers_follow_allocation(&self) -> bool {
        self.buffers_follow_allocation
    }
    /// The CPU-id source asked for; `None` picks rseq where glibc registered it, else
    /// `sched_getcpu`.
    pub fn cpu_id(&self) -> Option<CpuIdSource> {
        self.cpu_id
    }
    /// Where the machine's shape comes from.
    pub fn topology(&self) -> &TopologySpec {
        &self.topology
    }
}
