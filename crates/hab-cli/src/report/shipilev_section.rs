//! What Shipilëv's experiment's runs say (`shipilev.rs` runs them): the seed's claim, the TLAB
//! size sweep, zeroing, the plot, Hab configured as HotSpot's TLABs are, the claim on the middle
//! levels, and the report's section.

use std::fmt::Write as _;

use hab::{MiddleLevelSpec, Mode, TlabPolicy};

use super::claims::{Claims, Verdict};
use super::costs::Costs;
use super::experiment::{Context, Experiment};
use super::hotspot::{self, HotSpot};
use super::jvm::JvmTlab;
use super::plot::{LinePlot, Series};
use super::scale::Scale;
use super::shared::{seed_claim, Figures, Measured};
use super::shipilev::*;
use crate::figures::Spread;
use crate::workload::{RunResult, RunSpec};

/// Hab and HotSpot doing the same work per object, and the two claims against HotSpot.
pub(super) fn render_like_hotspot(
    s: &mut String,
    scale: &Scale,
    measured: &Measured,
    hotspot: &HotSpot,
    claims: &mut Claims,
) {
    let _ = writeln!(s, "### Hab and HotSpot doing the same work per object\n");
    let bandwidth = hotspot::write_bandwidth_gbps();
    let _ = writeln!(
        s,
        "HotSpot's compiled loop initialises each object whole when it allocates it (its TLABs \
         are not zeroed at refill), prefetches the lines ahead of its allocations \
         (`-XX:AllocatePrefetchStyle`) and stores 4-byte compressed references. Hab's loop does \
         the same here: `--zero never` (header, then zeroes) and `--prefetch` \
         (`Mutator::alloc_sized_prefetching`: one `prefetchw` {} bytes ahead). Both write 16 bytes \
         of object and 4 of reference per object; GB/s counts the 20. This machine writes memory \
         at {bandwidth:.1} GB/s (zeroing 1 GiB, best of 3, in this run). `hab` refills the TLABs \
         from one 1 MiB buffer per core (`{}`, a compare-and-swap per refill) or per CPU (`{}`, \
         a restartable sequence per refill, no atomic instruction).\n",
        hab::ALLOCATION_PREFETCH_BYTES,
        MiddleLevelSpec::list_to_string(&[DEFAULT_MIDDLE]),
        MiddleLevelSpec::list_to_string(&[CPU_MIDDLE])
    );
    let _ = writeln!(
        s,
        "| TLAB | Hab `tlab` ns/object | Hab `hab`, `core` | Hab `hab`, `cpu` | HotSpot ns/object | Hab `tlab` GB/s | HotSpot GB/s |"
    );
    let _ = writeln!(s, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let gbps = |ns: f64| 20.0 / ns;
    let (mut hab_runs, mut jvm_runs) = (Vec::new(), Vec::new());
    for policy in SWEEP {
        let hab_tlab = measured.get(&like_hotspot(scale, Mode::Tlab, policy, None));
        let hab_mode = |middle| {
            SMALL_AND_LARGE
                .contains(&policy)
                .then(|| measured.get(&like_hotspot(scale, Mode::Hab, policy, middle)))
                .map_or("—".into(), super::shared::spread)
        };
        let jvm = hotspot.alloc_array_ns(jvm_tlab(policy, Mode::Tlab));
        hab_runs.push(hab_tlab.ns_per_object());
        jvm_runs.extend(hotspot.alloc_array(jvm_tlab(policy, Mode::Tlab)));
        let _ = writeln!(
            s,
            "| {policy} | {} | {} | {} | {} | {:.2} | {} |",
            super::shared::spread(hab_tlab),
            hab_mode(None),
            hab_mode(Some(CPU_MIDDLE)),
            hotspot.alloc_array_spread(jvm_tlab(policy, Mode::Tlab)),
            gbps(hab_tlab.ns_per_alloc),
            hotspot::cell(jvm.map(gbps), 2)
        );
    }
    let _ = writeln!(s);
    let small = TlabPolicy::Fixed(1 << 10);
    let hab_small_of = |middle| {
        measured
            .get(&like_hotspot(scale, Mode::Hab, small, middle))
            .ns_per_object()
    };
    let (hab_small_core, hab_small_cpu) = (hab_small_of(None), hab_small_of(Some(CPU_MIDDLE)));
    let hab_small_spread = best_of([hab_small_core, hab_small_cpu]);
    let (Some(jvm_small_spread), false) = (
        hotspot.alloc_array(JvmTlab::Fixed(1 << 10)),
        jvm_runs.is_empty(),
    ) else {
        let _ = writeln!(
            s,
            "The two claims against HotSpot (Hab's best `tlab` time at most HotSpot's best; `hab` \
             with 1 KiB TLABs at least 3× faster than HotSpot with 1 KiB TLABs) need HotSpot's \
             figures: not checked in this run.\n"
        );
        return;
    };
    let (hab_best_spread, jvm_best_spread) = (best_of(hab_runs), best_of(jvm_runs));
    let (hab_best, jvm_best) = (hab_best_spread.median, jvm_best_spread.median);
    let best_claim = "Hab's best `tlab` time is at most HotSpot's best TLAB time";
    let best_verdict = Verdict::at_most(hab_best_spread.ratio(jvm_best_spread), 1.0);
    let _ = writeln!(
        s,
        "Claim: Hab's best `tlab` time is at most HotSpot's best TLAB time ({hab_best:.2} against \
         {jvm_best:.2} ns/object: {:.1} against {:.1} GB/s, {:.0} % and {:.0} % of the {bandwidth:.1} \
         GB/s zeroing reaches{}): {}.\n",
        gbps(hab_best),
        gbps(jvm_best),
        100.0 * gbps(hab_best) / bandwidth,
        100.0 * gbps(jvm_best) / bandwidth,
        if gbps(hab_best) > 1.25 * bandwidth {
            "; far above 100 %: at this scale the objects of a repetition stay in the caches"
        } else {
            ""
        },
        claims.judge("Beside HotSpot", best_claim, best_verdict)
    );
    let (hab_small, jvm_small) = (hab_small_spread.median, jvm_small_spread.median);
    let (hab_small_core, hab_small_cpu) = (hab_small_core.median, hab_small_cpu.median);
    let small_claim = "with 1 KiB TLABs, Hab's `hab` mode is at least 3× faster than HotSpot";
    let small_verdict = Verdict::at_least(jvm_small_spread.ratio(hab_small_spread), 3.0);
    // At 3× HotSpot's 1 KiB speed, Hab would have to write this fast.
    let needed_gbps = gbps(jvm_small / 3.0);
    let fastest_gbps = bandwidth.max(gbps(hab_best));
    let _ = writeln!(
        s,
        "Claim: with 1 KiB TLABs, Hab's `hab` mode is at least 3× faster than HotSpot \
         (the faster middle level, {hab_small:.2} against {jvm_small:.2} ns/object, {:.2}×; \
         `core` {hab_small_core:.2}, `cpu` {hab_small_cpu:.2}): {}. Three times HotSpot's \
         speed would mean writing {needed_gbps:.1} GB/s, {:.2}× the fastest this machine wrote \
         in this section ({fastest_gbps:.1} GB/s: a 1 GiB memset, or Hab's best run){}.\n",
        jvm_small / hab_small,
        claims.judge("Beside HotSpot", small_claim, small_verdict),
        needed_gbps / fastest_gbps,
        if needed_gbps > 0.9 * fastest_gbps {
            ": memory bandwidth, not the allocation path, bounds both here"
        } else {
            ""
        }
    );
}

/// Kirsch et al.'s claim made stronger: small TLABs over a per-core level as fast as big ones.
pub(super) fn render_middle_claim<'m>(
    s: &mut String,
    scale: &Scale,
    get: &dyn Fn(Mode, TlabPolicy, usize) -> &'m RunResult,
    claims: &mut Claims,
) {
    let small = TlabPolicy::Fixed(1 << 10);
    let large = TlabPolicy::Fixed(1 << 20);
    let _ = writeln!(
        s,
        "\n### The same with a per-core middle level (`hab`, `--middle {}`)\n",
        MiddleLevelSpec::list_to_string(&[DEFAULT_MIDDLE])
    );
    let _ = writeln!(s, "| threads | TLAB | `tlab` ns/object | `hab` ns/object | hab / tlab throughput | foreign % |");
    let _ = writeln!(s, "| ---: | --- | ---: | ---: | ---: | ---: |");
    for threads in scale.threads.scaling() {
        for policy in [small, large, TlabPolicy::Adaptive] {
            let (t, h) = (
                get(Mode::Tlab, policy, threads),
                get(Mode::Hab, policy, threads),
            );
            let _ = writeln!(
                s,
                "| {threads} | {policy} | {:.2} | {:.2} | {:.2}× | {:.3} |",
                t.ns_per_alloc,
                h.ns_per_alloc,
                h.allocs_per_sec / t.allocs_per_sec,
                h.foreign_pct
            );
        }
    }
    let _ = writeln!(s, "\n| claim | threads | measured | holds |");
    let _ = writeln!(s, "| --- | ---: | ---: | --- |");
    for threads in scale.threads.claimed() {
        // Throughput ratios are time ratios the other way round.
        let large_tlab = get(Mode::Tlab, large, threads).ns_per_object();
        let ratio = large_tlab.ratio(get(Mode::Hab, small, threads).ns_per_object());
        let baseline = large_tlab.ratio(get(Mode::Tlab, small, threads).ns_per_object());
        let claim =
            format!("`hab` with 1 KiB TLABs ≥ 90 % of `tlab` with 1 MiB TLABs ({threads} threads)");
        let verdict = claims.judge(SECTION, &claim, Verdict::at_least(ratio, 0.9));
        let _ = writeln!(
            s,
            "| `hab` with 1 KiB TLABs ≥ 90 % of `tlab` with 1 MiB TLABs | {threads} | {:.0} % | {verdict} |",
            ratio.median * 100.0,
        );
        let claim =
            format!("`hab` with 1 KiB TLABs beats `tlab` with 1 KiB TLABs ({threads} threads)");
        let verdict = claims.judge(
            SECTION,
            &claim,
            Verdict::at_least(ratio.ratio(baseline), 1.0),
        );
        let _ = writeln!(
            s,
            "| … where `tlab` with 1 KiB TLABs reaches | {threads} | {:.0} % | {verdict} |",
            baseline.median * 100.0,
        );
        let default = get(Mode::Hab, TlabPolicy::Adaptive, threads);
        let claim = format!(
            "foreign allocations ≤ 1 % (default: adaptive TLABs, `core:1MiB`, {threads} threads)"
        );
        let verdict = Verdict::at_most(Spread::exact(default.foreign_pct), 1.0);
        let _ = writeln!(
            s,
            "| foreign allocations ≤ 1 % (default: adaptive TLABs, `core:1MiB`) | {threads} | {:.3} % | {} |",
            default.foreign_pct,
            claims.judge(SECTION, &claim, verdict)
        );
    }
    let _ = writeln!(s);
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
