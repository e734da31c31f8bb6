//! TLAB sizing: how many bytes a thread's next TLAB should have.
//!
//! Mechanism here, policy apart: [`TlabSizer`] keeps a thread's desired size within the
//! policy's bounds and a multiple of the alignment, the refill waste limit (HotSpot's
//! keep-or-refill rule: `desired / 64`, reset whenever the size changes or a TLAB is taken,
//! raised by the waste increment at each allocation outside the TLAB) and the steady size the
//! slow path's short refill reads. A [`SizingPolicy`] (`policy.rs`, with the feedback it gets
//! and the helpers policies share) moves the desired size at three moments: a thread's start,
//! a refill and a collection. One type per policy, one file each:
//!
//! - [`fixed`]: always the configured size.
//! - [`adaptive`] (HotSpot): the thread's share of the allocation space over the target
//!   refills per collection.
//! - [`growing`] (Agesen): 24 words, ×1.5 at every refill, ÷2 at every collection.
//!
//! The size of per-CPU LABs follows the same share formula ([`cpu_lab_bytes`]).

pub(crate) mod adaptive;
pub(crate) mod fixed;
pub(crate) mod growing;
pub(crate) mod policy;

use crate::config::{HeapConfig, TlabPolicy};
pub(crate) use policy::{
    aligned_within, refill_share_bytes, CollectionFeedback, DecayingAverage, SizingPolicy,
};

/// The policy `config` names.
fn policy(config: &HeapConfig) -> Box<dyn SizingPolicy> {
    match config.tlab() {
        TlabPolicy::Fixed(bytes) => Box::new(fixed::Fixed { bytes }),
        TlabPolicy::Adaptive => Box::new(adaptive::Adaptive::new(config)),
        TlabPolicy::Growing => Box::new(growing::Growing),
    }
}

/// One thread's TLAB sizing state.
#[derive(Debug)]
pub(crate) struct TlabSizer {
    policy: Box<dyn SizingPolicy>,
    desired_bytes: usize,
    refill_waste_limit_bytes: usize,
    /// The refill waste limit a new TLAB starts with (`desired_bytes` over the refill waste
    /// fraction), computed when the desired size changes rather than at every refill.
    initial_waste_limit_bytes: usize,
    /// The size of every TLAB until the desired size changes, for the slow path's short
    /// refill: the desired size, or 0 where a refill changes it (the growing policy).
    steady_bytes: usize,
    /// The bytes kept free below a TLAB's end (`Space::lab_reserve_bytes`).
    reserve_bytes: usize,
    /// The largest object a TLAB of `steady_bytes` holds: `steady_bytes` less the reserve
    /// (0 where that is 0), one compare for the short refill.
    steady_object_bytes: usize,
}

impl TlabSizer {
    /// A new thread's sizer, for an allocation range of `capacity_bytes` shared by an average
    /// of `allocating_threads` threads, in a space that keeps `reserve_bytes` free below a
    /// TLAB's end.
    pub(crate) fn new(
        config: &HeapConfig,
        capacity_bytes: usize,
        allocating_threads: f64,
        reserve_bytes: usize,
    ) -> Self {
        let mut policy = policy(config);
        let desired = policy.initial_bytes(config, capacity_bytes, allocating_threads);
        let mut sizer = TlabSizer {
            policy,
            desired_bytes: 0,
            refill_waste_limit_bytes: 0,
            initial_waste_limit_bytes: 0,
            steady_bytes: 0,
            reserve_bytes,
            steady_object_bytes: 0,
        };
        sizer.set_desired(config, desired);
        sizer
    }

    /// The size the thread's next TLAB should have.
    #[inline]
    pub(crate) fn desired_bytes(&self) -> usize {
        self.desired_bytes
    }

    /// A TLAB with more free bytes than this is kept when an object does not fit.
    #[inline]
    pub(crate) fn refill_waste_limit_bytes(&self) -> usize {
        self.refill_waste_limit_bytes
    }

    /// HotSpot's keep-or-refill rule: when an object does not fit, a TLAB with more free
    /// bytes than the refill waste limit is kept (the object goes outside it); otherwise it
    /// is retired and a new one taken.
    #[inline]
    pub(crate) fn keeps(&self, free_bytes: usize) -> bool {
        free_bytes > self.refill_waste_limit_bytes()
    }

    /// An object was allocated outside a TLAB that was kept: tolerate a little more waste next
    /// time, so a run of large objects eventually retires the TLAB. Until a refill resets the
    /// limit, the short refill takes no object (its largest is 0): the next refill is a full
    /// one, and the short refill never has to reset the limit itself.
    pub(crate) fn record_slow_allocation(&mut self, config: &HeapConfig) {
        self.refill_waste_limit_bytes = self
            .refill_waste_limit_bytes
            .saturating_add(config.waste_increment_bytes());
        self.steady_object_bytes = 0;
    }

    /// Whether [`record_refill`](TlabSizer::record_refill) changes the desired size (the
    /// growing policy).
    #[inline]
    pub(crate) fn resizes_at_refill(&self) -> bool {
        self.steady_bytes == 0
    }

    /// The size of the next TLAB when a refill leaves the desired size as it is (the fixed
    /// and adaptive policies); 0 where it changes it (the growing policy), whose refills take
    /// the full slow path. One load for the short refill, instead of a look at the policy.
    #[inline]
    pub(crate) fn steady_bytes(&self) -> usize {
        self.steady_bytes
    }

    /// The largest object the short refill takes: what a TLAB of
    /// [`steady_bytes`](TlabSizer::steady_bytes) holds past the reserve kept below its end;
    /// 0 where `steady_bytes` is, or while the refill waste limit is raised (every refill then
    /// takes the full path).
    #[inline]
    pub(crate) fn steady_object_bytes(&self) -> usize {
        self.steady_object_bytes
    }

    /// The thread took a new TLAB of [`steady_bytes`](TlabSizer::steady_bytes) on the short
    /// refill: nothing to record. What [`record_refill`](TlabSizer::record_refill) does for a
    /// policy that keeps its size is to reset the waste limit, and the short refill runs only
    /// while the limit is at its start (see
    /// [`record_slow_allocation`](TlabSizer::record_slow_allocation)).
    #[inline]
    pub(crate) fn record_steady_refill(&self) {
        debug_assert!(self.steady_bytes != 0);
        debug_assert_eq!(
            self.refill_waste_limit_bytes,
            self.initial_waste_limit_bytes
        );
    }

    /// The thread took a new TLAB.
    #[inline]
    pub(crate) fn record_refill(&mut self, config: &HeapConfig) {
        if self.resizes_at_refill() {
            let desired = self.policy.after_refill(self.desired_bytes);
            self.set_desired(config, desired);
        } else {
            self.reset_waste_limit();
        }
    }

    /// A collection ended; resize for the next interval.
    pub(crate) fn record_collection(&mut self, config: &HeapConfig, feedback: CollectionFeedback) {
        let desired = self
            .policy
            .after_collection(config, self.desired_bytes, feedback);
        self.set_desired(config, desired);
    }

    fn set_desired(&mut self, config: &HeapConfig, bytes: usize) {
        let (min, max) = self.policy.bounds(config);
        self.desired_bytes = aligned_within(config, bytes, min, max);
        self.initial_waste_limit_bytes = self.desired_bytes / config.refill_waste_fraction();
        self.steady_bytes = if self.policy.resizes_at_refill() {
            0
        } else {
            self.desired_bytes
        };
        self.reset_waste_limit();
    }

    /// The limit at its start, and the short refill open again.
    #[inline]
    fn reset_waste_limit(&mut self) {
        self.refill_waste_limit_bytes = self.initial_waste_limit_bytes;
        self.steady_object_bytes = self.steady_bytes.saturating_sub(self.reserve_bytes);
    }
}

/// The size of the per-CPU LABs taken while the allocation range has `range_bytes`, shared by
/// `cpus` CPUs: a fixed policy's size, else (adaptive, growing) each CPU's share over the
/// target refills, within the smallest and largest TLAB. Recomputed at each collection.
pub(crate) fn cpu_lab_bytes(config: &HeapConfig, range_bytes: usize, cpus: usize) -> usize {
    match config.tlab() {
        TlabPolicy::Fixed(bytes) => bytes,
        TlabPolicy::Adaptive | TlabPolicy::Growing => aligned_within(
            config,
            refill_share_bytes(config, range_bytes, cpus as f64),
            config.min_tlab_bytes(),
            config.max_tlab_bytes(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HeapConfig;

    fn config(policy: TlabPolicy) -> HeapConfig {
        HeapConfig::builder()
            .capacity("64MiB")
            .tlab(policy)
            .max_tlab("4MiB")
            .build()
            .unwrap()
    }

    fn feedback(allocated: u64, used: usize, capacity: usize) -> CollectionFeedback {
        CollectionFeedback {
            refills: 10,
            allocated_bytes: allocated,
            used_bytes: used,
            old_capacity_bytes: capacity,
            new_capacity_bytes: capacity,
        }
    }

    #[test]
    fn the_steady_object_bound_leaves_the_reserve() {
        let fixed = config(TlabPolicy::Fixed(256));
        let sizer = TlabSizer::new(&fixed, 64 << 20, 1.0, 24);
        assert_eq!(sizer.steady_bytes(), 256);
        assert_eq!(sizer.steady_object_bytes(), 232);
        let no_room = TlabSizer::new(&fixed, 64 << 20, 1.0, 4096);
        assert_eq!(no_room.steady_object_bytes(), 0);
        let growing = TlabSizer::new(&config(TlabPolicy::Growing), 64 << 20, 1.0, 24);
        assert_eq!(
            (growing.steady_bytes(), growing.steady_object_bytes()),
            (0, 0)
        );
        // Resized at a collection, the bound follows.
        let mut adaptive = TlabSizer::new(&config(TlabPolicy::Adaptive), 64 << 20, 1.0, 24);
        adaptive.record_collection(
            &config(TlabPolicy::Adaptive),
            feedback(32 << 20, 32 << 20, 64 << 20),
        );
        assert_eq!(adaptive.steady_object_bytes(), adaptive.steady_bytes() - 24);
    }

    #[test]
    fn growing_follows_agesen() {
        let config = config(TlabPolicy::Growing);
        let mut sizer = TlabSizer::new(&config, 64 << 20, 1.0, 0);
        let mut words = vec![];
        for _ in 0..4 {
            words.push(sizer.desired_bytes() / 8);
            sizer.record_refill(&config);
        }
        assert_eq!(words, [24, 36, 54, 81]);
        let before = sizer.desired_bytes();
        sizer.record_collection(&config, feedback(0, 0, 64 << 20));
        assert_eq!(sizer.desired_bytes(), before / 2 / 8 * 8);
        for _ in 0..100 {
            sizer.record_refill(&config);
        }
        assert_eq!(sizer.desired_bytes(), 4 << 20, "clamped to the max");
        for _ in 0..100 {
            sizer.record_collection(&config, feedback(0, 0, 64 << 20));
        }
        assert_eq!(sizer.desired_bytes(), 192, "clamped to the min");
    }

    #[test]
    fn adaptive_initial_size_shares_the_space_among_threads() {
        let config = config(TlabPolicy::Adaptive);
        // 64 MiB / (1 thread × 50 refills) = 1342177 bytes, aligned down to 8.
        let one = TlabSizer::new(&config, 64 << 20, 1.0, 0);
        assert_eq!(one.desired_bytes(), 1_342_176);
        assert_eq!(one.refill_waste_limit_bytes(), 1_342_176 / 64);
        // 4 threads: a quarter.
        let four = TlabSizer::new(&config, 64 << 20, 4.0, 0);
        assert_eq!(four.desired_bytes(), 335_544);
        // 1000 threads: below the 2 KiB minimum, so clamped.
        let many = TlabSizer::new(&config, 64 << 20, 1000.0, 0);
        assert_eq!(many.desired_bytes(), 2048);
    }

    #[test]
    fn adaptive_follows_the_allocation_fraction() {
        let config = config(TlabPolicy::Adaptive);
        let capacity = 64 << 20;
        let mut sizer = TlabSizer::new(&config, capacity, 4.0, 0);
        // Initial fraction sample: 335544 × 50 / 64 MiB = 0.25.
        // The thread did all the allocation this time: fraction 1.0, weight max(35, 100/2) %.
        sizer.record_collection(&config, feedback(48 << 20, 48 << 20, capacity));
        let fraction = 0.5 * (335_544.0 * 50.0 / capacity as f64) + 0.5 * 1.0;
        let expected = (fraction * capacity as f64 / 50.0) as usize / 8 * 8;
        assert_eq!(sizer.desired_bytes(), expected);
        // A collection when less than half the space was used leaves the average alone.
        sizer.record_collection(&config, feedback(1 << 20, 1 << 20, capacity));
        assert_eq!(sizer.desired_bytes(), expected);
        // Third sample, weight max(35, 100/3 = 33) = 35 %.
        sizer.record_collection(&config, feedback(0, 40 << 20, capacity));
        let fraction = 0.65 * fraction;
        let expected = (fraction * capacity as f64 / 50.0) as usize / 8 * 8;
        assert_eq!(sizer.desired_bytes(), expected.max(2048));
    }

    #[test]
    fn refill_waste_limit_grows_by_the_increment_and_resets_at_refill() {
        let config = config(TlabPolicy::Fixed(64 << 10));
        let mut sizer = TlabSizer::new(&config, 64 << 20, 1.0, 0);
        assert_eq!(sizer.desired_bytes(), 64 << 10);
        assert_eq!(sizer.refill_waste_limit_bytes(), 1024);
        let steady_object_bytes = sizer.steady_object_bytes();
        assert_eq!(steady_object_bytes, 64 << 10);
        sizer.record_slow_allocation(&config);
        sizer.record_slow_allocation(&config);
        assert_eq!(sizer.refill_waste_limit_bytes(), 1024 + 2 * 32);
        assert_eq!(
            sizer.steady_object_bytes(),
            0,
            "a raised limit closes the short refill"
        );
        sizer.record_refill(&config);
        assert_eq!(sizer.refill_waste_limit_bytes(), 1024);
        assert_eq!(sizer.steady_object_bytes(), steady_object_bytes);
        sizer.record_collection(&config, feedback(1, 1, 1));
        assert_eq!(sizer.desired_bytes(), 64 << 10, "fixed never resizes");
    }

    #[test]
    fn decaying_average_weights_early_samples_more() {
        let mut average = DecayingAverage::new(35);
        average.sample(1.0);
        assert_eq!(average.average(), 1.0);
        average.sample(0.0);
        assert_eq!(average.average(), 0.5);
        for _ in 0..200 {
            average.sample(0.0);
        }
        assert!(average.average() < 1e-9);
    }
}
