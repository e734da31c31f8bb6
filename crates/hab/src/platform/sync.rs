//! The atomics of the lock-free protocols: std's, or loom's when model checking
//! (`RUSTFLAGS="--cfg loom"`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
