//! The heap: configuration, object model, the global level, and the registry of mutators that
//! collections stop and whose TLABs they retire.

pub(crate) mod cpu_lab_path;
pub(crate) mod error;
pub(crate) mod mutator;

use std::ops::Range;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::collection::Collection;
use crate::config::{ConfigError, HeapConfig, MiddleLevelSpec, Mode, TopologySpec};
use crate::heap::error::{AllocError, CollectionError, HeapError, RunningMutator};
use crate::heap::mutator::{AllocSize, Mutator, MutatorCell, MutatorLocal, HELD, PARKED, RUNNING};
use crate::labs::cpu_labs::Plabs;
use crate::labs::sizing::{DecayingAverage, TlabSizer};
use crate::labs::tlab::{Tlab, Waste};
use crate::levels::middle::MiddleLevel;
use crate::memory::global::GlobalHeap;
use crate::memory::object_model::ObjectModel;
use crate::memory::reservation::{address_to_pointer, Reservation};
use crate::mutator::stats::{Counters, HeapStats, TlabStats};
use crate::platform::cpu_id::{CpuIdReader, CpuIdSource, SimulatedCpu};
use crate::platform::process::{self, Epoch, ForkGate, ThreadIdentity};
use crate::platform::rseq::{self, RseqMechanism};
use crate::platform::topology::{Level, Topology, TopologySource};

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
    /// Advances when a collection ends or when a stopped attach may proceed.
    resumed: Epoch,
    /// The thread running a collection, if any: one at a time.
    collector_lock: CollectorLock,
    collections: AtomicU64,
}

/// The registry, locked, with a [`ForkGate`] held so that no `fork` copies it locked.
pub(crate) struct RegistryGuard<'h> {
    registry: MutexGuard<'h, Registry>,
    _fork: ForkGate,
}

impl Deref for RegistryGuard<'_> {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        &self.registry
    }
}

impl DerefMut for RegistryGuard<'_> {
    fn deref_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }
}

/// Who runs a collection now. Unlike a mutex held for the collection's duration, it tells
/// a forked child that the collector was a thread of its parent (and so will never finish),
/// and lets a caller wait with a deadline.
struct CollectorLock {
    holder: Mutex<Option<ThreadIdentity>>,
    /// Advances when the holder lets go.
    released: Epoch,
}

/// The right to run a collection, released when dropped (also when unwinding).
pub(crate) struct CollectorGuard<'h>(&'h CollectorLock);

impl CollectorLock {
    /// Becomes the collector, waiting until `deadline` (forever if `None`) for the current one
    /// to finish. A holder that does not exist in this process (the parent's, after `fork`)
    /// is taken over.
    fn acquire(&self, deadline: Option<Instant>) -> Option<CollectorGuard<'_>> {
        loop {
            let seen = {
                let _fork = ForkGate::enter();
                let mut holder = self.holder.lock().unwrap_or_else(|e| e.into_inner());
                let stale = holder.as_ref().is_some_and(|thread| !thread.exists_here());
                if holder.is_none() || stale {
                    *holder = Some(ThreadIdentity::current());
                    return Some(CollectorGuard(self));
                }
                self.released.current()
            };
            let wait = match deadline {
                None => Duration::from_millis(100),
                Some(deadline) => deadline.checked_duration_since(Instant::now())?,
            };
            self.released
                .wait_while(seen, wait.min(Duration::from_millis(100)));
        }
    }
}

impl Drop for CollectorGuard<'_> {
    fn drop(&mut self) {
        let _fork = ForkGate::enter();
        *self.0.holder.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.0.released.advance();
    }
}

/// Releases the stopped world unless defused: a collection that unwinds before it is set up
/// (a panicking object model) lets the mutators run again instead of holding them forever.
struct ReleaseOnUnwind<'h>(Option<&'h Heap>);

impl Drop for ReleaseOnUnwind<'_> {
    fn drop(&mut self) {
        if let Some(heap) = self.0 {
            heap.release_mutators();
        }
    }
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
    /// Mutators of threads that did not survive a `fork` into this process.
    pub(crate) forgotten_after_fork: u64,
}

impl Heap {
    /// Reserves the heap's address range and sets up its levels.
    ///
    /// Errors: the object model's smallest filler does not fit the smallest TLAB, a simulated
    /// topology spec is malformed, the CPU-id source asked for does not work here, or the
    /// address range cannot be reserved.
    pub fn new(config: HeapConfig, model: impl ObjectModel) -> Result<Arc<Heap>, HeapError> {
        process::watch_forks();
        let alignment = config.alignment_bytes();
        let min_filler = model.min_filler_bytes().max(1);
        let tlab_reserve_bytes = if min_filler <= alignment {
            0
        } else {
            // A filler larger than any TLAB is refused below; `usize::MAX` stands for one so
            // large that rounding it up would overflow.
            min_filler
                .checked_next_multiple_of(alignment)
                .unwrap_or(usize::MAX)
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
            reservation
                .pretouch()
                .map_err(|source| HeapError::Pretouch {
                    bytes: config.capacity_bytes(),
                    source,
                })?;
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
                forgotten_after_fork: 0,
            }),
            resumed: Epoch::default(),
            collector_lock: CollectorLock {
                holder: Mutex::new(None),
                released: Epoch::default(),
            },
            collections: AtomicU64::new(0),
            config,
        }))
    }

    /// Registers a new mutator for the calling thread (or one it will be sent to). Waits while
    /// a collection is in progress.
    pub fn attach(self: &Arc<Self>) -> Mutator {
        let mut registry = self.registry();
        while registry.stopping {
            registry = self.wait_for_resume(registry);
        }
        self.forget_mutators_lost_in_fork(&mut registry);
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
            thread: Mutex::new(ThreadIdentity::current()),
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
    /// **This wait has no bound.** A mutator whose thread never parks keeps it waiting
    /// forever: a running [`Mutator`] held by the calling thread (park it first), one that was
    /// leaked (`mem::forget`), or one whose thread died without unwinding. Mutators of threads
    /// lost in a `fork` are forgotten, not waited for. Where that risk is not acceptable, use
    /// [`collection_within`](Heap::collection_within), which gives up and names the mutators
    /// still running.
    pub fn collection(&self) -> Collection<'_> {
        let guard = self.collector_lock.acquire(None).expect("no deadline");
        self.stop_the_world(guard, None)
            .expect("a collection without a deadline stops the world")
    }

    /// Stops the world as [`collection`](Heap::collection) does, giving up after `timeout`:
    /// then the mutators run again and the error
    /// ([`CollectionError::Timeout`]) lists the ones still running, with their threads, since
    /// when, and whether the thread still exists (a leaked mutator, or one whose thread died
    /// without unwinding, never parks).
    ///
    /// ```
    /// use std::time::Duration;
    /// use hab::{CollectionError, HeaderWordModel, Heap, HeapConfig};
    /// let heap = Heap::new(HeapConfig::builder().capacity("1MiB").build()?, HeaderWordModel)?;
    /// let forgotten = heap.attach();
    /// std::mem::forget(forgotten); // a running mutator nobody will ever park
    /// match heap.collection_within(Duration::from_millis(10)) {
    ///     Err(CollectionError::Timeout { running, .. }) => assert_eq!(running.len(), 1),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn collection_within(&self, timeout: Duration) -> Result<Collection<'_>, CollectionError> {
        let deadline = Instant::now() + timeout;
        let guard = self
            .collector_lock
            .acquire(Some(deadline))
            .ok_or(CollectionError::InProgress)?;
        self.stop_the_world(guard, Some(deadline))
    }

    /// Claims every mutator as it parks, until none runs or `deadline` passes; then retires
    /// the LABs. On timeout releases the claimed mutators and names the running ones.
    fn stop_the_world<'h>(
        &'h self,
        guard: CollectorGuard<'h>,
        deadline: Option<Instant>,
    ) -> Result<Collection<'h>, CollectionError> {
        let started = Instant::now();
        {
            let mut registry = self.registry();
            registry.stopping = true;
            self.forget_mutators_lost_in_fork(&mut registry);
        }
        let mut release = ReleaseOnUnwind(Some(self));
        let mut rounds = 0u32;
        while self.claim_parked_mutators() > 0 {
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                let running = self.running_mutators();
                if running.is_empty() {
                    // They parked since the claim: claim them now.
                    continue;
                }
                drop(release);
                return Err(CollectionError::Timeout {
                    waited: started.elapsed(),
                    running,
                });
            }
            rounds += 1;
            if rounds < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        let collection = Collection::begin(self, guard);
        release.0 = None;
        Ok(collection)
    }

    /// The mutators running now (not parked), with the thread each runs on: who a
    /// collection waits for.
    pub fn running_mutators(&self) -> Vec<RunningMutator> {
        let now = Instant::now();
        self.registry()
            .mutators
            .iter()
            .filter(|cell| cell.state.load(Ordering::Acquire) == RUNNING)
            .map(|cell| {
                let thread = cell.thread();
                RunningMutator {
                    id: cell.id,
                    thread_name: thread.name.clone(),
                    thread_id: thread.tid,
                    running_for: now.saturating_duration_since(thread.since),
                    thread_exists: thread.exists_here(),
                    is_calling_thread: thread.is_current(),
                }
            })
            .collect()
    }

    /// After a `fork`, removes the mutators of the parent's threads that do not exist in
    /// this process (they will never park), retiring their TLABs and keeping their counters;
    /// the forking thread's mutators are kept as this process's.
    fn forget_mutators_lost_in_fork(&self, registry: &mut Registry) {
        let forked = |cell: &Arc<MutatorCell>| cell.thread().belongs_to_another_process();
        if !registry.mutators.iter().any(forked) {
            return;
        }
        let mut kept = Vec::with_capacity(registry.mutators.len());
        for cell in std::mem::take(&mut registry.mutators) {
            let thread = cell.thread();
            if !thread.belongs_to_another_process() {
                kept.push(cell);
            } else if thread.exists_here() {
                let mut adopted = thread;
                adopted.pid = process::current_pid();
                adopted.tid = process::current_tid();
                *cell.thread.lock().unwrap_or_else(|e| e.into_inner()) = adopted;
                kept.push(cell);
            } else {
                // SAFETY: the mutator's thread does not exist in this process, so nothing
                // else touches its TLAB; the registry lock keeps collections out.
                unsafe { (*cell.tlab.get()).retire(self, &cell.counters, Waste::Collection) };
                let mut stats = cell.counters.snapshot();
                stats.desired_size_bytes = 0;
                registry.detached += stats;
                registry.forgotten_after_fork += 1;
            }
        }
        registry.mutators = kept;
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
        let guard = self.collector_lock.acquire(None).expect("no deadline");
        if self.collections() != seen {
            return None;
        }
        Some(
            self.stop_the_world(guard, None)
                .expect("a collection without a deadline stops the world"),
        )
    }

    /// Like [`collection`](Heap::collection) but does not wait: fails if another collection
    /// is in progress or a mutator is running.
    pub fn try_collection(&self) -> Result<Collection<'_>, CollectionError> {
        let guard = self
            .collector_lock
            .acquire(Some(Instant::now()))
            .ok_or(CollectionError::InProgress)?;
        self.stop_the_world(guard, Some(Instant::now()))
            .map_err(|error| match error {
                CollectionError::Timeout { running, .. } => CollectionError::MutatorsRunning {
                    running: running.len(),
                },
                other => other,
            })
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
        self.resumed.advance();
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
                registry = self.wait_for_resume(registry);
            }
        }
        cell.running_since
            .store(self.collections(), Ordering::Relaxed);
        cell.mark_running();
    }

    /// Waits for `resumed` (a collection ended) holding no lock, then locks the registry
    /// again: a fork from another thread never waits for a collection to end, nor copies the
    /// registry locked.
    fn wait_for_resume<'h>(&'h self, guard: RegistryGuard<'h>) -> RegistryGuard<'h> {
        let seen = self.resumed.current();
        drop(guard);
        self.resumed.wait_while(seen, Duration::from_millis(100));
        self.registry()
    }

    /// Removes a running mutator whose TLAB is already retired, keeping its counters.
    pub(crate) fn detach(&self, cell: &Arc<MutatorCell>) {
        let mut registry = self.registry();
        registry.mutators.retain(|other| !Arc::ptr_eq(other, cell));
        let mut stats = cell.counters.snapshot();
        stats.desired_size_bytes = 0;
        registry.detached += stats;
        drop(registry);
        self.resumed.advance();
    }

    pub(crate) fn registry(&self) -> RegistryGuard<'_> {
        let fork = ForkGate::enter();
        RegistryGuard {
            registry: self.registry.lock().unwrap_or_else(|e| e.into_inner()),
            _fork: fork,
        }
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
