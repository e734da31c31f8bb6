//! The registry: the mutators a collection must stop, and what the heap keeps of those that
//! left. Locked, it holds off forks (`attach.rs` changes it).

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::labs::sizing::DecayingAverage;
use crate::mutator::cell::MutatorCell;
use crate::mutator::stats::AllocationStats;
use crate::platform::process::ForkGate;

/// The registry, locked, with a [`ForkGate`] held so that no `fork` copies it locked.
pub(crate) struct RegistryGuard<'h> {
    registry: MutexGuard<'h, Registry>,
    _fork: ForkGate,
}

impl Deref for RegistryGuard<'_> {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        &self.registry
    }
}

impl DerefMut for RegistryGuard<'_> {
    fn deref_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }
}

pub(crate) struct Registry {
    pub(crate) mutators: Vec<Arc<MutatorCell>>,
    /// A collection is stopping or has stopped the mutators: no new ones may attach.
    pub(crate) stopping: bool,
    /// Mutators attached so far: the next one's index in attach order (where a simulated
    /// CPU starts, so that runs with the same seed migrate alike).
    pub(crate) attached: u64,
    /// Counters of mutators that detached.
    pub(crate) detached: AllocationStats,
    /// Decaying average of threads that took a TLAB between collections.
    pub(crate) allocating_threads: DecayingAverage,
    /// Mutators of threads that did not survive a `fork` into this process.
    pub(crate) forgotten_after_fork: u64,
}

impl Registry {
    pub(crate) fn new(allocating_threads: DecayingAverage) -> Self {
        Registry {
            mutators: Vec::new(),
            stopping: false,
            attached: 0,
            detached: AllocationStats::default(),
            allocating_threads,
            forgotten_after_fork: 0,
        }
    }
}

impl<'h> RegistryGuard<'h> {
    /// Locks `registry` (a poisoned lock too: the registry stays consistent across a panic),
    /// holding off forks while it is locked.
    pub(crate) fn lock(registry: &'h Mutex<Registry>) -> Self {
        let fork = ForkGate::enter();
        RegistryGuard {
            registry: registry.lock().unwrap_or_else(|e| e.into_inner()),
            _fork: fork,
        }
    }
}
