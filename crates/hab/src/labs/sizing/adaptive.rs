//! HotSpot's adaptive TLABs: `desired = average allocation fraction × capacity / target
//! refills`, where the fraction is the share of the allocation space the thread used between
//! two collections, averaged with a decaying weight (35 %), and the target refills come from
//! the waste target (50 for 1 %). A new thread starts at `capacity / (threads × refills)`.

use super::policy::{
    aligned_within, refill_share_bytes, CollectionFeedback, DecayingAverage, SizingPolicy,
};
use crate::config::HeapConfig;

/// The thread's share of allocation between collections, averaged.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Adaptive {
    allocation_fraction: DecayingAverage,
}

impl Adaptive {
    pub(crate) fn new(config: &HeapConfig) -> Self {
        Adaptive {
            allocation_fraction: DecayingAverage::new(config.allocation_weight_percent()),
        }
    }
}

impl SizingPolicy for Adaptive {
    /// An equal share of the range, taken in the target refills; the fraction that share
    /// stands for is the average's first sample.
    fn initial_bytes(
        &mut self,
        config: &HeapConfig,
        capacity_bytes: usize,
        allocating_threads: f64,
    ) -> usize {
        let share = refill_share_bytes(config, capacity_bytes, allocating_threads.round());
        let (min, max) = self.bounds(config);
        let desired = aligned_within(config, share, min, max);
        if capacity_bytes > 0 {
            let fraction = desired as f64 * config.target_refills() / capacity_bytes as f64;
            self.allocation_fraction.sample(fraction.min(1.0));
        }
        desired
    }

    fn after_collection(
        &mut self,
        config: &HeapConfig,
        _: usize,
        feedback: CollectionFeedback,
    ) -> usize {
        // Only intervals that used a good part of the space say something about the
        // thread's share; the fraction can exceed 1 through outside allocations.
        if feedback.refills > 0
            && feedback.used_bytes > 0
            && feedback.used_bytes * 2 > feedback.old_capacity_bytes
        {
            let fraction = feedback.allocated_bytes as f64 / feedback.used_bytes as f64;
            self.allocation_fraction.sample(fraction.min(1.0));
        }
        let share = self.allocation_fraction.average() * feedback.new_capacity_bytes as f64;
        (share / config.target_refills()) as usize
    }
}
