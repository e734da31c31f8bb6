//! How big the report's experiments are: the quick, default and full scales.

use super::threads::Threads;
use crate::workload::{RunSpec, Workload};

/// Which experiments' sizes, and whether HotSpot runs beside Hab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    Quick,
    Default,
    Full,
}

/// The heap of every `alloc-object` run (Jaffer's experiment, the per-CPU LABs, the refill
/// costs): small enough to stay in the caches.
pub const ALLOC_OBJECT_HEAP_BYTES: usize = 16 << 20;

/// How big the experiments are, and their thread counts.
pub struct Scale {
    /// `quick`, `default` or `full`.
    pub name: &'static str,
    pub quick: bool,
    /// Objects per thread in Shipilëv's experiment (the seed: 50 M).
    pub array_objects: usize,
    /// Objects per thread in Jaffer's experiment.
    pub object_objects: usize,
    /// Objects per run, shared among its threads, in the middle-level grid.
    pub grid_objects: usize,
    pub repeat: usize,
    pub warmup: usize,
    /// Orders per warehouse thread (VM).
    pub warehouse_orders: usize,
    /// Messages per chat connection (VM).
    pub chat_messages: usize,
    /// Depth of binary-trees and GCBench (VM).
    pub tree_depth: u32,
    /// Repetitions of each VM run.
    pub vm_repeat: usize,
    /// The thread counts, from the machine's CPUs.
    pub threads: Threads,
}

/// The sizes of each scale; their thread counts are the machine's, set by [`Scale::new`].
const DEFAULT: Scale = Scale {
    name: "default",
    quick: false,
    array_objects: 50_000_000,
    object_objects: 20_000_000,
    grid_objects: 16_000_000,
    repeat: 5,
    warmup: 1,
    warehouse_orders: 20_000,
    chat_messages: 40,
    tree_depth: 16,
    vm_repeat: 3,
    threads: Threads::UNSET,
};
/// The seeds' sizes where they differ from the default: deeper trees, longer runs, more
/// repetitions.
const FULL: Scale = Scale {
    name: "full",
    quick: false,
    array_objects: 50_000_000,
    object_objects: 50_000_000,
    grid_objects: 50_000_000,
    repeat: 10,
    warmup: 2,
    warehouse_orders: 100_000,
    chat_messages: 200,
    tree_depth: 20,
    vm_repeat: 5,
    threads: Threads::UNSET,
};
const QUICK: Scale = Scale {
    name: "quick",
    quick: true,
    array_objects: 2_000_000,
    object_objects: 2_000_000,
    grid_objects: 2_000_000,
    repeat: 3,
    warmup: 1,
    warehouse_orders: 2_000,
    chat_messages: 8,
    tree_depth: 12,
    vm_repeat: 1,
    threads: Threads::UNSET,
};

impl Scale {
    /// The experiments at `size`, with `threads`' counts.
    pub fn new(size: Size, threads: Threads) -> Scale {
        let sizes = match size {
            Size::Quick => QUICK,
            Size::Default => DEFAULT,
            Size::Full => FULL,
        };
        Scale { threads, ..sizes }
    }

    /// A run of `workload` at this scale: 16-byte objects, 1 thread, TLAB mode, adaptive, on
    /// the machine's topology (or the simulated one).
    pub fn spec(&self, workload: Workload) -> RunSpec {
        let (objects, heap_bytes) = match workload {
            Workload::AllocArray => (self.array_objects, None),
            Workload::AllocObject => (self.object_objects, Some(ALLOC_OBJECT_HEAP_BYTES)),
        };
        RunSpec {
            workload,
            objects,
            heap_bytes,
            repeat: self.repeat,
            warmup: self.warmup,
            topology: self.threads.topology(),
            cpu_id: self.threads.cpu_id(),
            ..RunSpec::default()
        }
    }

    /// A run of `workload` on `threads` threads: the scale's objects per thread, shared out
    /// beyond the CPUs ([`Threads::objects_per_thread`]).
    pub fn spec_on(&self, workload: Workload, threads: usize) -> RunSpec {
        let base = self.spec(workload);
        RunSpec {
            threads,
            objects: self.threads.objects_per_thread(base.objects, threads),
            ..base
        }
    }
}
