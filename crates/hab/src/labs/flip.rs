//! The `flip` mode's policy (Garthwaite et al., §5.2): at each collection, decide whether the
//! next cycle allocates in TLABs or in per-CPU LABs. Memory left unused is the signal: TLABs
//! leave a tail per thread, per-CPU LABs one per CPU, so many threads on few CPUs favour
//! per-CPU LABs and few threads on many CPUs favour TLABs. Pure policy: the collection feeds it
//! a cycle's figures and the allocator applies the answer.

/// The thresholds of the flip policy.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FlipPolicy {
    /// The largest LAB (the largest TLAB).
    max_lab_bytes: u64,
    /// Online CPUs: how many per-CPU LABs can be partly used at once.
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
}

impl FlipPolicy {
    pub(crate) fn new(max_lab_bytes: usize, cpus: usize) -> Self {
        FlipPolicy {
            max_lab_bytes: max_lab_bytes as u64,
            cpus: cpus.max(1) as u64,
        }
    }

    /// Whether the next cycle allocates in per-CPU LABs, after a cycle spent in them
    /// (`in_cpu_labs`) or in TLABs: switch to per-CPU LABs when TLABs left more unused than
    /// the largest LAB × the CPUs, and back when per-CPU LABs left more than the largest LAB
    /// × the running threads.
    pub(crate) fn next_in_cpu_labs(&self, in_cpu_labs: bool, cycle: CycleWaste) -> bool {
        let flip = if in_cpu_labs {
            cycle.unused_lab_bytes > self.max_lab_bytes * cycle.running_threads.max(1)
        } else {
            cycle.unused_tlab_bytes > self.max_lab_bytes * self.cpus
        };
        in_cpu_labs != flip
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flips_when_the_current_buffers_leave_more_than_the_other_would() {
        let policy = FlipPolicy::new(1024, 4);
        let cycle = |tlab, lab, threads| CycleWaste {
            unused_tlab_bytes: tlab,
            unused_lab_bytes: lab,
            running_threads: threads,
        };
        assert!(!policy.next_in_cpu_labs(false, cycle(4096, 0, 100)));
        assert!(policy.next_in_cpu_labs(false, cycle(4097, 0, 100)));
        assert!(policy.next_in_cpu_labs(true, cycle(0, 2048, 2)));
        assert!(!policy.next_in_cpu_labs(true, cycle(0, 2049, 2)));
        assert!(!policy.next_in_cpu_labs(true, cycle(0, 1025, 0)));
    }
}
