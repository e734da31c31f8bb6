//! The heap: configuration, object model, the global level, and the registry of mutators that
//! collections stop and whose TLABs they retire.

use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::collection::Collection;
use crate::config::{ConfigError, HeapConfig, MiddleLevelSpec, Mode, TopologySpec};
use crate::cpu_id::{CpuIdReader, CpuIdSource, SimulatedCpu};
use crate::error::{AllocError, CollectionError, HeapError};
use crate::global::GlobalHeap;
use crate::middle::MiddleLevel;
use crate::mutator::{AllocSize, Mutator, MutatorCell, MutatorLocal, HELD, PARKED, RUNNING};
use crate::object_model::ObjectModel;
use crate::plab::Plabs;
use crate::reservation::{address_to_pointer, Reservation};
use crate::rseq::{self, RseqMechanism};
use crate::sizing::{DecayingAverage, TlabSizer};
use crate::stats::{Counters, HeapStats, TlabStats};
use crate::tlab::Tlab;
use crate::topology::{Level, Topology, TopologySource};

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

/// The `cpu` level uses restartable sequences where they work, where its domains are the
/// CPUs the kernel numbers (a real topology and CPU-id source) and where its buffers fit a
/// per-CPU word.
fn restartable(spec: &MiddleLevelSpec, topology: &Topology, cpu_id: &CpuIdReader) -> bool {
    spec.level == Level::Cpu
        && spec.buffer_bytes <= rseq::MAX_BUFFER_BYTES
        && per_cpu_works(topology, cpu_id)
}

/// Restartable per-CPU buffers need rseq, and CPUs numbered as the kernel numbers them.
fn per_cpu_works(topology: &Topology, cpu_id: &CpuIdReader) -> bool {
    topology.source() == TopologySource::Sysfs
        && !matches!(cpu_id.source(), CpuIdSource::Simulated { .. })
        && !matches!(rseq::mechanism(), RseqMechanism::Unavailable(_))
}

/// A garbage-collected heap's allocation subsystem. Create one with [`Heap::new`], give each
/// mutator thread a [`Mutator`] with [`attach`](Heap::attach), and stop them all for a
/// [`collection`](Heap::collection).
pub struct Heap {
    config: HeapConfig,
    model: Box<dyn ObjectModel>,
    global: GlobalHeap,
    /// Bytes every TLAB keeps below its hard end so its tail can hold a filler.
    tlab_reserve_bytes: usize,
    /// The object model's smallest filler.
    min_filler_bytes: usize,
    topology: Topology,
    cpu_id: CpuIdReader,
    /// The configured middle levels, lowest first (empty unless the mode is `hab`).
    levels: Vec<MiddleLevel>,
    /// The per-CPU LABs of the `plab` and `flip` modes.
    plabs: Option<Plabs>,
    /// In the `flip` mode: whether mutators allocate in per-CPU LABs this cycle.
    flipped_to_plabs: AtomicBool,
    /// Collections that ended a cycle spent in per-CPU LABs.
    plab_collections: AtomicU64,
    /// Heap-wide counters when the last collection ended, to measure a cycle's waste.
    totals_at_last_collection: Mutex<TlabStats>,
    /// Counters of work done by collections rather than by a mutator (middle-level tails
    /// retired at collections).
    collector: Counters,
    registry: Mutex<Registry>,
    /// Signalled when a collection ends or when a stopped attach may proceed.
    resumed: Condvar,
    /// Held for the whole of a collection: one at a time.
    collecting: Mutex<()>,
    collections: AtomicU64,
}

pub(crate) struct Registry {
    pub(crate) mutators: Vec<Arc<MutatorCell>>,
    /// A collection is stopping or has stopped the mutators: no new ones may attach.
    pub(crate) stopping: bool,
    next_id: u64,
    /// Counters of mutators that detached.
    pub(crate) detached: TlabStats,
    /// Decaying average of threads that took a TLAB between collections.
    pub(crate) allocating_threads: DecayingAverage,
}

impl Heap {
    /// Reserves the heap's address range and sets up its levels.
    ///
    /// Errors: the object model's smallest filler does not fit the smallest TLAB, a simulated
    /// topology spec is malformed, the CPU-id source asked for does not work here, or the
    /// address range cannot be reserved.
    pub fn new(config: HeapConfig, model: impl ObjectModel) -> Result<Arc<Heap>, HeapError> {
        let alignment = config.alignment_bytes();
        let min_filler = model.min_filler_bytes().max(1);
        let tlab_reserve_bytes = if min_filler <= alignment {
            0
        } else {
            min_filler.next_multiple_of(alignment)
        };
        if tlab_reserve_bytes >= config.min_tlab_bytes() {
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
            None => CpuIdReader::new(CpuIdSource::Rseq, topology.cpu_slots())
                .or_else(|_| CpuIdReader::new(CpuIdSource::GetCpu, topology.cpu_slots())),
        }
        .map_err(|problem| ConfigError::new("cpu_id", problem))?;
        let levels = config
            .middle()
            .iter()
            .map(|spec| {
                let level = MiddleLevel::new(
                    spec.level,
                    spec.buffer_bytes,
                    topology.domains(spec.level),
                    tlab_reserve_bytes,
                );
                if restartable(spec, &topology, &cpu_id) {
                    level.with_per_cpu(topology.cpu_slots())
                } else {
                    level
                }
            })
            .collect();
        let plabs = matches!(config.mode(), Mode::Plab | Mode::Flip).then(|| {
            Plabs::new(
                &config,
                tlab_reserve_bytes,
                &topology,
                per_cpu_works(&topology, &cpu_id),
            )
        });
        let reservation =
            Reservation::new(config.capacity_bytes()).map_err(|source| HeapError::Reserve {
                bytes: config.capacity_bytes(),
                source,
            })?;
        if config.pretouch() {
            reservation.pretouch();
        }
        let mut allocating_threads = DecayingAverage::new(config.allocation_weight_percent());
        allocating_threads.sample(1.0);
        Ok(Arc::new(Heap {
            global: GlobalHeap::new(reservation, config.capacity_bytes(), config.zero()),
            model: Box::new(model),
            tlab_reserve_bytes,
            min_filler_bytes: min_filler,
            topology,
            cpu_id,
            levels,
            plabs,
            flipped_to_plabs: AtomicBool::new(false),
            plab_collections: AtomicU64::new(0),
            totals_at_last_collection: Mutex::new(TlabStats::default()),
            collector: Counters::default(),
            registry: Mutex::new(Registry {
                mutators: Vec::new(),
                stopping: false,
                next_id: 0,
                detached: TlabStats::default(),
                allocating_threads,
            }),
            resumed: Condvar::new(),
            collecting: Mutex::new(()),
            collections: AtomicU64::new(0),
            config,
        }))
    }

    /// Registers a new mutator for the calling thread (or one it will be sent to). Waits while
    /// a collection is in progress.
    pub fn attach(self: &Arc<Self>) -> Mutator {
        let mut registry = self.registry();
        while registry.stopping {
            registry = self
                .resumed
                .wait(registry)
                .unwrap_or_else(|e| e.into_inner());
        }
        let (start, end) = self.global.range();
        let sizer = TlabSizer::new(
            &self.config,
            end - start,
            registry.allocating_threads.average(),
        );
        let counters = Counters::default();
        counters
            .desired_size_bytes
            .set(sizer.desired_bytes() as u64);
        let cell = Arc::new(MutatorCell {
            tlab: Tlab::default().into(),
            running_since: self.collections().into(),
            local: MutatorLocal {
                sizer,
                allocated_at_last_collection: 0,
                refills_at_last_collection: 0,
                simulated_cpu: SimulatedCpu::new(&self.cpu_id, registry.next_id),
                in_plab: false,
            }
            .into(),
            state: RUNNING.into(),
            counters,
            id: registry.next_id,
        });
        registry.next_id += 1;
        registry.mutators.push(cell.clone());
        drop(registry);
        Mutator::new(cell, self.clone())
    }

    /// The configuration the heap was built from.
    pub fn config(&self) -> &HeapConfig {
        &self.config
    }

    /// Checks an object size once, for [`Mutator::alloc_sized`].
    pub fn checked_size(&self, bytes: usize) -> Result<AllocSize, AllocError> {
        AllocSize::check(
            bytes,
            self.config.alignment_bytes(),
            self.config.capacity_bytes(),
        )
    }

    /// The whole reserved address range: every address Hab hands out lies in it.
    pub fn reserved_range(&self) -> Range<usize> {
        let (start, _) = self.global.reserved();
        start..start + self.config.capacity_bytes()
    }

    /// The current allocation range (the whole reservation until a collection changes it).
    pub fn allocation_range(&self) -> Range<usize> {
        let (start, end) = self.global.range();
        start..end
    }

    /// Collections finished so far.
    pub fn collections(&self) -> u64 {
        self.collections.load(Ordering::Acquire)
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
        totals.plab.rseq_aborts += self.plabs.as_ref().map_or(0, Plabs::inline_aborts);
        let (start, end) = self.global.range();
        HeapStats {
            totals,
            live_mutators: registry.mutators.len(),
            collections: self.collections(),
            plab_collections: self.plab_collections.load(Ordering::Relaxed),
            used_bytes: self.global.top() - start,
            capacity_bytes: end - start,
        }
    }

    /// Each live mutator's id and counters, in attach order.
    pub fn mutator_stats(&self) -> Vec<(u64, TlabStats)> {
        self.registry()
            .mutators
            .iter()
            .map(|cell| (cell.id, cell.counters.snapshot()))
            .collect()
    }

    /// Stops the world: waits until every mutator is parked, then retires every TLAB and
    /// returns the collection. Mutators that unpark meanwhile wait until it ends.
    ///
    /// The calling thread must not hold a running [`Mutator`] of this heap (park it first),
    /// or this waits forever.
    pub fn collection(&self) -> Collection<'_> {
        let guard = self.collecting.lock().unwrap_or_else(|e| e.into_inner());
        self.stop_the_world(guard)
    }

    fn stop_the_world<'h>(&'h self, guard: MutexGuard<'h, ()>) -> Collection<'h> {
        self.registry().stopping = true;
        let mut rounds = 0u32;
        while self.claim_parked_mutators() > 0 {
            rounds += 1;
            if rounds < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        Collection::begin(self, guard)
    }

    /// Stops the world as [`collection`](Heap::collection) does, unless a collection finished
    /// since the caller saw [`collections`](Heap::collections) return `seen`: then returns
    /// `None` at once. Lets threads that ran out of memory together collect only once.
    ///
    /// ```
    /// use hab::{AllocError, HeaderWordModel, Heap, HeapConfig};
    /// let heap = Heap::new(HeapConfig::builder().capacity("64KiB").build()?, HeaderWordModel)?;
    /// let mut mutator = heap.attach();
    /// let seen = heap.collections();
    /// while let Ok(object) = mutator.alloc(64) {
    ///     // SAFETY: 64 fresh bytes owned by this thread.
    ///     unsafe { HeaderWordModel::write_header(object, 64) };
    /// }
    /// mutator.safe_region(|| {
    ///     if let Some(mut collection) = heap.collection_if_none_since(seen) {
    ///         collection.reset();
    ///     }
    /// });
    /// assert_eq!(heap.collections(), 1);
    /// mutator.alloc(64)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn collection_if_none_since(&self, seen: u64) -> Option<Collection<'_>> {
        let guard = self.collecting.lock().unwrap_or_else(|e| e.into_inner());
        if self.collections() != seen {
            return None;
        }
        Some(self.stop_the_world(guard))
    }

    /// Like [`collection`](Heap::collection) but does not wait: fails if another collection
    /// is in progress or a mutator is running.
    pub fn try_collection(&self) -> Result<Collection<'_>, CollectionError> {
        let guard = self
            .collecting
            .try_lock()
            .map_err(|_| CollectionError::InProgress)?;
        self.registry().stopping = true;
        let running = self.claim_parked_mutators();
        if running > 0 {
            self.release_mutators();
            return Err(CollectionError::MutatorsRunning { running });
        }
        Ok(Collection::begin(self, guard))
    }

    /// Claims every parked mutator for the collection; returns how many are still running.
    fn claim_parked_mutators(&self) -> usize {
        let registry = self.registry();
        registry
            .mutators
            .iter()
            .filter(|cell| {
                let claimed =
                    cell.state
                        .compare_exchange(PARKED, HELD, Ordering::Acquire, Ordering::Relaxed);
                matches!(claimed, Err(RUNNING))
            })
            .count()
    }

    /// Hands every claimed mutator back to its thread and lets waiting threads go on.
    pub(crate) fn release_mutators(&self) {
        let mut registry = self.registry();
        for cell in &registry.mutators {
            let _ = cell
                .state
                .compare_exchange(HELD, PARKED, Ordering::Release, Ordering::Relaxed);
        }
        registry.stopping = false;
        drop(registry);
        self.resumed.notify_all();
    }

    /// Moves a parked mutator back to running, waiting while a collection holds it.
    pub(crate) fn wait_to_unpark(&self, cell: &MutatorCell) {
        while cell
            .state
            .compare_exchange(PARKED, RUNNING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            let mut registry = self.registry();
            while cell.state.load(Ordering::Acquire) == HELD {
                registry = self
                    .resumed
                    .wait(registry)
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
        cell.running_since
            .store(self.collections(), Ordering::Relaxed);
    }

    /// Removes a running mutator whose TLAB is already retired, keeping its counters.
    pub(crate) fn detach(&self, cell: &Arc<MutatorCell>) {
        let mut registry = self.registry();
        registry.mutators.retain(|other| !Arc::ptr_eq(other, cell));
        let mut stats = cell.counters.snapshot();
        stats.desired_size_bytes = 0;
        registry.detached += stats;
        drop(registry);
        self.resumed.notify_all();
    }

    pub(crate) fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn global(&self) -> &GlobalHeap {
        &self.global
    }

    pub(crate) fn object_model(&self) -> &dyn ObjectModel {
        &*self.model
    }

    /// Covers the gap `[start, start + bytes)` with a filler. A gap that breaks the object
    /// model's contract (misaligned, or shorter than its smallest filler) can only come from a
    /// size checked against another heap; it is left unwritten rather than risk a write beyond
    /// the gap, and the heap walk then reports the heap as unparseable there.
    ///
    /// # Safety
    /// The caller owns the gap exclusively.
    pub(crate) unsafe fn write_filler(&self, start: usize, bytes: usize) {
        let alignment = self.config.alignment_bytes();
        if bytes == 0 || bytes < self.min_filler_bytes || (start | bytes) % alignment != 0 {
            return;
        }
        // SAFETY: the gap is aligned, long enough for a filler, inside the reservation (a LAB
        // carved from it) and owned by the caller; a non-null heap address.
        unsafe {
            self.model
                .write_filler(NonNull::new_unchecked(address_to_pointer(start)), bytes)
        };
    }

    /// The machine's shape the middle levels follow.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Where the heap reads the current CPU number.
    pub fn cpu_id(&self) -> &CpuIdReader {
        &self.cpu_id
    }

    /// The middle levels, lowest first.
    pub fn middle_levels(&self) -> Vec<MiddleLevelInfo> {
        self.levels
            .iter()
            .map(|level| MiddleLevelInfo {
                level: level.level(),
                buffer_bytes: level.buffer_bytes(),
                domains: level.domains(),
                restartable: level.is_restartable(),
            })
            .collect()
    }

    pub(crate) fn levels(&self) -> &[MiddleLevel] {
        &self.levels
    }

    /// Whether the `plab` or `flip` mode's per-CPU LABs use restartable sequences (`None` in
    /// other modes); otherwise they are compare-and-swap buffers.
    pub fn plabs_restartable(&self) -> Option<bool> {
        self.plabs.as_ref().map(Plabs::is_restartable)
    }

    /// Whether mutators allocate in per-CPU LABs in this cycle: always in the `plab` mode,
    /// after a flip in the `flip` mode.
    pub fn allocates_in_plabs(&self) -> bool {
        match self.config.mode() {
            Mode::Plab => true,
            Mode::Flip => self.flipped_to_plabs.load(Ordering::Relaxed),
            _ => false,
        }
    }

    pub(crate) fn totals_at_last_collection(&self) -> MutexGuard<'_, TlabStats> {
        self.totals_at_last_collection
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn plabs(&self) -> Option<&Plabs> {
        self.plabs.as_ref()
    }

    /// At the end of a collection: counts the cycle's mode and, in the `flip` mode, switches
    /// for the next cycle (see [`Mode::Flip`]).
    pub(crate) fn end_cycle(&self, unused_tlab_bytes: u64, unused_lab_bytes: u64, threads: u64) {
        let in_plabs = self.allocates_in_plabs();
        if in_plabs {
            self.plab_collections.fetch_add(1, Ordering::Relaxed);
        }
        if self.config.mode() != Mode::Flip {
            return;
        }
        let max_lab = self.config.max_tlab_bytes() as u64;
        let cpus = self.topology.online_cpus().len().max(1) as u64;
        let flip = if in_plabs {
            unused_lab_bytes > max_lab * threads.max(1)
        } else {
            unused_tlab_bytes > max_lab * cpus
        };
        if flip {
            self.flipped_to_plabs.store(!in_plabs, Ordering::Relaxed);
        }
    }

    pub(crate) fn collector(&self) -> &Counters {
        &self.collector
    }

    pub(crate) fn tlab_reserve_bytes(&self) -> usize {
        self.tlab_reserve_bytes
    }

    pub(crate) fn count_collection(&self) {
        self.collections.fetch_add(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for Heap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heap")
            .field("config", &self.config)
            .field("allocation_range", &self.allocation_range())
            .finish_non_exhaustive()
    }
}
