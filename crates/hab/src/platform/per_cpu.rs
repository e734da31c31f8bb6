//! What this process's per-CPU machinery runs on, decided once and reported the same way
//! everywhere (`hab topology`, `hab run`, the C ABI, a JVM's start-up line).

use std::fmt;

use super::cpu_id::{CpuIdReader, CpuIdSource};
use super::rseq::{self, RseqMechanism};

/// Which rseq registration this process's threads use, and the CPU-id source a heap or a set
/// of levels picks when none is given: restartable per-CPU buffers and LABs wherever the
/// threads have an rseq area (glibc's registration, or Hab's own where glibc registered none),
/// the CPU read from the area where it sits at one offset in every thread (else by
/// `sched_getcpu()`); compare-and-swap per-CPU buffers, no per-CPU LABs in restartable
/// sections, and the CPU read by `sched_getcpu()` where the kernel refuses rseq.
///
/// ```
/// let support = hab::per_cpu_support();
/// if !support.restartable() {
///     assert_eq!(support.cpu_id, hab::CpuIdSource::GetCpu);
/// }
/// println!("{support}"); // one line for a log
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct PerCpuSupport {
    /// How threads get their rseq areas, or why they have none.
    pub registration: RseqMechanism,
    /// The CPU-id source chosen when none is given: `Rseq` or `GetCpu`.
    pub cpu_id: CpuIdSource,
}

impl PerCpuSupport {
    /// Whether per-CPU buffers and LABs can be restartable here.
    pub fn restartable(&self) -> bool {
        !matches!(self.registration, RseqMechanism::Unavailable(_))
    }

    /// A reader of [`cpu_id`](PerCpuSupport::cpu_id) for `cpu_slots`, falling back to
    /// `GetCpu` should the calling thread's area be refused.
    pub fn cpu_id_reader(&self, cpu_slots: usize) -> Result<CpuIdReader, String> {
        CpuIdReader::new(self.cpu_id, cpu_slots)
            .or_else(|_| CpuIdReader::new(CpuIdSource::GetCpu, cpu_slots))
    }
}

/// The process's [`PerCpuSupport`] (the registration is decided by the first call of any of
/// Hab's rseq functions, in the thread that makes it).
pub fn per_cpu_support() -> PerCpuSupport {
    let registration = rseq::mechanism().clone();
    // The CPU is read from the area where every thread's sits at one offset.
    let cpu_id = match rseq::area_offset() {
        Some(_) => CpuIdSource::Rseq,
        None => CpuIdSource::GetCpu,
    };
    PerCpuSupport {
        registration,
        cpu_id,
    }
}

/// One line: `restartable per-CPU buffers, CPU id rseq; rseq areas: glibc's registration
/// (offset 2336)`, or with compare-and-swap and the reason rseq is unavailable.
impl fmt::Display for PerCpuSupport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let buffers = if self.restartable() {
            "restartable"
        } else {
            "compare-and-swap"
        };
        write!(
            f,
            "{buffers} per-CPU buffers, CPU id {}; rseq areas: {}",
            self.cpu_id, self.registration
        )
    }
}
