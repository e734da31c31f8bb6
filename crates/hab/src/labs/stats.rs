//! What the per-CPU LABs did, counted per mutator (see `platform::counter`).

use std::ops::AddAssign;

use crate::platform::counter::figures;

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
        /// LABs a collection found in use (holding memory), summed over collections: with
        /// [`HeapStats::cpu_lab_collections`](crate::HeapStats::cpu_lab_collections), how many
        /// slots the threads spread over. One per CPU the threads ran on, or, indexed by
        /// concurrency ids, at most one per thread running at once.
        labs_in_use_at_collections,
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
        /// Bytes of the objects allocated in those buffers.
        fallback_bytes,
        /// Bytes those buffers handed out beyond the objects (the filler reserve and
        /// rounding), left unused. (The buffers' own tails count as the `cpu` level's waste:
        /// they are a `cpu` middle level.)
        fallback_waste_bytes,
        /// Steps of LABs zeroed ahead ([`ZeroMemory::Ahead`](crate::ZeroMemory::Ahead), in
        /// reused memory): a LAB claimed when an object passed the memory zeroed so far, the
        /// next part zeroed and the LAB put back.
        zeroing_steps,
    }
}

impl CpuLabStats {
    /// Bytes left unused: LABs' free tails, discarded sidelined LABs, and what the
    /// compare-and-swap buffers handed out beyond the objects.
    pub fn unused_bytes(&self) -> u64 {
        self.partial_waste_bytes + self.discarded_sidelined_bytes + self.fallback_waste_bytes
    }

    /// Bytes of the objects allocated in per-CPU LABs and in the compare-and-swap buffers.
    ///
    /// Nothing is counted on the fast path, and the threads of a CPU share its LAB, so this
    /// is derived: the bytes of the LABs taken, less the rests sidelined (a reused rest counts
    /// again when taken) and the free tails retired. A live LAB counts whole until it is
    /// retired, so the figure is exact once every LAB is (at a collection); a mutator's own
    /// figure counts the LABs it took, whoever bumped through them.
    pub fn allocated_bytes(&self) -> u64 {
        (self.lab_bytes + self.fallback_bytes)
            .saturating_sub(self.sidelined_bytes + self.partial_waste_bytes)
    }
}
