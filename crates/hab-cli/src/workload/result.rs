//! What a run measured: times over the repetitions and the library's statistics, as the JSON
//! and the report read them.

use hab::LevelStats;
use serde::Serialize;

use crate::figures::Spread;

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
    /// The middle levels, e.g. `core:1MiB` (empty outside mode `hab`), with the sizes their
    /// buffers start with.
    pub middle: String,
    /// Whether the buffers are resized at each collection (`auto` levels).
    pub buffers_follow_allocation: bool,
    /// Where the CPU number came from.
    pub cpu_id_source: String,
    /// What the restartable per-CPU arrays were indexed by (`hab::rseq_slot_index`).
    pub slot_index: String,
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
    /// LABs the run's collections found in use, all collections.
    pub labs_in_use_at_collections: u64,
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
            labs_in_use_at_collections: stats.labs_in_use_at_collections,
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
