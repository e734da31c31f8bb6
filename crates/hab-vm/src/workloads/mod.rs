//! The seeds' workloads, written against the VM's safe API (handles, scopes, safepoints).

pub mod alloc;
pub mod binary_trees;
pub mod chat;
pub mod gcbench;
pub mod javac_like;
pub mod warehouses;

use crate::VmError;

/// What a workload printed and how much work it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Its output lines.
    pub lines: Vec<String>,
    /// Operations done, for a throughput.
    pub ops: u64,
    /// What an operation is.
    pub op: &'static str,
}

/// Waits for a workload thread; its panic becomes [`VmError::Panicked`] rather than a panic of
/// the caller.
pub(crate) fn join<T>(handle: std::thread::JoinHandle<Result<T, VmError>>) -> Result<T, VmError> {
    let thread = handle.thread().name().unwrap_or("unnamed").to_string();
    handle.join().unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(VmError::Panicked { thread, message })
    })
}

/// A small deterministic random number generator (xorshift64*), one per thread.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
