//! The platform layer: what the machine and the kernel offer. Restartable sequences (their
//! registration, ABI, sections and per-CPU slots), the machine's topology, the sources of the
//! current CPU id and which of them this process uses, processes and forks, asymmetric fences, loom-aware atomics, allocation prefetch.

pub(crate) mod counter;
pub(crate) mod cpu_id;
pub(crate) mod fence;
pub(crate) mod per_cpu;
pub(crate) mod prefetch;
pub(crate) mod process;
pub(crate) mod rseq;
pub(crate) mod sync;
pub(crate) mod topology;
