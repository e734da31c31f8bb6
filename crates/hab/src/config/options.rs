//! The options a heap is configured with: how mutators allocate ([`Mode`]), how TLABs are
//! sized ([`TlabPolicy`]), whether reused memory is zeroed ([`ZeroMemory`]), the bounds on
//! alignment and capacity, and the sizes builder methods accept.

use std::fmt;
use std::str::FromStr;

use crate::config::error::ConfigError;
use crate::memory::size::{ByteSize, SizeParseError};
pub use crate::memory::words::WORD_BYTES;

/// The smallest object alignment: one 64-bit heap word. Every address Hab hands out is a
/// multiple of it, whatever the configuration.
pub const MIN_ALIGNMENT_BYTES: usize = 8;
/// The largest object alignment a heap may be configured with (one page).
pub const MAX_ALIGNMENT_BYTES: usize = 4096;
/// The largest heap capacity: 16 TiB, well inside the user address space of 64-bit Linux.
pub const MAX_CAPACITY_BYTES: usize = 1 << 44;
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
    /// Named `cpu-lab`; `plab`, the seed's term, is accepted as an alias.
    CpuLab,
    /// Starts as [`Mode::Tlab`]; at a collection switches to [`Mode::CpuLab`] when the memory
    /// left unused in TLABs exceeded the largest LAB × the CPUs in
    /// [`CYCLES_OVER_BOUND_TO_FLIP`](crate::CYCLES_OVER_BOUND_TO_FLIP) cycles in a row (the
    /// first cycle apart), and back when the memory left unused in per-CPU LABs exceeded the
    /// largest LAB × the allocating threads (§5.2; the rule: [`FlipCycle`](crate::FlipCycle)).
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
