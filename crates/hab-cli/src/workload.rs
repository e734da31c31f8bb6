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
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use hab::{
    AllocError, CpuIdSource, HeaderWordModel, Heap, HeapConfig, MiddleLevelSpec, Mode, Mutator,
    TlabPolicy, TlabStats, ZeroMemory,
};
use serde::Serialize;

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
        if self.zero == ZeroMemory::Never {
            command += " --zero never";
        }
        if self.prefetch {
            command += " --prefetch";
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
            zero: ZeroMemory::AtRefill,
            prefetch: false,
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
    /// Whether reused memory is zeroed at refill (`refill`) or left to the workload (`never`).
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
    pub waste_bytes: u64,
    /// Waste (TLABs and middle levels) in percent of the bytes allocated in objects.
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
    /// Per-CPU LABs (modes `plab` and `flip`): the rows of Garthwaite et al.'s Table 2.
    pub plab: PlabResult,
    /// Whether those LABs use restartable sequences (`null` in other modes).
    pub plab_restartable: Option<bool>,
    /// Each thread's TLAB statistics at the end, as one line like HotSpot's `gc+tlab` log.
    pub thread_stats: Vec<String>,
    /// The compute loop's speed-up from 1 to `threads` threads in this run (ideal: `threads`).
    pub compute_speedup: Option<f64>,
}

/// Per-CPU LAB figures of a run (means per repetition).
#[derive(Clone, Debug, Default, Serialize)]
pub struct PlabResult {
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
}

impl From<hab::PlabStats> for PlabResult {
    fn from(stats: hab::PlabStats) -> Self {
        PlabResult {
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
    pub allocs: u64,
    pub foreign_allocs: u64,
    pub foreign_pct: f64,
    pub refills: u64,
    pub waste_bytes: u64,
    pub rseq_aborts: u64,
    pub rseq_fallbacks: u64,
    /// Chunks a refill could not install, kept for later refills; and those reused.
    pub sidelined: u64,
    pub sideline_reused: u64,
}

/// Policy name as the JSON spells it.
fn policy_name(policy: TlabPolicy) -> &'static str {
    match policy {
        TlabPolicy::Fixed(_) => "fixed",
        TlabPolicy::Adaptive => "adaptive",
        TlabPolicy::Growing => "growing",
    }
}

impl RunSpec {
    /// The heap capacity to use: the given one, or room for every object of a repetition plus
    /// slack for TLABs and middle-level buffers (alloc-array), or 16 MiB, small enough to stay in the caches
    /// (alloc-object).
    pub fn heap_bytes(&self) -> usize {
        self.heap_bytes.unwrap_or(match self.workload {
            Workload::AllocArray => {
                let objects = self.threads * self.objects * self.object_size;
                let slack = self.threads * (4 << 20) + objects / 8 + self.middle_bytes();
                (objects + slack).next_multiple_of(1 << 20)
            }
            Workload::AllocObject => 16 << 20,
        })
    }

    /// An upper bound of what the middle levels' buffers can hold back: a buffer per CPU at
    /// each level.
    fn middle_bytes(&self) -> usize {
        let cpus = match &self.topology {
            Some(spec) => spec
                .split('x')
                .filter_map(|n| n.parse::<usize>().ok())
                .product(),
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        self.middle
            .iter()
            .map(|spec| spec.buffer_bytes * cpus)
            .sum()
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
        if let Some(max) = self.max_tlab {
            builder = builder.max_tlab(max);
        }
        builder.build().map_err(|e| e.to_string())
    }
}

/// Runs one configuration: warm-up and measured repetitions.
pub fn run(spec: &RunSpec) -> Result<RunResult, String> {
    if spec.threads == 0 || spec.objects == 0 || spec.repeat == 0 {
        return Err("--threads, --objects and --repeat must be at least 1".into());
    }
    let heap = Heap::new(spec.config()?, HeaderWordModel).map_err(|e| e.to_string())?;
    let size = heap
        .checked_size(spec.object_size)
        .map_err(|e| e.to_string())?;
    let references = References::of(&heap)?;
    let options = LoopOptions {
        prefetch: spec.prefetch,
        initialise_body: spec.zero == ZeroMemory::Never,
    };
    let reps = spec.warmup + spec.repeat;
    let barrier = Barrier::new(spec.threads + 1);
    let spans = Mutex::new(vec![Vec::new(); reps]);
    let failure = Mutex::new(None::<String>);
    let mut per_rep = Vec::new();
    let mut mean_desired_bytes = 0;
    let mut thread_stats = Vec::new();

    std::thread::scope(|scope| {
        for _ in 0..spec.threads {
            scope.spawn(|| {
                let mut parked = heap.attach().park();
                let mut array = match spec.workload {
                    Workload::AllocArray => vec![1u32; spec.objects],
                    Workload::AllocObject => Vec::new(),
                };
                for rep in 0..reps {
                    barrier.wait();
                    let mut mutator = parked.unpark();
                    let start = Instant::now();
                    let outcome = match spec.workload {
                        Workload::AllocArray => {
                            alloc_array(&mut mutator, size, options, references, &mut array)
                        }
                        Workload::AllocObject => {
                            alloc_object(&mut mutator, size, options, spec.objects)
                        }
                    };
                    let end = Instant::now();
                    parked = mutator.park();
                    if let Err(error) = outcome {
                        failure.lock().unwrap().get_or_insert(error);
                    }
                    spans.lock().unwrap()[rep].push((start, end));
                    barrier.wait();
                    barrier.wait();
                }
                black_box(&array);
            });
        }
        let mut before = heap.stats();
        for _ in 0..reps {
            barrier.wait();
            barrier.wait();
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
            barrier.wait();
        }
    });
    if let Some(error) = failure.into_inner().unwrap() {
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
    let mean = |value: &dyn Fn(&(TlabStats, u64)) -> u64| {
        measured.iter().map(value).sum::<u64>() / measured.len() as u64
    };
    let mut sorted = elapsed_ms.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let total_objects = (spec.threads * spec.objects) as f64;
    let tlab_size = match spec.tlab {
        TlabPolicy::Fixed(bytes) => bytes as u64,
        _ => mean_desired_bytes,
    };
    let waste_bytes =
        mean(&|(s, _)| s.waste_bytes() + s.middle_waste_bytes() + s.plab.unused_bytes());
    let mut plab_total = hab::PlabStats::default();
    for (stats, _) in measured {
        plab_total += stats.plab;
    }
    let reps = measured.len() as u64;
    let plab = PlabResult::from(plab_total.divided_by(reps));
    let levels: Vec<LevelResult> = heap
        .middle_levels()
        .into_iter()
        .map(|info| {
            let i = info.level.index();
            let allocs = mean(&|(s, _)| s.levels[i].allocs);
            let foreign_allocs = mean(&|(s, _)| s.levels[i].foreign_allocs);
            LevelResult {
                level: info.level.name(),
                buffer_bytes: info.buffer_bytes,
                domains: info.domains,
                restartable: info.restartable,
                allocs,
                foreign_allocs,
                foreign_pct: percent(foreign_allocs, allocs),
                refills: mean(&|(s, _)| s.levels[i].refills),
                waste_bytes: mean(&|(s, _)| s.levels[i].waste_bytes),
                rseq_aborts: mean(&|(s, _)| s.levels[i].rseq_aborts),
                rseq_fallbacks: mean(&|(s, _)| s.levels[i].rseq_fallbacks),
                sidelined: mean(&|(s, _)| s.levels[i].sidelined),
                sideline_reused: mean(&|(s, _)| s.levels[i].sideline_reused),
            }
        })
        .collect();
    let middle_allocs = levels.iter().map(|l| l.allocs).sum();
    let foreign_allocs = levels.iter().map(|l| l.foreign_allocs).sum();
    // Each repetition ends with the collection that resets the heap; count only the others.
    let collections = mean(&|(_, c)| *c).saturating_sub(1);
    Ok(RunResult {
        workload: spec.workload.name(),
        mode: spec.mode.to_string(),
        threads: spec.threads,
        object_size: spec.object_size,
        objects: spec.objects,
        tlab_policy: policy_name(spec.tlab),
        tlab_size,
        heap_bytes: spec.heap_bytes(),
        zero: match spec.zero {
            ZeroMemory::AtRefill => "refill",
            ZeroMemory::Never => "never",
        },
        prefetch: spec.prefetch,
        repeat: spec.repeat,
        elapsed_ms_min: sorted[0],
        elapsed_ms_median: median,
        ns_per_alloc: median * 1e6 / total_objects,
        allocs_per_sec: total_objects / (median / 1e3),
        bytes_per_sec: total_objects * spec.object_size as f64 / (median / 1e3),
        elapsed_ms,
        refills: mean(&|(s, _)| s.refills),
        slow_allocs: mean(&|(s, _)| s.slow_allocs),
        waste_bytes,
        waste_pct: percent(
            waste_bytes,
            (spec.threads * spec.objects * spec.object_size) as u64,
        ),
        middle: MiddleLevelSpec::list_to_string(heap.config().middle()),
        cpu_id_source: heap.cpu_id().source().to_string(),
        topology: spec.topology.clone().unwrap_or_else(|| "sysfs".into()),
        middle_allocs,
        foreign_allocs,
        foreign_pct: percent(foreign_allocs, middle_allocs),
        levels,
        collections,
        plab,
        plab_restartable: heap.plabs_restartable(),
        thread_stats,
        compute_speedup: (spec.compute && spec.threads > 1).then(|| compute_speedup(spec.threads)),
    })
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// The fast path of the mutator's current mode: the TLAB's, or the per-CPU LAB's in mode
/// `plab` (as a JIT emits one allocation sequence per mode). Each workload loop exists once
/// per fast path, each a plain loop the compiler keeps in registers.
macro_rules! per_fast_path {
    ($mutator:expr, |$allocator:ident| $body:expr) => {
        match $mutator.plab() {
            Some(mut plab) => {
                let $allocator = &mut plab;
                $body
            }
            None => {
                let $allocator = &mut *$mutator;
                $body
            }
        }
    };
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

/// Calls `$loop::<PREFETCH, INITIALISE>(allocator, args…)` with the fast path of the
/// mutator's mode and the constants the options select.
macro_rules! per_loop {
    ($mutator:expr, $options:expr, $loop:ident($($arg:expr),*)) => {
        match ($options.prefetch, $options.initialise_body) {
            (false, false) => per_fast_path!($mutator, |allocator| $loop::<false, false>(allocator, $($arg),*)),
            (false, true) => per_fast_path!($mutator, |allocator| $loop::<false, true>(allocator, $($arg),*)),
            (true, false) => per_fast_path!($mutator, |allocator| $loop::<true, false>(allocator, $($arg),*)),
            (true, true) => per_fast_path!($mutator, |allocator| $loop::<true, true>(allocator, $($arg),*)),
        }
    };
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

/// Shipilëv's loop: allocate, write the header, keep the address.
fn alloc_array(
    mutator: &mut Mutator,
    size: hab::AllocSize,
    options: LoopOptions,
    references: References,
    array: &mut [u32],
) -> Result<(), String> {
    let result = per_loop!(mutator, options, fill_array(size, references, array));
    result.map_err(|error| match error {
        AllocError::OutOfMemory { .. } => format!("{error}: give alloc-array a larger --heap"),
        _ => error.to_string(),
    })
}

/// Something with an `alloc_sized`: a [`Mutator`] or a [`hab::PlabPath`].
trait Allocate {
    fn alloc_sized(&mut self, size: hab::AllocSize) -> Result<NonNull<u8>, AllocError>;
    fn alloc_sized_prefetching(&mut self, size: hab::AllocSize) -> Result<NonNull<u8>, AllocError>;

    /// One allocation, with or without the prefetch.
    #[inline(always)]
    fn allocate<const PREFETCH: bool>(
        &mut self,
        size: hab::AllocSize,
    ) -> Result<NonNull<u8>, AllocError> {
        if PREFETCH {
            self.alloc_sized_prefetching(size)
        } else {
            self.alloc_sized(size)
        }
    }
}

impl Allocate for Mutator {
    #[inline(always)]
    fn alloc_sized(&mut self, size: hab::AllocSize) -> Result<NonNull<u8>, AllocError> {
        Mutator::alloc_sized(self, size)
    }

    #[inline(always)]
    fn alloc_sized_prefetching(&mut self, size: hab::AllocSize) -> Result<NonNull<u8>, AllocError> {
        Mutator::alloc_sized_prefetching(self, size)
    }
}

impl Allocate for hab::PlabPath<'_> {
    #[inline(always)]
    fn alloc_sized(&mut self, size: hab::AllocSize) -> Result<NonNull<u8>, AllocError> {
        hab::PlabPath::alloc_sized(self, size)
    }

    #[inline(always)]
    fn alloc_sized_prefetching(&mut self, size: hab::AllocSize) -> Result<NonNull<u8>, AllocError> {
        hab::PlabPath::alloc_sized_prefetching(self, size)
    }
}

/// Makes a fresh object parseable: its header, and with `INITIALISE` zeroes over the rest (when
/// memory is not zeroed at refill, the runtime initialises what it allocates).
#[inline(always)]
fn initialise<const INITIALISE: bool>(object: NonNull<u8>, size: hab::AllocSize) {
    // SAFETY: `object` is `size` fresh bytes owned by this thread, word-aligned.
    unsafe { HeaderWordModel::write_header(object, size.bytes()) };
    if INITIALISE {
        let body = object.as_ptr().wrapping_add(hab::WORD_BYTES).cast::<u64>();
        let body_words = size.bytes() / hab::WORD_BYTES - 1;
        // A one-word body is one store, as a compiler emits for a known size; larger ones go
        // through `write_bytes` (a `memset` call).
        if body_words == 1 {
            // SAFETY: the word after the header is inside the object's `size` bytes.
            unsafe { body.write(0) };
        } else {
            // SAFETY: the `body_words` words after the header are the rest of the object.
            unsafe { body.write_bytes(0, body_words) };
        }
    }
}

#[inline(always)]
fn fill_array<const PREFETCH: bool, const INITIALISE: bool>(
    allocator: &mut impl Allocate,
    size: hab::AllocSize,
    references: References,
    array: &mut [u32],
) -> Result<(), AllocError> {
    for slot in array.iter_mut() {
        let object = allocator.allocate::<PREFETCH>(size)?;
        initialise::<INITIALISE>(object, size);
        *slot = references.compress(object);
    }
    Ok(())
}

/// Jaffer's loop: allocate, write the header, drop; collect when the heap is full.
fn alloc_object(
    mutator: &mut Mutator,
    size: hab::AllocSize,
    options: LoopOptions,
    objects: usize,
) -> Result<(), String> {
    let mut done = 0;
    while done < objects {
        let left = objects - done;
        let (allocated, result) = per_loop!(mutator, options, drop_objects(size, left));
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
/// stopped it early.
#[inline(always)]
fn drop_objects<const PREFETCH: bool, const INITIALISE: bool>(
    allocator: &mut impl Allocate,
    size: hab::AllocSize,
    objects: usize,
) -> (usize, Result<(), AllocError>) {
    for done in 0..objects {
        match allocator.allocate::<PREFETCH>(size) {
            Ok(object) => initialise::<INITIALISE>(object, size),
            Err(error) => return (done, Err(error)),
        }
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
pub fn compute_speedup(threads: usize) -> f64 {
    let time = |threads: usize| {
        let barrier = Barrier::new(threads);
        let start = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    barrier.wait();
                    compute_loop(COMPUTE_ITERATIONS)
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
            initialise::<true>(object, size);
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
            initialise::<true>(object, size);
            assert_eq!(memory[0], bytes as u64);
            assert!(
                memory[1..].iter().all(|&word| word == 0),
                "{bytes}: {memory:?}"
            );
        }
    }
}
