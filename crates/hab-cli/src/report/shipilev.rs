//! Shipilëv's experiment: allocation throughput against TLAB size (`alloc-array`), the same
//! with and without zeroing, with a per-core middle level under the TLABs, and HotSpot's
//! Epsilon GC beside Hab, both doing the same work per object.

use std::fmt::Write as _;

use hab::{Level, MiddleLevelSpec, Mode, TlabPolicy, ZeroMemory};

use super::claims::{Claims, Verdict};
use super::costs::{Costs, SHARED_OBJECTS, SMALL_TLAB_OBJECTS, TLAB_OBJECTS};
use super::experiment::{Context, Experiment};
use super::hotspot::HotSpot;
use super::jvm::JvmTlab;
use super::plot::{LinePlot, Series};
use super::scale::Scale;
use super::shared::{seed_claim, Figures, Measured};
use super::shipilev_tables::{render_like_hotspot, render_middle_claim};
use crate::figures::Spread;
use crate::workload::{RunResult, RunSpec, Workload};

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

fn unzeroed(scale: &Scale, policy: TlabPolicy, threads: usize) -> RunSpec {
    RunSpec {
        zero: ZeroMemory::Never,
        ..tlab(scale, Mode::Tlab, policy, threads)
    }
}

/// The former default: a whole TLAB zeroed at its refill.
fn zeroed_at_refill(scale: &Scale, policy: TlabPolicy, threads: usize) -> RunSpec {
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

fn label(policy: TlabPolicy, mode: Mode) -> String {
    match mode {
        Mode::Shared => "shared (no TLAB)".into(),
        _ => policy.to_string(),
    }
}

/// The figures the seed's claim is judged on: time per object on one thread, in ns.
struct SeedFigures {
    /// Hab's `tlab` mode with its best TLAB size, with 1 KiB TLABs, and in `shared` mode.
    best: Spread,
    one_kib: Spread,
    shared: Spread,
    /// HotSpot's best TLAB size, 1 KiB TLABs and TLABs off, when it was measured.
    hotspot: Option<[Spread; 3]>,
}

impl SeedFigures {
    fn measure(scale: &Scale, measured: &Measured, hotspot: &HotSpot) -> SeedFigures {
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
    fn verdict(&self) -> Verdict {
        match self.hotspot {
            Some([best, one_kib, off]) => Verdict::at_least(one_kib.ratio(best), 1.5)
                .and(Verdict::at_least(off.ratio(best), 5.0)),
            None => Verdict::at_least(self.shared.ratio(self.best), 3.0),
        }
    }
}

/// The work behind the claim's times, counted: instructions per object with small and large
/// TLABs and without (callgrind, `alloc-object`, one thread), when valgrind ran.
fn render_counted(s: &mut String, costs: &Costs) {
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

pub fn render(
    scale: &Scale,
    measured: &Measured,
    hotspot: &HotSpot,
    figures: &Figures,
    costs: &Costs,
    claims: &mut Claims,
) -> String {
    let mut s = String::new();
    let get = |mode, policy, threads| measured.get(&tlab(scale, mode, policy, threads));
    let _ = writeln!(
        s,
        "## Shipilëv's experiment: allocation throughput against TLAB size\n"
    );
    render_seed_claim(
        &mut s,
        &SeedFigures::measure(scale, measured, hotspot),
        claims,
    );
    render_counted(&mut s, costs);
    render_sweep(&mut s, scale, &get, hotspot, claims);
    render_zeroing(&mut s, scale, measured, hotspot, &get);
    render_plot(&mut s, scale, measured, hotspot, figures, &get);
    render_middle_claim(&mut s, scale, &get, claims);
    render_like_hotspot(&mut s, scale, measured, hotspot, claims);
    s
}

/// The section's opening: the seed's figures, ours, and the verdict.
fn render_seed_claim(s: &mut String, seed: &SeedFigures, claims: &mut Claims) {
    let per_50m = |ns: f64| ns * 50e6 / 1e6;
    let (best, one_kib, shared) = (seed.best.median, seed.one_kib.median, seed.shared.median);
    let hab_text = format!(
        "Hab's `tlab` mode takes {:.0} ms with its best TLAB size ({:.1} GB/s), {:.0} ms with \
         1 KiB TLABs ({:.2}× its best) and {:.0} ms ({:.1}×) in `shared` mode (a CAS per \
         object).",
        per_50m(best),
        16.0 / best,
        per_50m(one_kib),
        one_kib / best,
        per_50m(shared),
        shared / best
    );
    let ours = match seed.hotspot {
        Some([jvm_best, jvm_one_kib, jvm_off]) => {
            let (jvm_best, jvm_one_kib, jvm_off) =
                (jvm_best.median, jvm_one_kib.median, jvm_off.median);
            format!(
                "per 50 M objects on one thread, HotSpot (Epsilon GC) takes {:.0} ms with its \
                 best TLAB size ({:.1} GB/s), {:.0} ms with 1 KiB TLABs ({:.1}×) and {:.0} ms \
                 ({:.0}×) with TLABs off. {hab_text}",
                per_50m(jvm_best),
                16.0 / jvm_best,
                per_50m(jvm_one_kib),
                jvm_one_kib / jvm_best,
                per_50m(jvm_off),
                jvm_off / jvm_best
            )
        }
        None => format!("HotSpot was not measured. Per 50 M objects on one thread, {hab_text}"),
    };
    *s += &seed_claim(
        claims,
        "JVM Anatomy Park #4",
        "allocation in a TLAB is a pointer bump: on one thread 50 M 16-byte objects take about \
         225 ms with TLABs of 16 KiB to 1 MiB (2.5 GB/s), 548 ms with 1 KiB TLABs (2.4×), and \
         2785 ms (12×) with TLABs off.",
        &ours,
        seed.verdict(),
    );
}

/// The sweep over TLAB sizes, beside HotSpot's, and the claims on its figures.
fn render_sweep<'m>(
    s: &mut String,
    scale: &Scale,
    get: &dyn Fn(Mode, TlabPolicy, usize) -> &'m RunResult,
    hotspot: &HotSpot,
    claims: &mut Claims,
) {
    let (small, large) = (TlabPolicy::Fixed(1 << 10), TlabPolicy::Fixed(1 << 20));
    let _ = writeln!(
        s,
        "`alloc-array`: each thread allocates {} objects of 16 bytes, writes each header and keeps \
         each as a 4-byte compressed reference in its own pre-touched array, in a pre-touched \
         heap that needs no collection. Median of {} repetitions after {} warm-up; `shared` is \
         `-XX:-UseTLAB`. HotSpot (1 thread): Epsilon GC (no collection), pre-touched heap, the \
         same TLAB size (`-XX:TLABSize` with `-XX:-ResizeTLAB -XX:-EpsilonElasticTLAB`, JDK 17's \
         spelling of Shipilëv's `-XX:EpsilonTLABSize`; adaptive: Epsilon's defaults), the array \
         allocated once, JMH single-shot median of 3 after 1 warm-up.\n",
        scale.array_objects, scale.repeat, scale.warmup
    );
    let _ = writeln!(s, "| threads | TLAB | median ms | min ms | ns/object | M objects/s | MB/s | refills | waste % | vs 1 MiB TLAB | HotSpot ns/object |");
    let _ = writeln!(
        s,
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let counts = scale.threads.scaling();
    for &threads in &counts {
        let reference = get(Mode::Tlab, large, threads);
        let rows = SWEEP
            .iter()
            .map(|&p| (p, Mode::Tlab))
            .chain([(TlabPolicy::Adaptive, Mode::Shared)]);
        for (policy, mode) in rows {
            let r = get(mode, policy, threads);
            let _ = writeln!(
                s,
                "| {threads} | {} | {:.1} | {:.1} | {} | {:.1} | {:.0} | {} | {:.2} | {:.2}× | {} |",
                label(policy, mode),
                r.elapsed_ms_median,
                r.elapsed_ms_min,
                super::shared::spread(r),
                r.allocs_per_sec / 1e6,
                r.bytes_per_sec / 1e6,
                r.refills,
                r.waste_pct,
                r.allocs_per_sec / reference.allocs_per_sec,
                match threads {
                    1 => hotspot.alloc_array_spread(jvm_tlab(policy, mode)),
                    _ => "—".into(),
                }
            );
        }
    }
    let _ = writeln!(s, "\n| claim | threads | measured | holds |");
    let _ = writeln!(s, "| --- | ---: | ---: | --- |");
    for &threads in &counts {
        let ratio = get(Mode::Shared, TlabPolicy::Adaptive, threads)
            .ns_per_object()
            .ratio(get(Mode::Tlab, TlabPolicy::Fixed(256 << 10), threads).ns_per_object());
        let (claim, holds) = if threads == 1 {
            let claim = "`tlab` (256 KiB) ≥ 2× `shared` throughput";
            let verdict = Verdict::at_least(ratio, 2.0);
            (claim, claims.judge(SECTION, claim, verdict).to_string())
        } else {
            (
                "`tlab` (256 KiB) / `shared` throughput (reported)",
                "—".into(),
            )
        };
        let _ = writeln!(
            s,
            "| {claim} | {threads} | {:.2}× | {holds} |",
            ratio.median
        );
    }
    for &threads in &counts {
        let ratio = get(Mode::Tlab, small, threads).allocs_per_sec
            / get(Mode::Tlab, large, threads).allocs_per_sec;
        let _ = writeln!(s, "| `tlab`: 1 KiB / 1 MiB TLAB throughput, the baseline a middle level must beat | {threads} | {ratio:.2} | — |");
    }
}

/// The same runs zeroed ahead of `top` (the default), zeroed at refill, and not zeroed.
fn render_zeroing<'m>(
    s: &mut String,
    scale: &Scale,
    measured: &Measured,
    hotspot: &HotSpot,
    get: &dyn Fn(Mode, TlabPolicy, usize) -> &'m RunResult,
) {
    let large = TlabPolicy::Fixed(1 << 20);
    let big = get(Mode::Tlab, large, 1);
    let written = big.allocs_per_sec * (big.object_size + std::mem::size_of::<u32>()) as f64;
    let _ = writeln!(
        s,
        "\nWith 1 MiB TLABs one thread writes {:.1} GB/s (objects plus the array of references). \
         Reused memory is zeroed by default a step ahead of each TLAB's top (`--zero ahead`: \
         {} KiB at a time, when an allocation reaches the end of the zeroed part, through the \
         TLAB's soft end). The steps are small so that zeroing overlaps allocation: a step's \
         stores wait in the CPU's store buffer while their lines come from memory, and the \
         thread goes on allocating. Zeroing a whole TLAB when it is taken (`--zero refill`) goes through memory \
         twice when the TLAB is larger than the caches (zeroes, then objects). Without zeroing \
         (`--zero never`) the loop initialises each object whole, header then zeroes, as a \
         runtime must then:\n",
        written / 1e9,
        hab::ZERO_AHEAD_BYTES >> 10
    );
    let _ = writeln!(
        s,
        "| threads | TLAB | zeroed ahead (default): ns/object | zeroed at refill | not zeroed |"
    );
    let _ = writeln!(s, "| ---: | --- | ---: | ---: | ---: |");
    for threads in scale.threads.scaling() {
        for policy in SMALL_AND_LARGE {
            let ahead = get(Mode::Tlab, policy, threads);
            let at_refill = measured.get(&zeroed_at_refill(scale, policy, threads));
            let raw = measured.get(&unzeroed(scale, policy, threads));
            let _ = writeln!(
                s,
                "| {threads} | {policy} | {} | {} | {} |",
                super::shared::spread(ahead),
                super::shared::spread(at_refill),
                super::shared::spread(raw)
            );
        }
    }
    let large = TlabPolicy::Fixed(1 << 20);
    let default = get(Mode::Tlab, large, 1).ns_per_object();
    let like = measured
        .get(&like_hotspot(scale, Mode::Tlab, large, None))
        .ns_per_object();
    let jvm_best = SWEEP
        .iter()
        .filter_map(|&policy| hotspot.alloc_array(jvm_tlab(policy, Mode::Tlab)))
        .min_by(|a, b| a.median.total_cmp(&b.median));
    let _ = writeln!(
        s,
        "\nOne thread, 1 MiB TLABs, in this run: the default configuration {:.2} ns/object, \
         `--zero never --prefetch` {:.2} ({:.2}× the default's speed){}.\n",
        default.median,
        like.median,
        default.median / like.median,
        match jvm_best {
            Some(best) => format!(
                ", HotSpot's best TLAB time {:.2} ({:.2}× the default's speed)",
                best.median,
                default.median / best.median
            ),
            None => ", HotSpot not measured".into(),
        }
    );
}

/// Time per object against TLAB size: Hab's threads, Hab as HotSpot, HotSpot.
fn render_plot<'m>(
    s: &mut String,
    scale: &Scale,
    measured: &Measured,
    hotspot: &HotSpot,
    figures: &Figures,
    get: &dyn Fn(Mode, TlabPolicy, usize) -> &'m RunResult,
) {
    let mut series: Vec<Series> = scale
        .threads
        .scaling()
        .into_iter()
        .map(|threads| Series {
            name: format!(
                "Hab, {threads} thread{}",
                if threads == 1 { "" } else { "s" }
            ),
            points: SWEEP
                .iter()
                .filter_map(|&policy| match policy {
                    TlabPolicy::Fixed(bytes) => {
                        Some((bytes as f64, get(Mode::Tlab, policy, threads).ns_per_alloc))
                    }
                    _ => None,
                })
                .collect(),
        })
        .collect();
    let fixed_points = |value: &dyn Fn(TlabPolicy) -> Option<f64>| -> Vec<(f64, f64)> {
        SWEEP
            .iter()
            .filter_map(|&policy| match policy {
                TlabPolicy::Fixed(bytes) => value(policy).map(|ns| (bytes as f64, ns)),
                _ => None,
            })
            .collect()
    };
    series.push(Series {
        name: "Hab, 1 thread, as HotSpot (initialised, prefetch)".into(),
        points: fixed_points(&|policy| {
            Some(
                measured
                    .get(&like_hotspot(scale, Mode::Tlab, policy, None))
                    .ns_per_alloc,
            )
        }),
    });
    if hotspot.measured() {
        series.push(Series {
            name: "HotSpot, 1 thread".into(),
            points: fixed_points(&|policy| hotspot.alloc_array_ns(jvm_tlab(policy, Mode::Tlab))),
        });
    }
    *s += &figures.lines(
        "shipilev",
        &LinePlot {
            title: "alloc-array: time per object against TLAB size (Hab tlab mode, HotSpot)",
            x_label: "TLAB size (bytes, log scale)",
            y_label: "ns per object",
            log_x: true,
            series,
        },
    );
}

/// The experiment as the report runs it.
pub struct Shipilev;

impl Experiment for Shipilev {
    fn name(&self) -> &'static str {
        "Shipilëv's experiment: allocation throughput against TLAB size"
    }

    fn runs(&self, scale: &Scale) -> Vec<RunSpec> {
        specs(scale)
    }

    fn section(&self, cx: &Context, claims: &mut Claims) -> String {
        render(
            &cx.scale,
            &cx.measured,
            &cx.hotspot,
            &cx.figures,
            super::costs::counted(cx),
            claims,
        )
    }
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
