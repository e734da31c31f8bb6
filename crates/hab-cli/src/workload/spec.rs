//! A run's specification: the workload, the heap, the mode and its sizes, the threads; checked
//! before anything is allocated, and spelled back as the `hab run` command that reproduces it.

use hab::{CpuIdSource, HeapConfig, MiddleLevelSpec, Mode, TlabPolicy, ZeroMemory};

use crate::limits;

use super::*;

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

    pub(super) fn config(&self) -> Result<HeapConfig, String> {
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
