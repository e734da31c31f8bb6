//! What a heap is built from: capacity, allocation mode, TLAB sizing policy and its knobs.
//!
//! [`HeapConfig::builder`] collects the settings; [`HeapConfigBuilder::build`] checks them all
//! and names the first field that is wrong in a [`ConfigError`].

use std::fmt;
use std::str::FromStr;

use crate::memory::size::{ByteSize, SizeParseError};
use crate::platform::cpu_id::CpuIdSource;
use crate::platform::topology::{Level, Topology};

pub(crate) mod auto_levels;
mod builder;
pub(crate) mod fit_levels;
pub(crate) use builder::check_levels;
pub use builder::HeapConfigBuilder;

/// The smallest object alignment: one 64-bit heap word. Every address Hab hands out is a
/// multiple of it, whatever the configuration.
pub const MIN_ALIGNMENT_BYTES: usize = 8;
/// The largest object alignment a heap may be configured with (one page).
pub const MAX_ALIGNMENT_BYTES: usize = 4096;
/// The largest heap capacity: 16 TiB, well inside the user address space of 64-bit Linux.
pub const MAX_CAPACITY_BYTES: usize = 1 << 44;
pub use crate::memory::words::WORD_BYTES;
/// Agesen's initial TLAB size for the `growing` policy: 24 words.
pub const GROWING_INITIAL_BYTES: usize = 24 * WORD_BYTES;

/// How mutators allocate objects.
///
/// Later levels of the hierarchy add more modes; the name of each is what the CLI accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// Every object is carved from the global heap with a compare-and-swap on its top,
    /// like HotSpot with `-XX:-UseTLAB`.
    Shared,
    /// Objects are bumped in the thread's TLAB; TLABs are carved from the global heap.
    Tlab,
    /// Objects are bumped in the thread's TLAB; TLABs are carved from the middle levels (the
    /// buffer of the CPU, core, … the thread runs on), which are carved from the global heap.
    Hab,
    /// No TLAB: every object is bumped in the LAB of the CPU the thread runs on, inside a
    /// restartable sequence (Garthwaite et al.'s per-processor LABs, which here are per
    /// logical CPU). LABs are sized like TLABs (see [`TlabPolicy`]) and come from the global
    /// heap, sidelined ones first. Where rseq does not work, per-CPU compare-and-swap buffers.
    /// Named `cpu-lab`; `cpu-lab`, the seed's term, is accepted as an alias.
    CpuLab,
    /// Starts as [`Mode::Tlab`]; at each collection switches to [`Mode::CpuLab`] when the memory
    /// left unused in TLABs exceeded the largest LAB × the CPUs, and back when the memory left
    /// unused in per-CPU LABs exceeded the largest LAB × the allocating threads (§5.2).
    Flip,
}

impl Mode {
    /// Every mode, in the order the CLI lists them.
    pub const ALL: [Mode; 5] = [
        Mode::Shared,
        Mode::Tlab,
        Mode::Hab,
        Mode::CpuLab,
        Mode::Flip,
    ];

    /// The mode's name as the CLI and the statistics spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Mode::Shared => "shared",
            Mode::Tlab => "tlab",
            Mode::Hab => "hab",
            Mode::CpuLab => "cpu-lab",
            Mode::Flip => "flip",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        // `cpu-lab`: the seed's name for per-processor LABs, kept as an alias.
        let text = if text == "plab" { "cpu-lab" } else { text };
        Mode::ALL
            .into_iter()
            .find(|mode| mode.name() == text)
            .ok_or_else(|| {
                let names: Vec<_> = Mode::ALL.into_iter().map(Mode::name).collect();
                ConfigError::invalid("mode", text, &format!("one of: {}", names.join(", ")))
            })
    }
}

/// How big each TLAB a thread takes is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TlabPolicy {
    /// Every TLAB has this many bytes (`-XX:TLABSize=<n> -XX:-ResizeTLAB`). Only the last TLAB
    /// carved before the heap fills may be smaller.
    Fixed(usize),
    /// HotSpot's policy: the desired size follows the thread's share of allocation between
    /// collections, the allocation space and a target number of refills per collection.
    Adaptive,
    /// Agesen's policy: start at 24 words, grow ×1.5 at every refill, halve at every collection.
    Growing,
}

impl TlabPolicy {
    /// The policy's kind as the statistics spell it: `fixed`, `adaptive` or `growing` (its
    /// `Display` is the configuration's spelling: a size for a fixed policy).
    pub fn kind(&self) -> &'static str {
        match self {
            TlabPolicy::Fixed(_) => "fixed",
            TlabPolicy::Adaptive => "adaptive",
            TlabPolicy::Growing => "growing",
        }
    }
}

impl fmt::Display for TlabPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlabPolicy::Fixed(bytes) => write!(f, "{}", ByteSize::new(*bytes)),
            TlabPolicy::Adaptive => f.write_str("adaptive"),
            TlabPolicy::Growing => f.write_str("growing"),
        }
    }
}

impl FromStr for TlabPolicy {
    type Err = ConfigError;

    /// `adaptive`, `growing`, or a size such as `256KiB` for [`TlabPolicy::Fixed`].
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "adaptive" => Ok(TlabPolicy::Adaptive),
            "growing" => Ok(TlabPolicy::Growing),
            _ => text
                .parse::<ByteSize>()
                .map(|size| TlabPolicy::Fixed(size.bytes()))
                .map_err(|_| ConfigError::invalid("tlab", text, "adaptive, growing or a size")),
        }
    }
}

/// How far ahead of a TLAB's top [`ZeroMemory::Ahead`] zeroes, at least, each time an
/// allocation reaches the end of the zeroed part.
///
/// Small, so that zeroing overlaps allocation: a step's few dozen vector stores wait in the
/// CPU's store buffer while their cache lines come from memory, and the thread goes on
/// allocating. Steps of tens of KiB make it wait for every line before its next object, and
/// from 2 KiB glibc's `memset` turns into `rep stosb`, which waited as well: with 32 KiB
/// steps, `alloc-array` (20 M objects of 16 bytes, kept) took 1.5 times as long as not
/// zeroing; with 1 KiB steps it takes as long. Large enough that the short slow path it costs
/// (`SlowPath::common_miss`) is rare next to the objects it serves.
pub const ZERO_AHEAD_BYTES: usize = 1 << 10;

/// Whether memory handed out is zeroed.
///
/// A fresh reservation is zero (anonymous `mmap`), so memory that was never handed out before
/// needs no work in either setting. The difference is memory handed out again after a
/// collection gave back an allocation range that had been used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ZeroMemory {
    /// Hab zeroes a TLAB's reused memory a step at a time just ahead of its top
    /// ([`ZERO_AHEAD_BYTES`](crate::ZERO_AHEAD_BYTES) per step, when an allocation reaches the
    /// end of the part zeroed so far: the TLAB's soft end stops there), so that the zeroed
    /// lines are still in the cache when the objects are written. Objects allocated outside a
    /// TLAB and per-CPU LABs are zeroed when handed out, as with
    /// [`AtRefill`](ZeroMemory::AtRefill). Every object starts as zeros.
    #[default]
    Ahead,
    /// Hab zeroes reused memory when it hands it out: a whole TLAB at its refill, an object
    /// allocated outside a TLAB at its allocation. Every object starts as zeros.
    AtRefill,
    /// Hab never writes memory it hands out; initialising it is the runtime's job.
    Never,
}

impl ZeroMemory {
    /// Every setting, in the order the CLI lists them.
    pub const ALL: [ZeroMemory; 3] = [ZeroMemory::Ahead, ZeroMemory::AtRefill, ZeroMemory::Never];

    /// The setting's name as the CLI and the statistics spell it: `ahead`, `refill`, `never`.
    pub const fn name(self) -> &'static str {
        match self {
            ZeroMemory::Ahead => "ahead",
            ZeroMemory::AtRefill => "refill",
            ZeroMemory::Never => "never",
        }
    }
}

impl fmt::Display for ZeroMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ZeroMemory {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ZeroMemory::ALL
            .into_iter()
            .find(|zero| zero.name() == text)
            .ok_or_else(|| {
                let names: Vec<_> = ZeroMemory::ALL.into_iter().map(ZeroMemory::name).collect();
                ConfigError::invalid("zero", text, &format!("one of: {}", names.join(", ")))
            })
    }
}

/// A configuration that was rejected, naming the field and the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    problem: String,
}

impl ConfigError {
    /// The configuration field that is wrong (`capacity`, `min_tlab`, `alignment`, …).
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// What is wrong with it, without the field's name.
    pub fn problem(&self) -> &str {
        &self.problem
    }

    pub(crate) fn new(field: &'static str, problem: impl Into<String>) -> Self {
        ConfigError {
            field,
            problem: problem.into(),
        }
    }

    fn invalid(field: &'static str, text: &str, expected: &str) -> Self {
        ConfigError::new(field, format!("{text:?} is not valid; expected {expected}"))
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid heap configuration: {}: {}",
            self.field, self.problem
        )
    }
}

impl std::error::Error for ConfigError {}

/// A byte size given either as a number of bytes or as text such as `"64MiB"`.
///
/// Lets builder methods take `1 << 20`, `"1MiB"` or a [`ByteSize`] alike.
pub trait IntoByteSize {
    /// The size, or why the text is not one.
    fn into_byte_size(self) -> Result<ByteSize, SizeParseError>;
}

impl IntoByteSize for usize {
    fn into_byte_size(self) -> Result<ByteSize, SizeParseError> {
        Ok(ByteSize::new(self))
    }
}

impl IntoByteSize for ByteSize {
    fn into_byte_size(self) -> Result<ByteSize, SizeParseError> {
        Ok(self)
    }
}

impl IntoByteSize for &str {
    fn into_byte_size(self) -> Result<ByteSize, SizeParseError> {
        self.parse()
    }
}

impl IntoByteSize for &String {
    fn into_byte_size(self) -> Result<ByteSize, SizeParseError> {
        self.parse()
    }
}

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
    /// and the heap (see [`HeapConfigBuilder::middle`]).
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

    /// The levels `auto` picks on this machine for a space of `capacity_bytes` whose smallest
    /// TLAB is `min_tlab_bytes` (see [`HeapConfigBuilder::middle`]): for a runtime that
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
        let fit = auto_levels::Fit {
            capacity_bytes,
            min_tlab_bytes,
            max_tlab_bytes: None,
        };
        auto_levels::choose(&TopologySpec::Discover, None, fit)
    }

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
        let room = fit_levels::Room {
            space_bytes,
            min_tlab_bytes,
            max_buffer_bytes,
        };
        fit_levels::fit(&Topology::discover(), levels, room)
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
fn check_smallest_tlab(
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

/// A checked heap configuration. Build one with [`HeapConfig::builder`].
///
/// ```
/// use hab::{HeapConfig, Mode, TlabPolicy};
/// let config = HeapConfig::builder()
///     .capacity("64MiB")
///     .mode(Mode::Tlab)
///     .tlab(TlabPolicy::Adaptive)
///     .max_tlab("256KiB")
///     .build()
///     .unwrap();
/// assert_eq!(config.capacity_bytes(), 64 << 20);
/// assert_eq!(config.min_tlab_bytes(), 2048);
///
/// let error = HeapConfig::builder().capacity(0).build().unwrap_err();
/// assert_eq!(error.field(), "capacity");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct HeapConfig {
    capacity_bytes: usize,
    mode: Mode,
    tlab: TlabPolicy,
    min_tlab_bytes: usize,
    max_tlab_bytes: usize,
    alignment_bytes: usize,
    waste_target_percent: f64,
    refill_waste_fraction: usize,
    waste_increment_bytes: usize,
    allocation_weight_percent: u32,
    zero: ZeroMemory,
    pretouch: bool,
    end_of_cycle: bool,
    middle: Vec<MiddleLevelSpec>,
    buffers_follow_allocation: bool,
    cpu_id: Option<CpuIdSource>,
    topology: TopologySpec,
}

impl HeapConfig {
    /// A builder with HotSpot's defaults: 64 MiB, `tlab` mode, adaptive sizing, TLABs of
    /// 2 KiB … 1 MiB, 8-byte alignment, 1 % waste target, refill waste limit 1/64 of the TLAB.
    pub fn builder() -> HeapConfigBuilder {
        HeapConfigBuilder::default()
    }

    /// Bytes reserved for the heap.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }
    /// The allocation mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// The TLAB sizing policy.
    pub fn tlab(&self) -> TlabPolicy {
        self.tlab
    }
    /// The smallest TLAB worth taking (`-XX:MinTLABSize`); a smaller remainder of the heap is
    /// used by allocations outside TLABs.
    pub fn min_tlab_bytes(&self) -> usize {
        self.min_tlab_bytes
    }
    /// The largest TLAB (`-XX:MaxTLABSize`); objects bigger than it are allocated outside TLABs.
    pub fn max_tlab_bytes(&self) -> usize {
        self.max_tlab_bytes
    }
    /// Object alignment: every object size must be a multiple of it.
    pub fn alignment_bytes(&self) -> usize {
        self.alignment_bytes
    }
    /// Allowed TLAB waste, in percent of the allocation space (`TLABWasteTargetPercent`).
    pub fn waste_target_percent(&self) -> f64 {
        self.waste_target_percent
    }
    /// The adaptive policy's target number of refills per thread and collection:
    /// `100 / (2 × waste target)`, i.e. 50 for 1 %.
    pub fn target_refills(&self) -> f64 {
        100.0 / (2.0 * self.waste_target_percent)
    }
    /// A TLAB whose free space is at most `desired size / fraction` is retired when an object
    /// does not fit (`TLABRefillWasteFraction`); with more free space the object is allocated
    /// outside it.
    pub fn refill_waste_fraction(&self) -> usize {
        self.refill_waste_fraction
    }
    /// How much the refill waste limit grows at each allocation outside the TLAB
    /// (`TLABWasteIncrement`, 4 words).
    pub fn waste_increment_bytes(&self) -> usize {
        self.waste_increment_bytes
    }
    /// Weight of the newest sample in the decaying averages of the adaptive policy
    /// (`TLABAllocationWeight`, 35 %).
    pub fn allocation_weight_percent(&self) -> u32 {
        self.allocation_weight_percent
    }
    /// Whether reused memory is zeroed when handed out.
    pub fn zero(&self) -> ZeroMemory {
        self.zero
    }
    /// Whether the whole reservation is touched when the heap is created
    /// (`-XX:+AlwaysPreTouch`).
    pub fn pretouch(&self) -> bool {
        self.pretouch
    }
    /// Whether TLABs carved from the global heap shrink at the end of each cycle: once a
    /// full TLAB is more than a thread's part of what is left of the allocation range (its
    /// fraction of the allocation), its next TLAB is that part, and once the part is below
    /// the smallest TLAB its objects are allocated outside TLABs, so that the memory handed
    /// out is used before the collection (Garthwaite et al.'s question of when to stop
    /// handing out LABs). Only in cycles where the full TLABs of the threads that allocate
    /// would hold an eighth of the range or more. Applies to the `tlab` mode and the TLAB
    /// phases of `flip`; in the `hab` mode the middle levels' buffers do the same one level
    /// up: a buffer refilled near the end of the range takes its share of what is left
    /// instead of a whole buffer (a quarter of it over the level's buffers).
    pub fn end_of_cycle(&self) -> bool {
        self.end_of_cycle
    }
    /// The middle levels, lowest first (empty unless the mode is [`Mode::Hab`]), with the
    /// buffer sizes they start with.
    pub fn middle(&self) -> &[MiddleLevelSpec] {
        &self.middle
    }
    /// Whether the middle levels' buffers are resized at each collection to follow the
    /// allocation: when `auto` picked the levels (given levels keep their sizes). See
    /// `levels/buffer_sizing.rs`; [`Heap::middle_levels`](crate::Heap::middle_levels) gives
    /// the sizes now.
    pub fn buffers_follow_allocation(&self) -> bool {
        self.buffers_follow_allocation
    }
    /// The CPU-id source asked for; `None` picks rseq where glibc registered it, else
    /// `sched_getcpu`.
    pub fn cpu_id(&self) -> Option<CpuIdSource> {
        self.cpu_id
    }
    /// Where the machine's shape comes from.
    pub fn topology(&self) -> &TopologySpec {
        &self.topology
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(builder: HeapConfigBuilder) -> &'static str {
        builder.build().unwrap_err().field()
    }

    #[test]
    fn defaults_are_hotspots() {
        let config = HeapConfig::builder().build().unwrap();
        assert_eq!(config.capacity_bytes(), 64 << 20);
        assert_eq!(config.mode(), Mode::Tlab);
        assert_eq!(config.tlab(), TlabPolicy::Adaptive);
        assert_eq!(config.min_tlab_bytes(), 2048);
        assert_eq!(config.max_tlab_bytes(), 1 << 20);
        assert_eq!(config.target_refills(), 50.0);
        assert_eq!(config.refill_waste_fraction(), 64);
        assert_eq!(config.waste_increment_bytes(), 32);
        assert_eq!(config.allocation_weight_percent(), 35);
        assert_eq!(config.zero(), ZeroMemory::Ahead);
    }

    #[test]
    fn defaults_shrink_to_a_small_heap() {
        let config = HeapConfig::builder().capacity("1k").build().unwrap();
        assert_eq!(config.min_tlab_bytes(), 1024);
        assert_eq!(config.max_tlab_bytes(), 1024);
    }

    #[test]
    fn invalid_configurations_name_their_field() {
        let b = HeapConfig::builder;
        assert_eq!(field_of(b().capacity(0)), "capacity");
        assert_eq!(field_of(b().capacity("lots")), "capacity");
        assert_eq!(field_of(b().capacity(1001)), "capacity");
        assert_eq!(field_of(b().capacity("32TiB")), "capacity");
        assert_eq!(field_of(b().alignment(12)), "alignment");
        assert_eq!(field_of(b().alignment(4)), "alignment");
        assert_eq!(field_of(b().alignment(8192)), "alignment");
        assert_eq!(
            field_of(b().min_tlab("64KiB").max_tlab("16KiB")),
            "min_tlab"
        );
        assert_eq!(field_of(b().min_tlab(12)), "min_tlab");
        assert_eq!(
            field_of(b().capacity("1MiB").tlab(TlabPolicy::Fixed(2 << 20))),
            "tlab"
        );
        assert_eq!(field_of(b().tlab(TlabPolicy::Fixed(0))), "tlab");
        assert_eq!(field_of(b().capacity("1MiB").max_tlab("2MiB")), "max_tlab");
        assert_eq!(
            field_of(b().tlab(TlabPolicy::Fixed(8192)).max_tlab("4KiB")),
            "tlab"
        );
        assert_eq!(
            field_of(b().waste_target_percent(0.0)),
            "waste_target_percent"
        );
        assert_eq!(
            field_of(b().waste_target_percent(f64::NAN)),
            "waste_target_percent"
        );
        assert_eq!(
            field_of(b().refill_waste_fraction(0)),
            "refill_waste_fraction"
        );
        assert_eq!(
            field_of(b().allocation_weight_percent(0)),
            "allocation_weight_percent"
        );
        let message = b()
            .min_tlab("64KiB")
            .max_tlab("16KiB")
            .build()
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("min_tlab") && message.contains("64KiB"),
            "{message}"
        );
    }

    #[test]
    fn middle_levels_are_checked() {
        let b = || HeapConfig::builder().mode(Mode::Hab);
        let config = b().middle("core:512KiB,package:32MiB").build().unwrap();
        assert_eq!(
            config.max_tlab_bytes(),
            512 << 10,
            "the default max shrinks to the buffer"
        );
        assert_eq!(config.middle().len(), 2);
        // No levels, or `auto`: picked from the machine (a 2-CPU simulated one: `core`).
        let auto = b().simulated_topology("1x2x1").build().unwrap();
        assert_eq!(MiddleLevelSpec::list_to_string(auto.middle()), "core:2MiB");
        assert_eq!(
            b().middle("auto")
                .simulated_topology("1x2x1")
                .build()
                .unwrap(),
            auto
        );
        // Levels over a runtime's own space have no heap to size `auto` from.
        let error = check_levels(&MiddleLevelSpec::parse_list("auto").unwrap(), 0, 8).unwrap_err();
        assert!(error.to_string().contains("given explicitly"), "{error}");
        assert_eq!(
            field_of(HeapConfig::builder().middle("core:1MiB")),
            "middle"
        );
        assert_eq!(field_of(b().middle("package:32MiB,core:1MiB")), "middle");
        assert_eq!(field_of(b().middle("core:1MiB,core:2MiB")), "middle");
        assert_eq!(field_of(b().middle("core:1MiB,package:1536KiB")), "middle");
        assert_eq!(
            field_of(b().middle("core:1MiB").max_tlab("768KiB")),
            "middle"
        );
        assert_eq!(
            field_of(b().middle("core:1MiB").tlab(TlabPolicy::Fixed(3 << 10))),
            "middle"
        );
        assert_eq!(field_of(b().middle("socket:1MiB")), "middle");
        assert_eq!(field_of(b().middle("core=1MiB")), "middle");
        assert_eq!(field_of(b().middle("core:lots")), "middle");
        assert_eq!(field_of(b().middle("core:1GiB")), "middle");
        let message = b()
            .middle("core:1MiB,package:1536KiB")
            .build()
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("not a multiple of the core buffer"),
            "{message}"
        );
        assert_eq!(
            MiddleLevelSpec::list_to_string(config.middle()),
            "core:512KiB,package:32MiB"
        );
    }

    /// `auto` honours a largest TLAB given with it (fixed, or `max_tlab`): its buffers hold
    /// whole TLABs of that size. (Half of these pairs were refused, blaming `middle`.)
    #[test]
    fn auto_levels_fit_a_given_largest_tlab() {
        for capacity in ["4MiB", "16MiB", "64MiB", "1GiB"] {
            for max_tlab in ["64KiB", "768KiB", "1MiB"] {
                let config = HeapConfig::builder()
                    .mode(Mode::Hab)
                    .capacity(capacity)
                    .max_tlab(max_tlab)
                    .build()
                    .unwrap_or_else(|e| panic!("{capacity}, {max_tlab}: {e}"));
                let lowest = config.middle()[0].buffer_bytes;
                assert!(lowest.is_multiple_of(config.max_tlab_bytes()));
                assert!(config.buffers_follow_allocation());
            }
        }
        let config = HeapConfig::builder()
            .mode(Mode::Hab)
            .tlab(TlabPolicy::Fixed(24 << 10))
            .build()
            .unwrap();
        assert!(config.middle()[0].buffer_bytes.is_multiple_of(24 << 10));
        // Where no buffer of whole TLABs fits the heap, the error names the TLAB's setting.
        let error = HeapConfig::builder()
            .mode(Mode::Hab)
            .capacity("1MiB")
            .max_tlab("768KiB")
            .min_tlab("512KiB")
            .simulated_topology("1x2x1")
            .build()
            .unwrap_err();
        assert_eq!(error.field(), "max_tlab", "{error}");
        assert!(error.to_string().contains("auto levels"), "{error}");
    }

    #[test]
    fn names_parse() {
        assert_eq!("shared".parse::<Mode>().unwrap(), Mode::Shared);
        assert_eq!("tlab".parse::<Mode>().unwrap(), Mode::Tlab);
        assert_eq!("cpu-lab".parse::<Mode>().unwrap(), Mode::CpuLab);
        assert_eq!(
            "plab".parse::<Mode>().unwrap(),
            Mode::CpuLab,
            "the seed's name stays an alias"
        );
        assert_eq!("tlabs".parse::<Mode>().unwrap_err().field(), "mode");
        assert_eq!(
            "adaptive".parse::<TlabPolicy>().unwrap(),
            TlabPolicy::Adaptive
        );
        assert_eq!(
            "growing".parse::<TlabPolicy>().unwrap(),
            TlabPolicy::Growing
        );
        assert_eq!(
            "4KiB".parse::<TlabPolicy>().unwrap(),
            TlabPolicy::Fixed(4096)
        );
        assert!("big".parse::<TlabPolicy>().is_err());
        assert_eq!(TlabPolicy::Fixed(1 << 20).to_string(), "1MiB");
    }
}
