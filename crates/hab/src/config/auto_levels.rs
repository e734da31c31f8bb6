//! `auto` middle levels: what the `hab` mode uses when given none, chosen from the machine
//! and the heap's size.
//!
//! - The lowest level is `cpu` where its buffers can be restartable (rseq works, and CPUs are
//!   the kernel's): a refill there is one restartable bump, no atomic instruction. Elsewhere
//!   it is `core`, compare-and-swap buffers shared by a core's hardware threads.
//! - One compare-and-swap level above it where the machine has a sharing domain between the
//!   lowest level's and the whole machine (more than one such domain, each of several of
//!   the lowest level's): the finest of `llc`, `package` and `node` (of levels that group
//!   alike, `package`, then `llc`). A level with one domain would only stand in for the
//!   global heap.
//! - Buffers follow the heap: the lowest level's hold a sixteenth of the heap over its
//!   domains (between four smallest TLABs and 16 MiB), the upper level's an eighth over its
//!   domains (at least four of the lowest level's buffers, at most 128 MiB), powers of two, so
//!   that a small heap gets small buffers rather than none, and a large one buffers that
//!   refill rarely (with 1 KiB TLABs on this 2-CPU machine, `alloc-array` ran 0.68 ns per
//!   object through `cpu:16MiB` against 1.09 through `cpu:1MiB`). These are the first
//!   cycle's sizes: each collection then resizes the buffers to follow what the domains
//!   allocate (`levels/buffer_sizing.rs`).

use crate::config::error::ConfigError;
use crate::config::levels::{check_smallest_tlab, MiddleLevelSpec, TopologySpec};
use crate::config::options::MAX_CAPACITY_BYTES;
use crate::memory::size::ByteSize;
use crate::platform::cpu_id::CpuIdSource;
use crate::platform::rseq::{self, RseqMechanism};
use crate::platform::topology::{Level, Topology, TopologySource};

/// The largest lowest-level buffer `auto` picks.
pub(crate) const MAX_LOWEST_BYTES: usize = 16 << 20;
/// The largest upper-level buffer `auto` picks.
pub(crate) const MAX_UPPER_BYTES: usize = 128 << 20;

/// What the levels must fit: the space they carve from and the TLABs they hand out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fit {
    /// The heap's (or eden's) size.
    pub(crate) capacity_bytes: usize,
    /// The smallest TLAB.
    pub(crate) min_tlab_bytes: usize,
    /// The largest TLAB where the caller fixed it (`max_tlab`, or a fixed TLAB size): the
    /// lowest buffer then holds a whole number of them. `None`: the largest TLAB follows
    /// the lowest buffer.
    pub(crate) max_tlab_bytes: Option<usize>,
}

/// The levels `auto` picks for `fit`, on the machine `spec` describes, reading CPUs from
/// `cpu_id` (`None`: the default source). Errors name a simulated topology that does not
/// parse, or the setting no buffer within the space can satisfy.
pub(crate) fn choose(
    spec: &TopologySpec,
    cpu_id: Option<CpuIdSource>,
    fit: Fit,
) -> Result<Vec<MiddleLevelSpec>, ConfigError> {
    let topology = match spec {
        TopologySpec::Discover => Topology::discover(),
        TopologySpec::SysfsAt(root) => Topology::discover_from(root),
        TopologySpec::Simulated(text) => {
            Topology::simulated(text).map_err(|problem| ConfigError::new("topology", problem))?
        }
    };
    let restartable = topology.source() == TopologySource::Sysfs
        && !matches!(cpu_id, Some(CpuIdSource::Simulated { .. }))
        && !matches!(rseq::mechanism(), RseqMechanism::Unavailable(_));
    levels_for(&topology, restartable, fit)
}

/// [`choose`] on a known machine.
fn levels_for(
    topology: &Topology,
    restartable: bool,
    fit: Fit,
) -> Result<Vec<MiddleLevelSpec>, ConfigError> {
    let Fit {
        capacity_bytes,
        min_tlab_bytes,
        max_tlab_bytes,
    } = fit;
    let lowest = if restartable { Level::Cpu } else { Level::Core };
    let lowest_domains = topology.domains(lowest).max(1);
    let mut lowest_bytes = power_of_two_within(
        capacity_bytes / lowest_domains.saturating_mul(16),
        min_tlab_bytes.saturating_mul(4),
        MAX_LOWEST_BYTES,
    );
    if lowest_bytes > capacity_bytes {
        // Four smallest TLABs do not fit the space: the largest buffer that does.
        lowest_bytes = power_of_two_within(capacity_bytes, 1, capacity_bytes);
        if lowest_bytes < min_tlab_bytes {
            return Err(ConfigError::new(
                "min_tlab",
                format!(
                    "auto levels: no power-of-two buffer of at least the smallest TLAB ({}) \
                     fits a space of {}: give a smaller min_tlab or a larger space",
                    ByteSize::new(min_tlab_bytes),
                    ByteSize::new(capacity_bytes)
                ),
            ));
        }
    }
    if let Some(max_tlab_bytes) = max_tlab_bytes {
        // The buffer holds whole TLABs of the size the caller fixed.
        lowest_bytes = lowest_bytes
            .checked_next_multiple_of(max_tlab_bytes)
            .filter(|bytes| *bytes <= capacity_bytes)
            .ok_or_else(|| {
                ConfigError::new(
                    "max_tlab",
                    format!(
                        "auto levels: a buffer holding whole TLABs of {} does not fit a space of \
                         {}: give a smaller max_tlab, or the levels",
                        ByteSize::new(max_tlab_bytes),
                        ByteSize::new(capacity_bytes)
                    ),
                )
            })?;
    }
    let mut levels = vec![MiddleLevelSpec {
        level: lowest,
        buffer_bytes: lowest_bytes,
    }];
    // The finest grouping between the lowest level's and the whole machine; of levels that
    // group alike (one cache and one node per package), the first of this list.
    let upper = [Level::Package, Level::Llc, Level::Node]
        .into_iter()
        .enumerate()
        .filter(|&(_, level)| (2..lowest_domains).contains(&topology.domains(level)))
        .min_by_key(|&(preference, level)| (topology.domains(level), preference))
        .map(|(_, level)| level);
    if let Some(level) = upper {
        let domains = topology.domains(level);
        let floor = lowest_bytes.saturating_mul(4);
        let upper_bytes = power_of_two_within(
            capacity_bytes / domains.saturating_mul(8),
            floor,
            MAX_UPPER_BYTES.max(floor),
        )
        .checked_next_multiple_of(lowest_bytes)
        .filter(|bytes| *bytes <= capacity_bytes);
        // Optional: where no buffer of whole lower buffers fits the space, there is none.
        if let Some(buffer_bytes) = upper_bytes {
            levels.push(MiddleLevelSpec {
                level,
                buffer_bytes,
            });
        }
    }
    Ok(levels)
}

/// The largest power of two at most `bytes`, within `[min, max]` (`min` rounded up to one).
pub(crate) fn power_of_two_within(bytes: usize, min: usize, max: usize) -> usize {
    let floor = if bytes == 0 {
        0
    } else {
        1 << (usize::BITS - 1 - bytes.leading_zeros())
    };
    floor.clamp(min.next_power_of_two(), max.max(min.next_power_of_two()))
}

impl MiddleLevelSpec {
    /// The levels `auto` picks on this machine for a space of `capacity_bytes` whose smallest
    /// TLAB is `min_tlab_bytes` (see [`HeapConfigBuilder::middle`](crate::HeapConfigBuilder::middle)): for a runtime that
    /// keeps its own eden and gives these to [`MiddleLevels`](crate::MiddleLevels) (whose
    /// list must be explicit, as it is not told its space's size).
    ///
    /// ```
    /// use hab::MiddleLevelSpec;
    /// let levels = MiddleLevelSpec::auto(256 << 20, 2048)?;
    /// assert!(!levels.is_empty());
    /// println!("{}", MiddleLevelSpec::list_to_string(&levels)); // e.g. cpu:8MiB
    /// # Ok::<(), hab::ConfigError>(())
    /// ```
    ///
    /// Every buffer lies within the space and holds at least one smallest TLAB.
    ///
    /// Errors: a space of 0 or beyond Hab's 16 TiB limit, a smallest TLAB that is not a
    /// positive multiple of 8 or is larger than the space, or a space that holds no
    /// power-of-two buffer of at least one smallest TLAB.
    pub fn auto(
        capacity_bytes: usize,
        min_tlab_bytes: usize,
    ) -> Result<Vec<MiddleLevelSpec>, ConfigError> {
        if capacity_bytes == 0 || capacity_bytes > MAX_CAPACITY_BYTES {
            return Err(ConfigError::new(
                "capacity",
                format!(
                    "auto needs a space of 1 byte to 16TiB, not {}",
                    ByteSize::new(capacity_bytes)
                ),
            ));
        }
        check_smallest_tlab("auto", capacity_bytes, min_tlab_bytes)?;
        let fit = Fit {
            capacity_bytes,
            min_tlab_bytes,
            max_tlab_bytes: None,
        };
        choose(&TopologySpec::Discover, None, fit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn machine(spec: &str) -> Topology {
        Topology::simulated(spec).unwrap()
    }

    fn named(levels: &[MiddleLevelSpec]) -> String {
        MiddleLevelSpec::list_to_string(levels)
    }

    /// What `auto` picks for a space of `capacity_bytes` with 2 KiB smallest TLABs.
    fn levels_for(
        topology: &Topology,
        restartable: bool,
        capacity_bytes: usize,
        min_tlab_bytes: usize,
    ) -> Vec<MiddleLevelSpec> {
        super::levels_for(
            topology,
            restartable,
            Fit {
                capacity_bytes,
                min_tlab_bytes,
                max_tlab_bytes: None,
            },
        )
        .unwrap()
    }

    #[test]
    fn a_restartable_cpu_level_where_rseq_works_else_a_core_level() {
        let one_package = machine("1x4x2");
        assert_eq!(
            named(&levels_for(&one_package, true, 64 * MIB, 2048)),
            "cpu:512KiB"
        );
        assert_eq!(
            named(&levels_for(&one_package, false, 64 * MIB, 2048)),
            "core:1MiB"
        );
    }

    #[test]
    fn a_level_above_where_the_machine_has_several_packages() {
        let two_packages = machine("2x8x2");
        assert_eq!(
            named(&levels_for(&two_packages, true, 1024 * MIB, 2048)),
            "cpu:2MiB,package:64MiB"
        );
        assert_eq!(
            named(&levels_for(&two_packages, false, 256 * MIB, 2048)),
            "core:1MiB,package:16MiB"
        );
    }

    #[test]
    fn small_heaps_get_small_buffers() {
        let levels = levels_for(&machine("1x2x1"), true, 4 * MIB, 2048);
        assert_eq!(named(&levels), "cpu:128KiB");
        let tiny = levels_for(&machine("1x64x2"), true, MIB, 2048);
        assert_eq!(named(&tiny), "cpu:8KiB", "four smallest TLABs");
    }

    #[test]
    fn buffers_hold_whole_tlabs_of_a_given_largest_size() {
        let fit = |capacity_bytes, max_tlab_bytes| {
            super::levels_for(
                &machine("1x2x1"),
                true,
                Fit {
                    capacity_bytes,
                    min_tlab_bytes: 2048,
                    max_tlab_bytes: Some(max_tlab_bytes),
                },
            )
        };
        // 16 MiB over 2 CPUs alone would pick cpu:512KiB: a 1 MiB TLAB needs 1 MiB buffers.
        assert_eq!(named(&fit(16 * MIB, MIB).unwrap()), "cpu:1MiB");
        assert_eq!(named(&fit(64 * MIB, 768 << 10).unwrap()), "cpu:2304KiB");
        assert_eq!(named(&fit(64 * MIB, 64 << 10).unwrap()), "cpu:2MiB");
        let error = fit(512 << 10, MIB).unwrap_err();
        assert_eq!(error.field(), "max_tlab", "{error}");
    }

    #[test]
    fn buffers_stay_within_the_space() {
        let fit = |capacity_bytes, min_tlab_bytes| {
            super::levels_for(
                &machine("2x8x2"),
                true,
                Fit {
                    capacity_bytes,
                    min_tlab_bytes,
                    max_tlab_bytes: None,
                },
            )
        };
        for (capacity, min) in [(4096, 2048), (16 << 10, 8), (24 << 10, 8 << 10), (8, 8)] {
            for level in fit(capacity, min).unwrap() {
                assert!(level.buffer_bytes <= capacity, "{level:?} for {capacity}");
                assert!(level.buffer_bytes >= min && level.buffer_bytes.is_multiple_of(8));
            }
        }
        assert_eq!(fit(3000, 2560).unwrap_err().field(), "min_tlab");
    }

    #[test]
    fn powers_of_two_within_bounds() {
        assert_eq!(power_of_two_within(3000, 1024, 1 << 20), 2048);
        assert_eq!(power_of_two_within(0, 1000, 1 << 20), 1024);
        assert_eq!(power_of_two_within(usize::MAX, 1, 4096), 4096);
    }
}
