//! Which CPU am I on: the sources of the current CPU number.
//!
//! A per-CPU buffer is chosen by the CPU the thread runs on, read at every TLAB refill. The
//! reading is a hint, not a lock: the thread may migrate right after it, so a wrong answer costs
//! contention, never correctness. Four sources, cheapest first:
//!
//! | source | how | cost here |
//! | --- | --- | --- |
//! | [`CpuIdSource::Rseq`] | load `cpu_id` from the thread's rseq area (glibc's or Hab's own) | a load |
//! | [`CpuIdSource::Rdpid`] | the RDPID instruction: Linux keeps the CPU in `TSC_AUX` | one instruction |
//! | [`CpuIdSource::GetCpu`] | `sched_getcpu()`, a vDSO call | a call |
//! | [`CpuIdSource::Simulated`] | a virtual CPU per thread that migrates at random | a load |
//!
//! A [`CpuIdReader`] checks once that its source works here, then reads it with
//! [`CpuIdReader::current`]; every reading is in `0..cpu_slots`.

use std::fmt;
use std::str::FromStr;

/// Where the current CPU number comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CpuIdSource {
    /// A plain load of `cpu_id` from the thread's rseq area: glibc's registration where it has
    /// one (found at run time), else Hab's own ([`RseqMechanism`](crate::RseqMechanism)).
    Rseq,
    /// `sched_getcpu()` (glibc, vDSO-backed).
    GetCpu,
    /// The RDPID instruction (x86_64 CPUs that have it; Linux keeps the CPU number in
    /// `TSC_AUX`'s low 12 bits).
    Rdpid,
    /// A simulated CPU per thread that migrates with the given probability at every allocation
    /// slow path; deterministic for a seed. For tests and for studying machines larger than this
    /// one. In a heap, the mutator with [`id`](crate::Mutator::id) `i` is thread `i` of
    /// [`SimulatedCpu::new`], and it may migrate once per TLAB refill, before the refill reads
    /// its CPU (so a simulated thread never moves between choosing a domain and committing).
    Simulated {
        /// Seeds every thread's generator (with the thread's index).
        seed: u64,
        /// Probability, in `0.0..=1.0`, that a thread migrates at a slow path.
        migrate_probability: f64,
    },
}

impl CpuIdSource {
    /// Every source's name, as [`CpuIdSource::name`] spells it.
    pub const NAMES: [&'static str; 4] = ["rseq", "getcpu", "rdpid", "sim"];

    /// Migration probability of `sim` when none is given.
    const DEFAULT_MIGRATE_PROBABILITY: f64 = 0.01;

    /// Seed of `sim` when none is given.
    const DEFAULT_SEED: u64 = 1;

    /// The source's name: `rseq`, `getcpu`, `rdpid` or `sim` (without its parameters).
    pub fn name(&self) -> &'static str {
        match self {
            CpuIdSource::Rseq => "rseq",
            CpuIdSource::GetCpu => "getcpu",
            CpuIdSource::Rdpid => "rdpid",
            CpuIdSource::Simulated { .. } => "sim",
        }
    }
}

/// Prints the name, and for `sim` its parameters (`sim:<probability>:<seed>`), so that the text
/// parses back to the same source.
impl fmt::Display for CpuIdSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuIdSource::Simulated {
                seed,
                migrate_probability,
            } => write!(f, "sim:{migrate_probability}:{seed}"),
            source => f.write_str(source.name()),
        }
    }
}

/// Parses `rseq`, `getcpu`, `rdpid`, `sim`, `sim:<probability>` or `sim:<probability>:<seed>`
/// (probability 0.01 and seed 1 when left out).
impl FromStr for CpuIdSource {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut parts = text.split(':');
        let name = parts.next().unwrap_or_default();
        let source = match name {
            "rseq" => CpuIdSource::Rseq,
            "getcpu" => CpuIdSource::GetCpu,
            "rdpid" => CpuIdSource::Rdpid,
            "sim" => {
                let migrate_probability = match parts.next() {
                    None => Self::DEFAULT_MIGRATE_PROBABILITY,
                    Some(probability) => parse_probability(probability)?,
                };
                let seed = match parts.next() {
                    None => Self::DEFAULT_SEED,
                    Some(seed) => seed.parse().map_err(|_| {
                        format!("{seed:?} in {text:?} is not a seed (an integer in 0..2^64)")
                    })?,
                };
                CpuIdSource::Simulated {
                    seed,
                    migrate_probability,
                }
            }
            _ => {
                return Err(format!(
                    "{text:?} is not a CPU id source; expected rseq, getcpu, rdpid, sim, \
                     sim:<probability> or sim:<probability>:<seed>"
                ))
            }
        };
        match parts.next() {
            None => Ok(source),
            Some(_) if name == "sim" => Err(format!(
                "{text:?} has too many parts; expected sim:<probability>:<seed>"
            )),
            Some(_) => Err(format!("{text:?}: the source {name} takes no parameters")),
        }
    }
}

/// Parses a migration probability, checked by [`check_probability`].
fn parse_probability(text: &str) -> Result<f64, String> {
    let probability = text
        .parse::<f64>()
        .map_err(|_| format!("{text:?} is not a migration probability (a number in 0..=1)"))?;
    check_probability(probability)?;
    Ok(probability)
}

/// Accepts a probability in `0.0..=1.0` (not NaN).
fn check_probability(probability: f64) -> Result<(), String> {
    if (0.0..=1.0).contains(&probability) {
        Ok(())
    } else {
        Err(format!(
            "migration probability {probability} is not in 0..=1"
        ))
    }
}

/// A ready-to-use reader for one source, shared by all threads of a heap.
///
/// Only [`CpuIdReader::new`] makes one, after checking that the source works on this machine:
/// holding a reader is what makes its unchecked readings sound.
#[derive(Clone, Copy, Debug)]
pub struct CpuIdReader {
    source: CpuIdSource,
    /// Readings are clamped to `0..cpu_slots`; at least 1.
    cpu_slots: usize,
    /// For [`CpuIdSource::Rseq`]: the offset of `cpu_id` from the thread pointer
    /// (the area's offset plus 4), valid in every thread of the process. 0 otherwise.
    rseq_cpu_id_offset: isize,
    /// `source` is `Rseq`: the same fact, kept apart so that `current` tests it with one
    /// compare (tested on `source`, the compiler merged it back into the jump table).
    reads_rseq: bool,
}

impl CpuIdReader {
    /// Checks that `source` works here and makes a reader for it.
    ///
    /// - `Rseq` needs an rseq area registered for the calling thread (`cpu_id >= 0`): glibc's
    ///   (found at run time: `__rseq_offset` and `__rseq_size > 0`, looked up with `dlsym`), or
    ///   where glibc registered none, Hab's own (see [`RseqMechanism`](crate::RseqMechanism)).
    /// - `Rdpid` needs an x86_64 CPU with RDPID (`CPUID.(EAX=7,ECX=0):ECX[22]`) whose reading
    ///   agrees with `sched_getcpu()`.
    /// - `GetCpu` needs `sched_getcpu() >= 0`.
    /// - `Simulated` needs a migration probability in `0..=1`.
    ///
    /// `Rseq` and `Rdpid` are available on x86_64 Linux only. `cpu_slots` (at least 1) bounds
    /// the readings: simulated CPUs are in `0..cpu_slots`, a real CPU number is taken modulo
    /// `cpu_slots`. The error says why the source is unavailable.
    pub fn new(source: CpuIdSource, cpu_slots: usize) -> Result<CpuIdReader, String> {
        if cpu_slots == 0 {
            return Err("cpu_slots must be at least 1".to_string());
        }
        let mut reader = CpuIdReader {
            source,
            cpu_slots,
            rseq_cpu_id_offset: 0,
            reads_rseq: matches!(source, CpuIdSource::Rseq),
        };
        match source {
            CpuIdSource::Rseq => reader.rseq_cpu_id_offset = rseq::cpu_id_offset()?,
            CpuIdSource::GetCpu => {
                let cpu = sched_getcpu();
                if cpu < 0 {
                    return Err(format!(
                        "sched_getcpu() is unavailable here: it returned {cpu} ({})",
                        std::io::Error::last_os_error()
                    ));
                }
            }
            CpuIdSource::Rdpid => rdpid::check()?,
            CpuIdSource::Simulated {
                migrate_probability,
                ..
            } => check_probability(migrate_probability)?,
        }
        Ok(reader)
    }

    /// The source this reader reads.
    pub fn source(&self) -> CpuIdSource {
        self.source
    }

    /// For the `Rseq` source, the offset of `cpu_id` from the thread pointer, valid in every
    /// thread of the process, for a caller that reads the CPU itself
    /// ([`read_rseq_cpu`]); `None` for the other sources.
    pub(crate) fn rseq_cpu_id_offset(&self) -> Option<isize> {
        self.reads_rseq.then_some(self.rseq_cpu_id_offset)
    }

    /// The CPU the calling thread runs on now, in `0..cpu_slots`.
    ///
    /// `thread` is the calling thread's state; only the simulated source reads it. For `Rseq`
    /// this is one load relative to the thread pointer (falling back to `sched_getcpu()` in a
    /// thread whose area is not registered), for `Rdpid` one instruction.
    #[inline]
    pub fn current(&self, thread: &SimulatedCpu) -> usize {
        // The usual source is tested first, on its own flag: one compare, where the `match`
        // alone jumps through a table.
        let cpu = if self.reads_rseq {
            self.rseq_cpu()
        } else {
            match self.source {
                CpuIdSource::Rseq => self.rseq_cpu(),
                CpuIdSource::Rdpid => self.rdpid_cpu(),
                CpuIdSource::GetCpu => sched_getcpu_or_zero(),
                CpuIdSource::Simulated { .. } => thread.cpu,
            }
        };
        // A branch the predictor always gets right, instead of a division at every reading.
        if cpu < self.cpu_slots {
            cpu
        } else {
            cpu % self.cpu_slots
        }
    }

    /// `Some(now)`, a reading as [`current`](CpuIdReader::current) gives it, when the calling
    /// thread no longer runs on `cpu` (a reading of this reader); `None` when it still does.
    /// With `Rseq` the common answer is one load and one compare: the check after a carve that
    /// counts the carves a migration made foreign.
    ///
    /// ```
    /// use hab::{CpuIdReader, CpuIdSource, SimulatedCpu};
    /// let source = CpuIdSource::Simulated { seed: 1, migrate_probability: 0.0 };
    /// let reader = CpuIdReader::new(source, 4)?;
    /// let thread = SimulatedCpu::new(&reader, 2);
    /// let cpu = reader.current(&thread);
    /// assert_eq!(reader.moved_from(cpu, &thread), None);
    /// assert_eq!(reader.moved_from((cpu + 1) % 4, &thread), Some(cpu));
    /// # Ok::<(), String>(())
    /// ```
    #[inline]
    pub fn moved_from(&self, cpu: usize, thread: &SimulatedCpu) -> Option<usize> {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        if self.reads_rseq {
            // SAFETY: as in `rseq_cpu`: this reader was made for `Rseq` after finding a
            // registration, so the offset locates `cpu_id` in every thread's area.
            // An unregistered area's negative reading never equals a CPU in `0..cpu_slots`.
            if unsafe { read_rseq_cpu(self.rseq_cpu_id_offset) } == cpu {
                return None;
            }
        }
        let now = self.current(thread);
        (now != cpu).then_some(now)
    }

    /// Called by the allocation slow path: a simulated thread migrates to a random other CPU
    /// with the configured probability. No-op for real sources.
    #[inline]
    pub fn on_slow_path(&self, thread: &mut SimulatedCpu) {
        if let CpuIdSource::Simulated {
            migrate_probability,
            ..
        } = self.source
        {
            thread.maybe_migrate(migrate_probability, self.cpu_slots);
        }
    }

    /// `cpu_id` of the calling thread's rseq area, or `sched_getcpu()` if it is not registered.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[inline(always)]
    fn rseq_cpu(&self) -> usize {
        // SAFETY: `new` made this reader for `Rseq` only after finding the rseq areas' offset
        // (glibc's, in every thread's control block, or Hab's own, in every thread's static
        // TLS), so `rseq_cpu_id_offset` locates the `cpu_id` field of the calling thread's.
        let cpu = unsafe { rseq::read_cpu_id(self.rseq_cpu_id_offset) };
        if cpu >= 0 {
            cpu as usize
        } else {
            unregistered_thread_cpu()
        }
    }

    /// Unreachable: `new` refuses `Rseq` on this target.
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    #[inline(always)]
    fn rseq_cpu(&self) -> usize {
        sched_getcpu_or_zero()
    }

    /// The CPU number RDPID reads.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[inline(always)]
    fn rdpid_cpu(&self) -> usize {
        // SAFETY: `new` made this reader for `Rdpid` only after CPUID reported the instruction.
        unsafe { rdpid::read_cpu() }
    }

    /// Unreachable: `new` refuses `Rdpid` on this target.
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    #[inline(always)]
    fn rdpid_cpu(&self) -> usize {
        sched_getcpu_or_zero()
    }
}

/// The rseq fallback, out of line: a thread whose area reads −1 (not registered yet: Hab's own
/// registration registers it now) or −2 (registration failed: `sched_getcpu()`).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[cold]
#[inline(never)]
fn unregistered_thread_cpu() -> usize {
    if let Some(area_offset) = crate::platform::rseq::area_offset() {
        if crate::platform::rseq::register_current_thread() {
            // SAFETY: rseq works and its areas sit at `area_offset` in every thread, so
            // `cpu_id` is 4 bytes further in the calling thread's.
            let cpu = unsafe { rseq::read_cpu_id(area_offset + 4) };
            if cpu >= 0 {
                return cpu as usize;
            }
        }
    }
    sched_getcpu_or_zero()
}

/// One reading of the calling thread's `cpu_id` at `cpu_id_offset` from its thread pointer
/// (a [`CpuIdReader::rseq_cpu_id_offset`]): its CPU, or, in a thread whose area is not
/// registered, a number above every CPU (the negative reading as an unsigned one). One load.
///
/// # Safety
/// `cpu_id_offset` came from [`CpuIdReader::rseq_cpu_id_offset`].
#[inline(always)]
pub(crate) unsafe fn read_rseq_cpu(cpu_id_offset: isize) -> usize {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        // SAFETY: the reader found an rseq area at this offset in every thread.
        unsafe { rseq::read_cpu_id(cpu_id_offset) as u32 as usize }
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    {
        let _ = cpu_id_offset;
        usize::MAX
    }
}

/// `sched_getcpu()`, or −1 where the C library has none.
fn sched_getcpu() -> i32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getcpu has no preconditions.
        unsafe { libc::sched_getcpu() }
    }
    #[cfg(not(target_os = "linux"))]
    {
        -1
    }
}

/// `sched_getcpu()`, or CPU 0 if it fails (it does not once `new` saw it work).
#[inline]
fn sched_getcpu_or_zero() -> usize {
    usize::try_from(sched_getcpu()).unwrap_or(0)
}

/// Finding and reading glibc's rseq area.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod rseq {
    use std::arch::asm;

    /// Offset of `cpu_id` inside `struct rseq`.
    const CPU_ID_OFFSET: isize = 4;

    /// The offset of `cpu_id` from every thread's pointer (the rseq area's offset plus 4),
    /// where rseq works (glibc's registration or Hab's own) and the calling thread's area is
    /// registered.
    pub(super) fn cpu_id_offset() -> Result<isize, String> {
        use crate::platform::rseq::{self as areas, RseqMechanism};
        // Counting instructions under valgrind (`HAB_RSEQ=unregistered`): read the area's
        // `cpu_id_start`, which nothing writes there (0: CPU 0), so that a CPU reading costs
        // the one load it costs where glibc registered the area, not a `sched_getcpu`.
        if let RseqMechanism::Unregistered { offset } = areas::mechanism() {
            return Ok(*offset);
        }
        let Some(area_offset) = areas::area_offset() else {
            return Err(match areas::mechanism() {
                RseqMechanism::Own { .. } => "the rseq areas are thread-local here (Hab's own \
                                              registration): no offset common to every thread \
                                              to read the CPU at"
                    .to_string(),
                mechanism => format!("no rseq area: {mechanism}"),
            });
        };
        let cpu_id_offset = area_offset + CPU_ID_OFFSET;
        areas::register_current_thread();
        // SAFETY: rseq works here, so every thread has an area at `area_offset` from its
        // thread pointer (glibc's in its control block, or Hab's own in its static TLS).
        let cpu = unsafe { read_cpu_id(cpu_id_offset) };
        if cpu < 0 {
            return Err(format!(
                "the calling thread's rseq area is not registered (cpu_id reads {cpu})"
            ));
        }
        Ok(cpu_id_offset)
    }

    /// Reads the `u32` at `fs:[cpu_id_offset]`, as the signed `cpu_id`.
    ///
    /// # Safety
    ///
    /// `cpu_id_offset` came from [`cpu_id_offset`], and the calling thread is a glibc thread
    /// (its `fs` base is its thread pointer).
    #[inline(always)]
    pub(super) unsafe fn read_cpu_id(cpu_id_offset: isize) -> i32 {
        let cpu: u32;
        // SAFETY: by the caller's contract the address is the aligned `cpu_id` field inside the
        // calling thread's control block, live as long as the thread; the kernel writes it, so
        // the asm is not `pure` (each call reads it again).
        unsafe {
            asm!(
                "mov {:e}, dword ptr fs:[{}]",
                out(reg) cpu,
                in(reg) cpu_id_offset,
                options(nostack, readonly, preserves_flags),
            );
        }
        cpu as i32
    }
}

/// Stub for targets without glibc's rseq on x86_64.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
mod rseq {
    /// Always an error on this target.
    pub(super) fn cpu_id_offset() -> Result<isize, String> {
        Err("the rseq source is implemented for x86_64 Linux only".to_string())
    }
}

/// The RDPID instruction.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod rdpid {
    use std::arch::asm;
    use std::arch::x86_64::{__cpuid_count, __get_cpuid_max};

    /// How often a reading is compared with `sched_getcpu()` before giving up (the thread may
    /// migrate between the two).
    const ATTEMPTS: usize = 10;

    /// Checks that the CPU has RDPID and that it reads the CPU the kernel reports.
    pub(super) fn check() -> Result<(), String> {
        // Safe functions since Rust 1.87, unsafe before.
        // SAFETY: CPUID exists on every x86_64 CPU; leaf 7 is read only if the CPU has it.
        #[allow(unused_unsafe)]
        let has_rdpid = unsafe {
            let (max_leaf, _) = __get_cpuid_max(0);
            max_leaf >= 7 && __cpuid_count(7, 0).ecx & (1 << 22) != 0
        };
        if !has_rdpid {
            return Err("this CPU has no RDPID instruction (CPUID.7.0:ECX[22] is 0)".to_string());
        }
        let mut last = (0, 0);
        for _ in 0..ATTEMPTS {
            // SAFETY: CPUID just reported RDPID.
            let before = unsafe { read_cpu() };
            let kernel = super::sched_getcpu();
            // SAFETY: as above.
            let after = unsafe { read_cpu() };
            if before == after && usize::try_from(kernel) == Ok(before) {
                return Ok(());
            }
            last = (before, kernel);
        }
        Err(format!(
            "RDPID does not read the CPU number here: it read {} while sched_getcpu() said {} \
             ({ATTEMPTS} attempts)",
            last.0, last.1
        ))
    }

    /// The low 12 bits of `TSC_AUX`, where Linux keeps the CPU number (the node is above them).
    ///
    /// # Safety
    ///
    /// The CPU has RDPID.
    #[inline(always)]
    pub(super) unsafe fn read_cpu() -> usize {
        let aux: u64;
        // SAFETY: the caller guarantees the instruction exists; it reads a register only.
        unsafe {
            asm!("rdpid {}", out(reg) aux, options(nomem, nostack, preserves_flags));
        }
        (aux & 0xfff) as usize
    }
}

/// Stub for targets other than x86_64 Linux.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
mod rdpid {
    /// Always an error on this target.
    pub(super) fn check() -> Result<(), String> {
        Err("the rdpid source is implemented for x86_64 Linux only".to_string())
    }
}

/// Per-thread state of the simulated source (a virtual CPU and a random generator); real
/// sources ignore it.
#[derive(Clone, Debug)]
pub struct SimulatedCpu {
    /// The virtual CPU.
    cpu: usize,
    /// splitmix64 state.
    random: u64,
    migrations: u64,
}

impl SimulatedCpu {
    /// The state of the `thread_index`-th thread of a heap: starts on CPU
    /// `thread_index % cpu_slots`, with a generator seeded from the source's seed and
    /// `thread_index`, so runs with the same seed migrate alike.
    pub fn new(reader: &CpuIdReader, thread_index: u64) -> SimulatedCpu {
        let seed = match reader.source {
            CpuIdSource::Simulated { seed, .. } => seed,
            _ => 0,
        };
        let slots = reader.cpu_slots as u64;
        SimulatedCpu {
            cpu: (thread_index % slots) as usize,
            random: mix(seed) ^ mix(thread_index.wrapping_add(GOLDEN_GAMMA)),
            migrations: 0,
        }
    }

    /// Migrations so far.
    pub fn migrations(&self) -> u64 {
        self.migrations
    }

    /// With probability `probability`, moves to a CPU other than the current one, uniformly
    /// chosen in `0..cpu_slots`.
    fn maybe_migrate(&mut self, probability: f64, cpu_slots: usize) {
        if cpu_slots < 2 {
            return;
        }
        // 53 random bits as a number in 0..1: below 1.0 always migrates, 0.0 never does.
        let draw = (self.next_random() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        if draw >= probability {
            return;
        }
        let other = (self.next_random() % (cpu_slots as u64 - 1)) as usize;
        let current = self.cpu.min(cpu_slots - 1);
        self.cpu = if other >= current { other + 1 } else { other };
        self.migrations += 1;
    }

    /// splitmix64 (Steele, Lea, Flood).
    fn next_random(&mut self) -> u64 {
        self.random = self.random.wrapping_add(GOLDEN_GAMMA);
        mix(self.random)
    }
}

/// splitmix64's increment: 2^64 divided by the golden ratio.
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// splitmix64's output function.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real sources.
    const REAL: [CpuIdSource; 3] = [CpuIdSource::Rseq, CpuIdSource::GetCpu, CpuIdSource::Rdpid];

    /// Larger than any CPU number, so that readings are not clamped.
    const MANY_SLOTS: usize = 4096;

    /// Whether the environment turned glibc's rseq registration off.
    #[cfg(target_os = "linux")]
    fn rseq_disabled() -> bool {
        std::env::var("GLIBC_TUNABLES").is_ok_and(|tunables| {
            tunables
                .split(':')
                .any(|tunable| tunable == "glibc.pthread.rseq=0")
        })
    }

    fn sim(seed: u64, migrate_probability: f64) -> CpuIdSource {
        CpuIdSource::Simulated {
            seed,
            migrate_probability,
        }
    }

    #[test]
    fn parses_names() {
        assert_eq!("rseq".parse(), Ok(CpuIdSource::Rseq));
        assert_eq!("getcpu".parse(), Ok(CpuIdSource::GetCpu));
        assert_eq!("rdpid".parse(), Ok(CpuIdSource::Rdpid));
        assert_eq!("sim".parse(), Ok(sim(1, 0.01)));
        assert_eq!("sim:0.5".parse(), Ok(sim(1, 0.5)));
        assert_eq!("sim:1:42".parse(), Ok(sim(42, 1.0)));
        assert_eq!("sim:0:0".parse(), Ok(sim(0, 0.0)));
        for source in [
            CpuIdSource::Rseq,
            CpuIdSource::GetCpu,
            CpuIdSource::Rdpid,
            sim(7, 0.25),
            sim(u64::MAX, 0.1),
        ] {
            assert_eq!(source.to_string().parse(), Ok(source));
        }
        for (source, name) in REAL.iter().chain([&sim(1, 0.0)]).zip(CpuIdSource::NAMES) {
            assert_eq!(source.name(), name);
        }
    }

    #[test]
    fn rejects_bad_names() {
        for text in [
            "",
            "RSEQ",
            " rseq",
            "cpu",
            "rseq:1",
            "getcpu:",
            "sim:",
            "sim:x",
            "sim:-0.1",
            "sim:1.5",
            "sim:NaN",
            "sim:inf",
            "sim:0.5:",
            "sim:0.5:-1",
            "sim:0.5:1:2",
            "sim::1",
        ] {
            let error = text.parse::<CpuIdSource>().unwrap_err();
            assert!(!error.is_empty(), "{text:?}");
        }
    }

    #[test]
    fn new_rejects_bad_parameters() {
        assert!(CpuIdReader::new(CpuIdSource::GetCpu, 0).is_err());
        assert!(CpuIdReader::new(sim(1, 0.5), 0).is_err());
        assert!(CpuIdReader::new(sim(1, f64::NAN), 4).is_err());
        assert!(CpuIdReader::new(sim(1, -1.0), 4).is_err());
        assert!(CpuIdReader::new(sim(1, 2.0), 4).is_err());
    }

    #[test]
    fn reader_is_send_and_sync() {
        fn shared<T: Send + Sync + Copy>() {}
        shared::<CpuIdReader>();
    }

    /// The CPUs this thread may run on.
    #[cfg(target_os = "linux")]
    fn allowed_cpus() -> Vec<usize> {
        // SAFETY: an all-zero cpu_set_t is a valid, empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a writable cpu_set_t of the size passed.
        let result = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
        assert_eq!(result, 0, "{}", std::io::Error::last_os_error());
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `cpu` is below CPU_SETSIZE.
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .collect()
    }

    /// Pins the calling thread to `cpu`.
    #[cfg(target_os = "linux")]
    fn pin(cpu: usize) {
        // SAFETY: an all-zero cpu_set_t is a valid, empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `cpu` comes from `allowed_cpus`, below CPU_SETSIZE.
        unsafe { libc::CPU_SET(cpu, &mut set) };
        // SAFETY: `set` is a cpu_set_t of the size passed.
        let result = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
        assert_eq!(result, 0, "{}", std::io::Error::last_os_error());
    }

    /// The sources `new` accepts here.
    fn accepted(cpu_slots: usize) -> Vec<CpuIdReader> {
        REAL.iter()
            .filter_map(|&source| CpuIdReader::new(source, cpu_slots).ok())
            .collect()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn availability_matches_the_machine() {
        assert!(CpuIdReader::new(CpuIdSource::GetCpu, 1).is_ok());
        let rseq = CpuIdReader::new(CpuIdSource::Rseq, 1);
        // Wherever rseq works (glibc's registration or Hab's own), the source works; where the
        // kernel refuses it, its error says why.
        if let crate::RseqMechanism::Unavailable(why) = crate::rseq_mechanism() {
            let error = rseq.unwrap_err();
            assert!(error.contains(why.as_str()), "{error}");
        } else if let crate::RseqMechanism::Own { offset: None, .. } = crate::rseq_mechanism() {
            let error = rseq.unwrap_err();
            assert!(error.contains("thread-local"), "{error}");
        } else if cfg!(all(
            target_os = "linux",
            target_arch = "x86_64",
            target_env = "gnu"
        )) {
            rseq.unwrap();
        }
        for source in REAL {
            match CpuIdReader::new(source, 1) {
                Ok(_) => eprintln!("{source}: available"),
                Err(error) => eprintln!("{source}: unavailable: {error}"),
            }
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn real_sources_agree_with_sched_getcpu_when_pinned() {
        std::thread::spawn(|| {
            let readers = accepted(MANY_SLOTS);
            let clamped = accepted(3);
            let thread = SimulatedCpu::new(&readers[0], 0);
            for cpu in allowed_cpus() {
                pin(cpu);
                assert_eq!(sched_getcpu(), cpu as i32);
                for reader in &readers {
                    assert_eq!(reader.current(&thread), cpu, "{}", reader.source());
                    assert_eq!(reader.moved_from(cpu, &thread), None, "{}", reader.source());
                    let other = (cpu + 1) % MANY_SLOTS;
                    let moved = reader.moved_from(other, &thread);
                    assert_eq!(moved, Some(cpu), "{}", reader.source());
                }
                for reader in &clamped {
                    assert_eq!(reader.current(&thread), cpu % 3, "{}", reader.source());
                    assert_eq!(
                        reader.moved_from(cpu % 3, &thread),
                        None,
                        "{}",
                        reader.source()
                    );
                    let moved = reader.moved_from((cpu + 1) % 3, &thread);
                    assert_eq!(moved, Some(cpu % 3), "{}", reader.source());
                }
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn real_sources_stay_below_cpu_slots() {
        for cpu_slots in [1, 2, 3, MANY_SLOTS] {
            for reader in accepted(cpu_slots) {
                let mut thread = SimulatedCpu::new(&reader, 5);
                for _ in 0..1000 {
                    reader.on_slow_path(&mut thread);
                    assert!(reader.current(&thread) < cpu_slots);
                }
                assert_eq!(thread.migrations(), 0);
            }
        }
    }

    /// Reads `cpu_id` through a pointer: thread pointer (`fs:[0]`) + `__rseq_offset` + 4.
    #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
    fn cpu_id_through_pointer(cpu_id_offset: isize) -> i32 {
        let thread_pointer: usize;
        // SAFETY: on x86_64 Linux, `fs:[0]` holds the thread control block's own address.
        unsafe {
            std::arch::asm!(
                "mov {}, qword ptr fs:[0]",
                out(reg) thread_pointer,
                options(nostack, readonly, preserves_flags),
            );
        }
        let field = thread_pointer.wrapping_add_signed(cpu_id_offset) as *const u32;
        // SAFETY: the offset is glibc's, so the field lies in this thread's control block.
        unsafe { field.read_volatile() as i32 }
    }

    #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
    #[test]
    fn rseq_area_is_where_the_registration_says() {
        use crate::platform::rseq::{mechanism, RseqMechanism};
        let offset = rseq::cpu_id_offset();
        let cpu_id_offset = match mechanism() {
            RseqMechanism::Unavailable(why) => {
                let error = offset.unwrap_err();
                assert!(error.contains(why.as_str()), "{error}");
                return;
            }
            // The area is in glibc's `struct pthread`, above the thread pointer (2336 here).
            RseqMechanism::Glibc { .. } => {
                assert!(!rseq_disabled());
                let cpu_id_offset = offset.unwrap();
                assert!(cpu_id_offset - 4 > 0, "{cpu_id_offset}");
                cpu_id_offset
            }
            RseqMechanism::Own { offset: None, .. } => {
                assert!(offset.unwrap_err().contains("thread-local"));
                return;
            }
            // Hab registers the area glibc left unused, at the same place.
            RseqMechanism::Own {
                offset: Some(area_offset),
                ..
            } => {
                assert!(rseq_disabled());
                assert_eq!(*area_offset, lookup_rseq_offset());
                let cpu_id_offset = offset.unwrap();
                assert_eq!(cpu_id_offset - 4, *area_offset);
                cpu_id_offset
            }
            other => panic!("{other}"),
        };
        assert_eq!(cpu_id_offset % 4, 0);
        let reader = CpuIdReader::new(CpuIdSource::Rseq, MANY_SLOTS).unwrap();
        std::thread::spawn(move || {
            let thread = SimulatedCpu::new(&reader, 0);
            for cpu in allowed_cpus() {
                pin(cpu);
                // A new thread's own area registers at its first reading.
                assert_eq!(reader.current(&thread), cpu);
                assert_eq!(cpu_id_through_pointer(cpu_id_offset), cpu as i32);
            }
        })
        .join()
        .unwrap();
    }

    #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
    #[test]
    fn rseq_disabled_leaves_cpu_id_negative() {
        if !rseq_disabled() {
            return;
        }
        // glibc still places the area; the kernel never filled it.
        let offset = lookup_rseq_offset();
        assert_eq!(cpu_id_through_pointer(offset + 4), -2);
        // The rseq source reads Hab's own area instead, where the kernel allows one.
        let own = CpuIdReader::new(CpuIdSource::Rseq, 8);
        assert_eq!(
            own.is_ok(),
            crate::platform::rseq::register_current_thread()
                && crate::platform::rseq::area_offset().is_some(),
            "{own:?}"
        );
        // A reader forced onto the unregistered area falls back to sched_getcpu().
        let reader = CpuIdReader {
            source: CpuIdSource::Rseq,
            cpu_slots: MANY_SLOTS,
            rseq_cpu_id_offset: offset + 4,
            reads_rseq: true,
        };
        std::thread::spawn(move || {
            let thread = SimulatedCpu::new(&reader, 0);
            for cpu in allowed_cpus() {
                pin(cpu);
                assert_eq!(reader.current(&thread), cpu);
            }
        })
        .join()
        .unwrap();
    }

    /// `__rseq_offset`, whether or not glibc registered areas.
    #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
    fn lookup_rseq_offset() -> isize {
        crate::platform::rseq::glibc_offset_even_unregistered()
            .expect("glibc exports __rseq_offset")
    }

    /// The CPUs a simulated thread visits over `slow_paths` slow paths.
    fn simulated_trace(source: CpuIdSource, cpu_slots: usize, thread_index: u64) -> Vec<usize> {
        let reader = CpuIdReader::new(source, cpu_slots).unwrap();
        let mut thread = SimulatedCpu::new(&reader, thread_index);
        (0..1000)
            .map(|_| {
                reader.on_slow_path(&mut thread);
                reader.current(&thread)
            })
            .collect()
    }

    #[test]
    fn simulated_is_deterministic() {
        let source = sim(99, 0.3);
        let trace = simulated_trace(source, 16, 3);
        assert_eq!(trace, simulated_trace(source, 16, 3));
        assert_ne!(trace, simulated_trace(sim(100, 0.3), 16, 3));
        assert_ne!(trace, simulated_trace(source, 16, 4));
        assert!(trace.iter().all(|&cpu| cpu < 16));
        // Roughly 30% of the slow paths migrate.
        let migrations = trace.windows(2).filter(|pair| pair[0] != pair[1]).count();
        assert!((200..400).contains(&migrations), "{migrations}");
    }

    #[test]
    fn simulated_starts_on_thread_index_modulo_slots() {
        let reader = CpuIdReader::new(sim(1, 0.5), 4).unwrap();
        for index in 0..10 {
            let thread = SimulatedCpu::new(&reader, index);
            assert_eq!(reader.current(&thread), index as usize % 4);
            assert_eq!(thread.migrations(), 0);
        }
    }

    #[test]
    fn simulated_probability_zero_never_migrates() {
        let reader = CpuIdReader::new(sim(5, 0.0), 8).unwrap();
        let mut thread = SimulatedCpu::new(&reader, 3);
        for _ in 0..1000 {
            reader.on_slow_path(&mut thread);
            assert_eq!(reader.current(&thread), 3);
        }
        assert_eq!(thread.migrations(), 0);
    }

    #[test]
    fn simulated_probability_one_always_migrates() {
        for cpu_slots in [2, 3, 64] {
            let reader = CpuIdReader::new(sim(5, 1.0), cpu_slots).unwrap();
            let mut thread = SimulatedCpu::new(&reader, 1);
            let mut seen = vec![false; cpu_slots];
            for step in 1..=1000 {
                let before = reader.current(&thread);
                reader.on_slow_path(&mut thread);
                let after = reader.current(&thread);
                assert_ne!(before, after);
                assert!(after < cpu_slots);
                assert_eq!(thread.migrations(), step);
                seen[after] = true;
            }
            assert!(seen.iter().all(|&seen| seen), "{cpu_slots}: {seen:?}");
        }
        // A single CPU leaves nowhere to go.
        let reader = CpuIdReader::new(sim(5, 1.0), 1).unwrap();
        let mut thread = SimulatedCpu::new(&reader, 7);
        reader.on_slow_path(&mut thread);
        assert_eq!((reader.current(&thread), thread.migrations()), (0, 0));
    }
}
