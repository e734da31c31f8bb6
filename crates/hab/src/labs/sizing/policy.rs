//! What a TLAB sizing policy is: the [`SizingPolicy`] trait, the [`CollectionFeedback`] it
//! gets at collections, the decaying average HotSpot's policy keeps, and the share formulas
//! the policies and the per-CPU LABs use.

use std::fmt;

use crate::config::HeapConfig;

/// A decaying average whose newest sample has a fixed weight, except that the first samples
/// weigh more (1/n) so the average is not biased towards its zero start (HotSpot's
/// `AdaptiveWeightedAverage`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DecayingAverage {
    average: f64,
    samples: u32,
    weight_percent: u32,
}

impl DecayingAverage {
    pub(crate) fn new(weight_percent: u32) -> Self {
        DecayingAverage {
            average: 0.0,
            samples: 0,
            weight_percent,
        }
    }

    pub(crate) fn sample(&mut self, value: f64) {
        self.samples = self.samples.saturating_add(1);
        let weight = if self.samples < 100 {
            self.weight_percent.max(100 / self.samples)
        } else {
            self.weight_percent
        };
        let weight = f64::from(weight) / 100.0;
        self.average = (1.0 - weight) * self.average + weight * value;
    }

    pub(crate) fn average(&self) -> f64 {
        self.average
    }
}

/// What a collection tells a thread's sizer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CollectionFeedback {
    /// TLABs the thread took since the previous collection.
    pub(crate) refills: u64,
    /// Bytes the thread allocated (in and outside TLABs) since the previous collection.
    pub(crate) allocated_bytes: u64,
    /// Bytes of the allocation range in use when the collection began.
    pub(crate) used_bytes: usize,
    /// Size of the allocation range before the collection.
    pub(crate) old_capacity_bytes: usize,
    /// Size of the allocation range after the collection.
    pub(crate) new_capacity_bytes: usize,
}

/// How a thread's desired TLAB size moves (see the module documentation). Called at a
/// thread's start, on the full slow path's refills and at collections, never on the short
/// refill: that one takes [`TlabSizer::steady_bytes`] when the policy leaves the size alone at
/// refills.
pub(crate) trait SizingPolicy: fmt::Debug + Send {
    /// The smallest and largest desired size.
    fn bounds(&self, config: &HeapConfig) -> (usize, usize) {
        (config.min_tlab_bytes(), config.max_tlab_bytes())
    }

    /// A new thread's first desired size, for an allocation range of `capacity_bytes` shared
    /// by an average of `allocating_threads` threads.
    fn initial_bytes(
        &mut self,
        config: &HeapConfig,
        capacity_bytes: usize,
        allocating_threads: f64,
    ) -> usize;

    /// Whether [`after_refill`](SizingPolicy::after_refill) changes the size.
    fn resizes_at_refill(&self) -> bool {
        false
    }

    /// The desired size after the thread took a TLAB of `desired_bytes`.
    fn after_refill(&mut self, desired_bytes: usize) -> usize {
        desired_bytes
    }

    /// The desired size after a collection.
    fn after_collection(
        &mut self,
        config: &HeapConfig,
        desired_bytes: usize,
        feedback: CollectionFeedback,
    ) -> usize;
}

/// An equal share of an allocation range of `range_bytes` for each of `sharers` (at least 1),
/// taken in the waste target's number of refills per collection: where a new thread's
/// adaptive TLAB starts, and the size of per-CPU LABs (the CPUs share the range).
pub(crate) fn refill_share_bytes(config: &HeapConfig, range_bytes: usize, sharers: f64) -> usize {
    (range_bytes as f64 / (sharers.max(1.0) * config.target_refills())) as usize
}

/// `bytes` rounded down to the alignment, then kept within `[min, max]`.
pub(crate) fn aligned_within(config: &HeapConfig, bytes: usize, min: usize, max: usize) -> usize {
    (bytes - bytes % config.alignment_bytes()).clamp(min, max)
}
