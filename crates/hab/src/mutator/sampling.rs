//! Allocation sampling: a callback about every N bytes each thread allocates, as JFR's
//! `ObjectAllocationSample` and JVMTI's `SampledObjectAlloc` give their runtimes.
//!
//! No cost on the fast path, on or off: a thread's TLAB soft end stops at the address where
//! its next sample falls (when that is below the limit), so the allocation that crosses it
//! takes the slow path, which calls the sampler and sets the next one. Each thread keeps a
//! byte clock (its objects' bytes in TLABs and outside them); objects in per-CPU LABs are not
//! sampled.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::platform::process::ForkGate;

/// One sampled allocation, as the sampler sees it.
#[derive(Clone, Copy, Debug)]
pub struct AllocationSample {
    /// The allocating mutator ([`Mutator::id`](crate::Mutator::id)).
    pub mutator_id: u64,
    /// The object: handed out, not yet initialised by the runtime (zero, unless memory is
    /// not zeroed).
    pub address: NonNull<u8>,
    /// Its size.
    pub bytes: usize,
    /// The bytes the thread had allocated, this object included.
    pub thread_allocated_bytes: u64,
}

/// A sampler: the interval and the callback. See [`Heap::sample_allocations`].
///
/// [`Heap::sample_allocations`]: crate::Heap::sample_allocations
pub struct AllocationSampler {
    interval_bytes: usize,
    callback: Box<dyn Fn(&AllocationSample) + Send + Sync>,
}

impl AllocationSampler {
    /// Calls `callback` on the allocating thread for the object that crosses each
    /// `interval_bytes` of that thread's allocation (at least 1).
    pub fn new(
        interval_bytes: usize,
        callback: impl Fn(&AllocationSample) + Send + Sync + 'static,
    ) -> Self {
        AllocationSampler {
            interval_bytes: interval_bytes.max(1),
            callback: Box::new(callback),
        }
    }

    /// The bytes between two samples of one thread.
    pub fn interval_bytes(&self) -> usize {
        self.interval_bytes
    }
}

impl std::fmt::Debug for AllocationSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllocationSampler")
            .field("interval_bytes", &self.interval_bytes)
            .finish_non_exhaustive()
    }
}

/// The heap's sampler, if any. Read by slow paths only.
pub(crate) struct Sampling {
    /// The sampler's interval; 0 when sampling is off (one load for the slow path).
    interval_bytes: AtomicUsize,
    /// The size bits that send a miss past the slow path's short line: the low bits of the
    /// heap's alignment (a size checked against another heap), or every bit while sampling is
    /// on, so that one test of the size finds either. Changes with the sampler, under its lock;
    /// each mutator keeps a copy the short line tests (`MutatorCell::full_path_bits`), which
    /// `Heap::sample_allocations` updates.
    full_path_size_bits: AtomicUsize,
    /// The low bits of the heap's alignment.
    alignment_bits: usize,
    sampler: Mutex<Option<Arc<AllocationSampler>>>,
}

impl Sampling {
    /// No sampler, in a heap that aligns objects to `alignment_bytes` (a power of two).
    pub(crate) fn new(alignment_bytes: usize) -> Self {
        debug_assert!(alignment_bytes.is_power_of_two());
        let alignment_bits = alignment_bytes - 1;
        Sampling {
            interval_bytes: AtomicUsize::new(0),
            full_path_size_bits: AtomicUsize::new(alignment_bits),
            alignment_bits,
            sampler: Mutex::new(None),
        }
    }

    /// Installs `sampler` (or turns sampling off); threads see it at their next slow path.
    pub(crate) fn set(&self, sampler: Option<AllocationSampler>) {
        let mut current = self.sampler.lock().unwrap_or_else(|e| e.into_inner());
        let interval = sampler.as_ref().map_or(0, |s| s.interval_bytes);
        let bits = match interval {
            0 => self.alignment_bits,
            _ => usize::MAX,
        };
        *current = sampler.map(Arc::new);
        self.interval_bytes.store(interval, Ordering::Relaxed);
        self.full_path_size_bits.store(bits, Ordering::Relaxed);
    }

    /// The bits of an allocation's size that, set, send it past the slow path's short line:
    /// see the field.
    #[inline]
    pub(crate) fn full_path_size_bits(&self) -> usize {
        self.full_path_size_bits.load(Ordering::Relaxed)
    }

    /// The interval, 0 when off.
    #[inline]
    pub(crate) fn interval_bytes(&self) -> usize {
        self.interval_bytes.load(Ordering::Relaxed)
    }

    /// Calls the sampler, if one is still installed, outside the lock (which is taken inside
    /// the fork gate, so that a `fork` never copies it held).
    #[cold]
    pub(crate) fn report(&self, sample: &AllocationSample) {
        let sampler = {
            let _fork = ForkGate::enter();
            self.sampler
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        };
        if let Some(sampler) = sampler {
            (sampler.callback)(sample);
        }
    }
}

/// A thread's sampling state: the byte clock reading at which its next sample falls.
#[derive(Debug)]
pub(crate) struct NextSample {
    /// `u64::MAX` when none is set (sampling was off when last looked at).
    pub(crate) at_clock_bytes: u64,
}

impl Default for NextSample {
    fn default() -> Self {
        NextSample {
            at_clock_bytes: u64::MAX,
        }
    }
}

impl NextSample {
    /// The bytes left before the next sample for a thread whose clock reads `clock`, setting
    /// the next sample an interval ahead if none is set; `None` when sampling is off.
    pub(crate) fn bytes_ahead(&mut self, clock: u64, interval_bytes: usize) -> Option<u64> {
        if interval_bytes == 0 {
            self.at_clock_bytes = u64::MAX;
            return None;
        }
        if self.at_clock_bytes == u64::MAX {
            self.at_clock_bytes = clock + interval_bytes as u64;
        }
        Some(self.at_clock_bytes.saturating_sub(clock))
    }

    /// Whether the thread's clock, now at `clock`, reached the next sample; if so, sets the
    /// one after an interval further.
    pub(crate) fn reached(&mut self, clock: u64, interval_bytes: usize) -> bool {
        if interval_bytes == 0 || clock < self.at_clock_bytes {
            return false;
        }
        self.at_clock_bytes = clock + interval_bytes as u64;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_fall_an_interval_apart() {
        let mut next = NextSample::default();
        assert_eq!(next.bytes_ahead(100, 0), None);
        assert_eq!(next.bytes_ahead(100, 1000), Some(1000));
        assert!(!next.reached(1099, 1000));
        assert!(next.reached(1100, 1000));
        assert_eq!(next.bytes_ahead(1100, 1000), Some(1000));
        // Off: forgotten, and set afresh when turned on again.
        assert!(!next.reached(5000, 0));
        assert_eq!(next.bytes_ahead(5000, 0), None);
        assert_eq!(next.bytes_ahead(5000, 10), Some(10));
    }
}
