//! The `flip` mode's policy (Garthwaite et al., §5.2): at each collection, decide whether the
//! next cycle allocates in TLABs or in per-CPU LABs. Memory left unused is the signal: TLABs
//! leave a tail per thread, per-CPU LABs one per CPU, so many threads on few CPUs favour
//! per-CPU LABs and few threads on many CPUs favour TLABs. Policy only: the collection feeds it
//! a cycle's figures and the allocator applies the answer; the one thing it remembers between
//! collections is how many cycles in a row left TLAB tails over its bound.

use std::sync::atomic::{AtomicU64, Ordering};

/// How many judged cycles in TLABs in a row must leave tails over the flip's bound before the
/// next goes to per-CPU LABs ([`FlipCycle`]). Threads that just started leave large tails for
/// a few collections, in TLABs sized for the fewer threads that ran before them: HotSpot (and
/// Hab's adaptive TLABs) resize TLABs at each collection from a weighted average of the threads
/// that allocated, 35 % to the newest, so 16 threads starting at once on 2 CPUs
/// (`jvm/hotspot/test/ThreadsStart.java`) left 8, 3.5 and 2 times their steady tails in the
/// three cycles after they started: the first over a tenth of eden, the second at 8-10 %.
pub const CYCLES_OVER_BOUND_TO_FLIP: u64 = 3;

/// One cycle as the flip policy reads it, at the collection that ends it: Hab's `flip` mode
/// and HotSpot's (`-XX:+UseHABCPULABs`, through `hab_flip_next_in_cpu_labs`) decide with this
/// one rule.
///
/// A cycle in TLABs leaves *tails over the bound* when its TLABs left more unused than a LAB
/// per CPU could, and more than `min_unused_tlab_percent` of what the cycle took: where a
/// per-CPU LAB's path per object is much longer than a TLAB's, TLABs that leave little are
/// worth keeping (HotSpot's stubs: 21 instructions longer, a tenth; Hab's own paths: 7 longer,
/// no bound). The first cycle never does: its TLABs were sized before any thread had allocated.
/// After a cycle in TLABs, the next goes to per-CPU LABs when it is the
/// [`CYCLES_OVER_BOUND_TO_FLIP`]th judged cycle in a row with tails over the bound: fewer can
/// be a burst of threads that just started, more are the threads' steady state. After a cycle
/// in per-CPU LABs, back to TLABs when those left more than a LAB per thread that ran.
///
/// ```
/// use hab::FlipCycle;
/// // 1000 threads on 2 CPUs left 40 MiB of TLAB tails in a 64 MiB cycle, as in the two before.
/// let cycle = FlipCycle {
///     in_cpu_labs: false,
///     first: false,
///     unused_tlab_bytes: 40 << 20,
///     unused_lab_bytes: 0,
///     lab_bytes: 64 << 10,
///     cpus: 2,
///     running_threads: 1000,
///     cycle_bytes: 64 << 20,
///     min_unused_tlab_percent: 10,
///     previous_cycles_over_bound: 2,
/// };
/// assert_eq!(cycle.cycles_over_bound(), 3);
/// assert!(cycle.next_in_cpu_labs());
/// // The same tails after only one such cycle: TLABs stay for another cycle.
/// assert!(!FlipCycle { previous_cycles_over_bound: 1, ..cycle }.next_in_cpu_labs());
/// // 16 threads left 2 MiB: under a tenth of the cycle, TLABs stay and the count starts again.
/// let few = FlipCycle { unused_tlab_bytes: 2 << 20, running_threads: 16, ..cycle };
/// assert_eq!(few.cycles_over_bound(), 0);
/// assert!(!few.next_in_cpu_labs());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlipCycle {
    /// Whether the cycle allocated in per-CPU LABs (else in TLABs).
    pub in_cpu_labs: bool,
    /// Whether it is the first cycle (its TLABs sized before any thread allocated).
    pub first: bool,
    /// Free tails of the TLABs retired in the cycle (at refills and at the collection).
    pub unused_tlab_bytes: u64,
    /// Free memory the per-CPU LABs left in the cycle.
    pub unused_lab_bytes: u64,
    /// The largest LAB: the largest TLAB, or the per-CPU buffer.
    pub lab_bytes: u64,
    /// CPUs online: how many per-CPU LABs can be partly used at once.
    pub cpus: u64,
    /// Threads that ran in the cycle.
    pub running_threads: u64,
    /// The bytes the cycle took from the space (its objects and what its LABs left): eden's
    /// size, for a collector whose cycles end when eden is full.
    pub cycle_bytes: u64,
    /// The least TLAB tails, in percent of `cycle_bytes`, for which per-CPU LABs are worth
    /// their longer path (0: any that pass the CPUs' bound).
    pub min_unused_tlab_percent: u64,
    /// The judged cycles in TLABs in a row, right before this one, that left tails over the
    /// bound: the [`cycles_over_bound`](Self::cycles_over_bound) of the cycle judged before
    /// (0 before the first).
    pub previous_cycles_over_bound: u64,
}

impl FlipCycle {
    /// Whether the next cycle allocates in per-CPU LABs.
    pub fn next_in_cpu_labs(&self) -> bool {
        if self.in_cpu_labs {
            return self.unused_lab_bytes
                <= self.lab_bytes.saturating_mul(self.running_threads.max(1));
        }
        self.cycles_over_bound() >= CYCLES_OVER_BOUND_TO_FLIP
    }

    /// The judged cycles in TLABs in a row, this one included, that left tails over the
    /// bound (more unused than a LAB per CPU and than `min_unused_tlab_percent` of the
    /// cycle); 0 when this one did not, was in per-CPU LABs or is the first. What the next
    /// judged cycle reads as its `previous_cycles_over_bound`.
    pub fn cycles_over_bound(&self) -> u64 {
        let over = !self.in_cpu_labs
            && !self.first
            && self.unused_tlab_bytes > self.lab_bytes.saturating_mul(self.cpus.max(1))
            && self.unused_tlab_bytes > self.cycle_bytes / 100 * self.min_unused_tlab_percent;
        if over {
            self.previous_cycles_over_bound.saturating_add(1)
        } else {
            0
        }
    }
}

/// A heap's flip policy: its fixed inputs, and what the cycles judged so far left.
#[derive(Debug)]
pub(crate) struct FlipPolicy {
    /// The largest LAB (the largest TLAB).
    max_lab_bytes: u64,
    /// Online CPUs.
    cpus: u64,
    /// The last cycles' [`FlipCycle::cycles_over_bound`]. Written at collections only, with
    /// every mutator stopped: relaxed.
    cycles_over_bound: AtomicU64,
}

/// What one cycle left unused, as a collection measured it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CycleWaste {
    /// Free tails of TLABs retired in the cycle.
    pub(crate) unused_tlab_bytes: u64,
    /// Free memory of per-CPU LABs (and, for threads without rseq, the per-CPU
    /// compare-and-swap buffers) left in the cycle.
    pub(crate) unused_lab_bytes: u64,
    /// Threads that ran during the cycle.
    pub(crate) running_threads: u64,
    /// The bytes the cycle took: its objects and what its LABs left.
    pub(crate) cycle_bytes: u64,
    /// Whether it is the heap's first cycle that allocated.
    pub(crate) first: bool,
}

impl FlipPolicy {
    pub(crate) fn new(max_lab_bytes: usize, cpus: usize) -> Self {
        FlipPolicy {
            max_lab_bytes: max_lab_bytes as u64,
            cpus: cpus.max(1) as u64,
            cycles_over_bound: AtomicU64::new(0),
        }
    }

    /// Whether the next cycle allocates in per-CPU LABs, after a cycle spent in them
    /// (`in_cpu_labs`) or in TLABs ([`FlipCycle::next_in_cpu_labs`]). Called once per
    /// collection, at its end.
    pub(crate) fn next_in_cpu_labs(&self, in_cpu_labs: bool, cycle: CycleWaste) -> bool {
        let cycle = FlipCycle {
            in_cpu_labs,
            first: cycle.first,
            unused_tlab_bytes: cycle.unused_tlab_bytes,
            unused_lab_bytes: cycle.unused_lab_bytes,
            lab_bytes: self.max_lab_bytes,
            cpus: self.cpus,
            running_threads: cycle.running_threads,
            cycle_bytes: cycle.cycle_bytes,
            // Hab's per-CPU LAB path is 7 instructions longer than its TLAB's: no bound.
            min_unused_tlab_percent: 0,
            previous_cycles_over_bound: self.cycles_over_bound.load(Ordering::Relaxed),
        };
        self.cycles_over_bound
            .store(cycle.cycles_over_bound(), Ordering::Relaxed);
        cycle.next_in_cpu_labs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case of the rule: each bound, both ways, from either kind of LAB.
    #[test]
    fn flips_when_the_current_buffers_leave_more_than_the_other_would() {
        // LABs of 1 KiB, 4 CPUs, a cycle of 100 KiB: in TLABs, more than 4 KiB and more than
        // 10 KiB of tails flip; in per-CPU LABs, more than 1 KiB per running thread flips back.
        let cycle = |in_cpu_labs, tlab, lab, threads| FlipCycle {
            in_cpu_labs,
            first: false,
            unused_tlab_bytes: tlab,
            unused_lab_bytes: lab,
            lab_bytes: 1024,
            cpus: 4,
            running_threads: threads,
            cycle_bytes: 102_400,
            min_unused_tlab_percent: 10,
            previous_cycles_over_bound: CYCLES_OVER_BOUND_TO_FLIP - 1,
        };
        // The tenth of the cycle is the bound that counts here (10,240 > 4,096).
        assert!(!cycle(false, 4097, 0, 100).next_in_cpu_labs());
        assert!(!cycle(false, 10_240, 0, 100).next_in_cpu_labs());
        assert!(cycle(false, 10_241, 0, 100).next_in_cpu_labs());
        assert_eq!(cycle(false, 10_241, 0, 100).cycles_over_bound(), 3);
        assert_eq!(cycle(false, 10_240, 0, 100).cycles_over_bound(), 0);
        // Over the bound in fewer cycles in a row: TLABs for another cycle.
        for previous in 0..CYCLES_OVER_BOUND_TO_FLIP - 1 {
            let fewer = FlipCycle {
                previous_cycles_over_bound: previous,
                ..cycle(false, 1 << 20, 0, 100)
            };
            assert_eq!(fewer.cycles_over_bound(), previous + 1);
            assert!(!fewer.next_in_cpu_labs(), "{previous}");
        }
        // More keep flipping, and the count saturates.
        let many = FlipCycle {
            previous_cycles_over_bound: u64::MAX,
            ..cycle(false, 1 << 20, 0, 100)
        };
        assert!(many.next_in_cpu_labs() && many.cycles_over_bound() == u64::MAX);
        // The CPUs' LABs count where the cycle is small.
        let small = FlipCycle {
            cycle_bytes: 8192,
            ..cycle(false, 4096, 0, 100)
        };
        assert!(!small.next_in_cpu_labs());
        assert!(FlipCycle {
            unused_tlab_bytes: 4097,
            ..small
        }
        .next_in_cpu_labs());
        // Never after the first cycle, whose tails never count as over the bound.
        let first = FlipCycle {
            first: true,
            ..cycle(false, 1 << 20, 0, 100)
        };
        assert!(!first.next_in_cpu_labs() && first.cycles_over_bound() == 0);
        // A cycle in per-CPU LABs starts the count again.
        assert_eq!(cycle(true, 1 << 20, 0, 100).cycles_over_bound(), 0);
        // Back to TLABs past a LAB per running thread (at least one).
        assert!(cycle(true, 0, 2048, 2).next_in_cpu_labs());
        assert!(!cycle(true, 0, 2049, 2).next_in_cpu_labs());
        assert!(!cycle(true, 0, 1025, 0).next_in_cpu_labs());
        assert!(cycle(true, 1 << 30, 1024, 0).next_in_cpu_labs());
        // No overflow with absurd inputs.
        assert!(FlipCycle {
            lab_bytes: u64::MAX,
            ..cycle(true, 0, u64::MAX, u64::MAX)
        }
        .next_in_cpu_labs());
    }

    #[test]
    fn a_heaps_policy_passes_its_lab_and_cpus_and_remembers_the_last_cycle() {
        // Hab's own LABs: no tenth of the cycle, only the CPUs' bound (4 KiB).
        let waste = CycleWaste {
            unused_tlab_bytes: 4097,
            unused_lab_bytes: 0,
            running_threads: 100,
            cycle_bytes: 102_400,
            first: false,
        };
        let few = CycleWaste {
            unused_tlab_bytes: 4096,
            ..waste
        };
        let first = CycleWaste {
            first: true,
            ..waste
        };
        let policy = FlipPolicy::new(1024, 4);
        // The first cycle does not count; then three cycles over the bound in a row flip.
        let decisions = [first, waste, waste, waste].map(|c| policy.next_in_cpu_labs(false, c));
        assert_eq!(decisions, [false, false, false, true]);
        // A cycle under the bound starts the count again.
        let policy = FlipPolicy::new(1024, 4);
        let decisions =
            [waste, waste, few, waste, waste, waste].map(|c| policy.next_in_cpu_labs(false, c));
        assert_eq!(decisions, [false, false, false, false, false, true]);
        // So does a cycle in per-CPU LABs.
        let policy = FlipPolicy::new(1024, 4);
        assert!(!policy.next_in_cpu_labs(false, waste));
        assert!(!policy.next_in_cpu_labs(false, waste));
        assert!(policy.next_in_cpu_labs(true, few));
        assert!(!policy.next_in_cpu_labs(false, waste));
    }
}
