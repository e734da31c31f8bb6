//! The allocation workloads of the seeds, timed on threads that allocate through Hab.
//!
//! - `alloc-array` (Shipilëv): each thread allocates N objects, writes their header and stores
//!   each as a 4-byte compressed reference (its heap offset in words, as a JVM with compressed
//!   references stores it) in its own preallocated array, in a pre-touched heap large enough
//!   that nothing is collected during a repetition.
//! - `alloc-object` (Jaffer): allocate, write the header and drop; when the heap is full, the
//!   thread that noticed stops the world, resets the heap (everything is dead) and goes on.
//!
//! With `--zero never` the workloads initialise each object whole (header, then zeroes), as a
//! runtime that does not zero at refill must; with `--prefetch` they allocate through the
//! fast paths' `_prefetching` forms (one allocation prefetch per object).
//!
//! Every repetition starts all threads at a barrier; its time runs from the first thread's
//! start to the last thread's end. Between repetitions every mutator is parked and one
//! collection resets the heap, so each repetition starts from the same state.

use std::hint::black_box;
use std::ptr::NonNull;
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::Instant;

use hab::{
    AllocError, AllocationStats, CpuIdSource, HeaderWordModel, Heap, HeapConfig, LevelStats,
    MiddleLevelSpec, Mode, Mutator, TlabPolicy, ZeroMemory,
};
use serde::Serialize;

use crate::figures::{self, Spread};
use crate::limits;

/// Which workload to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Shipilëv's experiment: allocate N objects per thread and keep them in an array.
    AllocArray,
    /// Jaffer's experiment: allocate and drop; reset the heap when it fills.
    AllocObject,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::AllocArray => "alloc-array",
            Workload::AllocObject => "alloc-object",
        }
    }
}

/// Everything that defines one measured configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    pub workload: Workload,
    pub mode: Mode,
    pub tlab: TlabPolicy,
    pub threads: usize,
    /// Objects per thread and repetition.
    pub objects: usize,
    pub object_size: usize,
    /// Heap capacity; `None` picks one that fits the workload.
    pub heap_bytes: Option<usize>,
    pub repeat: usize,
    /// Repetitions run first and not counted.
    pub warmup: usize,
    pub zero: ZeroMemory,
    /// Allocate with an allocation prefetch (`alloc_sized_prefetching`).
    pub prefetch: bool,
    /// Sample allocations every this many bytes per thread (`Heap::sample_allocations`, with
    /// a callback that counts).
    pub sample_bytes: Option<usize>,
    /// alloc-object: poll for a safepoint after every object (`Mutator::poll`), as a loop
    /// back-edge of compiled code does.
    pub poll: bool,
    pub min_tlab: Option<usize>,
    pub max_tlab: Option<usize>,
    pub waste_target_percent: f64,
    pub refill_waste_fraction: usize,
    /// Also time the compute loop on 1 and `threads` threads.
    pub compute: bool,
    /// Middle levels (mode `hab`).
    pub middle: Vec<MiddleLevelSpec>,
    /// CPU-id source; `None` lets the heap choose.
    pub cpu_id: Option<CpuIdSource>,
    /// A simulated topology such as `4x10x2`; `None` reads the machine's.
    pub topology: Option<String>,
}

impl RunSpec {
    /// The `hab run` command line that runs this configuration.
    pub fn command(&self) -> String {
        let mut command = format!(
            "hab run --workload {} --mode {} --tlab-size {} --threads {} --objects {} \
             --object-size {} --heap {} --repeat {} --warmup {}",
            self.workload.name(),
            self.mode,
            self.tlab,
            self.threads,
            self.objects,
            self.object_size,
            hab::ByteSize::new(self.heap_bytes()),
            self.repeat,
            self.warmup
        );
        match self.zero {
            ZeroMemory::Ahead => {}
            ZeroMemory::AtRefill => command += " --zero refill",
            ZeroMemory::Never => command += " --zero never",
        }
        if self.prefetch {
            command += " --prefetch";
        }
        if let Some(bytes) = self.sample_bytes {
            command += &format!(" --sample-every {bytes}");
        }
        if self.poll {
            command += " --poll";
        }
        if !self.middle.is_empty() {
            command += &format!(
                " --middle {}",
                MiddleLevelSpec::list_to_string(&self.middle)
            );
        }
        if let Some(source) = self.cpu_id {
            command += &format!(" --cpu-id {source}");
        }
        if let Some(topology) = &self.topology {
            command += &format!(" --topology {topology}");
        }
        if !self.compute {
            command += " --no-compute";
        }
        command
    }
}

impl Default for RunSpec {
    /// `alloc-array`, `tlab` mode with adaptive TLABs, 1 thread, 10 M objects of 16 bytes, 5
    /// repetitions after 1 warm-up, HotSpot's defaults for the rest.
    fn default() -> Self {
        RunSpec {
            workload: Workload::AllocArray,
            mode: Mode::Tlab,
            tlab: TlabPolicy::Adaptive,
            threads: 1,
            objects: 10_000_000,
            object_size: 16,
            heap_bytes: None,
            repeat: 5,
            warmup: 1,
            zero: ZeroMemory::Ahead,
            prefetch: false,
            sample_bytes: None,
            poll: false,
            min_tlab: None,
            max_tlab: None,
            waste_target_percent: 1.0,
            refill_waste_fraction: 64,
            compute: false,
            middle: Vec::new(),
            cpu_id: None,
            topology: None,
        }
    }
}

/// One configuration's measurements: the JSON line of `hab run --json`.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub workload: &'static str,
    pub mode: String,
    pub threads: usize,
    pub object_size: usize,
    pub objects: usize,
    pub tlab_policy: &'static str,
    /// The fixed TLAB size, or the mean desired size at the end for adaptive and growing.
    pub tlab_size: u64,
    pub heap_bytes: usize,
    /// Whether reused memory is zeroed ahead of each TLAB's top (`ahead`), a whole TLAB at
    /// refill (`refill`) or left to the workload (`never`).
    pub zero: &'static str,
    /// Whether each allocation prefetched ahead.
    pub prefetch: bool,
    pub repeat: usize,
    pub elapsed_ms: Vec<f64>,
    pub elapsed_ms_min: f64,
    pub elapsed_ms_median: f64,
    pub ns_per_alloc: f64,
    pub allocs_per_sec: f64,
    pub bytes_per_sec: f64,
    /// Mean per repetition, like every count below.
    pub refills: u64,
    pub slow_allocs: u64,
    /// Bytes of the objects allocated, in LABs of every kind and outside them (counted by
    /// the library; each repetition ends with a collection that retires every LAB, so this
    /// is `threads × objects × object_size`).
    pub allocated_bytes: u64,
    /// Bytes left unused in TLABs, middle-level buffers and per-CPU LABs: the fillers.
    pub waste_bytes: u64,
    /// Waste in percent of `allocated_bytes`.
    pub waste_pct: f64,
    pub collections: u64,
    /// The middle levels, e.g. `core:1MiB` (empty outside mode `hab`).
    pub middle: String,
    /// Where the CPU number came from.
    pub cpu_id_source: String,
    /// `sysfs` or the simulated spec.
    pub topology: String,
    /// Chunks handed out by the middle levels (TLABs and buffers of lower levels).
    pub middle_allocs: u64,
    /// Those served by a domain other than the thread's at commit.
    pub foreign_allocs: u64,
    pub foreign_pct: f64,
    /// Per configured level: allocations, foreign percentage, refills, waste bytes.
    pub levels: Vec<LevelResult>,
    /// Per-CPU LABs (modes `cpu-lab` and `flip`): the rows of Garthwaite et al.'s Table 2.
    pub cpu_lab: CpuLabResult,
    /// Whether those LABs use restartable sequences (`null` in other modes).
    pub cpu_labs_restartable: Option<bool>,
    /// Each thread's TLAB statistics at the end, as one line like HotSpot's `gc+tlab` log.
    pub thread_stats: Vec<String>,
    /// The compute loop's speed-up from 1 to `threads` threads in this run (ideal: `threads`).
    pub compute_speedup: Option<f64>,
    /// Allocation samples taken, all repetitions (with `--sample-every`).
    pub samples: u64,
}

impl RunResult {
    /// Time per object (of all threads together) in ns over the repetitions.
    pub fn ns_per_object(&self) -> Spread {
        let objects = (self.threads * self.objects) as f64;
        Spread::of(&self.elapsed_ms).scaled(1e6 / objects)
    }
}

/// Per-CPU LAB figures of a run (means per repetition).
#[derive(Clone, Debug, Default, Serialize)]
pub struct CpuLabResult {
    pub labs: u64,
    pub lab_bytes: u64,
    pub transactions: u64,
    pub failed_transactions: u64,
    pub invalid_transactions: u64,
    pub sidelined_labs: u64,
    pub sidelined_bytes: u64,
    pub discarded_sidelined_labs: u64,
    pub partial_labs: u64,
    pub partial_waste_bytes: u64,
    pub rseq_aborts: u64,
    pub fallback_allocs: u64,
    /// Of those, objects from a CPU beyond the per-CPU array.
    pub out_of_range_cpus: u64,
    /// Bytes of the objects in per-CPU LABs and compare-and-swap buffers.
    pub allocated_bytes: u64,
    /// Bytes left unused in them.
    pub unused_bytes: u64,
}

impl From<hab::CpuLabStats> for CpuLabResult {
    fn from(stats: hab::CpuLabStats) -> Self {
        CpuLabResult {
            labs: stats.labs,
            lab_bytes: stats.lab_bytes,
            transactions: stats.transactions,
            failed_transactions: stats.failed_transactions,
            invalid_transactions: stats.invalid_transactions,
            sidelined_labs: stats.sidelined_labs,
            sidelined_bytes: stats.sidelined_bytes,
            discarded_sidelined_labs: stats.discarded_sidelined_labs,
            partial_labs: stats.partial_labs,
            partial_waste_bytes: stats.partial_waste_bytes,
            rseq_aborts: stats.rseq_aborts,
            fallback_allocs: stats.fallback_allocs,
            out_of_range_cpus: stats.out_of_range_cpus,
            allocated_bytes: stats.allocated_bytes(),
            unused_bytes: stats.unused_bytes(),
        }
    }
}

/// One middle level's figures in a run (means per repetition).
#[derive(Clone, Debug, Serialize)]
pub struct LevelResult {
    pub level: &'static str,
    pub buffer_bytes: usize,
    pub domains: usize,
    /// Per-CPU buffers in restartable sequences (else compare-and-swap buffers).
    pub restartable: bool,
    /// The library's figures for the level, under their own names in the JSON.
    #[serde(flatten)]
    pub stats: LevelStats,
    pub foreign_pct: f64,
}

impl RunSpec {
    /// Checks every number against what a run can do, before anything is allocated: counts
    /// at least 1, at most [`MAX_THREADS`](crate::limits::MAX_THREADS) threads, products that
    /// do not overflow, and an alloc-array heap (pre-touched) that fits this machine.
    pub fn check(&self) -> Result<(), String> {
        limits::threads("--threads", self.threads)?;
        limits::at_least_one("--objects", self.objects)?;
        limits::repetitions("--repeat", self.repeat, false)?;
        limits::repetitions("--warmup", self.warmup, true)?;
        limits::at_least_one("--object-size", self.object_size)?;
        if let Some(heap) = self.heap_bytes {
            if self.object_size > heap {
                return Err(format!(
                    "--heap {}: smaller than one object (--object-size {})",
                    hab::ByteSize::new(heap),
                    self.object_size
                ));
            }
        }
        let factors = [
            ("--threads", self.threads),
            ("--objects", self.objects),
            ("--object-size", self.object_size),
        ];
        limits::product(&factors)?;
        for spec in &self.middle {
            limits::product(&[
                ("a --middle buffer", spec.buffer_bytes),
                ("cpus", self.cpus()),
            ])
            .map_err(|_| {
                format!(
                    "--middle {}: its buffers overflow",
                    MiddleLevelSpec::list_to_string(std::slice::from_ref(spec))
                )
            })?;
        }
        if self.workload == Workload::AllocArray {
            // Each thread keeps a 4-byte reference per object.
            let array = limits::product(&[
                ("--threads", self.threads),
                ("--objects", self.objects),
                ("4 bytes", 4),
            ])?;
            limits::heap_fits(array, "alloc-array's arrays of references", true)
                .map_err(|e| e.replace("a heap of", "arrays of"))?;
        }
        let middle = self.middle_bytes().unwrap_or(usize::MAX);
        if self.heap_bytes.is_none() && middle > hab::MAX_CAPACITY_BYTES {
            return Err(format!(
                "--middle {}: a buffer per level for each of {} cpus needs more than Hab's 16TiB \
                 heap limit",
                MiddleLevelSpec::list_to_string(&self.middle),
                self.cpus()
            ));
        }
        let needed = self.sized_heap_bytes()?;
        let tlab_flag = match (self.tlab, self.max_tlab, self.min_tlab) {
            (TlabPolicy::Fixed(_), _, _) => Some("--tlab-size"),
            (_, Some(_), _) => Some("--max-tlab"),
            (_, None, Some(_)) => Some("--min-tlab"),
            _ => None,
        };
        let what = match (self.heap_bytes, tlab_flag) {
            (Some(_), _) => format!("--heap {}", hab::ByteSize::new(needed)),
            (None, Some(flag)) => format!(
                "{} ({}, and a TLAB of up to {} per thread from {flag})",
                self.workload.name(),
                limits::describe(&factors),
                hab::ByteSize::new(self.max_tlab_bytes())
            ),
            (None, None) => format!("{} ({})", self.workload.name(), limits::describe(&factors)),
        };
        limits::heap_fits(needed, &what, self.workload == Workload::AllocArray)
    }

    /// The heap capacity to use: the given one, or room for every object of a repetition plus
    /// slack for TLABs and middle-level buffers (alloc-array), or 16 MiB, small enough to stay
    /// in the caches (alloc-object). Only for a spec that passed [`check`](RunSpec::check).
    pub fn heap_bytes(&self) -> usize {
        self.sized_heap_bytes().unwrap_or(usize::MAX)
    }

    /// [`heap_bytes`](RunSpec::heap_bytes), or why the sizes overflow. The slack per thread
    /// is the largest TLAB it may hold back ([`max_tlab_bytes`](RunSpec::max_tlab_bytes)).
    fn sized_heap_bytes(&self) -> Result<usize, String> {
        if let Some(bytes) = self.heap_bytes {
            return Ok(bytes);
        }
        match self.workload {
            Workload::AllocArray => {
                let overflow = || {
                    format!(
                        "alloc-array's heap for {} overflows",
                        limits::describe(&[
                            ("--threads", self.threads),
                            ("--objects", self.objects),
                            ("--object-size", self.object_size),
                        ])
                    )
                };
                let per_thread = self
                    .objects
                    .checked_mul(self.object_size)
                    .ok_or_else(overflow)?;
                let objects = per_thread.checked_mul(self.threads).ok_or_else(overflow)?;
                let slack = self
                    .threads
                    .checked_mul(self.max_tlab_bytes())
                    .and_then(|tlabs| tlabs.checked_add(objects / 8))
                    .and_then(|slack| slack.checked_add(self.middle_bytes()?))
                    .ok_or_else(overflow)?;
                objects
                    .checked_add(slack)
                    .and_then(|bytes| bytes.checked_next_multiple_of(1 << 20))
                    .ok_or_else(overflow)
            }
            Workload::AllocObject => Ok(16 << 20),
        }
    }

    /// The largest TLAB a thread takes: the fixed size, `--max-tlab`, or, by default for the
    /// native workloads, HotSpot's 1 MiB lowered to what one thread allocates in a repetition
    /// (at least 64 KiB): a TLAB larger than a thread's whole allocation only holds memory
    /// back, and the heap must leave room for one per thread.
    fn max_tlab_bytes(&self) -> usize {
        match (self.tlab, self.max_tlab) {
            (TlabPolicy::Fixed(bytes), _) => bytes,
            (_, Some(bytes)) => bytes,
            _ => self
                .objects
                .saturating_mul(self.object_size)
                .checked_next_power_of_two()
                .unwrap_or(usize::MAX)
                .clamp(64 << 10, 1 << 20)
                // As HotSpot's default: no larger than the lowest middle buffer or the heap.
                .min(
                    self.middle
                        .first()
                        .map_or(usize::MAX, |spec| spec.buffer_bytes),
                )
                .min(self.heap_bytes.unwrap_or(usize::MAX) / 8 * 8)
                .max(self.min_tlab.unwrap_or(0)),
        }
    }

    /// CPUs of the machine (or the simulated topology) the middle levels have buffers for.
    fn cpus(&self) -> usize {
        match &self.topology {
            Some(spec) => spec
                .split('x')
                .filter_map(|n| n.parse::<usize>().ok())
                .try_fold(1usize, |cpus, n| cpus.checked_mul(n))
                .unwrap_or(usize::MAX),
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// An upper bound of what the middle levels' buffers can hold back: a buffer per CPU at
    /// each level; `None` when it overflows.
    fn middle_bytes(&self) -> Option<usize> {
        self.middle.iter().try_fold(0usize, |sum, spec| {
            sum.checked_add(spec.buffer_bytes.checked_mul(self.cpus())?)
        })
    }

    fn config(&self) -> Result<HeapConfig, String> {
        let mut builder = HeapConfig::builder()
            .capacity(self.heap_bytes())
            .mode(self.mode)
            .tlab(self.tlab)
            .zero(self.zero)
            .waste_target_percent(self.waste_target_percent)
            .refill_waste_fraction(self.refill_waste_fraction)
            .pretouch(self.workload == Workload::AllocArray)
            .middle_levels(&self.middle);
        if let Some(source) = self.cpu_id {
            builder = builder.cpu_id(source);
        }
        if let Some(spec) = &self.topology {
            builder = builder.simulated_topology(spec);
        }
        if let Some(min) = self.min_tlab {
            builder = builder.min_tlab(min);
        }
        if !matches!(self.tlab, TlabPolicy::Fixed(_)) {
            builder = builder.max_tlab(self.max_tlab_bytes());
        }
        builder.build().map_err(|e| {
            // The largest TLAB was derived from the lowest buffer: that buffer is what is small.
            let lowest = self.middle.first().filter(|lowest| {
                e.field() == "min_tlab"
                    && self.min_tlab.is_none()
                    && self.max_tlab.is_none()
                    && self.max_tlab_bytes() == lowest.buffer_bytes
            });
            match lowest {
                Some(lowest) => format!(
                    "--middle {}: the lowest level's buffer ({}) is smaller than the smallest \
                     TLAB (--min-tlab, 2KiB by default), and a buffer holds whole TLABs: give \
                     larger buffers or a smaller --min-tlab",
                    MiddleLevelSpec::list_to_string(&self.middle),
                    MiddleLevelSpec::list_to_string(std::slice::from_ref(lowest)),
                ),
                None => limits::config_error(&e, self.heap_bytes.is_some()),
            }
        })
    }
}

/// A barrier that a failing party can break: every waiter, now and later, then returns
/// `false`. A thread that cannot start or fails mid-run thus stops the run instead of leaving
/// the others waiting forever.
struct Rendezvous {
    parties: usize,
    /// Arrived in this round, the round, and whether the barrier is broken.
    state: Mutex<(usize, u64, bool)>,
    changed: Condvar,
}

impl Rendezvous {
    fn new(parties: usize) -> Self {
        Rendezvous {
            parties,
            state: Mutex::new((0, 0, false)),
            changed: Condvar::new(),
        }
    }

    /// Waits for every party; `false` if the barrier is (or gets) broken.
    fn wait(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.2 {
            return false;
        }
        state.0 += 1;
        if state.0 == self.parties {
            *state = (0, state.1 + 1, false);
            self.changed.notify_all();
            return true;
        }
        let round = state.1;
        while state.1 == round && !state.2 {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        !state.2 || state.1 != round
    }

    fn break_all(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).2 = true;
        self.changed.notify_all();
    }
}

/// Breaks the rendezvous when dropped before being defused: a worker that returns early or
/// panics.
struct BreakUnlessDone<'a>(&'a Rendezvous, bool);

impl Drop for BreakUnlessDone<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.break_all();
        }
    }
}

/// Runs one configuration: warm-up and measured repetitions.
pub fn run(spec: &RunSpec) -> Result<RunResult, String> {
    spec.check()?;
    let heap = Heap::new(spec.config()?, HeaderWordModel).map_err(|e| match e {
        hab::HeapError::Config(e) => limits::config_error(&e, spec.heap_bytes.is_some()),
        other => other.to_string(),
    })?;
    let samples = Arc::new(std::sync::atomic::AtomicU64::new(0));
    if let Some(bytes) = spec.sample_bytes {
        let counted = samples.clone();
        heap.sample_allocations(Some(hab::AllocationSampler::new(bytes, move |_| {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })));
    }
    let size = heap
        .checked_size(spec.object_size)
        .map_err(|e| format!("--object-size {}: {e}", spec.object_size))?;
    let references = match spec.workload {
        Workload::AllocArray => Some(References::of(&heap)?),
        Workload::AllocObject => None,
    };
    let options = LoopOptions {
        prefetch: spec.prefetch,
        initialise_body: spec.zero == ZeroMemory::Never,
    };
    let reps = spec.warmup + spec.repeat;
    let barrier = Rendezvous::new(spec.threads + 1);
    let spans = Mutex::new(vec![Vec::new(); reps]);
    let failure = Mutex::new(None::<String>);
    let fail = |error: String| {
        failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(error);
        barrier.break_all();
    };
    let mut per_rep = Vec::new();
    let mut mean_desired_bytes = 0;
    let mut thread_stats = Vec::new();

    std::thread::scope(|scope| {
        let worker = |index: usize| {
            let mut guard = BreakUnlessDone(&barrier, false);
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut array = Vec::new();
                if references.is_some() {
                    array.try_reserve_exact(spec.objects).map_err(|e| {
                        format!(
                            "cannot allocate thread {index}'s array of {} references: {e}",
                            spec.objects
                        )
                    })?;
                    array.resize(spec.objects, 1u32);
                }
                let mut parked = heap.attach().park();
                for rep in 0..reps {
                    if !barrier.wait() {
                        return Ok(());
                    }
                    let mut mutator = parked.unpark();
                    let start = Instant::now();
                    let outcome = match references {
                        Some(references) => {
                            alloc_array(&mut mutator, size, options, references, &mut array)
                        }
                        None => alloc_object(&mut mutator, size, options, spec.poll, spec.objects),
                    };
                    let end = Instant::now();
                    parked = mutator.park();
                    outcome?;
                    spans.lock().unwrap_or_else(|e| e.into_inner())[rep].push((start, end));
                    if !barrier.wait() || !barrier.wait() {
                        return Ok(());
                    }
                }
                black_box(&array);
                Ok::<(), String>(())
            }));
            match outcome {
                Ok(Ok(())) => guard.1 = true,
                Ok(Err(error)) => fail(error),
                Err(panic) => fail(format!(
                    "thread {index} failed: {}",
                    panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default()
                )),
            }
        };
        for index in 0..spec.threads {
            let spawned = std::thread::Builder::new()
                .name(format!("mutator-{index}"))
                .spawn_scoped(scope, move || worker(index));
            if let Err(error) = spawned {
                fail(format!(
                    "cannot start thread {index} of --threads {}: {error}",
                    spec.threads
                ));
                return;
            }
        }
        let mut before = heap.stats();
        for _ in 0..reps {
            if !barrier.wait() || !barrier.wait() {
                return;
            }
            let mut collection = heap.collection();
            collection.reset();
            collection.finish();
            let after = heap.stats();
            let live = heap.mutator_stats();
            thread_stats = live
                .iter()
                .map(|(id, s)| format!("TLAB: thread {id} {s}"))
                .collect();
            mean_desired_bytes = live.iter().map(|(_, s)| s.desired_size_bytes).sum::<u64>()
                / live.len().max(1) as u64;
            per_rep.push((
                after.totals.since(&before.totals),
                after.collections - before.collections,
            ));
            before = after;
            if !barrier.wait() {
                return;
            }
        }
    });
    if let Some(error) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(error);
    }

    let spans = spans.into_inner().unwrap();
    let elapsed_ms: Vec<f64> = spans[spec.warmup..]
        .iter()
        .map(|rep| {
            let first = rep.iter().map(|(start, _)| *start).min().unwrap();
            let last = rep.iter().map(|(_, end)| *end).max().unwrap();
            (last - first).as_secs_f64() * 1e3
        })
        .collect();
    let measured = &per_rep[spec.warmup..];
    let mean = |value: &dyn Fn(&(AllocationStats, u64)) -> u64| {
        measured.iter().map(value).sum::<u64>() / measured.len() as u64
    };
    let spread = Spread::of(&elapsed_ms);
    let median = spread.median;
    let total_objects = (spec.threads * spec.objects) as f64;
    let tlab_size = match spec.tlab {
        TlabPolicy::Fixed(bytes) => bytes as u64,
        _ => mean_desired_bytes,
    };
    let waste_bytes = mean(&|(s, _)| s.waste_bytes());
    let allocated_bytes = mean(&|(s, _)| s.allocated_bytes());
    let mut plab_total = hab::CpuLabStats::default();
    for (stats, _) in measured {
        plab_total += stats.cpu_lab;
    }
    let reps = measured.len() as u64;
    let cpu_lab = CpuLabResult::from(plab_total.divided_by(reps));
    let levels: Vec<LevelResult> = heap
        .middle_levels()
        .into_iter()
        .map(|info| {
            let mut stats = LevelStats::default();
            for (measured_stats, _) in measured {
                stats += measured_stats.levels[info.level.index()];
            }
            let stats = stats.divided_by(reps);
            LevelResult {
                level: info.level.name(),
                buffer_bytes: info.buffer_bytes,
                domains: info.domains,
                restartable: info.restartable,
                foreign_pct: figures::percent_of_counts(stats.foreign_allocs, stats.allocs),
                stats,
            }
        })
        .collect();
    let middle_allocs = levels.iter().map(|l| l.stats.allocs).sum();
    let foreign_allocs = levels.iter().map(|l| l.stats.foreign_allocs).sum();
    // Each repetition ends with the collection that resets the heap; count only the others.
    let collections = mean(&|(_, c)| *c).saturating_sub(1);
    Ok(RunResult {
        workload: spec.workload.name(),
        mode: spec.mode.to_string(),
        threads: spec.threads,
        object_size: spec.object_size,
        objects: spec.objects,
        tlab_policy: spec.tlab.kind(),
        tlab_size,
        heap_bytes: spec.heap_bytes(),
        zero: spec.zero.name(),
        prefetch: spec.prefetch,
        repeat: spec.repeat,
        elapsed_ms_min: spread.min,
        elapsed_ms_median: median,
        ns_per_alloc: median * 1e6 / total_objects,
        allocs_per_sec: total_objects / (median / 1e3),
        bytes_per_sec: total_objects * spec.object_size as f64 / (median / 1e3),
        elapsed_ms,
        refills: mean(&|(s, _)| s.refills),
        slow_allocs: mean(&|(s, _)| s.slow_allocs),
        allocated_bytes,
        waste_bytes,
        waste_pct: figures::percent_of_counts(waste_bytes, allocated_bytes),
        middle: MiddleLevelSpec::list_to_string(heap.config().middle()),
        cpu_id_source: heap.cpu_id().source().to_string(),
        topology: spec.topology.clone().unwrap_or_else(|| "sysfs".into()),
        middle_allocs,
        foreign_allocs,
        foreign_pct: figures::percent_of_counts(foreign_allocs, middle_allocs),
        levels,
        collections,
        cpu_lab,
        cpu_labs_restartable: heap.cpu_labs_restartable(),
        thread_stats,
        compute_speedup: (spec.compute && spec.threads > 1).then(|| compute_speedup(spec.threads)),
        samples: samples.load(std::sync::atomic::Ordering::Relaxed),
    })
}

/// What each workload loop does beside allocating: compile-time choices, so that each
/// combination is a loop of its own with nothing to test per object.
#[derive(Clone, Copy)]
struct LoopOptions {
    /// Allocate through the `_prefetching` fast paths.
    prefetch: bool,
    /// Zero each object's body after its header (memory is not zeroed at refill).
    initialise_body: bool,
}

/// Calls `$loop::<PREFETCH, INITIALISE>(mutator, args…)` with the constants the options
/// select. (The mutator's one allocation call reaches the fast path of its mode.)
macro_rules! per_loop {
    ($mutator:expr, $options:expr, $size:expr, $loop:ident($($arg:expr),*)) => {
        match ($options.prefetch, Body::of($options.initialise_body, $size)) {
            (false, Body::HeaderOnly) => $loop::<false, HEADER_ONLY>($mutator, $($arg),*),
            (false, Body::OneWord) => $loop::<false, ONE_WORD_BODY>($mutator, $($arg),*),
            (false, Body::Zeroed) => $loop::<false, ZEROED_BODY>($mutator, $($arg),*),
            (true, Body::HeaderOnly) => $loop::<true, HEADER_ONLY>($mutator, $($arg),*),
            (true, Body::OneWord) => $loop::<true, ONE_WORD_BODY>($mutator, $($arg),*),
            (true, Body::Zeroed) => $loop::<true, ZEROED_BODY>($mutator, $($arg),*),
        }
    };
}

/// What a loop writes of an object past its header, decided once per loop (not per object, so
/// that no loop depends on the compiler hoisting the test): nothing (memory is zeroed), one
/// word (a 16-byte object), or a zeroed body (`write_bytes`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Body {
    HeaderOnly,
    OneWord,
    Zeroed,
}

const HEADER_ONLY: u8 = 0;
const ONE_WORD_BODY: u8 = 1;
const ZEROED_BODY: u8 = 2;

impl Body {
    fn of(initialise_body: bool, size: hab::AllocSize) -> Body {
        match (initialise_body, size.bytes() / hab::WORD_BYTES) {
            (false, _) => Body::HeaderOnly,
            (true, 2) => Body::OneWord,
            (true, _) => Body::Zeroed,
        }
    }
}

/// How `alloc-array` stores an address in 4 bytes: its offset from the reservation's start in
/// words, as HotSpot stores compressed references (heaps up to 32 GiB).
#[derive(Clone, Copy)]
struct References {
    base: usize,
}

impl References {
    fn of(heap: &Heap) -> Result<Self, String> {
        let range = heap.reserved_range();
        if (range.end - range.start) / hab::WORD_BYTES > u32::MAX as usize {
            return Err(
                "alloc-array keeps 4-byte compressed references: the heap can be at most 32GiB"
                    .into(),
            );
        }
        Ok(References { base: range.start })
    }

    #[inline(always)]
    fn compress(self, object: NonNull<u8>) -> u32 {
        ((object.as_ptr() as usize - self.base) / hab::WORD_BYTES) as u32
    }
}

/// Shipilëv's loop: allocate, write the header, keep the address. Out of line, as
/// `alloc_object`.
#[inline(never)]
fn alloc_array(
    mutator: &mut Mutator,
    size: hab::AllocSize,
    options: LoopOptions,
    references: References,
    array: &mut [u32],
) -> Result<(), String> {
    let result = per_loop!(mutator, options, size, fill_array(size, references, array));
    result.map_err(|error| match error {
        AllocError::OutOfMemory { .. } => format!("{error}: give alloc-array a larger --heap"),
        _ => error.to_string(),
    })
}

/// One allocation, with or without the prefetch.
#[inline(always)]
fn allocate<const PREFETCH: bool>(
    mutator: &mut Mutator,
    size: hab::AllocSize,
) -> Result<NonNull<u8>, AllocError> {
    if PREFETCH {
        mutator.alloc_sized_prefetching(size)
    } else {
        mutator.alloc_sized(size)
    }
}

/// Makes a fresh object parseable: its header, and (`BODY`, see [`Body`]) zeroes over the rest
/// when memory is not zeroed at refill (the runtime initialises what it allocates): one store
/// for a one-word body, as a compiler emits for a known size; `write_bytes` (a `memset` call)
/// for larger ones.
#[inline(always)]
fn initialise<const BODY: u8>(object: NonNull<u8>, size: hab::AllocSize) {
    // SAFETY: `object` is `size` fresh bytes owned by this thread, word-aligned.
    unsafe { HeaderWordModel::write_header(object, size.bytes()) };
    let body = object.as_ptr().wrapping_add(hab::WORD_BYTES).cast::<u64>();
    match BODY {
        // SAFETY: the loop chose this for 16-byte objects: the word after the header is theirs.
        ONE_WORD_BODY => unsafe { body.write(0) },
        ZEROED_BODY => {
            let body_words = size.bytes() / hab::WORD_BYTES - 1;
            // SAFETY: the `body_words` words after the header are the rest of the object.
            unsafe { body.write_bytes(0, body_words) };
        }
        _ => {}
    }
}

/// Out of line, so that nothing in the function holds on to the mutator's address: the loop
/// then keeps the mutator's fields in registers, as a JIT's compiled loop would.
#[inline(never)]
fn fill_array<const PREFETCH: bool, const BODY: u8>(
    mutator: &mut Mutator,
    size: hab::AllocSize,
    references: References,
    array: &mut [u32],
) -> Result<(), AllocError> {
    for slot in array.iter_mut() {
        let object = allocate::<PREFETCH>(mutator, size)?;
        initialise::<BODY>(object, size);
        *slot = references.compress(object);
    }
    Ok(())
}

/// Jaffer's loop: allocate, write the header, drop; collect when the heap is full.
// Out of line, so that the loop is compiled the same whatever the worker around it does.
#[inline(never)]
fn alloc_object(
    mutator: &mut Mutator,
    size: hab::AllocSize,
    options: LoopOptions,
    poll: bool,
    objects: usize,
) -> Result<(), String> {
    let mut done = 0;
    while done < objects {
        let left = objects - done;
        let (allocated, result) = if poll {
            drop_objects_polling(mutator, size, left)
        } else {
            per_loop!(mutator, options, size, drop_objects(size, left))
        };
        done += allocated;
        match result {
            Ok(()) => {}
            Err(AllocError::OutOfMemory { .. }) => collect_when_full(mutator),
            Err(error) => return Err(error.to_string()),
        }
    }
    Ok(())
}

/// Allocates up to `objects` objects, initialising each; returns how many and the error that
/// stopped it early. Out of line, for the reason `fill_array` is.
#[inline(never)]
fn drop_objects<const PREFETCH: bool, const BODY: u8>(
    mutator: &mut Mutator,
    size: hab::AllocSize,
    objects: usize,
) -> (usize, Result<(), AllocError>) {
    for done in 0..objects {
        match allocate::<PREFETCH>(mutator, size) {
            Ok(object) => initialise::<BODY>(object, size),
            Err(error) => return (done, Err(error)),
        }
    }
    (objects, Ok(()))
}

/// `drop_objects` with a safepoint poll after each object: what the poll costs.
#[inline(never)]
fn drop_objects_polling(
    mutator: &mut Mutator,
    size: hab::AllocSize,
    objects: usize,
) -> (usize, Result<(), AllocError>) {
    for done in 0..objects {
        match mutator.alloc_sized(size) {
            Ok(object) => initialise::<HEADER_ONLY>(object, size),
            Err(error) => return (done, Err(error)),
        }
        mutator.poll();
    }
    (objects, Ok(()))
}

/// Parks, resets the heap unless another thread just did, and unparks.
#[cold]
fn collect_when_full(mutator: &mut Mutator) {
    let heap: Arc<Heap> = mutator.heap().clone();
    let seen = heap.collections();
    mutator.safe_region(|| {
        if let Some(mut collection) = heap.collection_if_none_since(seen) {
            collection.reset();
        }
    });
}

/// Iterations of the compute loop: about 0.1 s on these machines.
const COMPUTE_ITERATIONS: u64 = 100_000_000;

/// Milliseconds the compute loop takes for `iterations` on the calling thread: a probe of how
/// much of the CPU the process gets right now.
pub fn compute_ms(iterations: u64) -> f64 {
    let start = Instant::now();
    black_box(compute_loop(iterations));
    start.elapsed().as_secs_f64() * 1e3
}

/// A pure compute loop (xorshift), touching no memory.
fn compute_loop(iterations: u64) -> u64 {
    let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
    for _ in 0..iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    black_box(x)
}

/// How much faster `threads` threads get the same per-thread compute work done than one
/// thread: `threads × t(1) / t(threads)`. On a machine that scales perfectly, `threads`.
/// Beyond four threads per CPU the speed-up has saturated (every CPU is busy), so at most that
/// many are timed and their speed-up stands for more: 4096 threads take as long as 8 on two
/// CPUs (each timing a whole loop per thread used to take minutes).
pub fn compute_speedup(threads: usize) -> f64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = threads.min(4 * cpus).max(1);
    let iterations = COMPUTE_ITERATIONS;
    let time = |threads: usize| {
        let barrier = Barrier::new(threads);
        let start = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    barrier.wait();
                    compute_loop(iterations)
                });
            }
        });
        start.elapsed().as_secs_f64()
    };
    let one = (0..3).map(|_| time(1)).fold(f64::MAX, f64::min);
    let many = (0..3).map(|_| time(threads)).fold(f64::MAX, f64::min);
    threads as f64 * one / many
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compressed reference is the object's word offset from the reservation's start, and
    /// the last word of the heap still fits.
    /// A party that breaks the rendezvous releases every waiter, now and later, with `false`
    /// (a thread that cannot start, or fails, must not leave the others waiting).
    #[test]
    fn a_broken_rendezvous_releases_every_waiter() {
        let rendezvous = Rendezvous::new(3);
        std::thread::scope(|scope| {
            let waiters: Vec<_> = (0..2).map(|_| scope.spawn(|| rendezvous.wait())).collect();
            std::thread::sleep(std::time::Duration::from_millis(20));
            rendezvous.break_all();
            for waiter in waiters {
                assert!(!waiter.join().unwrap());
            }
        });
        assert!(!rendezvous.wait(), "a later wait returns at once");
        let whole = Rendezvous::new(2);
        std::thread::scope(|scope| {
            let other = scope.spawn(|| whole.wait());
            assert!(whole.wait());
            assert!(other.join().unwrap());
        });
    }

    #[test]
    fn compressed_references_are_word_offsets() {
        let config = HeapConfig::builder().capacity(1 << 20).build().unwrap();
        let heap = Heap::new(config, HeaderWordModel).unwrap();
        let references = References::of(&heap).unwrap();
        let range = heap.reserved_range();
        let mut mutator = heap.attach();
        let size = mutator.checked_size(16).unwrap();
        for _ in 0..100 {
            let object = mutator.alloc_sized(size).unwrap();
            initialise::<ONE_WORD_BODY>(object, size);
            let reference = references.compress(object) as usize;
            assert_eq!(
                range.start + reference * hab::WORD_BYTES,
                object.as_ptr() as usize
            );
        }
        let last = NonNull::new((range.end - hab::WORD_BYTES) as *mut u8).unwrap();
        assert_eq!(
            references.compress(last) as usize,
            (range.end - range.start) / hab::WORD_BYTES - 1
        );
    }

    /// With `--zero never`, a loop initialises the whole object: header, then zeroes over
    /// whatever the memory held.
    #[test]
    fn initialise_zeroes_the_body_after_the_header() {
        for bytes in [16usize, 48] {
            let mut memory = vec![u64::MAX; bytes / 8];
            let object = NonNull::new(memory.as_mut_ptr().cast::<u8>()).unwrap();
            let config = HeapConfig::builder().capacity(1 << 20).build().unwrap();
            let heap = Heap::new(config, HeaderWordModel).unwrap();
            let size = heap.checked_size(bytes).unwrap();
            match Body::of(true, size) {
                Body::OneWord => initialise::<ONE_WORD_BODY>(object, size),
                _ => initialise::<ZEROED_BODY>(object, size),
            }
            assert_eq!(memory[0], bytes as u64);
            assert!(
                memory[1..].iter().all(|&word| word == 0),
                "{bytes}: {memory:?}"
            );
        }
    }
}
