//! The mutator layer: one thread's allocation state and the paths through it.

pub(crate) mod stats;
