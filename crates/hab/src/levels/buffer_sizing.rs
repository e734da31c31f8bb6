//! How big the middle levels' buffers are, re-decided at each collection when `auto` picked
//! the levels ([`HeapConfig::buffers_follow_allocation`](crate::HeapConfig::buffers_follow_allocation)).
//!
//! HotSpot sizes a TLAB so that each thread refills it a target number of times per cycle;
//! this does the same one level up. A level's buffers are sized so that the buffer of each
//! domain that allocates refills [`TARGET_REFILLS`] times per cycle: what the level took from
//! above in the cycle that ended (its buffer refills times their size), over the domains that
//! allocated (the level's domains, or fewer when fewer threads allocated), over the target.
//! So buffers follow the allocation: a machine whose threads fill a few of its domains gets
//! larger buffers for those (fewer refills), a cycle that allocates little through a level
//! gets smaller ones (less held in buffers at the collection, whose free tails are waste).
//!
//! Rounded to the nearest power of two, and bounded:
//! - above by a share of the space the next cycle has: every domain's buffer together hold at
//!   most a quarter of the allocation range ([`MAX_SHARE_DIVISOR`]), and by `auto`'s own caps
//!   (16 MiB lowest, 128 MiB above; and what a restartable per-CPU word can hold);
//! - below by what the level hands out: for the lowest level, the TLABs (the caller says how
//!   large: a heap, the largest TLAB a thread desires and four of the smallest; levels over a
//!   runtime's eden, the average TLAB of the last cycle that took any), so that a small heap
//!   gets small buffers, not none; for the others four of the new buffer of the level below.
//!   (Four of the largest TLAB, tried first, made HotSpot's per-CPU buffers 16 MiB for a
//!   192 MiB eden, whose tails then wasted 7–15 % of eden at each collection.)
//! - a buffer shrinks at most by half per collection, so one quiet cycle does not undo what
//!   the others learned; it grows to its target at once.
//!
//! Where the bounds disagree, the floor wins over the share (a buffer smaller than the TLABs
//! it hands out would send every TLAB past the levels), and the share over the halving (a
//! space that shrank by more than half takes the buffers down with it).
//!
//! Cost: nothing on the allocation paths (a buffer refill reads its level's size with one
//! load, as before); a few multiplications per level at each collection.

use crate::config::auto_levels::{power_of_two_within, MAX_LOWEST_BYTES, MAX_UPPER_BYTES};
use crate::levels::middle::MiddleLevel;
use crate::platform::rseq;
use crate::platform::topology::Level;

/// Buffer refills per cycle the sizing aims at for each domain that allocates.
pub(crate) const TARGET_REFILLS: u64 = 16;
/// All of a level's buffers together hold at most the allocation range over this.
pub(crate) const MAX_SHARE_DIVISOR: usize = 4;

/// What one level did in the cycle that ended, and what bounds its next size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LevelCycle {
    /// Buffer refills of the level in the cycle (claims of an exhausted buffer).
    pub(crate) refills: u64,
    /// The size the buffers took from above in the cycle.
    pub(crate) buffer_bytes: usize,
    /// The level's domains (buffers).
    pub(crate) domains: usize,
    /// The largest buffer the level may have (`auto`'s cap for its place, and what a
    /// restartable per-CPU word holds).
    pub(crate) max_bytes: usize,
}

/// The next sizes of a heap's levels, lowest first, from what each did in the cycle that
/// ended (`cycles`, lowest first), the threads that allocated in it, the bytes of the next
/// allocation range and the smallest buffer the lowest level may have (its TLABs).
pub(crate) fn next_buffer_bytes(
    cycles: &[LevelCycle],
    allocating_threads: usize,
    range_bytes: usize,
    lowest_floor_bytes: usize,
) -> Vec<usize> {
    let mut sizes: Vec<usize> = Vec::with_capacity(cycles.len());
    for cycle in cycles {
        let floor = sizes
            .last()
            .map_or(lowest_floor_bytes, |below| below.saturating_mul(4));
        let active_domains = cycle.domains.min(allocating_threads).max(1);
        let taken_bytes = u128::from(cycle.refills) * cycle.buffer_bytes as u128;
        let target = taken_bytes / (active_domains as u128 * u128::from(TARGET_REFILLS));
        let target = usize::try_from(target).unwrap_or(usize::MAX);
        let max = (range_bytes / (cycle.domains.max(1) * MAX_SHARE_DIVISOR)).min(cycle.max_bytes);
        sizes.push(power_of_two_within(
            nearest_power_of_two(target.max(cycle.buffer_bytes / 2)),
            floor,
            max,
        ));
    }
    sizes
}

/// Resizes `levels` (lowest first) for the next cycle: `cycle_refills(level)` is the buffer
/// refills of `level` in the cycle that ended; the threads that allocated in it, the bytes of
/// the next range and the lowest level's floor as in [`next_buffer_bytes`]; no buffer above
/// `max_buffer_bytes` where given (the largest piece the space hands out) unless a floor is.
/// Returns the sizes set, lowest first. Only at a collection (a refill meanwhile takes either
/// size).
pub(crate) fn resize(
    levels: &[MiddleLevel],
    cycle_refills: impl Fn(Level) -> u64,
    allocating_threads: usize,
    range_bytes: usize,
    max_buffer_bytes: Option<usize>,
    lowest_floor_bytes: usize,
) -> Vec<usize> {
    let cycles: Vec<LevelCycle> = levels
        .iter()
        .enumerate()
        .map(|(index, level)| LevelCycle {
            refills: cycle_refills(level.level()),
            buffer_bytes: level.buffer_bytes(),
            domains: level.domains(),
            max_bytes: match (index, level.is_restartable()) {
                (0, true) => MAX_LOWEST_BYTES.min(rseq::MAX_BUFFER_BYTES),
                (0, false) => MAX_LOWEST_BYTES,
                _ => MAX_UPPER_BYTES,
            }
            .min(max_buffer_bytes.unwrap_or(usize::MAX)),
        })
        .collect();
    let sizes = next_buffer_bytes(&cycles, allocating_threads, range_bytes, lowest_floor_bytes);
    for (level, &bytes) in levels.iter().zip(&sizes) {
        level.set_buffer_bytes(bytes);
    }
    sizes
}

/// The power of two nearest `bytes` (the larger one from half-way up, the largest `usize`
/// has at most); 0 for 0.
fn nearest_power_of_two(bytes: usize) -> usize {
    if bytes == 0 {
        return 0;
    }
    let floor = 1usize << (usize::BITS - 1 - bytes.leading_zeros());
    if (bytes - floor) * 2 >= floor {
        floor.checked_mul(2).unwrap_or(floor)
    } else {
        floor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: usize = 1 << 10;
    const MIB: usize = 1 << 20;

    fn level(refills: u64, buffer_bytes: usize, domains: usize) -> LevelCycle {
        LevelCycle {
            refills,
            buffer_bytes,
            domains,
            max_bytes: 16 * MIB,
        }
    }

    #[test]
    fn a_domain_refills_its_buffer_the_target_times_per_cycle() {
        // Two domains took 64 refills of 1 MiB: 32 MiB each, 2 MiB per refill at 16.
        let sizes = next_buffer_bytes(&[level(64, MIB, 2)], 2, 256 * MIB, 2 * KIB);
        assert_eq!(sizes, [2 * MIB]);
        // The same allocation in 4 domains of 4 needs half as much each.
        let sizes = next_buffer_bytes(&[level(64, MIB, 4)], 4, 256 * MIB, 2 * KIB);
        assert_eq!(sizes, [MIB]);
    }

    #[test]
    fn few_threads_on_many_domains_get_larger_buffers() {
        // 2 threads on a 16-CPU level: the allocation is over 2 domains, not 16.
        let few = next_buffer_bytes(&[level(64, MIB, 16)], 2, 1024 * MIB, 2 * KIB);
        let many = next_buffer_bytes(&[level(64, MIB, 16)], 16, 1024 * MIB, 2 * KIB);
        assert_eq!((few[0], many[0]), (2 * MIB, MIB / 2));
    }

    #[test]
    fn buffers_hold_at_most_a_share_of_the_range() {
        // A huge allocation, a 64 MiB range over 2 domains: at most 64 MiB / (2 × 4).
        let sizes = next_buffer_bytes(&[level(1 << 20, MIB, 2)], 2, 64 * MIB, 2 * KIB);
        assert_eq!(sizes, [8 * MIB]);
        // And at most the level's cap.
        let capped = LevelCycle {
            max_bytes: 4 * MIB,
            ..level(1 << 20, MIB, 2)
        };
        assert_eq!(
            next_buffer_bytes(&[capped], 2, 1024 * MIB, 2 * KIB),
            [4 * MIB]
        );
    }

    #[test]
    fn a_quiet_cycle_halves_a_buffer_at_most() {
        let sizes = next_buffer_bytes(&[level(0, 8 * MIB, 2)], 0, 256 * MIB, 2 * KIB);
        assert_eq!(sizes, [4 * MIB]);
        // Cycle after cycle, down to the floor (the TLABs it hands out).
        let mut size = 8 * MIB;
        for _ in 0..20 {
            size = next_buffer_bytes(&[level(0, size, 2)], 0, 256 * MIB, 64 * KIB)[0];
        }
        assert_eq!(size, 64 * KIB);
    }

    #[test]
    fn sizes_round_to_the_nearest_power_of_two() {
        assert_eq!(nearest_power_of_two(0), 0);
        assert_eq!(nearest_power_of_two(1), 1);
        assert_eq!(nearest_power_of_two(3 * MIB - 1), 2 * MIB);
        assert_eq!(nearest_power_of_two(3 * MIB), 4 * MIB);
        assert_eq!(nearest_power_of_two(usize::MAX), usize::MAX / 2 + 1);
    }

    #[test]
    fn a_small_heap_gets_small_buffers_not_none() {
        // 1 MiB over 64 domains: the share, 4 KiB, still holds two 2 KiB TLABs; an 8 KiB
        // floor (four of them) wins over the share.
        let sizes = next_buffer_bytes(&[level(100, 16 * KIB, 64)], 64, MIB, 2 * KIB);
        assert_eq!(sizes, [4 * KIB]);
        let sizes = next_buffer_bytes(&[level(100, 16 * KIB, 64)], 64, MIB, 8 * KIB);
        assert_eq!(sizes, [8 * KIB]);
    }

    #[test]
    fn a_level_holds_at_least_four_buffers_of_the_level_below() {
        // The level below chose 2 MiB; the upper level's own target would be 2 MiB (half
        // its 4 MiB).
        let lower = level(64, MIB, 2);
        let upper = LevelCycle {
            max_bytes: 128 * MIB,
            ..level(1, 4 * MIB, 1)
        };
        let sizes = next_buffer_bytes(&[lower, upper], 2, 1024 * MIB, 2 * KIB);
        assert_eq!(sizes, [2 * MIB, 8 * MIB]);
    }

    #[test]
    fn a_synthetic_trace_settles_where_each_domain_refills_the_target_times() {
        // Each cycle 4 threads allocate 96 MiB through a 4-domain level; whatever the start,
        // the size settles at 96 / 4 / 16 = 1.5 MiB, to the nearest power of two: 2 MiB.
        for start in [64 * KIB, 16 * MIB] {
            let mut size = start;
            for _ in 0..12 {
                let refills = (96 * MIB / size) as u64;
                size = next_buffer_bytes(&[level(refills, size, 4)], 4, 512 * MIB, 2 * KIB)[0];
            }
            assert_eq!(size, 2 * MIB, "from {start}");
        }
    }
}
