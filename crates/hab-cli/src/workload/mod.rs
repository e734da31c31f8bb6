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

mod compute;
mod loops;
mod result;
mod runner;
mod spec;

pub use compute::*;
use loops::*;
pub use result::*;
pub use runner::*;
pub use spec::*;

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
