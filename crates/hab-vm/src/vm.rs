//! The runtime: a Hab heap split into two halves for the copying collector, the registry of
//! threads and their roots, the safepoint protocol, and the collection log.

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hab::{AllocationStats, ByteSize, Collection, Heap, HeapConfigBuilder, HeapStats, Mutator};

use crate::collector::{self, CheckSummary};
use crate::object::{VmObjectModel, WORD_BYTES};

/// How a VM is set up.
#[derive(Clone, Debug)]
pub struct VmConfig {
    /// Bytes of the allocation space. The reservation is twice this: the collector copies the
    /// survivors into the other half.
    pub space_bytes: usize,
    /// Hab's settings (mode, TLAB policy, middle levels, …); the capacity is set from
    /// `space_bytes`.
    pub heap: HeapConfigBuilder,
    /// Check the heap before and after every collection; a failure stops the run.
    pub verify: bool,
    /// Print one line per collection to standard error (like `-Xlog:gc`).
    pub log_gc: bool,
    /// Also print each thread's LAB statistics at every collection (like `-Xlog:gc+tlab`).
    pub log_tlab: bool,
}

impl VmConfig {
    /// A VM with an allocation space of `space_bytes` and Hab's defaults.
    pub fn new(space_bytes: usize) -> Self {
        VmConfig {
            space_bytes,
            heap: HeapConfigBuilder::default(),
            verify: false,
            log_gc: false,
            log_tlab: false,
        }
    }
}

/// Why the VM stopped a thread's work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VmError {
    /// The configuration or the heap could not be set up.
    Setup(String),
    /// Live data does not fit the allocation space.
    OutOfMemory {
        /// Bytes that survived the last collection.
        live_bytes: usize,
        /// The allocation space.
        space_bytes: usize,
        /// The request that failed.
        request_bytes: usize,
    },
    /// A thread found the space taken by other threads after this many collections in a row.
    Starved {
        /// Collections it waited for.
        collections: u32,
    },
    /// An object larger than the VM can describe.
    TooLarge(String),
    /// A heap check of `--verify` failed.
    Verify(String),
    /// A workload thread panicked.
    Panicked {
        /// The thread's name.
        thread: String,
        /// The panic's message.
        message: String,
    },
}

impl fmt::Display for VmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmError::Setup(why) => write!(f, "cannot set the VM up: {why}"),
            VmError::OutOfMemory {
                live_bytes,
                space_bytes,
                request_bytes,
            } => write!(
                f,
                "out of memory: {} survive collections in a {} allocation space; a request of {} \
                 does not fit (give --heap more)",
                ByteSize::new(*live_bytes),
                ByteSize::new(*space_bytes),
                ByteSize::new(*request_bytes)
            ),
            VmError::Starved { collections } => write!(
                f,
                "starved: other threads took the allocation space {collections} collections in a \
                 row"
            ),
            VmError::TooLarge(what) => write!(f, "object too large: {what}"),
            VmError::Verify(what) => write!(f, "heap verification failed: {what}"),
            VmError::Panicked { thread, message } => {
                write!(f, "thread {thread} panicked: {message}")
            }
        }
    }
}

impl std::error::Error for VmError {}

/// What started a collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcCause {
    /// A thread found the allocation space full.
    AllocationFailure,
    /// The program asked for one.
    Explicit,
}

/// One collection, as the log prints it.
#[derive(Clone, Debug, PartialEq)]
pub struct GcRecord {
    /// Its number, from 1.
    pub number: u64,
    /// Why it ran.
    pub cause: GcCause,
    /// Bytes of the allocation space in use before (objects, fillers, survivors).
    pub before_bytes: usize,
    /// Bytes that survived.
    pub after_bytes: usize,
    /// The allocation space.
    pub space_bytes: usize,
    /// How long the world was stopped.
    pub pause: Duration,
    /// Whether the cycle that ended ran in per-CPU LABs.
    pub in_plabs: bool,
}

impl fmt::Display for GcRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GC({}) Pause Young ({}) {}->{}({}) {:.3}ms{}",
            self.number - 1,
            match self.cause {
                GcCause::AllocationFailure => "Allocation Failure",
                GcCause::Explicit => "System.gc()",
            },
            approximate(self.before_bytes),
            approximate(self.after_bytes),
            approximate(self.space_bytes),
            self.pause.as_secs_f64() * 1e3,
            if self.in_plabs { " [per-CPU LABs]" } else { "" }
        )
    }
}

/// Bytes for people: `812B`, `35.2KiB`, `8.0MiB`, `1.5GiB`.
pub fn approximate(bytes: usize) -> String {
    const UNITS: [(&str, u32); 3] = [("GiB", 30), ("MiB", 20), ("KiB", 10)];
    match UNITS.iter().find(|(_, shift)| bytes >= 1 << shift) {
        Some((unit, shift)) => format!("{:.1}{unit}", bytes as f64 / (1u64 << shift) as f64),
        None => format!("{bytes}B"),
    }
}

/// A thread's roots: the addresses its handles stand for.
pub(crate) struct ThreadRoots {
    pub(crate) slots: UnsafeCell<Vec<usize>>,
}

// SAFETY: `slots` is touched by its thread only while the thread's mutator runs, and by the
// collector only inside a Hab collection, which holds every mutator parked; parking and the
// collection's start and end order the two (Hab's park protocol uses Release/Acquire).
unsafe impl Sync for ThreadRoots {}

/// State behind the VM's lock.
struct State {
    /// Which half the mutators allocate in.
    space: usize,
    /// Survivors of the last collection: `[start of the half, survivors_end)`.
    survivors_end: usize,
    records: Vec<GcRecord>,
    /// The first verification failure; every thread stops at its next safepoint.
    failure: Option<VmError>,
}

/// A VM: create one with [`Vm::new`], then give each thread a [`VmThread`](crate::VmThread) with
/// [`Vm::attach`].
pub struct Vm {
    heap: Arc<Heap>,
    config: VmConfig,
    halves: [Range<usize>; 2],
    state: Mutex<State>,
    threads: Mutex<Vec<Arc<ThreadRoots>>>,
    globals: Mutex<Vec<usize>>,
    pub(crate) failed: AtomicBool,
}

impl Vm {
    /// Reserves twice `config.space_bytes` and makes the first half the allocation space.
    pub fn new(config: VmConfig) -> Result<Arc<Vm>, VmError> {
        let space = config.space_bytes;
        if space == 0 || !space.is_multiple_of(4096) {
            return Err(VmError::Setup(format!(
                "the allocation space ({space} bytes) must be a positive multiple of 4 KiB"
            )));
        }
        let heap_config = config
            .heap
            .clone()
            .capacity(2 * space)
            .build()
            .map_err(|e| VmError::Setup(e.to_string()))?;
        if heap_config.alignment_bytes() != WORD_BYTES {
            return Err(VmError::Setup("the VM's objects are 8-byte aligned".into()));
        }
        let heap =
            Heap::new(heap_config, VmObjectModel).map_err(|e| VmError::Setup(e.to_string()))?;
        let base = heap.reserved_range().start;
        let halves = [base..base + space, base + space..base + 2 * space];
        {
            // No mutator yet: this only installs the first half as the allocation range.
            let mut collection = heap.collection();
            collection
                .set_allocation_range(halves[0].clone())
                .map_err(|e| VmError::Setup(e.to_string()))?;
        }
        Ok(Arc::new(Vm {
            heap,
            state: Mutex::new(State {
                space: 0,
                survivors_end: halves[0].start,
                records: Vec::new(),
                failure: None,
            }),
            halves,
            config,
            threads: Mutex::new(Vec::new()),
            globals: Mutex::new(Vec::new()),
            failed: AtomicBool::new(false),
        }))
    }

    /// Registers a new thread: its heap mutator and its roots, which collections scan from
    /// now on (a [`VmThread`](crate::VmThread) holds both: [`Vm::attach`]).
    pub(crate) fn register_thread(&self) -> (Mutator, Arc<ThreadRoots>) {
        let mutator = self.heap.attach();
        let roots = Arc::new(ThreadRoots {
            slots: UnsafeCell::new(Vec::new()),
        });
        lock(&self.threads).push(roots.clone());
        (mutator, roots)
    }

    pub(crate) fn detach(&self, roots: &Arc<ThreadRoots>) {
        lock(&self.threads).retain(|other| !Arc::ptr_eq(other, roots));
    }

    /// The Hab heap underneath.
    pub fn heap(&self) -> &Arc<Heap> {
        &self.heap
    }

    /// The configuration.
    pub fn config(&self) -> &VmConfig {
        &self.config
    }

    /// Every collection so far.
    pub fn gc_records(&self) -> Vec<GcRecord> {
        lock(&self.state).records.clone()
    }

    /// Bytes that survived the last collection.
    pub fn live_bytes_after_gc(&self) -> usize {
        let state = lock(&self.state);
        state.survivors_end - self.halves[state.space].start
    }

    /// Hab's heap-wide statistics.
    pub fn heap_stats(&self) -> HeapStats {
        self.heap.stats()
    }

    /// The first verification failure, if any.
    pub fn failure(&self) -> Option<VmError> {
        lock(&self.state).failure.clone()
    }

    pub(crate) fn globals(&self) -> MutexGuard<'_, Vec<usize>> {
        lock(&self.globals)
    }

    /// The bytes free in the allocation space right after the last collection.
    pub(crate) fn free_after_gc(&self) -> usize {
        let state = lock(&self.state);
        self.halves[state.space].end - state.survivors_end
    }

    pub(crate) fn collect(
        &self,
        mut collection: Collection<'_>,
        cause: GcCause,
    ) -> Result<(), VmError> {
        let started = Instant::now();
        let in_plabs = self.heap.allocates_in_cpu_labs();
        let mut state = lock(&self.state);
        if let Some(failure) = &state.failure {
            return Err(failure.clone());
        }
        let from = self.halves[state.space].clone();
        let to = self.halves[1 - state.space].clone();
        let range = collection.allocation_range();
        let used_end = range.start + collection.used_bytes();
        let before_bytes = used_end - from.start;
        let threads = lock(&self.threads);
        let mut globals = lock(&self.globals);
        let result = (|| {
            if self.config.verify {
                let roots = root_values(&threads, &globals);
                // SAFETY: the world is stopped and every LAB retired: [from.start, used_end) is
                // the survivors of the last collection and everything allocated since.
                unsafe { collector::check(from.start..used_end, None, roots.iter()) }
                    .map_err(|e| VmError::Verify(format!("before collection: {e}")))?;
            }
            let roots = threads
                .iter()
                // SAFETY: every mutator is parked in this collection, so no thread touches its
                // roots (see `ThreadRoots`).
                .flat_map(|roots| unsafe { &mut *roots.slots.get() }.iter_mut())
                .chain(globals.iter_mut());
            let (from_half, to_half) = (from.clone(), to.clone());
            // SAFETY: the roots refer to objects of `from` (handles only hold addresses the VM
            // handed out or read from fields, and every collection fixes them); `to` is the
            // other half, unused since the last collection.
            let survivors_end = unsafe { collector::copy_reachable(roots, from_half, to_half) };
            if self.config.verify {
                let roots = root_values(&threads, &globals);
                // SAFETY: [to.start, survivors_end) holds the copies back to back.
                let (summary, _) =
                    unsafe { collector::check(to.start..survivors_end, None, roots.iter()) }
                        .map_err(|e| VmError::Verify(format!("after collection: {e}")))?;
                debug_assert_eq!(summary.fillers, 0);
            }
            Ok::<_, VmError>(survivors_end)
        })();
        drop((threads, globals));
        let survivors_end = match result {
            Ok(end) => end,
            Err(error) => {
                state.failure = Some(error.clone());
                self.failed.store(true, Ordering::SeqCst);
                return Err(error);
            }
        };
        collection
            .set_allocation_range(survivors_end..to.end)
            .map_err(|e| VmError::Setup(e.to_string()))?;
        let tlab_lines = self.config.log_tlab.then(|| self.heap.mutator_stats());
        collection.finish();
        state.space = 1 - state.space;
        state.survivors_end = survivors_end;
        let record = GcRecord {
            number: state.records.len() as u64 + 1,
            cause,
            before_bytes,
            after_bytes: survivors_end - to.start,
            space_bytes: self.config.space_bytes,
            pause: started.elapsed(),
            in_plabs,
        };
        if self.config.log_gc {
            eprintln!("[gc] {record}");
        }
        for (id, stats) in tlab_lines.into_iter().flatten() {
            eprintln!("[gc,tlab] thread {id}: {stats}");
        }
        state.records.push(record);
        Ok(())
    }

    /// Checks the current allocation space now (for tests): stops the world, walks from the
    /// start of the half to the top, and checks every reference. The caller's thread must not
    /// hold a running [`VmThread`](crate::VmThread).
    pub fn verify_now(&self) -> Result<CheckSummary, VmError> {
        let collection = self.heap.collection();
        let state = lock(&self.state);
        let range = collection.allocation_range();
        let used_end = range.start + collection.used_bytes();
        let threads = lock(&self.threads);
        let globals = lock(&self.globals);
        let roots = root_values(&threads, &globals);
        let start = self.halves[state.space].start;
        // SAFETY: the world is stopped and every LAB retired.
        unsafe { collector::check(start..used_end, None, roots.iter()) }
            .map(|(summary, _)| summary)
            .map_err(VmError::Verify)
    }

    /// Sums every thread's LAB statistics (see [`AllocationStats`]).
    pub fn lab_stats(&self) -> AllocationStats {
        self.heap.stats().totals
    }
}

/// Every root's value, for a check.
fn root_values(threads: &[Arc<ThreadRoots>], globals: &[usize]) -> Vec<usize> {
    threads
        .iter()
        // SAFETY: called inside a collection: no thread touches its roots.
        .flat_map(|roots| unsafe { &*roots.slots.get() }.iter().copied())
        .chain(globals.iter().copied())
        .collect()
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl fmt::Debug for Vm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vm")
            .field("space_bytes", &self.config.space_bytes)
            .finish_non_exhaustive()
    }
}
