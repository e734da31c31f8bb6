//! The heap layer: a heap (its configuration, allocation side and registry of mutators) and
//! the handles threads allocate through. A heap is built here; collections (the layer above)
//! stop its mutators through the registry and the collector lock.
//!
//! - `mod.rs`: [`Heap`]: building one, its figures;
//! - `registry`: the mutators a collection must stop, locked with forks held off;
//! - `attach`: mutators joining and leaving (attach, detach, unpark, release, forks);
//! - `collector_lock`: one collection at a time, with deadlines and fork takeover;
//! - `mutator_handle`: the [`Mutator`](crate::Mutator) and
//!   [`ParkedMutator`](crate::ParkedMutator) handles and their TLAB fast path;
//! - `error`, `stats`: why a heap could not be built; heap-wide figures.

pub(crate) mod attach;
pub(crate) mod collector_lock;
pub(crate) mod error;
pub(crate) mod mutator_handle;
pub(crate) mod registry;
pub(crate) mod stats;

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::config::ZeroMemory;
use crate::config::{ConfigError, HeapConfig, TopologySpec};
use crate::heap::collector_lock::CollectorLock;
use crate::heap::error::HeapError;
use crate::heap::registry::{Registry, RegistryGuard};
use crate::heap::stats::HeapStats;
use crate::labs::cpu_labs::CpuLabs;
use crate::labs::sizing::DecayingAverage;
use crate::memory::global::GlobalHeap;
use crate::memory::object_model::ObjectModel;
use crate::memory::reservation::{Reservation, RuntimeMemory};
use crate::memory::size::ByteSize;
use crate::memory::space::{self, Space};
use crate::mutator::alloc_size::{AllocError, AllocSize};
use crate::mutator::allocator::Allocator;
use crate::mutator::cell::MutatorCell;
use crate::mutator::sampling::AllocationSampler;
use crate::mutator::short_line;
use crate::mutator::stats::{AllocationStats, Counters};
use crate::platform::cpu_id::CpuIdReader;
use crate::platform::per_cpu::per_cpu_support;
use crate::platform::process;
use crate::platform::topology::{Level, Topology};

/// One configured middle level, as [`Heap::middle_levels`] describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MiddleLevelInfo {
    /// The level.
    pub level: Level,
    /// Bytes of each of its buffers.
    pub buffer_bytes: usize,
    /// How many buffers (domains) it has.
    pub domains: usize,
    /// Whether its buffers are per-CPU buffers updated in restartable sequences (the `cpu`
    /// level where rseq works, on a real topology with a real CPU-id source); otherwise they
    /// are compare-and-swap buffers.
    pub restartable: bool,
}

/// A garbage-collected heap's allocation subsystem. Create one with [`Heap::new`], give each
/// mutator thread a [`Mutator`](crate::Mutator) with [`attach`](Heap::attach), and stop them all for a
/// [`collection`](Heap::collection).
pub struct Heap {
    /// The configuration, memory, machine and mode's parts the allocation paths read.
    allocator: Allocator,
    /// Collections that ended a cycle spent in per-CPU LABs.
    cpu_lab_collections: AtomicU64,
    /// Heap-wide counters when the last collection ended, to measure a cycle's waste.
    totals_at_last_collection: process::ForkSafeMutex<AllocationStats>,
    /// Counters of work done by collections rather than by a mutator (middle-level tails
    /// retired at collections).
    collector: Counters,
    registry: Mutex<Registry>,
    /// The thread running a collection, if any: one at a time.
    collector_lock: CollectorLock,
}

impl Heap {
    /// Reserves the heap's address range and sets up its levels.
    ///
    /// Errors: the object model's smallest filler does not fit the smallest TLAB, a simulated
    /// topology spec is malformed, the CPU-id source asked for does not work here, or the
    /// address range cannot be reserved.
    pub fn new(config: HeapConfig, model: impl ObjectModel) -> Result<Arc<Heap>, HeapError> {
        Heap::build(config, model, None)
    }

    /// A heap over memory the runtime owns (see [`RuntimeMemory`]) instead of a reservation
    /// of its own: the first [`capacity`](crate::HeapConfigBuilder::capacity) bytes of it
    /// are the allocation range. Hab never unmaps it.
    ///
    /// Errors: as [`Heap::new`]; the capacity is larger than the memory, the memory does not
    /// start at a multiple of the alignment, or the configuration asks for a pre-touch (which
    /// is for Hab's own reservation).
    pub fn with_memory(
        config: HeapConfig,
        model: impl ObjectModel,
        memory: RuntimeMemory,
    ) -> Result<Arc<Heap>, HeapError> {
        let problem = if config.capacity_bytes() > memory.len_bytes() {
            Some((
                "capacity",
                format!(
                    "{} is larger than the runtime's memory ({})",
                    ByteSize::new(config.capacity_bytes()),
                    ByteSize::new(memory.len_bytes())
                ),
            ))
        } else if !memory.start().is_multiple_of(config.alignment_bytes()) {
            Some((
                "memory",
                format!(
                    "the runtime's memory starts at {:#x}, not a multiple of the alignment {}",
                    memory.start(),
                    config.alignment_bytes()
                ),
            ))
        } else if config.pretouch() {
            Some((
                "pretouch",
                "applies to the heap's own reservation, not to the runtime's memory".into(),
            ))
        } else {
            None
        };
        if let Some((field, problem)) = problem {
            return Err(ConfigError::new(field, problem).into());
        }
        Heap::build(config, model, Some(memory))
    }

    fn build(
        config: HeapConfig,
        model: impl ObjectModel,
        memory: Option<RuntimeMemory>,
    ) -> Result<Arc<Heap>, HeapError> {
        let min_filler = model.min_filler_bytes().max(1);
        let reserve_bytes = space::lab_reserve_bytes(min_filler, config.alignment_bytes());
        if reserve_bytes >= config.min_tlab_bytes() {
            return Err(ConfigError::new(
                "min_tlab",
                format!(
                    "{} bytes leaves no room beside the object model's {min_filler}-byte filler",
                    config.min_tlab_bytes()
                ),
            )
            .into());
        }
        let topology = match config.topology() {
            TopologySpec::Discover => Topology::discover(),
            TopologySpec::SysfsAt(root) => Topology::discover_from(root),
            TopologySpec::Simulated(spec) => Topology::simulated(spec)
                .map_err(|problem| ConfigError::new("topology", problem))?,
        };
        let cpu_id = match config.cpu_id() {
            Some(source) => CpuIdReader::new(source, topology.cpu_slots()),
            None => per_cpu_support().cpu_id_reader(topology.cpu_slots()),
        }
        .map_err(|problem| ConfigError::new("cpu_id", problem))?;
        let pristine = memory.as_ref().is_none_or(RuntimeMemory::is_zeroed);
        let reservation = match memory {
            Some(memory) => Reservation::lent(memory),
            None => {
                Reservation::new(config.capacity_bytes()).map_err(|source| HeapError::Reserve {
                    bytes: config.capacity_bytes(),
                    source,
                })?
            }
        };
        if config.pretouch() {
            reservation
                .pretouch()
                .map_err(|source| HeapError::Pretouch {
                    bytes: config.capacity_bytes(),
                    source,
                })?;
        }
        let zero_reused = config.zero() != ZeroMemory::Never;
        let global = GlobalHeap::new(reservation, config.capacity_bytes(), zero_reused, pristine);
        let space = Space::new(
            global,
            Box::new(model),
            config.alignment_bytes(),
            reserve_bytes,
        );
        let mut allocating_threads = DecayingAverage::new(config.allocation_weight_percent());
        allocating_threads.sample(1.0);
        let heap = Arc::new(Heap {
            allocator: Allocator::new(config, space, topology, cpu_id, short_line::line_for),
            cpu_lab_collections: AtomicU64::new(0),
            totals_at_last_collection: process::ForkSafeMutex::new(AllocationStats::default()),
            collector: Counters::default(),
            registry: Mutex::new(Registry::new(allocating_threads)),
            collector_lock: CollectorLock::default(),
        });
        for level in heap.allocator.levels() {
            heap.collector.levels[level.level().index()]
                .buffer_bytes
                .set(level.buffer_bytes() as u64);
        }
        let watcher: Weak<dyn process::ForkWatcher> = Arc::downgrade(&heap) as Weak<Heap>;
        process::watch_forks_for(watcher);
        Ok(heap)
    }

    /// Whether the calling thread began a collection that has not ended yet (even if it
    /// handed the [`Collection`](crate::Collection) to another thread). Such a thread must not
    /// wait for a collection to end: [`attach`](Heap::attach),
    /// [`ParkedMutator::unpark`](crate::ParkedMutator::unpark) and
    /// [`collection`](Heap::collection) panic there instead of waiting for ever.
    ///
    /// ```
    /// use hab::{HeaderWordModel, Heap, HeapConfig};
    /// let heap = Heap::new(HeapConfig::builder().capacity("1MiB").build()?, HeaderWordModel)?;
    /// assert!(!heap.is_collecting_thread());
    /// let collection = heap.collection();
    /// assert!(heap.is_collecting_thread());
    /// collection.finish();
    /// assert!(!heap.is_collecting_thread());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_collecting_thread(&self) -> bool {
        self.collector_lock.held_by_calling_thread()
    }

    /// Panics naming `call` when the calling thread runs a collection: `call` would wait for
    /// it to end.
    pub(crate) fn refuse_wait_for_own_collection(&self, call: &str) {
        if self.is_collecting_thread() {
            panic!("{call}: {}", collector_lock::CALLER_COLLECTS);
        }
    }

    /// The configuration the heap was built from.
    pub fn config(&self) -> &HeapConfig {
        &self.allocator.config
    }

    /// The largest object a LAB holds: a larger object is never placed in a TLAB or a
    /// per-CPU LAB but carved on its own from the global heap (one compare-and-swap on its
    /// top, zeroed when handed out unless [`ZeroMemory::Never`]), the *large-object path*. It
    /// is the largest TLAB less the filler reserve. (Smaller objects may take the same path
    /// when the keep-or-refill rule keeps a TLAB with much free space.)
    ///
    /// ```
    /// use hab::{HeaderWordModel, Heap, HeapConfig};
    /// let heap = Heap::new(HeapConfig::builder().max_tlab("64KiB").build()?, HeaderWordModel)?;
    /// assert_eq!(heap.large_object_bytes(), 64 << 10);
    /// let mut mutator = heap.attach();
    /// let large = mutator.alloc(128 << 10)?; // outside any TLAB
    /// // SAFETY: `large` is 128 KiB of fresh memory owned by this thread.
    /// unsafe { HeaderWordModel::write_header(large, 128 << 10) };
    /// assert_eq!(mutator.stats().slow_allocs, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn large_object_bytes(&self) -> usize {
        self.config().max_tlab_bytes() - self.allocator.space.lab_reserve_bytes()
    }

    /// Checks an object size once, for [`Mutator::alloc_sized`](crate::Mutator::alloc_sized).
    pub fn checked_size(&self, bytes: usize) -> Result<AllocSize, AllocError> {
        AllocSize::check(
            bytes,
            self.config().alignment_bytes(),
            self.config().capacity_bytes(),
        )
    }

    /// The whole reserved address range: every address Hab hands out lies in it.
    pub fn reserved_range(&self) -> Range<usize> {
        let (start, _) = self.global().reserved();
        start..start + self.config().capacity_bytes()
    }

    /// The current allocation range (the whole reservation until a collection changes it).
    pub fn allocation_range(&self) -> Range<usize> {
        let (start, end) = self.global().range();
        start..end
    }

    /// Collections finished so far.
    pub fn collections(&self) -> u64 {
        self.allocator.safepoints.collections()
    }

    /// Samples allocations: calls `sampler`'s callback, on the allocating thread, for the
    /// object that crosses each interval of that thread's allocation (objects in TLABs and
    /// outside LABs; not those in per-CPU LABs). `None` turns sampling off. Each thread picks
    /// the change up at its next slow path (its next TLAB, or the next sample); the fast path
    /// costs nothing either way: the TLAB's soft end stops at the next sample.
    ///
    /// The callback runs in the allocation's slow path, before the runtime has initialised
    /// the object: it should record and return, not allocate or collect.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// use hab::{AllocationSampler, HeaderWordModel, Heap, HeapConfig};
    /// let heap = Heap::new(HeapConfig::builder().build()?, HeaderWordModel)?;
    /// let samples = Arc::new(AtomicU64::new(0));
    /// let counted = samples.clone();
    /// heap.sample_allocations(Some(AllocationSampler::new(64 << 10, move |sample| {
    ///     assert_eq!(sample.bytes, 32);
    ///     counted.fetch_add(1, Ordering::Relaxed);
    /// })));
    /// let mut mutator = heap.attach();
    /// for _ in 0..10_000 {
    ///     let object = mutator.alloc(32)?;
    ///     // SAFETY: `object` is 32 fresh bytes owned by this thread.
    ///     unsafe { HeaderWordModel::write_header(object, 32) };
    /// }
    /// // 320,000 bytes: a sample at 64 KiB, 128 KiB, ... 256 KiB.
    /// assert_eq!(samples.load(Ordering::Relaxed), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sample_allocations(&self, sampler: Option<AllocationSampler>) {
        let registry = self.registry();
        self.allocator.sampling.set(sampler);
        let bits = self.allocator.sampling.full_path_size_bits();
        for cell in &registry.mutators {
            cell.follow_heap_bits(bits);
        }
    }

    /// Asks every mutator to stop at its next safepoint: its next poll
    /// ([`Mutator::poll`](crate::Mutator::poll)) or allocation slow path (its TLAB is tripped, so its next TLAB
    /// allocation takes the slow path; a thread allocating in restartable per-CPU LABs reaches
    /// it at its next LAB miss, so such threads should poll). Stopped mutators sleep until the
    /// next collection to end, which satisfies every request made before it ended; a
    /// collection that gives up ([`Heap::collection_within`]) withdraws them.
    ///
    /// The caller then collects ([`Heap::collection`] requests by itself), or a collector
    /// thread waiting in [`wait_for_collection_request`](Heap::wait_for_collection_request)
    /// does. A request nobody serves leaves the mutators stopped.
    pub fn request_collection(&self) {
        let registry = self.registry();
        self.allocator.safepoints.request();
        MutatorCell::request_safepoints(registry.mutators.iter().map(|cell| &**cell));
    }

    /// Whether a collection is requested and has not ended yet.
    pub fn collection_requested(&self) -> bool {
        self.allocator.safepoints.pending()
    }

    /// Sleeps until a collection is requested, at most `timeout`; returns whether one is. For
    /// a runtime whose collections run on a thread of their own.
    pub fn wait_for_collection_request(&self, timeout: std::time::Duration) -> bool {
        self.allocator.safepoints.wait_for_request(timeout)
    }

    /// Heap-wide figures; counters of running threads may lag by their current TLAB.
    pub fn stats(&self) -> HeapStats {
        let registry = self.registry();
        let mut totals = registry.detached;
        totals += self.collector.snapshot();
        totals.desired_size_bytes = 0;
        for cell in &registry.mutators {
            totals += cell.counters.snapshot();
        }
        totals.cpu_lab.rseq_aborts += self.cpu_labs().map_or(0, CpuLabs::inline_aborts);
        let (start, end) = self.global().range();
        HeapStats {
            totals,
            live_mutators: registry.mutators.len(),
            collections: self.collections(),
            cpu_lab_collections: self.cpu_lab_collections.load(Ordering::Relaxed),
            used_bytes: self.global().top() - start,
            capacity_bytes: end - start,
        }
    }

    /// Each live mutator's id and counters, in attach order.
    pub fn mutator_stats(&self) -> Vec<(u64, AllocationStats)> {
        self.registry()
            .mutators
            .iter()
            .map(|cell| (cell.id, cell.counters.snapshot()))
            .collect()
    }

    /// The machine's shape the middle levels follow.
    pub fn topology(&self) -> &Topology {
        &self.allocator.topology
    }

    /// Where the heap reads the current CPU number.
    pub fn cpu_id(&self) -> &CpuIdReader {
        &self.allocator.cpu_id
    }

    /// The middle levels, lowest first.
    pub fn middle_levels(&self) -> Vec<MiddleLevelInfo> {
        self.allocator
            .levels()
            .iter()
            .map(|level| MiddleLevelInfo {
                level: level.level(),
                buffer_bytes: level.buffer_bytes(),
                domains: level.domains(),
                restartable: level.is_restartable(),
            })
            .collect()
    }

    /// Whether the `cpu-lab` or `flip` mode's per-CPU LABs use restartable sequences (`None` in
    /// other modes); otherwise they are compare-and-swap buffers.
    pub fn cpu_labs_restartable(&self) -> Option<bool> {
        self.cpu_labs().map(CpuLabs::is_restartable)
    }

    /// Whether mutators allocate in per-CPU LABs in this cycle: always in the `cpu-lab` mode,
    /// after a flip in the `flip` mode.
    pub fn allocates_in_cpu_labs(&self) -> bool {
        self.allocator.allocates_in_cpu_labs()
    }

    /// The registry of mutators, locked (with forks held off while it is).
    pub(crate) fn registry(&self) -> RegistryGuard<'_> {
        RegistryGuard::lock(&self.registry)
    }

    /// The allocation side: what the allocation paths read.
    #[inline]
    pub(crate) fn allocator(&self) -> &Allocator {
        &self.allocator
    }

    pub(crate) fn global(&self) -> &GlobalHeap {
        self.allocator.space.global()
    }

    pub(crate) fn cpu_labs(&self) -> Option<&CpuLabs> {
        self.allocator.cpu_labs.as_ref()
    }

    /// Records `totals` as the totals at the last collection and returns the previous ones.
    /// A fork-safe lock, as every lock a forked child may take again: a `fork` never copies
    /// it held (it did, and the child's first collection waited for ever).
    pub(crate) fn swap_totals_at_last_collection(
        &self,
        totals: AllocationStats,
    ) -> AllocationStats {
        std::mem::replace(&mut *self.totals_at_last_collection.lock(), totals)
    }

    pub(crate) fn collector(&self) -> &Counters {
        &self.collector
    }

    pub(crate) fn collector_lock(&self) -> &CollectorLock {
        &self.collector_lock
    }

    /// Counts a finished collection's cycle if it was spent in per-CPU LABs.
    pub(crate) fn count_cpu_lab_cycle(&self, cycle_in_cpu_labs: bool) {
        if cycle_in_cpu_labs {
            self.cpu_lab_collections.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for Heap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heap")
            .field("config", self.config())
            .field("allocation_range", &self.allocation_range())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::object_model::HeaderWordModel;

    /// The bits the short line tests follow the sampler while no safepoint is requested, stay
    /// all set while one is (whatever the sampler does meanwhile), and are the heap's again
    /// once the request is withdrawn.
    #[test]
    fn a_mutators_full_path_bits_follow_requests_and_the_sampler() {
        let config = HeapConfig::builder().capacity("16MiB").build().unwrap();
        let alignment_bits = config.alignment_bytes() - 1;
        let heap = Heap::new(config, HeaderWordModel).unwrap();
        let mut mutator = heap.attach();
        let cell = heap.registry().mutators[0].clone();
        let bits = || cell.full_path_bits();
        let sampler = || Some(AllocationSampler::new(64 << 10, |_| {}));
        assert_eq!(bits(), alignment_bits);
        heap.sample_allocations(sampler());
        assert_eq!(bits(), usize::MAX);
        heap.sample_allocations(None);
        assert_eq!(bits(), alignment_bits);

        // Requested with the sampler off; the sampler comes and goes meanwhile.
        heap.request_collection();
        assert_eq!(bits(), usize::MAX);
        heap.sample_allocations(sampler());
        heap.sample_allocations(None);
        assert_eq!(
            bits(),
            usize::MAX,
            "a request outlasts the sampler's changes"
        );
        mutator.safe_region(|| heap.collection().reset());
        assert_eq!(bits(), alignment_bits, "withdrawn, the heap's bits again");

        // Requested with the sampler on, which stays on.
        heap.sample_allocations(sampler());
        heap.request_collection();
        heap.sample_allocations(None);
        heap.sample_allocations(sampler());
        mutator.safe_region(|| heap.collection().reset());
        assert_eq!(bits(), usize::MAX, "the sampler is on");

        // A mutator attached during a request starts with every bit set.
        heap.sample_allocations(None);
        heap.request_collection();
        let late = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let second = heap.attach();
                    let bits = heap.registry().mutators[1].full_path_bits();
                    drop(second);
                    bits
                })
                .join()
                .unwrap()
        });
        assert_eq!(late, usize::MAX);
        mutator.safe_region(|| heap.collection().reset());
        assert_eq!(bits(), alignment_bits);
    }
}
