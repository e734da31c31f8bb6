//! What the per-CPU LABs did, counted per mutator (see `platform::counter`).

use std::ops::AddAssign;

use crate::platform::counter::{figures, Counter};

figures! {
    /// What the per-CPU LABs of the `cpu-lab` and `flip` modes did: the rows of Garthwaite et
    /// al.'s Table 2. A *transaction* installs a new LAB as a CPU's; it *fails* when its
    /// section aborted or found the CPU's LAB refilled by another thread, and is *invalid*
    /// when it could not install at all (the LAB is then sidelined).
    CpuLabStats, CpuLabCounters {
        /// LABs taken, from the global heap or the sideline.
        labs,
        /// Their bytes.
        lab_bytes,
        /// LABs taken from the sideline.
        sideline_reused,
        /// Transactions that installed a LAB.
        transactions,
        /// Transactions that aborted or found the LAB occupied at least once.
        failed_transactions,
        /// Transactions that could not install their LAB.
        invalid_transactions,
        /// LABs (rests of LABs) sidelined.
        sidelined_labs,
        /// Their bytes.
        sidelined_bytes,
        /// Sidelined LABs nobody took before a collection discarded them.
        discarded_sidelined_labs,
        /// Their bytes.
        discarded_sidelined_bytes,
        /// LABs emptied with free memory left, by refills and collections.
        partial_labs,
        /// That free memory.
        partial_waste_bytes,
        /// Restartable sections that aborted (heap totals include the inline path's).
        rseq_aborts,
        /// Objects allocated in per-CPU compare-and-swap buffers because the thread could not
        /// use rseq (no registration, a section that kept aborting, or a CPU beyond the
        /// per-CPU array).
        fallback_allocs,
        /// Of those, objects allocated from a CPU number at or beyond the per-CPU array (a
        /// topology that does not cover every CPU the kernel numbers).
        out_of_range_cpus,
    }
}

impl CpuLabStats {
    /// Bytes of LABs left unused: partial waste and discarded sidelined LABs.
    pub fn unused_bytes(&self) -> u64 {
        self.partial_waste_bytes + self.discarded_sidelined_bytes
    }
}
