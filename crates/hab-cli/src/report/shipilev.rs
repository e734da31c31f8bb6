//! Shipilëv's experiment: allocation throughput against TLAB size (`alloc-array`), the same
//! with and without zeroing, with a per-core middle level under the TLABs, and HotSpot's
//! Epsilon GC beside Hab, both doing the same work per object.
//!
//! What the runs say, and the report's section, is `shipilev_section.rs`.

use std::fmt::Write as _;

use hab::{Level, MiddleLevelSpec, Mode, TlabPolicy, ZeroMemory};

use super::claims::Verdict;
use super::costs::{Costs, SHARED_OBJECTS, SMALL_TLAB_OBJECTS, TLAB_OBJECTS};
use super::hotspot::HotSpot;
use super::jvm::JvmTlab;
use super::scale::Scale;
use super::shared::Measured;
use crate::figures::Spread;
use crate::workload::{RunSpec, Workload};

/// The TLAB sizes of the seed's sweep, then adaptive.
pub(super) const SWEEP: [TlabPolicy; 7] = [
    TlabPolicy::Fixed(1 << 10),
    TlabPolicy::Fixed(4 << 10),
    TlabPolicy::Fixed(16 << 10),
    TlabPolicy::Fixed(256 << 10),
    TlabPolicy::Fixed(1 << 20),
    TlabPolicy::Fixed(4 << 20),
    TlabPolicy::Adaptive,
];
/// TLAB sizes also run without zeroing at refill, and over a per-core level.
pub(super) const SMALL_AND_LARGE: [TlabPolicy; 2] =
    [TlabPolicy::Fixed(1 << 10), TlabPolicy::Fixed(1 << 20)];
/// Whose claims the section's tables check, in the list of claims.
pub(super) const SECTION: &str = "Shipilëv's experiment";
/// The default middle level: one 1 MiB buffer per core.
pub const DEFAULT_MIDDLE: MiddleLevelSpec = MiddleLevelSpec {
    level: Level::Core,
    buffer_bytes: 1 << 20,
};

pub(super) fn tlab(scale: &Scale, mode: Mode, policy: TlabPolicy, threads: usize) -> RunSpec {
    let middle = if mode == Mode::Hab {
        vec![DEFAULT_MIDDLE]
    } else {
        Vec::new()
    };
    RunSpec {
        mode,
        tlab: policy,
        middle,
        ..scale.spec_on(Workload::AllocArray, threads)
    }
}

pub(super) fn unzeroed(scale: &Scale, policy: TlabPolicy, threads: usize) -> RunSpec {
    RunSpec {
        zero: ZeroMemory::Never,
        ..tlab(scale, Mode::Tlab, policy, threads)
    }
}

/// The former default: a whole TLAB zeroed at its refill.
pub(super) fn zeroed_at_refill(scale: &Scale, policy: TlabPolicy, threads: usize) -> RunSpec {
    RunSpec {
        zero: ZeroMemory::AtRefill,
        ..tlab(scale, Mode::Tlab, policy, threads)
    }
}

/// The per-CPU middle level: one 1 MiB buffer per CPU, carved in restartable sequences.
pub(super) const CPU_MIDDLE: MiddleLevelSpec = MiddleLevelSpec {
    level: Level::Cpu,
    buffer_bytes: 1 << 20,
};

/// A run that does per object what HotSpot's compiled loop does: objects initialised whole at
/// allocation (no zeroing at refill) and an allocation prefetch. `middle` replaces mode
/// `hab`'s default level.
pub(super) fn like_hotspot(
    scale: &Scale,
    mode: Mode,
    policy: TlabPolicy,
    middle: Option<MiddleLevelSpec>,
) -> RunSpec {
    let base = tlab(scale, mode, policy, 1);
    RunSpec {
        zero: ZeroMemory::Never,
        prefetch: true,
        middle: middle.map_or(base.middle.clone(), |level| vec![level]),
        ..base
    }
}

/// HotSpot's configuration for one of Hab's: the same fixed size, adaptive, or none.
pub(super) fn jvm_tlab(policy: TlabPolicy, mode: Mode) -> JvmTlab {
    match (mode, policy) {
        (Mode::Shared, _) => JvmTlab::Off,
        (_, TlabPolicy::Fixed(bytes)) => JvmTlab::Fixed(bytes),
        _ => JvmTlab::Adaptive,
    }
}

pub fn specs(scale: &Scale) -> Vec<RunSpec> {
    let mut specs = Vec::new();
    for threads in scale.threads.scaling() {
        specs.extend(SWEEP.map(|policy| tlab(scale, Mode::Tlab, policy, threads)));
        specs.push(tlab(scale, Mode::Shared, TlabPolicy::Adaptive, threads));
        specs.extend(SMALL_AND_LARGE.map(|policy| unzeroed(scale, policy, threads)));
        specs.extend(SMALL_AND_LARGE.map(|policy| zeroed_at_refill(scale, policy, threads)));
        specs.extend(SMALL_AND_LARGE.map(|policy| tlab(scale, Mode::Hab, policy, threads)));
        specs.push(tlab(scale, Mode::Hab, TlabPolicy::Adaptive, threads));
    }
    specs.extend(SWEEP.map(|policy| like_hotspot(scale, Mode::Tlab, policy, None)));
    for middle in [None, Some(CPU_MIDDLE)] {
        specs.extend(SMALL_AND_LARGE.map(|policy| like_hotspot(scale, Mode::Hab, policy, middle)));
    }
    specs
}

pub(super) fn label(policy: TlabPolicy, mode: Mode) -> String {
    match mode {
        Mode::Shared => "shared (no TLAB)".into(),
        _ => policy.to_string(),
    }
}

/// The figures the seed's claim is judged on: time per object on one thread, in ns.
pub(super) struct SeedFigures {
    /// Hab's `tlab` mode with its best TLAB size, with 1 KiB TLABs, and in `shared` mode.
    pub(super) best: Spread,
    pub(super) one_kib: Spread,
    pub(super) shared: Spread,
    /// HotSpot's best TLAB size, 1 KiB TLABs and TLABs off, when it was measured.
    pub(super) hotspot: Option<[Spread; 3]>,
}

impl SeedFigures {
    pub(super) fn measure(scale: &Scale, measured: &Measured, hotspot: &HotSpot) -> SeedFigures {
        let get = |mode, policy| measured.get(&tlab(scale, mode, policy, 1)).ns_per_object();
        let jvm = |tlab| hotspot.alloc_array(tlab);
        let jvm_best = SWEEP
            .iter()
            .filter_map(|&policy| jvm(jvm_tlab(policy, Mode::Tlab)))
            .min_by(|a, b| a.median.total_cmp(&b.median));
        SeedFigures {
            best: best_of(SWEEP.map(|policy| get(Mode::Tlab, policy))),
            one_kib: get(Mode::Tlab, TlabPolicy::Fixed(1 << 10)),
            shared: get(Mode::Shared, TlabPolicy::Adaptive),
            hotspot: match (jvm_best, jvm(JvmTlab::Fixed(1 << 10)), jvm(JvmTlab::Off)) {
                (Some(best), Some(one_kib), Some(off)) => Some([best, one_kib, off]),
                _ => None,
            },
        }
    }

    /// The seed measured HotSpot: its claim holds when HotSpot here shows the same shape
    /// (1 KiB TLABs at least 1.5× slower than the best, no TLAB at least 5× slower); without
    /// HotSpot, Hab's TLABs against its shared CAS stand in (at least 3× apart).
    pub(super) fn verdict(&self) -> Verdict {
        match self.hotspot {
            Some([best, one_kib, off]) => Verdict::at_least(one_kib.ratio(best), 1.5)
                .and(Verdict::at_least(off.ratio(best), 5.0)),
            None => Verdict::at_least(self.shared.ratio(self.best), 3.0),
        }
    }
}

/// The work behind the claim's times, counted: instructions per object with small and large
/// TLABs and without (callgrind, `alloc-object`, one thread), when valgrind ran.
pub(super) fn render_counted(s: &mut String, costs: &Costs) {
    let counted =
        [SMALL_TLAB_OBJECTS, TLAB_OBJECTS, SHARED_OBJECTS].map(|run| costs.instructions(run));
    if let [Some(small), Some(large), Some(shared)] = counted {
        let _ = writeln!(
            s,
            "Behind those times, the work counted (callgrind, one thread, `alloc-object` with \
             16-byte objects, from *Instructions per allocation*): {small:.2} instructions per \
             object with 1 KiB TLABs, {large:.2} with 256 KiB TLABs, {shared:.2} without TLABs \
             ({:.2}× and {:.1}× the large TLABs' count). Instructions do not count cache misses \
             or contention, which the times do.\n",
            small / large,
            shared / large
        );
    }
}

/// The spread with the smallest median.
pub(super) fn best_of(spreads: impl IntoIterator<Item = Spread>) -> Spread {
    spreads
        .into_iter()
        .min_by(|a, b| a.median.total_cmp(&b.median))
        .expect("at least one run")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(min: f64, max: f64) -> Spread {
        Spread {
            median: (min + max) / 2.0,
            min,
            max,
        }
    }

    #[test]
    fn the_seed_is_judged_on_hotspot_when_it_ran() {
        let hab = |shared| SeedFigures {
            best: ns(0.4, 0.5),
            one_kib: ns(0.6, 0.7),
            shared,
            hotspot: None,
        };
        assert_eq!(
            hab(ns(2.0, 2.2)).verdict(),
            Verdict::Yes,
            "shared ≥ 4× the best"
        );
        assert_eq!(
            hab(ns(0.8, 1.0)).verdict(),
            Verdict::No,
            "shared ≤ 2.5× the best"
        );
        assert_eq!(hab(ns(1.2, 1.8)).verdict(), Verdict::Inconclusive);
        let with_hotspot = |one_kib| SeedFigures {
            hotspot: Some([ns(1.0, 1.1), one_kib, ns(12.0, 13.0)]),
            ..hab(ns(0.5, 0.6))
        };
        assert_eq!(with_hotspot(ns(2.0, 2.4)).verdict(), Verdict::Yes);
        assert_eq!(with_hotspot(ns(1.1, 1.2)).verdict(), Verdict::No);
        assert_eq!(with_hotspot(ns(1.5, 1.8)).verdict(), Verdict::Inconclusive);
    }
}
