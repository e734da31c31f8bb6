//! Levels a runtime named, fitted to its space: what HotSpot does with `-XX:HABLevels=` at a
//! small eden or a small G1 region, instead of turning the buffers off.
//!
//! A level fits when all its buffers (one per domain) hold at most a quarter of the space
//! (the share [`buffer_sizing`](crate::levels::buffer_sizing) keeps at every resize) and each
//! buffer is at most the runtime's largest chunk (G1's regions: a buffer is carved from one
//! region, so one larger than a region would always come back short). A level that does not
//! fit is brought down: the lowest level to the largest power of two that fits, never below one
//! smallest TLAB (the floor wins over the share: smaller buffers would send every TLAB past
//! the levels); a level above to the largest whole number of the buffers below it that fits,
//! never below two of them. A level above that cannot keep that is dropped, with every level
//! above it.
//!
//! Levels that fit are returned unchanged, so a caller can tell "fitted" by comparing.

use crate::config::auto_levels::power_of_two_within;
use crate::config::builder::check_levels;
use crate::config::error::ConfigError;
use crate::config::levels::{check_smallest_tlab, MiddleLevelSpec};
use crate::memory::words::WORD_BYTES;
use crate::platform::topology::Topology;

/// All of a level's buffers hold at most the space over this (as resizing keeps them).
const SHARE_DIVISOR: usize = 4;

/// What the levels must fit in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Room {
    /// The space the buffers carve from (eden).
    pub(crate) space_bytes: usize,
    /// The smallest TLAB: the lowest buffer holds at least one.
    pub(crate) min_tlab_bytes: usize,
    /// The largest buffer the space can hand out in one piece (`None`: the space).
    pub(crate) max_buffer_bytes: Option<usize>,
}

/// `levels` (lowest first) fitted to `room` on `topology`. Errors: levels the middle levels
/// would refuse as given (out of order, not multiples of the level below...), and a smallest
/// TLAB that is not a positive multiple of 8 within the space.
pub(crate) fn fit(
    topology: &Topology,
    levels: &[MiddleLevelSpec],
    room: Room,
) -> Result<Vec<MiddleLevelSpec>, ConfigError> {
    let Room {
        space_bytes,
        min_tlab_bytes,
        max_buffer_bytes,
    } = room;
    check_smallest_tlab("fitting levels", space_bytes, min_tlab_bytes)?;
    // A list the levels would refuse as given is refused here with the same words.
    let lowest_bytes = levels.first().map_or(0, |lowest| lowest.buffer_bytes);
    check_levels(levels, lowest_bytes, WORD_BYTES)?;
    let max_buffer_bytes = max_buffer_bytes.unwrap_or(space_bytes).min(space_bytes);
    let mut fitted: Vec<MiddleLevelSpec> = Vec::with_capacity(levels.len());
    for spec in levels {
        let domains = topology.domains(spec.level).max(1);
        let cap = (space_bytes / (domains * SHARE_DIVISOR)).min(max_buffer_bytes);
        let Some(below) = fitted.last().map(|below| below.buffer_bytes) else {
            // The lowest level: never below one smallest TLAB.
            let bytes = if spec.buffer_bytes <= cap {
                spec.buffer_bytes
            } else {
                power_of_two_within(cap, min_tlab_bytes, cap)
            };
            fitted.push(MiddleLevelSpec {
                level: spec.level,
                buffer_bytes: bytes,
            });
            continue;
        };
        let bytes = if spec.buffer_bytes <= cap && spec.buffer_bytes.is_multiple_of(below) {
            spec.buffer_bytes
        } else {
            // The largest whole number of the buffers below within the cap.
            spec.buffer_bytes.min(cap) / below * below
        };
        if bytes < 2 * below {
            break;
        }
        fitted.push(MiddleLevelSpec {
            level: spec.level,
            buffer_bytes: bytes,
        });
    }
    Ok(fitted)
}

impl MiddleLevelSpec {
    /// `levels` brought within a space of `space_bytes` on this machine, for a runtime that
    /// was given explicit sizes and must keep its buffers on at any eden: each level's
    /// buffers together hold at most a quarter of the space and each at most
    /// `max_buffer_bytes` (the largest piece the space hands out, such as a G1 region;
    /// `None`: no bound). A level that does not fit shrinks (the lowest to a power of two of
    /// at least one smallest TLAB, a level above to a whole number of at least two buffers
    /// below, or it is dropped with those above it); levels that fit come back unchanged.
    ///
    /// ```
    /// use hab::MiddleLevelSpec;
    /// let asked = MiddleLevelSpec::parse_list("cpu:16MiB")?;
    /// let fitted = MiddleLevelSpec::fit(&asked, 1 << 20, 2048, None)?;
    /// assert!(fitted[0].buffer_bytes < 16 << 20);
    /// # Ok::<(), hab::ConfigError>(())
    /// ```
    ///
    /// Errors: a smallest TLAB that is not a positive multiple of 8 within the space.
    pub fn fit(
        levels: &[MiddleLevelSpec],
        space_bytes: usize,
        min_tlab_bytes: usize,
        max_buffer_bytes: Option<usize>,
    ) -> Result<Vec<MiddleLevelSpec>, ConfigError> {
        let room = Room {
            space_bytes,
            min_tlab_bytes,
            max_buffer_bytes,
        };
        fit(&Topology::discover(), levels, room)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::topology::Level;

    const KIB: usize = 1 << 10;
    const MIB: usize = 1 << 20;

    fn fitted(
        machine: &str,
        levels: &str,
        space_bytes: usize,
        max_buffer: Option<usize>,
    ) -> String {
        let topology = Topology::simulated(machine).unwrap();
        let levels = MiddleLevelSpec::parse_list(levels).unwrap();
        let room = Room {
            space_bytes,
            min_tlab_bytes: 2 * KIB,
            max_buffer_bytes: max_buffer,
        };
        MiddleLevelSpec::list_to_string(&fit(&topology, &levels, room).unwrap())
    }

    #[test]
    fn levels_that_fit_come_back_unchanged() {
        assert_eq!(
            fitted("1x2x1", "cpu:256KiB,core:2MiB", 64 * MIB, None),
            "cpu:256KiB,core:2MiB"
        );
        assert_eq!(fitted("1x2x1", "cpu:3000", 64 * MIB, None), "cpu:3000B");
    }

    #[test]
    fn buffers_over_a_quarter_of_the_space_shrink_to_a_power_of_two() {
        // Eden of 3 MiB on 2 CPUs and 2 cores: each level's buffers hold at most 768 KiB.
        // 2 MiB of space on 2 CPUs: each level's buffers hold at most 512 KiB, 256 KiB each.
        assert_eq!(fitted("1x2x1", "cpu:1MiB", 2 * MIB, None), "cpu:256KiB");
        // 8 MiB: 1 MiB each; the core level's 2 MiB becomes four of the cpu level's.
        assert_eq!(
            fitted("1x2x1", "cpu:256KiB,core:2MiB", 8 * MIB, None),
            "cpu:256KiB,core:1MiB"
        );
    }

    #[test]
    fn the_lowest_buffer_keeps_one_smallest_tlab() {
        // 64 CPUs and 1 MiB: a quarter over 64 is 4 KiB; at 64 KiB of space, 256 bytes: the
        // floor of one 2 KiB TLAB wins.
        assert_eq!(fitted("1x64x1", "cpu:1MiB", MIB, None), "cpu:4KiB");
        assert_eq!(fitted("1x64x1", "cpu:1MiB", 64 * KIB, None), "cpu:2KiB");
    }

    #[test]
    fn an_upper_level_that_cannot_hold_two_lower_buffers_is_dropped() {
        // A region of 1 MiB caps every buffer: the core level can hold 1 MiB, four cpu buffers.
        assert_eq!(
            fitted("1x2x1", "cpu:256KiB,core:2MiB", 64 * MIB, Some(MIB)),
            "cpu:256KiB,core:1MiB"
        );
        // 1 MiB of space: cpu 128 KiB, the core level at most 128 KiB: dropped.
        assert_eq!(
            fitted("1x2x1", "cpu:256KiB,core:2MiB,package:8MiB", MIB, None),
            "cpu:128KiB"
        );
    }

    #[test]
    fn an_upper_level_stays_a_whole_number_of_the_lower_buffers() {
        let topology = Topology::simulated("2x4x1").unwrap();
        let levels = MiddleLevelSpec::parse_list("cpu:96KiB,package:4608KiB").unwrap();
        let room = Room {
            space_bytes: 8 * MIB,
            min_tlab_bytes: 2 * KIB,
            max_buffer_bytes: None,
        };
        let fitted = fit(&topology, &levels, room).unwrap();
        assert_eq!(fitted[0].buffer_bytes, 96 * KIB);
        assert_eq!(fitted[1].level, Level::Package);
        assert!(fitted[1].buffer_bytes <= MIB);
        assert_eq!(fitted[1].buffer_bytes % fitted[0].buffer_bytes, 0);
    }

    #[test]
    fn levels_out_of_order_are_refused_as_given() {
        let topology = Topology::simulated("1x2x1").unwrap();
        let levels = MiddleLevelSpec::parse_list("core:1MiB,cpu:64KiB").unwrap();
        let room = Room {
            space_bytes: 64 * MIB,
            min_tlab_bytes: 2 * KIB,
            max_buffer_bytes: None,
        };
        let error = fit(&topology, &levels, room).unwrap_err();
        assert!(error.to_string().contains("lowest first"), "{error}");
    }

    #[test]
    fn a_smallest_tlab_outside_the_space_is_an_error() {
        let topology = Topology::simulated("1x2x1").unwrap();
        let levels = MiddleLevelSpec::parse_list("cpu:64KiB").unwrap();
        let room = Room {
            space_bytes: KIB,
            min_tlab_bytes: 2 * KIB,
            max_buffer_bytes: None,
        };
        assert_eq!(
            fit(&topology, &levels, room).unwrap_err().field(),
            "min_tlab"
        );
    }
}
