//! The end of a cycle one level up: near the end of the space above, a buffer refill takes
//! only its share of what is left, not a whole buffer.
//!
//! What the middle levels' buffers hold when the space runs out is lost to the cycle unless
//! another CPU's refill takes it (the `cpu` level does: `cpu_buffers::take_foreign_tail`): the
//! collection comes while it is unused, and their tails are retired as waste. A buffer
//! refilled in full just before the end holds up to a whole buffer then, and with one buffer
//! per CPU that adds up (HotSpot on two CPUs with 8–16 MiB per-CPU buffers left up to 28 MB
//! of a 340–770 MB eden in tails at a young collection, 120–170 MB a run; with shares 0.1–9
//! MB a run). So a refill takes at most its buffer's share of the bytes the space above has left
//! (`free / (buffers × SHARE_DIVISOR)`), a whole buffer while that share is larger: the
//! buffers together then never hold more than about a quarter of what was left at their
//! last refills, which shrinks toward nothing as the space runs out, as the TLABs' end of
//! the cycle (`labs/end_of_cycle.rs`) does one level down.
//!
//! A short refill still takes at least what the request that found the buffer empty desires
//! (a TLAB of its desired size, or the buffer of the level below), so the end of a cycle one
//! level up never cuts a TLAB short: a TLAB smaller than it asked for is one more TLAB refill
//! (in HotSpot, a call into the runtime), and its own end of the cycle is the TLABs' business.
//!
//! The price is refills: from `buffers × SHARE_DIVISOR` whole buffers left, each refill
//! takes a fixed fraction of what is left, so running out takes about `buffers ×
//! SHARE_DIVISOR × ln(left / smallest chunk)` refills more per cycle (a few dozen per
//! buffer), each a buffer refill (hundreds of nanoseconds), nothing on the TLAB path.
//!
//! Only where the space above says what it has left (the heap's global range; an
//! [`Upstream`](crate::Upstream) that implements `free_bytes`) and the end of a cycle is on
//! ([`HeapConfig::end_of_cycle`](crate::HeapConfig::end_of_cycle)). A refill cut short is
//! counted (`short_refills` in [`LevelStats`](crate::LevelStats)); the buffer sizing leaves
//! such refills out, since they measure the end of the cycle, not the allocation.
//!
//! Cost: one load of the space's top and a division per buffer refill; nothing per TLAB.

use crate::memory::words::WORD_BYTES;

/// Every buffer of a level takes at most what the space above has left over its buffers and
/// this (a quarter: what the buffers can hold at the end is a quarter of what was left).
pub(crate) const SHARE_DIVISOR: usize = 4;

/// What the request that found a buffer empty asks for: at least `min` bytes, `desired` if it
/// can.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChunkBounds {
    pub(crate) min: usize,
    pub(crate) desired: usize,
}

/// The bytes a buffer of a level of `buffers` buffers of `buffer_bytes` asks of the space
/// above at a refill for `request` when that space has `free_bytes` left (`None`: it does not
/// say, or the end of a cycle is off): the whole buffer (at least the request's minimum), or
/// its share of what is left when that is smaller, a multiple of the request's minimum (which
/// keeps every chunk a multiple of the heap's alignment) and at least what the request
/// desires (within the whole buffer).
///
/// ```text
/// buffer 8 MiB, 2 buffers, 1 GiB left,  TLAB 4 KiB   -> 8 MiB
/// buffer 8 MiB, 2 buffers, 40 MiB left, TLAB 4 KiB   -> 5 MiB
/// buffer 8 MiB, 2 buffers, 1 MiB left,  TLAB 4 KiB   -> 128 KiB
/// buffer 8 MiB, 2 buffers, 1 MiB left,  TLAB 228 KiB -> 228 KiB
/// ```
#[inline]
pub(crate) fn refill_bytes(
    buffer_bytes: usize,
    buffers: usize,
    free_bytes: Option<usize>,
    request: ChunkBounds,
) -> usize {
    let min_bytes = request.min;
    let whole = buffer_bytes.max(min_bytes);
    let Some(free) = free_bytes else {
        return whole;
    };
    let unit = min_bytes.max(WORD_BYTES);
    let share = free / buffers.max(1).saturating_mul(SHARE_DIVISOR) / unit * unit;
    whole.min(share.max(request.desired)).max(min_bytes)
}

/// The largest TLAB a runtime's levels hand out ([`MiddleLevels`](crate::MiddleLevels)) when
/// the space above has `free_bytes` left (`None`: it does not say, and there is no such
/// bound): the same share of what is left as a buffer's refill takes ([`refill_bytes`]) over
/// the lowest level's `buffers`, in whole words. A TLAB takes what it desires within this
/// bound, and at least its minimum. Near the end of the space the TLABs shrink with the
/// buffers, so that a thread's TLAB tail at the collection is small: where the levels are the
/// runtime's only way to its space, what the TLABs leave unused then is the waste that
/// remains. Cost: a refill or two more per thread and cycle for every halving of the TLAB, all
/// in the last few buffers' worth of the space.
///
/// ```text
/// 2 buffers, 40 MiB left -> 5 MiB    (a TLAB of 256 KiB takes 256 KiB)
/// 2 buffers, 1 MiB left  -> 128 KiB  (a TLAB of 256 KiB takes 128 KiB)
/// 2 buffers, 8 KiB left  -> 1 KiB    (a TLAB of at least 2 KiB takes 2 KiB)
/// ```
#[inline]
pub(crate) fn tlab_limit_bytes(buffers: usize, free_bytes: Option<usize>) -> usize {
    let Some(free) = free_bytes else {
        return usize::MAX;
    };
    free / buffers.max(1).saturating_mul(SHARE_DIVISOR) / WORD_BYTES * WORD_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tlabs_shrink_to_a_buffers_share_of_what_is_left() {
        let (kib, mib) = (1usize << 10, 1usize << 20);
        assert_eq!(tlab_limit_bytes(2, None), usize::MAX);
        assert_eq!(tlab_limit_bytes(2, Some(40 * mib)), 5 * mib);
        assert_eq!(tlab_limit_bytes(2, Some(mib)), 128 * kib);
        assert_eq!(tlab_limit_bytes(2, Some(8 * kib)), kib);
        assert_eq!(tlab_limit_bytes(0, Some(1003)), 248, "whole words");
        assert_eq!(tlab_limit_bytes(3, Some(7)), 0);
    }

    const MIB: usize = 1 << 20;

    /// A request that asks for exactly `bytes`.
    fn exact(bytes: usize) -> ChunkBounds {
        ChunkBounds {
            min: bytes,
            desired: bytes,
        }
    }

    #[test]
    fn a_short_refill_still_serves_the_request_at_its_desired_size() {
        let tlab = ChunkBounds {
            min: 128 << 10,
            desired: 228 << 10,
        };
        assert_eq!(refill_bytes(8 * MIB, 2, Some(MIB), tlab), 228 << 10);
        // Within the whole buffer.
        assert_eq!(refill_bytes(192 << 10, 2, Some(MIB), tlab), 192 << 10);
        // Where the share is larger, the share.
        assert_eq!(refill_bytes(8 * MIB, 2, Some(16 * MIB), tlab), 2 * MIB);
    }

    #[test]
    fn a_whole_buffer_until_its_share_of_what_is_left_is_smaller() {
        assert_eq!(refill_bytes(8 * MIB, 2, None, exact(4096)), 8 * MIB);
        assert_eq!(
            refill_bytes(8 * MIB, 2, Some(1 << 30), exact(4096)),
            8 * MIB
        );
        assert_eq!(
            refill_bytes(8 * MIB, 2, Some(64 * MIB), exact(4096)),
            8 * MIB
        );
        assert_eq!(
            refill_bytes(8 * MIB, 2, Some(40 * MIB), exact(4096)),
            5 * MIB
        );
        assert_eq!(refill_bytes(8 * MIB, 2, Some(MIB), exact(4096)), 128 << 10);
        // A multiple of the request's minimum (or of 8), never below it.
        assert_eq!(refill_bytes(8 * MIB, 3, Some(1000), exact(8)), 80);
        assert_eq!(refill_bytes(8 * MIB, 3, Some(1000), exact(0)), 80);
        assert_eq!(refill_bytes(8 * MIB, 2, Some(100_000), exact(4096)), 12288);
        assert_eq!(refill_bytes(8 * MIB, 2, Some(0), exact(4096)), 4096);
        // A request larger than the buffer asks for itself, shrinking or not.
        assert_eq!(refill_bytes(4096, 2, None, exact(8192)), 8192);
        assert_eq!(refill_bytes(4096, 2, Some(1 << 30), exact(8192)), 8192);
        // No buffers counts as one; no overflow on the largest numbers.
        assert_eq!(refill_bytes(8 * MIB, 0, Some(4 * MIB), exact(8)), MIB);
        assert_eq!(
            refill_bytes(usize::MAX, usize::MAX, Some(usize::MAX), exact(8)),
            8
        );
    }

    /// What a synthetic cycle left: the bytes in buffers when the space ran out, and the
    /// buffer refills it took.
    #[derive(Debug)]
    struct Ending {
        left_in_buffers: usize,
        refills: usize,
    }

    /// A cycle over a space of `space_bytes`: `buffers` buffers of `buffer_bytes`, each
    /// request a TLAB of `tlab_bytes` from a buffer picked by a fixed pseudo-random sequence
    /// (some buffers allocate more than others: the weights), refilled with `refill_bytes`
    /// (or whole buffers, `shrink` off) until the space cannot serve a refill.
    fn run_cycle(
        space_bytes: usize,
        buffers: usize,
        buffer_bytes: usize,
        tlab_bytes: usize,
        shrink: bool,
    ) -> Ending {
        let mut free = space_bytes;
        let mut left = vec![0usize; buffers];
        let mut refills = 0;
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        loop {
            // xorshift: deterministic, and uneven between buffers by its weights.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let pick = (state % (buffers as u64 * (buffers as u64 + 1) / 2)) as usize;
            let (mut buffer, mut bound) = (0, buffers);
            while pick >= bound {
                buffer += 1;
                bound += buffers - buffer;
            }
            if left[buffer] < tlab_bytes {
                let want = refill_bytes(
                    buffer_bytes,
                    buffers,
                    shrink.then_some(free),
                    exact(tlab_bytes),
                );
                if free < tlab_bytes {
                    return Ending {
                        left_in_buffers: left.iter().sum(),
                        refills,
                    };
                }
                // The tail is retired (waste at the refill, as the levels do); what the space
                // has left is what a short carve gives.
                left[buffer] = want.min(free);
                free -= left[buffer];
                refills += 1;
            }
            left[buffer] -= tlab_bytes;
        }
    }

    #[test]
    fn buffers_hold_little_when_the_space_runs_out() {
        // HotSpot's case on two CPUs: 8 MiB per-CPU buffers, 4 KiB TLABs, a 340 MiB eden.
        let (space, tlab) = (340 * MIB, 4096);
        for buffers in [2, 16] {
            let whole = run_cycle(space, buffers, 8 * MIB, tlab, false);
            let shrunk = run_cycle(space, buffers, 8 * MIB, tlab, true);
            // Whole buffers leave about half a buffer each on average.
            assert!(
                whole.left_in_buffers > buffers * MIB,
                "{buffers} buffers: {whole:?}"
            );
            // Shrinking ones leave a tenth of that or less, and under 1 % of the space (what
            // is left sits in the buffers that allocate least: their last share).
            assert!(
                shrunk.left_in_buffers * 10 <= whole.left_in_buffers
                    && shrunk.left_in_buffers * 100 <= space,
                "{buffers} buffers: {shrunk:?} against {whole:?}"
            );
            // And pay for it with a bounded number of refills: about buffers × divisor ×
            // ln(what was left when shrinking began / a TLAB) more.
            let began = buffers * SHARE_DIVISOR * 8 * MIB;
            let bound = buffers * SHARE_DIVISOR * ((began / tlab) as f64).ln().ceil() as usize;
            assert!(
                shrunk.refills <= whole.refills + bound,
                "{buffers} buffers: {} refills against {} (bound {bound} more)",
                shrunk.refills,
                whole.refills
            );
        }
    }

    #[test]
    fn a_large_space_is_served_in_whole_buffers_until_its_end() {
        // With the space hundreds of buffers long, the share stays a whole buffer until the
        // last buffers × divisor of them: almost every refill is whole.
        let shrunk = run_cycle(1 << 30, 2, MIB, 1024, true);
        let whole = run_cycle(1 << 30, 2, MIB, 1024, false);
        assert!(shrunk.refills >= whole.refills);
        assert!(shrunk.refills - whole.refills < 2 * SHARE_DIVISOR * 12);
    }
}
