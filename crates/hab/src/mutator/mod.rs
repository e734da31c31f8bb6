//! The mutator layer: one thread's allocation state and the paths through it. The state
//! machine that guards a mutator's TLAB (`cell`, the only place with unchecked accesses to
//! it), the heap's allocation side that the paths read (`allocator`, where the mode is turned
//! into parts once), the slow path's short line for the common misses (`short_line`) and its
//! full path (`slow_path`), the TLAB refill both take (`refill`), the per-CPU LAB fast path's
//! state (`cpu_lab_cursor`), stopping at safepoints (`safepoint`), checked sizes and allocation
//! errors (`alloc_size`), allocation sampling (`sampling`), and the per-mutator counters
//! (`stats`).

pub(crate) mod alloc_size;
pub(crate) mod allocator;
pub(crate) mod cell;
pub(crate) mod cpu_lab_cursor;
pub(crate) mod refill;
pub(crate) mod safepoint;
pub(crate) mod sampling;
pub(crate) mod short_line;
pub(crate) mod slow_path;
pub(crate) mod stats;
