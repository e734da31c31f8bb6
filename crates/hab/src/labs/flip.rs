//! The `flip` mode's policy (Garthwaite et al., §5.2): at each collection, decide whether the
//! next cycle allocates in TLABs or in per-CPU LABs. Memory left unused is the signal: TLABs
//! leave a tail per thread, per-CPU LABs one per CPU, so many threads on few CPUs favour
//! per-CPU LABs and few threads on many CPUs favour TLABs. Pure policy: the collection feeds it
//! a cycle's figures and the allocator applies the answer.

/// One cycle as the flip policy reads it, at the collection that ends it: Hab's `flip` mode
/// and HotSpot's (`-XX:+UseHABCPULABs`, through `hab_flip_next_in_cpu_labs`) decide with this
/// one rule.
///
/// After a cycle in TLABs, the next goes to per-CPU LABs when the TLABs left more unused than
/// a LAB per CPU could, and more than `min_unused_tlab_percent` of what the cycle took: where
/// a per-CPU LAB's path per object is much longer than a TLAB's, TLABs that leave little are
/// worth keeping (HotSpot's stubs: 21 instructions longer, a tenth; Hab's own paths: 7 longer,
/// no bound). Never after the first cycle, whose TLABs were sized before any thread had
/// allocated (their tails say little of the threads'). After a cycle in per-CPU LABs, back to
/// TLABs when those left more than a LAB per thread that ran.
///
/// ```
/// use hab::FlipCycle;
/// // 1000 threads on 2 CPUs left 40 MiB of TLAB tails in a 64 MiB cycle: per-CPU LABs next.
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
/// };
/// assert!(cycle.next_in_cpu_labs());
/// // 16 threads left 2 MiB: under a tenth of the cycle, TLABs stay.
/// assert!(!FlipCycle { unused_tlab_bytes: 2 << 20, running_threads: 16, ..cycle }.next_in_cpu_labs());
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
}

impl FlipCycle {
    /// Whether the next cycle allocates in per-CPU LABs.
    pub fn next_in_cpu_labs(&self) -> bool {
        if self.in_cpu_labs {
            return self.unused_lab_bytes
                <= self.lab_bytes.saturating_mul(self.running_threads.max(1));
        }
        !self.first
            && self.unused_tlab_bytes > self.lab_bytes.saturating_mul(self.cpus.max(1))
            && self.unused_tlab_bytes > self.cycle_bytes / 100 * self.min_unused_tlab_percent
    }
}

/// A heap's fixed inputs of the flip policy.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FlipPolicy {
    /// The largest LAB (the largest TLAB).
    max_lab_bytes: u64,
    /// Online CPUs.
    cpus: u64,
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
    /// Whether it is the heap's first cycle.
    pub(crate) first: bool,
}

impl FlipPolicy {
    pub(crate) fn new(max_lab_bytes: usize, cpus: usize) -> Self {
        FlipPolicy {
            max_lab_bytes: max_lab_bytes as u64,
            cpus: cpus.max(1) as u64,
        }
    }

    /// Whether the next cycle allocates in per-CPU LABs, after a cycle spent in them
    /// (`in_cpu_labs`) or in TLABs ([`FlipCycle::next_in_cpu_labs`]).
    pub(crate) fn next_in_cpu_labs(&self, in_cpu_labs: bool, cycle: CycleWaste) -> bool {
        FlipCycle {
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
        }
        .next_in_cpu_labs()
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
        };
        // The tenth of the cycle is the bound that counts here (10,240 > 4,096).
        assert!(!cycle(false, 4097, 0, 100).next_in_cpu_labs());
        assert!(!cycle(false, 10_240, 0, 100).next_in_cpu_labs());
        assert!(cycle(false, 10_241, 0, 100).next_in_cpu_labs());
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
        // Never after the first cycle.
        assert!(!FlipCycle {
            first: true,
            ..cycle(false, 1 << 20, 0, 100)
        }
        .next_in_cpu_labs());
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
    fn a_heaps_policy_passes_its_lab_and_cpus() {
        let policy = FlipPolicy::new(1024, 4);
        // Hab's own LABs: no tenth of the cycle, only the CPUs' bound (4 KiB).
        let waste = CycleWaste {
            unused_tlab_bytes: 4097,
            unused_lab_bytes: 0,
            running_threads: 100,
            cycle_bytes: 102_400,
            first: false,
        };
        assert!(policy.next_in_cpu_labs(false, waste));
        assert!(!policy.next_in_cpu_labs(
            false,
            CycleWaste {
                first: true,
                ..waste
            }
        ));
    }
}
