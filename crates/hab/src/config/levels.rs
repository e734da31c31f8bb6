//! The middle levels a configuration names ([`MiddleLevelSpec`]: a level and its buffers'
//! size), where the machine's shape comes from ([`TopologySpec`]), and the checks levels pass
//! wherever they are used. `auto_levels.rs` picks levels, `fit_levels.rs` brings given ones
//! within a space.

use crate::config::error::ConfigError;
use crate::config::options::WORD_BYTES;
use crate::memory::size::ByteSize;
use crate::platform::topology::Level;

/// One middle level of a configuration: which level, and how big each of its buffers is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MiddleLevelSpec {
    /// The level.
    pub level: Level,
    /// Bytes of each buffer of the level (one buffer per domain).
    pub buffer_bytes: usize,
}

impl MiddleLevelSpec {
    /// Parses a list such as `core:1MiB` or `core:512KiB,package:32MiB` (lowest level first).
    /// `auto`, alone, is an empty list: the `hab` mode then picks its levels from the machine
    /// and the heap (see [`HeapConfigBuilder::middle`](crate::HeapConfigBuilder::middle)).
    ///
    /// ```
    /// use hab::{Level, MiddleLevelSpec};
    /// let levels = MiddleLevelSpec::parse_list("core:512KiB,package:32MiB")?;
    /// assert_eq!(levels[1], MiddleLevelSpec { level: Level::Package, buffer_bytes: 32 << 20 });
    /// assert!(MiddleLevelSpec::parse_list("auto")?.is_empty());
    /// // Nothing, an empty entry, and auto within a list are errors, not auto.
    /// for wrong in ["", ",", "core:1MiB,", "auto,core:1MiB", "auto,auto"] {
    ///     assert_eq!(MiddleLevelSpec::parse_list(wrong).unwrap_err().field(), "middle");
    /// }
    /// # Ok::<(), hab::ConfigError>(())
    /// ```
    pub fn parse_list(text: &str) -> Result<Vec<MiddleLevelSpec>, ConfigError> {
        let expected = "auto, or a list like core:1MiB or core:512KiB,package:32MiB";
        let text = text.trim();
        if text == "auto" {
            return Ok(Vec::new());
        }
        if text.is_empty() {
            return Err(ConfigError::new(
                "middle",
                format!("nothing given; expected {expected}"),
            ));
        }
        text.split(',')
            .map(str::trim)
            .map(|item| {
                if item.is_empty() {
                    return Err(ConfigError::new(
                        "middle",
                        format!("\"{text}\" has an empty entry: separate levels by single commas"),
                    ));
                }
                if item == "auto" {
                    return Err(ConfigError::new(
                        "middle",
                        format!(
                            "\"{text}\": auto picks every level, so it stands alone, not in a list"
                        ),
                    ));
                }
                let (level, size) = item
                    .split_once(':')
                    .ok_or_else(|| ConfigError::invalid("middle", item, expected))?;
                let level = level
                    .trim()
                    .parse::<Level>()
                    .map_err(|problem| ConfigError::new("middle", problem))?;
                let size = size
                    .parse::<ByteSize>()
                    .map_err(|error| ConfigError::new("middle", error.to_string()))?;
                Ok(MiddleLevelSpec {
                    level,
                    buffer_bytes: size.bytes(),
                })
            })
            .collect()
    }

    /// The list as [`parse_list`](MiddleLevelSpec::parse_list) reads it.
    pub fn list_to_string(levels: &[MiddleLevelSpec]) -> String {
        let items: Vec<String> = levels
            .iter()
            .map(|spec| format!("{}:{}", spec.level, ByteSize::new(spec.buffer_bytes)))
            .collect();
        items.join(",")
    }
}

/// A smallest TLAB that `what` (auto, or fitting levels) can size buffers for: a positive
/// multiple of 8 within the space.
pub(crate) fn check_smallest_tlab(
    what: &str,
    space_bytes: usize,
    min_tlab_bytes: usize,
) -> Result<(), ConfigError> {
    if min_tlab_bytes == 0
        || !min_tlab_bytes.is_multiple_of(WORD_BYTES)
        || min_tlab_bytes > space_bytes
    {
        return Err(ConfigError::new(
            "min_tlab",
            format!(
                "{what} needs a smallest TLAB that is a positive multiple of 8 within the space \
                 ({}), not {min_tlab_bytes} bytes",
                ByteSize::new(space_bytes)
            ),
        ));
    }
    Ok(())
}

/// Where the heap learns the machine's shape.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum TopologySpec {
    /// Read sysfs (see [`Topology::discover`](crate::Topology::discover)).
    #[default]
    Discover,
    /// A simulated machine such as `4x10x2` (see
    /// [`Topology::simulated`](crate::Topology::simulated)).
    Simulated(String),
    /// Read a sysfs tree rooted at this path instead of `/sys` (see
    /// [`Topology::discover_from`](crate::Topology::discover_from)): a topology captured from
    /// another machine, or a container's own view. CPUs are still the kernel's: a CPU number
    /// the tree does not cover takes the compare-and-swap path of per-CPU buffers, counted
    /// as `out_of_range_cpus`.
    SysfsAt(std::path::PathBuf),
}
