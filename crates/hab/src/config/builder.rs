//! The builder of [`HeapConfig`]: collects settings, then checks them all in one place,
//! naming the first field that is wrong.

use crate::config::auto_levels;
use crate::config::error::ConfigError;
use crate::config::heap_config::HeapConfig;
use crate::config::levels::{MiddleLevelSpec, TopologySpec};
use crate::config::options::{
    IntoByteSize, Mode, TlabPolicy, ZeroMemory, GROWING_INITIAL_BYTES, MAX_ALIGNMENT_BYTES,
    MAX_CAPACITY_BYTES, MIN_ALIGNMENT_BYTES, WORD_BYTES,
};
use crate::memory::size::{ByteSize, SizeParseError};
use crate::platform::cpu_id::CpuIdSource;

impl HeapConfig {
    /// A builder with HotSpot's defaults: 64 MiB, `tlab` mode, adaptive sizing, TLABs of
    /// 2 KiB … 1 MiB, 8-byte alignment, 1 % waste target, refill waste limit 1/64 of the TLAB.
    pub fn builder() -> HeapConfigBuilder {
        HeapConfigBuilder::default()
    }
}

/// Collects heap settings; [`build`](HeapConfigBuilder::build) checks them.
///
/// Sizes accept a number of bytes or text such as `"64MiB"` (see [`ByteSize`]).
#[derive(Clone, Debug, Default)]
pub struct HeapConfigBuilder {
    capacity: Option<Result<ByteSize, SizeParseError>>,
    mode: Option<Mode>,
    tlab: Option<TlabPolicy>,
    min_tlab: Option<Result<ByteSize, SizeParseError>>,
    max_tlab: Option<Result<ByteSize, SizeParseError>>,
    alignment: Option<usize>,
    waste_target_percent: Option<f64>,
    refill_waste_fraction: Option<usize>,
    waste_increment_words: Option<usize>,
    allocation_weight_percent: Option<u32>,
    zero: Option<ZeroMemory>,
    pretouch: bool,
    end_of_cycle: Option<bool>,
    middle: Option<Result<Vec<MiddleLevelSpec>, ConfigError>>,
    cpu_id: Option<CpuIdSource>,
    topology: TopologySpec,
}

impl HeapConfigBuilder {
    /// Bytes to reserve for the heap (default 64 MiB).
    pub fn capacity(mut self, size: impl IntoByteSize) -> Self {
        self.capacity = Some(size.into_byte_size());
        self
    }
    /// The allocation mode (default [`Mode::Tlab`]).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = Some(mode);
        self
    }
    /// The TLAB sizing policy (default [`TlabPolicy::Adaptive`]).
    pub fn tlab(mut self, policy: TlabPolicy) -> Self {
        self.tlab = Some(policy);
        self
    }
    /// Smallest TLAB (default 2 KiB; 24 words for the growing policy).
    pub fn min_tlab(mut self, size: impl IntoByteSize) -> Self {
        self.min_tlab = Some(size.into_byte_size());
        self
    }
    /// Largest TLAB (default 1 MiB, or the capacity or the lowest middle level's buffer if
    /// smaller: a TLAB is carved from that buffer). [`HeapConfig::max_tlab_bytes`] says what was
    /// chosen. An explicit value larger than the lowest buffer is an error.
    pub fn max_tlab(mut self, size: impl IntoByteSize) -> Self {
        self.max_tlab = Some(size.into_byte_size());
        self
    }
    /// Object alignment, a power of two from 8 to 4096 bytes (default 8).
    pub fn alignment(mut self, bytes: usize) -> Self {
        self.alignment = Some(bytes);
        self
    }
    /// Allowed TLAB waste in percent of the allocation space, in (0, 50] (default 1).
    pub fn waste_target_percent(mut self, percent: f64) -> Self {
        self.waste_target_percent = Some(percent);
        self
    }
    /// Refill waste limit as a fraction of the desired TLAB size, at least 1 (default 64).
    pub fn refill_waste_fraction(mut self, fraction: usize) -> Self {
        self.refill_waste_fraction = Some(fraction);
        self
    }
    /// Growth of the refill waste limit per allocation outside the TLAB, in words (default 4).
    pub fn waste_increment_words(mut self, words: usize) -> Self {
        self.waste_increment_words = Some(words);
        self
    }
    /// Weight of the newest sample in the adaptive policy's averages, 1–100 % (default 35).
    pub fn allocation_weight_percent(mut self, percent: u32) -> Self {
        self.allocation_weight_percent = Some(percent);
        self
    }
    /// Whether and when reused memory is zeroed (default [`ZeroMemory::Ahead`]).
    pub fn zero(mut self, zero: ZeroMemory) -> Self {
        self.zero = Some(zero);
        self
    }
    /// Touch the whole reservation when the heap is created (default off).
    pub fn pretouch(mut self, pretouch: bool) -> Self {
        self.pretouch = pretouch;
        self
    }
    /// Whether TLABs taken from the global heap shrink as the allocation range runs out,
    /// to a share of what is left per allocating thread, and objects are then allocated
    /// outside TLABs; and the middle levels' buffers, to their share of what is left (default
    /// on; see [`HeapConfig::end_of_cycle`]).
    pub fn end_of_cycle(mut self, on: bool) -> Self {
        self.end_of_cycle = Some(on);
        self
    }
    /// The middle levels of [`Mode::Hab`], lowest first, as text: `core:1MiB` or
    /// `core:512KiB,package:32MiB`. Each buffer must be a multiple of the largest chunk the
    /// level below takes from it: the largest TLAB for the lowest level, the buffer of the level
    /// below for the others (the default largest TLAB shrinks to the lowest buffer if needed).
    ///
    /// `auto` (or leaving the levels unset) picks them from the machine and the heap's
    /// capacity, within the other settings (buffers hold whole TLABs of a given `max_tlab` or
    /// fixed size; an error names the setting no buffer within the heap can satisfy): a
    /// restartable `cpu` level where rseq works (else `core`), a compare-and-swap level
    /// above it where the machine has several caches, packages or nodes, buffers a share of
    /// the heap (see [`HeapConfig::middle`] for what was picked), resized at each collection
    /// to follow what each domain allocates ([`HeapConfig::buffers_follow_allocation`]).
    ///
    /// ```
    /// use hab::{HeapConfig, Mode};
    /// let config = HeapConfig::builder().mode(Mode::Hab).middle("auto").build()?;
    /// assert!(!config.middle().is_empty());
    /// # Ok::<(), hab::ConfigError>(())
    /// ```
    pub fn middle(mut self, levels: &str) -> Self {
        self.middle = Some(MiddleLevelSpec::parse_list(levels));
        self
    }
    /// The middle levels of [`Mode::Hab`], lowest first.
    pub fn middle_levels(mut self, levels: &[MiddleLevelSpec]) -> Self {
        self.middle = Some(Ok(levels.to_vec()));
        self
    }
    /// Where the CPU number comes from (default: rseq if glibc registered it, else
    /// `sched_getcpu`).
    pub fn cpu_id(mut self, source: CpuIdSource) -> Self {
        self.cpu_id = Some(source);
        self
    }
    /// Simulates a machine of `packages x cores x threads` (e.g. `4x10x2`) instead of reading
    /// the real one; checked when the heap is created.
    pub fn simulated_topology(mut self, spec: &str) -> Self {
        self.topology = TopologySpec::Simulated(spec.to_string());
        self
    }

    /// Reads the machine's shape from a sysfs tree rooted at `root` instead of `/sys` (see
    /// [`TopologySpec::SysfsAt`]).
    pub fn sysfs_topology(mut self, root: impl Into<std::path::PathBuf>) -> Self {
        self.topology = TopologySpec::SysfsAt(root.into());
        self
    }

    /// Checks every setting and returns the configuration, or the first field that is wrong.
    pub fn build(mut self) -> Result<HeapConfig, ConfigError> {
        let capacity_bytes = size("capacity", self.capacity.take())?.unwrap_or(64 << 20);
        let explicit_min = size("min_tlab", self.min_tlab.take())?;
        let explicit_max = size("max_tlab", self.max_tlab.take())?;
        let alignment_bytes = check_alignment(self.alignment.unwrap_or(MIN_ALIGNMENT_BYTES))?;
        let limits = Limits {
            capacity_bytes: check_capacity(capacity_bytes, alignment_bytes)?,
            alignment_bytes,
        };
        let tlab = self.tlab.unwrap_or(TlabPolicy::Adaptive);
        let min_tlab_bytes = limits.min_tlab(tlab, explicit_min)?;
        let mut middle = self.middle.take().transpose()?.unwrap_or_default();
        let mode = self.mode.unwrap_or(Mode::Tlab);
        let buffers_follow_allocation = mode == Mode::Hab && middle.is_empty();
        if buffers_follow_allocation {
            // A largest TLAB the caller fixed is checked first, and auto's buffers hold it.
            let max_tlab_bytes = match (tlab, explicit_max) {
                (TlabPolicy::Fixed(_), _) | (_, Some(_)) => {
                    Some(limits.max_tlab(tlab, explicit_max, None)?)
                }
                _ => None,
            };
            let fit = auto_levels::Fit {
                capacity_bytes,
                min_tlab_bytes,
                max_tlab_bytes,
            };
            middle = auto_levels::choose(&self.topology, self.cpu_id, fit)?;
        }
        check_buffer_sizes(&middle, &limits)?;
        let lowest_buffer = middle.first().map(|spec| spec.buffer_bytes);
        let max_tlab_bytes = limits.max_tlab(tlab, explicit_max, lowest_buffer)?;
        if let (Some(lowest), None) = (middle.first(), explicit_max) {
            if lowest.buffer_bytes < min_tlab_bytes {
                // The largest TLAB came from the buffer: it is the buffer that is too small.
                return Err(ConfigError::new(
                    "middle",
                    format!(
                        "{}:{} is smaller than the smallest TLAB ({}): a buffer holds whole TLABs \
                         (give larger buffers, or a smaller min_tlab)",
                        lowest.level,
                        ByteSize::new(lowest.buffer_bytes),
                        ByteSize::new(min_tlab_bytes)
                    ),
                ));
            }
        }
        if min_tlab_bytes > max_tlab_bytes {
            return Err(ConfigError::new(
                "min_tlab",
                format!(
                    "the smallest TLAB ({}) is larger than the largest ({})",
                    ByteSize::new(min_tlab_bytes),
                    ByteSize::new(max_tlab_bytes)
                ),
            ));
        }
        let knobs = self.sizing_knobs(capacity_bytes)?;
        check_middle(mode, &middle, max_tlab_bytes, &limits)?;
        Ok(HeapConfig {
            capacity_bytes,
            mode,
            tlab,
            min_tlab_bytes,
            max_tlab_bytes,
            alignment_bytes,
            waste_target_percent: knobs.waste_target_percent,
            refill_waste_fraction: knobs.refill_waste_fraction,
            waste_increment_bytes: knobs.waste_increment_bytes,
            allocation_weight_percent: knobs.allocation_weight_percent,
            zero: self.zero.unwrap_or_default(),
            pretouch: self.pretouch,
            end_of_cycle: self.end_of_cycle.unwrap_or(true),
            buffers_follow_allocation,
            middle,
            cpu_id: self.cpu_id,
            topology: self.topology,
        })
    }

    /// The adaptive policy's knobs, checked; defaults are HotSpot's.
    fn sizing_knobs(&self, capacity_bytes: usize) -> Result<SizingKnobs, ConfigError> {
        let waste_target_percent = self.waste_target_percent.unwrap_or(1.0);
        if !(waste_target_percent > 0.0 && waste_target_percent <= 50.0) {
            return Err(ConfigError::new(
                "waste_target_percent",
                format!("{waste_target_percent} is not in (0, 50]"),
            ));
        }
        let refill_waste_fraction = self.refill_waste_fraction.unwrap_or(64);
        if refill_waste_fraction == 0 {
            return Err(ConfigError::new(
                "refill_waste_fraction",
                "must be at least 1",
            ));
        }
        // HotSpot's 4 words, but never more than a tiny heap holds.
        let waste_increment_words = self
            .waste_increment_words
            .unwrap_or((capacity_bytes / WORD_BYTES).clamp(1, 4));
        let waste_increment_bytes = waste_increment_words
            .checked_mul(WORD_BYTES)
            .filter(|bytes| *bytes <= capacity_bytes)
            .ok_or_else(|| {
                ConfigError::new("waste_increment_words", "larger than the heap capacity")
            })?;
        let allocation_weight_percent = self.allocation_weight_percent.unwrap_or(35);
        if !(1..=100).contains(&allocation_weight_percent) {
            return Err(ConfigError::new(
                "allocation_weight_percent",
                format!("{allocation_weight_percent} is not in 1..=100"),
            ));
        }
        Ok(SizingKnobs {
            waste_target_percent,
            refill_waste_fraction,
            waste_increment_bytes,
            allocation_weight_percent,
        })
    }
}

/// A size setting as bytes, or an error naming `field` when its text did not parse.
fn size(
    field: &'static str,
    value: Option<Result<ByteSize, SizeParseError>>,
) -> Result<Option<usize>, ConfigError> {
    value
        .transpose()
        .map(|size| size.map(ByteSize::bytes))
        .map_err(|error| ConfigError::new(field, error.to_string()))
}

fn check_alignment(alignment_bytes: usize) -> Result<usize, ConfigError> {
    if !alignment_bytes.is_power_of_two()
        || !(MIN_ALIGNMENT_BYTES..=MAX_ALIGNMENT_BYTES).contains(&alignment_bytes)
    {
        return Err(ConfigError::new(
            "alignment",
            format!("{alignment_bytes} is not a power of two from 8 to 4096"),
        ));
    }
    Ok(alignment_bytes)
}

fn check_capacity(capacity_bytes: usize, alignment_bytes: usize) -> Result<usize, ConfigError> {
    if capacity_bytes == 0 {
        return Err(ConfigError::new("capacity", "must be more than 0 bytes"));
    }
    if capacity_bytes > MAX_CAPACITY_BYTES {
        return Err(ConfigError::new(
            "capacity",
            format!(
                "{} is more than the 16TiB limit",
                ByteSize::new(capacity_bytes)
            ),
        ));
    }
    if !capacity_bytes.is_multiple_of(alignment_bytes) {
        return Err(ConfigError::new(
            "capacity",
            format!("{capacity_bytes} is not a multiple of the alignment {alignment_bytes}"),
        ));
    }
    Ok(capacity_bytes)
}

/// The checked capacity and alignment, which bound every other size.
struct Limits {
    capacity_bytes: usize,
    alignment_bytes: usize,
}

impl Limits {
    /// `bytes` for the TLAB size `field`: a positive multiple of the alignment, within the heap.
    fn tlab_size(&self, field: &'static str, bytes: usize) -> Result<usize, ConfigError> {
        let (alignment_bytes, capacity_bytes) = (self.alignment_bytes, self.capacity_bytes);
        if bytes == 0 || !bytes.is_multiple_of(alignment_bytes) {
            Err(ConfigError::new(
                field,
                format!(
                    "{bytes} bytes is not a positive multiple of the alignment {alignment_bytes}"
                ),
            ))
        } else if bytes > capacity_bytes {
            Err(ConfigError::new(
                field,
                format!(
                    "a TLAB of {} is larger than the heap capacity {}",
                    ByteSize::new(bytes),
                    ByteSize::new(capacity_bytes)
                ),
            ))
        } else {
            Ok(bytes)
        }
    }

    /// A default size, rounded down to the alignment (at least one unit).
    fn round_down(&self, bytes: usize) -> usize {
        (bytes / self.alignment_bytes).max(1) * self.alignment_bytes
    }

    /// The smallest TLAB: as set, or HotSpot's default within the heap.
    fn min_tlab(&self, tlab: TlabPolicy, explicit: Option<usize>) -> Result<usize, ConfigError> {
        let default_bytes = match tlab {
            TlabPolicy::Growing => GROWING_INITIAL_BYTES,
            TlabPolicy::Fixed(bytes) => bytes.min(2048),
            TlabPolicy::Adaptive => 2048,
        };
        match explicit {
            Some(bytes) => self.tlab_size("min_tlab", bytes),
            None => Ok(self.round_down(default_bytes.min(self.capacity_bytes))),
        }
    }

    /// The largest TLAB: a fixed TLAB's size (within an explicit maximum), or as set, or 1 MiB
    /// within the heap and the lowest middle level's buffer.
    fn max_tlab(
        &self,
        tlab: TlabPolicy,
        explicit: Option<usize>,
        lowest_buffer: Option<usize>,
    ) -> Result<usize, ConfigError> {
        let explicit = explicit
            .map(|bytes| self.tlab_size("max_tlab", bytes))
            .transpose()?;
        match (tlab, explicit) {
            (TlabPolicy::Fixed(bytes), max) => {
                let bytes = self.tlab_size("tlab", bytes)?;
                if max.is_some_and(|max| bytes > max) {
                    return Err(ConfigError::new(
                        "tlab",
                        format!(
                            "a fixed TLAB of {} is larger than max_tlab",
                            ByteSize::new(bytes)
                        ),
                    ));
                }
                Ok(bytes)
            }
            (_, Some(bytes)) => Ok(bytes),
            (_, None) => Ok(self.round_down(
                (1 << 20)
                    .min(self.capacity_bytes)
                    .min(lowest_buffer.unwrap_or(usize::MAX)),
            )),
        }
    }
}

/// The adaptive policy's knobs, checked.
struct SizingKnobs {
    waste_target_percent: f64,
    refill_waste_fraction: usize,
    waste_increment_bytes: usize,
    allocation_weight_percent: u32,
}

/// Each middle level's buffer is a positive multiple of the alignment, no larger than the
/// heap: checked before anything is derived from the buffers (the largest TLAB), so that a
/// wrong buffer is blamed on `middle`.
fn check_buffer_sizes(middle: &[MiddleLevelSpec], limits: &Limits) -> Result<(), ConfigError> {
    let (alignment_bytes, capacity_bytes) = (limits.alignment_bytes, limits.capacity_bytes);
    for spec in middle {
        let size = ByteSize::new(spec.buffer_bytes);
        if spec.buffer_bytes == 0 || spec.buffer_bytes % alignment_bytes != 0 {
            return Err(ConfigError::new(
                "middle",
                format!(
                    "{}:{size} is not a positive multiple of the alignment {alignment_bytes}",
                    spec.level
                ),
            ));
        }
        if spec.buffer_bytes > capacity_bytes {
            return Err(ConfigError::new(
                "middle",
                format!("{}:{size} is larger than the heap", spec.level),
            ));
        }
    }
    Ok(())
}

/// The middle levels fit the mode, come lowest first, and each buffer holds a whole number of
/// the largest chunks the level below takes (the seed's rule against extra fragmentation).
fn check_middle(
    mode: Mode,
    middle: &[MiddleLevelSpec],
    max_tlab_bytes: usize,
    limits: &Limits,
) -> Result<(), ConfigError> {
    check_buffer_sizes(middle, limits)?;
    match (mode, middle.is_empty()) {
        (Mode::Hab, true) => {
            return Err(ConfigError::new(
                "middle",
                "mode hab needs at least one middle level",
            ))
        }
        (Mode::Shared | Mode::Tlab | Mode::CpuLab | Mode::Flip, false) => {
            return Err(ConfigError::new(
                "middle",
                format!("middle levels need mode hab, not {mode}"),
            ))
        }
        _ => {}
    }
    let mut below: Option<MiddleLevelSpec> = None;
    for spec in middle {
        let (chunk_name, chunk_bytes) = match below {
            Some(lower) if lower.level >= spec.level => {
                return Err(ConfigError::new(
                    "middle",
                    format!(
                        "{} comes after {}: list levels lowest first, each once",
                        spec.level, lower.level
                    ),
                ))
            }
            Some(lower) => (format!("the {} buffer", lower.level), lower.buffer_bytes),
            None => ("the largest TLAB".to_string(), max_tlab_bytes),
        };
        let size = ByteSize::new(spec.buffer_bytes);
        if spec.buffer_bytes % chunk_bytes != 0 {
            return Err(ConfigError::new(
                "middle",
                format!(
                    "{}:{size} is not a multiple of {chunk_name} ({}), so refills would leave tails",
                    spec.level,
                    ByteSize::new(chunk_bytes)
                ),
            ));
        }
        below = Some(*spec);
    }
    Ok(())
}

/// Checks middle levels used on their own (`MiddleLevels`), over the chunks of an upstream
/// whose addresses are multiples of `alignment_bytes`: as in a heap of mode `hab`.
pub(crate) fn check_levels(
    middle: &[MiddleLevelSpec],
    max_tlab_bytes: usize,
    alignment_bytes: usize,
) -> Result<(), ConfigError> {
    if middle.is_empty() {
        // `auto` sizes buffers from a heap's capacity, which the upstream does not tell.
        return Err(ConfigError::new(
            "middle",
            "levels over a runtime's own space are given explicitly (auto needs the space's \
             size: MiddleLevelSpec::auto, hab_levels_auto in C, gives the list): e.g. core:1MiB",
        ));
    }
    let limits = Limits {
        capacity_bytes: usize::MAX,
        alignment_bytes,
    };
    check_middle(Mode::Hab, middle, max_tlab_bytes, &limits)
}
