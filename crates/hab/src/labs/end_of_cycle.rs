//! The end of a cycle: when to stop handing out TLABs at full size (Garthwaite et al. leave
//! it open).
//!
//! The memory a thread holds in its TLAB when the allocation range runs out is lost to the
//! cycle: the collection comes while it is unused. With many threads and a small range that
//! is most of the range (1000 chat threads with 64 KiB TLABs in 4 MiB). So, near the end of
//! the range, TLABs shrink to each thread's part of what is left: its fraction of the
//! allocation in past cycles (or in this one so far, if larger), times the bytes left. A thread that allocates a tenth of the
//! objects gets a tenth of what is left; one that allocates little gets little, and once its
//! part is below the smallest TLAB its objects are allocated outside TLABs, one
//! compare-and-swap each. Every thread then holds memory in proportion to how fast it uses it,
//! so the range runs out with little left in TLABs.
//!
//! Planned for each thread at each collection, from the cycle that ended: its fraction (a
//! decaying average, with the TLAB sizing's weight), and where its end of the cycle begins:
//! the first address past which a full TLAB is more than its part of what is left. Only
//! where it matters: when the full TLABs of the threads that allocated in the cycle would
//! together hold at least an eighth of the range ([`EndOfCycle::matters`]); below that what
//! full TLABs leave unused is small, and the parts would only cost refills (warehouses with
//! 64 threads, 2 KiB TLABs in 4 MiB: 8 % slower with parts, for no fewer collections). A thread
//! not yet planned takes every byte left as its part (the policy off behaves the same way).
//! Cost: nothing on the fast path; the short refill carves below the thread's own start of
//! the end instead of the range's end (the same one load); past it the full path multiplies
//! once per refill.

use crate::labs::sizing::DecayingAverage;

/// The end-of-cycle policy of a heap (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub(crate) struct EndOfCycle {
    /// Whether TLABs shrink at all ([`HeapConfig::end_of_cycle`](crate::HeapConfig::end_of_cycle)).
    enabled: bool,
    /// The weight of the newest cycle in a thread's fraction, in percent.
    weight_percent: u32,
}

impl EndOfCycle {
    /// The policy, on or off, learning each thread's fraction with `weight_percent` for the
    /// newest cycle.
    pub(crate) fn new(enabled: bool, weight_percent: u32) -> Self {
        EndOfCycle {
            enabled,
            weight_percent,
        }
    }

    /// A thread's part, before its first collection: every byte left, below `range_end`.
    pub(crate) fn new_thread(&self, range_end: usize) -> ThreadShare {
        ThreadShare {
            fraction: DecayingAverage::new(self.weight_percent),
            tlab_end: range_end,
            allocated_at_plan: 0,
            in_parts: false,
        }
    }

    /// Whether the end of the next cycle over a range of `range_bytes` needs parts: the full
    /// TLABs of the threads that allocated (`full_tlab_bytes`, summed over them) would hold
    /// at least an eighth of it. Off, it never does.
    pub(crate) fn matters(&self, full_tlab_bytes: usize, range_bytes: usize) -> bool {
        self.enabled && full_tlab_bytes >= range_bytes / 8
    }

    /// Plans a thread's next cycle at a collection (the thread stopped), over the range
    /// `[start, end)`: in the cycle that ends it allocated `thread_bytes` of the
    /// `all_bytes` every thread allocated ([`allocated_since_plan`]), `allocated_bytes` in
    /// all so far, and it desires TLABs of `full_tlab_bytes`; `matters` is
    /// [`matters`](EndOfCycle::matters) for the next cycle (its fraction is learned either
    /// way, so that it is ready when the end matters again).
    ///
    /// [`allocated_since_plan`]: ThreadShare::allocated_since_plan
    pub(crate) fn plan(
        &self,
        share: &mut ThreadShare,
        (start, end): (usize, usize),
        (thread_bytes, all_bytes): (u64, u64),
        allocated_bytes: u64,
        (full_tlab_bytes, matters): (usize, bool),
    ) {
        share.tlab_end = end;
        share.allocated_at_plan = allocated_bytes;
        share.in_parts = false;
        if !self.enabled || all_bytes == 0 {
            return;
        }
        share
            .fraction
            .sample((thread_bytes as f64 / all_bytes as f64).min(1.0));
        if matters {
            share.tlab_end = begins_at(start, end, share.fraction.average(), full_tlab_bytes);
            share.in_parts = true;
        }
    }
}

/// One thread's part of the end of a cycle. Written at collections, read by its refills.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ThreadShare {
    /// The thread's fraction of each cycle's allocation.
    fraction: DecayingAverage,
    /// Where the thread's end of the cycle begins: the short refill carves full TLABs below
    /// it; past it the full path carves parts ([`part_bytes`](ThreadShare::part_bytes)).
    tlab_end: usize,
    /// The thread's bytes allocated in TLABs and outside
    /// (`AllocationStats::tlab_and_outside_bytes`) at its last plan.
    allocated_at_plan: u64,
    /// Whether this cycle ends in parts; if not, every byte left is the thread's.
    in_parts: bool,
}

impl ThreadShare {
    /// The bytes the thread allocated since its last plan, given `allocated_bytes` in all.
    pub(crate) fn allocated_since_plan(&self, allocated_bytes: u64) -> u64 {
        allocated_bytes.saturating_sub(self.allocated_at_plan)
    }

    /// Where the thread's end of the cycle begins (at most the range's end).
    #[inline]
    pub(crate) fn tlab_end(&self) -> usize {
        self.tlab_end
    }

    /// The thread's next TLAB past the start of its end, with `available` bytes left of a
    /// range of which `used_bytes` are handed out, when it has `allocated_bytes` in all: its
    /// part of what is left, a multiple of `alignment_bytes` (all of it where the cycle does
    /// not end in parts, as before the thread was planned); `None` when that is below
    /// `min_bytes` (the object then goes outside a TLAB). Its part is its fraction of past cycles, or of this one so far if larger: a
    /// thread that allocates more than it used to is not starved of TLABs.
    pub(crate) fn part_bytes(
        &self,
        (available, used_bytes): (usize, usize),
        allocated_bytes: u64,
        min_bytes: usize,
        alignment_bytes: usize,
    ) -> Option<usize> {
        let fraction = if !self.in_parts {
            1.0
        } else {
            let this_cycle =
                self.allocated_since_plan(allocated_bytes) as f64 / used_bytes.max(1) as f64;
            self.fraction.average().max(this_cycle)
        };
        part_bytes(available, fraction, min_bytes, alignment_bytes)
    }
}

/// Where the end of a cycle over `[start, end)` begins for a thread with `fraction` of the
/// allocation and TLABs of `full_tlab_bytes`: the last address at which a full TLAB is at
/// most its part of what is left (`start` when even the whole range is too little).
fn begins_at(start: usize, end: usize, fraction: f64, full_tlab_bytes: usize) -> usize {
    let needed = if fraction > 0.0 {
        (full_tlab_bytes as f64 / fraction).min(usize::MAX as f64) as usize
    } else {
        usize::MAX
    };
    end.saturating_sub(needed).max(start)
}

/// `fraction` of `available`, aligned down; `None` below `min_bytes`.
fn part_bytes(
    available: usize,
    fraction: f64,
    min_bytes: usize,
    alignment_bytes: usize,
) -> Option<usize> {
    let part = (available as f64 * fraction.clamp(0.0, 1.0)) as usize & !(alignment_bytes - 1);
    (part >= min_bytes).then_some(part)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: usize = 1024;
    const RANGE: (usize, usize) = (0, 4096 * KIB);

    #[test]
    fn the_end_begins_where_a_full_tlab_outgrows_the_threads_part() {
        assert_eq!(
            begins_at(0, 4096 * KIB, 0.25, 64 * KIB),
            4096 * KIB - 256 * KIB
        );
        // A part too small for a full TLAB even of the whole range: the cycle is all end.
        assert_eq!(begins_at(1000, 4096 * KIB, 0.001, 64 * KIB), 1000);
        assert_eq!(begins_at(1000, 4096 * KIB, 0.0, 64 * KIB), 1000);
        assert_eq!(
            begins_at(0, 4096 * KIB, 1.0, 64 * KIB),
            4096 * KIB - 64 * KIB
        );
    }

    #[test]
    fn the_end_matters_where_full_tlabs_would_hold_an_eighth_of_the_range() {
        let on = EndOfCycle::new(true, 35);
        // 1000 chat threads with 64 KiB TLABs in 4 MiB; 64 warehouse threads with 2 KiB.
        assert!(on.matters(1000 * 64 * KIB, 4096 * KIB));
        assert!(!on.matters(64 * 2 * KIB, 4096 * KIB));
        assert!(on.matters(512 * KIB, 4096 * KIB));
        assert!(!EndOfCycle::new(false, 35).matters(usize::MAX, 4096 * KIB));
    }

    #[test]
    fn parts_are_aligned_and_stop_below_the_smallest_tlab() {
        assert_eq!(part_bytes(64 * KIB + 7, 0.25, 2 * KIB, 8), Some(16 * KIB));
        assert_eq!(part_bytes(100_000, 1.0 / 3.0, 2 * KIB, 8), Some(33_328));
        assert_eq!(part_bytes(8 * KIB - 8, 0.25, 2 * KIB, 8), None);
        assert_eq!(part_bytes(4 * KIB, 7.0, 2 * KIB, 8), Some(4 * KIB));
    }

    #[test]
    fn a_thread_is_planned_only_when_the_policy_is_on() {
        for on in [false, true] {
            let policy = EndOfCycle::new(on, 35);
            let mut share = policy.new_thread(RANGE.1);
            assert_eq!(
                share.part_bytes((10 * KIB, 0), 0, 2 * KIB, 8),
                Some(10 * KIB),
                "all, unplanned"
            );
            // The end does not matter: full TLABs to the range's end, the fraction learned.
            policy.plan(&mut share, RANGE, (1 << 20, 4 << 20), 0, (64 * KIB, false));
            assert_eq!(share.tlab_end(), RANGE.1);
            assert_eq!(
                share.part_bytes((16 * KIB, 0), 0, 2 * KIB, 8),
                Some(16 * KIB)
            );
            policy.plan(
                &mut share,
                RANGE,
                (1 << 20, 4 << 20),
                1 << 20,
                (64 * KIB, on),
            );
            assert_eq!(share.allocated_since_plan(3 << 20), 2 << 20);
            if on {
                assert_eq!(share.tlab_end(), RANGE.1 - 256 * KIB);
                let since_plan = 1 << 20;
                assert_eq!(
                    share.part_bytes((16 * KIB, 0), since_plan, 2 * KIB, 8),
                    Some(4 * KIB)
                );
                // Half of what this cycle used so far: half of what is left.
                let part =
                    share.part_bytes((16 * KIB, 64 * KIB), since_plan + 32 * 1024, 2 * KIB, 8);
                assert_eq!(part, Some(8 * KIB));
            } else {
                assert_eq!(share.tlab_end(), RANGE.1);
                assert_eq!(
                    share.part_bytes((16 * KIB, 0), 1 << 20, 2 * KIB, 8),
                    Some(16 * KIB)
                );
            }
        }
    }

    /// A synthetic trace of cycles over `RANGE`: in turns, thread `i` allocates
    /// `turn_bytes[i]` of 64-byte objects from its TLAB (taking one of `full_tlab_bytes`, or
    /// its part past its end, or none) until the range is full; then a collection plans every
    /// thread. Returns the bytes of objects each cycle allocated before the range was full
    /// (the rest was left in TLABs).
    fn cycles(
        turn_bytes: &[usize],
        full_tlab_bytes: usize,
        policy: EndOfCycle,
        count: usize,
    ) -> Vec<usize> {
        const OBJECT: usize = 64;
        let (min_tlab_bytes, range_bytes) = (2 * KIB, RANGE.1);
        let mut shares: Vec<ThreadShare> = turn_bytes
            .iter()
            .map(|_| policy.new_thread(RANGE.1))
            .collect();
        (0..count)
            .map(|_| {
                let mut top = 0;
                let mut tlabs = vec![(0usize, 0usize); turn_bytes.len()];
                let mut allocated = vec![0usize; turn_bytes.len()];
                'cycle: loop {
                    for (i, tlab) in tlabs.iter_mut().enumerate() {
                        for _ in 0..turn_bytes[i] / OBJECT {
                            if tlab.1 - tlab.0 < OBJECT {
                                let share = &shares[i];
                                let available = range_bytes - top;
                                let len = if top + full_tlab_bytes <= share.tlab_end() {
                                    Some(full_tlab_bytes)
                                } else {
                                    share
                                        .part_bytes(
                                            (available, top),
                                            share.allocated_at_plan + allocated[i] as u64,
                                            min_tlab_bytes,
                                            8,
                                        )
                                        .map(|part| part.min(full_tlab_bytes))
                                };
                                match len {
                                    Some(len) if len <= available => {
                                        *tlab = (top, top + len);
                                        top += len;
                                    }
                                    // Outside a TLAB, while the range has room.
                                    _ if OBJECT <= available => {
                                        *tlab = (top, top + OBJECT);
                                        top += OBJECT;
                                    }
                                    _ => break 'cycle,
                                }
                            }
                            tlab.0 += OBJECT;
                            allocated[i] += OBJECT;
                        }
                    }
                }
                let used: usize = allocated.iter().sum();
                let allocating = allocated.iter().filter(|&&bytes| bytes > 0).count();
                let matters = policy.matters(full_tlab_bytes * allocating, range_bytes);
                for (share, &bytes) in shares.iter_mut().zip(&allocated) {
                    let all = share.allocated_at_plan + bytes as u64;
                    let full = (full_tlab_bytes, matters);
                    policy.plan(share, RANGE, (bytes as u64, used as u64), all, full);
                }
                used
            })
            .collect()
    }

    #[test]
    fn many_threads_use_most_of_a_small_range_once_their_parts_are_known() {
        // The chat's shape: 1000 threads, 64 KiB TLABs, 4 MiB, a little each turn.
        let turns = vec![256; 1000];
        let off = cycles(&turns, 64 * KIB, EndOfCycle::new(false, 35), 8);
        let on = cycles(&turns, 64 * KIB, EndOfCycle::new(true, 35), 8);
        assert!(
            off.iter().all(|&bytes| bytes < RANGE.1 / 100),
            "64 TLABs hold the range: {off:?}"
        );
        // The first cycle knows no parts; the first collection sees only the 64 threads that
        // got TLABs, and each later one learns the others' parts.
        assert_eq!(on[0], off[0]);
        assert!(on.windows(2).all(|pair| pair[0] < pair[1]), "{on:?}");
        assert!(on[1] > RANGE.1 / 3 && on[7] > RANGE.1 * 9 / 10, "{on:?}");
    }

    #[test]
    fn uneven_threads_get_uneven_parts() {
        // Four threads allocate 100 times as fast as 96 others.
        let mut turns = vec![64; 100];
        turns[..4].fill(6400);
        let off = cycles(&turns, 64 * KIB, EndOfCycle::new(false, 35), 3);
        let on = cycles(&turns, 64 * KIB, EndOfCycle::new(true, 35), 3);
        assert!(
            on[2] > RANGE.1 * 9 / 10 && on[2] > off[2],
            "on {on:?}, off {off:?}"
        );
    }

    #[test]
    fn one_thread_keeps_full_tlabs_to_the_last() {
        for on in [false, true] {
            let used = cycles(&[4 * KIB], 64 * KIB, EndOfCycle::new(on, 35), 3);
            assert_eq!(used, vec![RANGE.1; 3], "policy on: {on}");
        }
    }
}
