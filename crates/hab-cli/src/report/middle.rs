//! The middle levels of Kirsch, Payer and Röck: speed-up of `hab` over `tlab` for TLAB sizes
//! and middle-level buffer sizes (their Figures 2 and 3), foreign allocations (their Tables I
//! and II), what a refill costs through each, and a simulated many-CPU machine.

use std::fmt::Write as _;

use hab::{ByteSize, CpuIdSource, Level, MiddleLevelSpec, Mode, TlabPolicy};

use super::claims::{Claims, Verdict};
use super::costs::Costs;
use super::experiment::{Context, Experiment};
use super::middle_tables::{render_foreign, render_refill_cost, render_simulated, table_header};
use super::plot::{LinePlot, Series};
use super::scale::Scale;
use super::shared::{seed_claim, Figures, Measured};
use crate::figures::Spread;
use crate::workload::{self, RunSpec, Workload};

/// The grid's thread counts: the scaling axis from 2 threads, then 4 and 16 per CPU.
pub(super) fn grid_threads(scale: &Scale) -> Vec<usize> {
    scale.threads.two_to_oversubscribed()
}

/// The refill-cost runs' thread counts: 1, 2 and every CPU.
pub(super) fn refill_threads(scale: &Scale) -> Vec<usize> {
    scale.threads.ends_and_two()
}

/// Rounds in which `auto` and the grid's best run again, in turn ([`AutoRematch`]).
const REMATCH_ROUNDS: usize = 3;

/// `auto` and the grid's best configuration at one point, run again in turn after the grid.
/// The grid's best is the fastest of several noisy runs, so part of its lead can be luck (a
/// run whose threads happened to get both CPUs); run again beside `auto`, each round
/// compares two runs made one after the other, under the same conditions.
pub struct AutoRematch {
    pub threads: usize,
    pub tlab: TlabPolicy,
    /// The best configuration's time per object over `auto`'s, one per round.
    pub ratios: Vec<f64>,
}

fn tlab_sizes(scale: &Scale) -> Vec<TlabPolicy> {
    let sizes: &[usize] = if scale.quick {
        &[1, 16]
    } else {
        &[1, 4, 16, 64, 256, 512]
    };
    sizes
        .iter()
        .map(|kib| TlabPolicy::Fixed(kib << 10))
        .chain([TlabPolicy::Adaptive])
        .collect()
}

fn middle_configs(scale: &Scale) -> Vec<MiddleLevelSpec> {
    let configs: &[(Level, usize)] = if scale.quick {
        &[
            (Level::Core, 512 << 10),
            (Level::Core, 2 << 20),
            (Level::Package, 32 << 20),
        ]
    } else {
        &[
            (Level::Core, 512 << 10),
            (Level::Core, 2 << 20),
            (Level::Core, 16 << 20),
            (Level::Package, 8 << 20),
            (Level::Package, 32 << 20),
            (Level::Package, 128 << 20),
        ]
    };
    configs
        .iter()
        .map(|&(level, buffer_bytes)| MiddleLevelSpec {
            level,
            buffer_bytes,
        })
        .collect()
}

/// One cell of the grid: `alloc-array`, the report's objects shared among the threads.
pub(super) fn grid(
    scale: &Scale,
    threads: usize,
    tlab: TlabPolicy,
    middle: Option<MiddleLevelSpec>,
) -> RunSpec {
    RunSpec {
        threads,
        tlab,
        mode: if middle.is_some() {
            Mode::Hab
        } else {
            Mode::Tlab
        },
        middle: middle.into_iter().collect(),
        objects: scale.grid_objects / threads,
        repeat: scale.repeat.min(3),
        ..scale.spec(Workload::AllocArray)
    }
}

/// A cell of the grid in the `hab` mode with the levels `auto` picks (no levels given).
fn grid_auto(scale: &Scale, threads: usize, tlab: TlabPolicy) -> RunSpec {
    RunSpec {
        mode: Mode::Hab,
        middle: Vec::new(),
        ..grid(scale, threads, tlab, None)
    }
}

/// The TLAB settings `auto` is compared at: the smallest fixed size and adaptive sizing.
fn auto_tlabs(scale: &Scale) -> [TlabPolicy; 2] {
    [tlab_sizes(scale)[0], TlabPolicy::Adaptive]
}

/// The fastest configuration of the grid (every middle level, and `tlab` alone) at one
/// point, by median time per object: its name and its run.
fn grid_best(
    scale: &Scale,
    measured: &Measured,
    threads: usize,
    tlab: TlabPolicy,
) -> (String, RunSpec) {
    std::iter::once(None)
        .chain(middle_configs(scale).into_iter().map(Some))
        .map(|middle| {
            let name = middle.map_or("`tlab`".to_string(), |spec| {
                format!("`{}`", MiddleLevelSpec::list_to_string(&[spec]))
            });
            (name, grid(scale, threads, tlab, middle))
        })
        .min_by(|a, b| {
            let median = |spec: &RunSpec| measured.get(spec).ns_per_object().median;
            median(&a.1).total_cmp(&median(&b.1))
        })
        .expect("the grid has runs")
}

/// Runs `auto` and the grid's best again, in turn, at every point `auto` is compared at.
fn rematch(
    scale: &Scale,
    measured: &Measured,
    progress: &indicatif::ProgressBar,
) -> Result<Vec<AutoRematch>, String> {
    let mut rematches = Vec::new();
    for threads in grid_threads(scale) {
        for tlab in auto_tlabs(scale) {
            let auto = grid_auto(scale, threads, tlab);
            let (name, best) = grid_best(scale, measured, threads, tlab);
            let mut ratios = Vec::new();
            for round in 0..REMATCH_ROUNDS {
                // Each runs first in turn, so that neither always follows the other.
                let mut ns = [0.0; 2];
                for which in [round % 2, 1 - round % 2] {
                    progress.set_message(format!(
                        "auto against {name}, {threads} threads, {tlab} TLABs, round {round}"
                    ));
                    let spec = if which == 0 { &auto } else { &best };
                    ns[which] = workload::run(spec)?.ns_per_object().median;
                    progress.inc(1);
                }
                ratios.push(ns[1] / ns[0]);
            }
            rematches.push(AutoRematch {
                threads,
                tlab,
                ratios,
            });
        }
    }
    Ok(rematches)
}

/// Where refills come from in the refill-cost runs: the global heap, the compare-and-swap
/// per-core level, the restartable per-CPU level.
pub(super) const REFILL_SOURCES: [Option<MiddleLevelSpec>; 3] = [
    None,
    Some(super::shipilev::DEFAULT_MIDDLE),
    Some(MiddleLevelSpec {
        level: Level::Cpu,
        buffer_bytes: 1 << 20,
    }),
];

/// The small TLABs of the refill-cost runs: 16 objects of 16 bytes, so that refills weigh.
pub(super) const SMALL_TLAB_BYTES: usize = 256;
/// The large TLABs they are compared with.
pub(super) const LARGE_TLAB_BYTES: usize = 1 << 20;

/// Refill-bound runs: `alloc-object` with small and large TLABs.
pub(super) fn refill_run(
    scale: &Scale,
    threads: usize,
    tlab_bytes: usize,
    middle: Option<MiddleLevelSpec>,
) -> RunSpec {
    RunSpec {
        threads,
        tlab: TlabPolicy::Fixed(tlab_bytes),
        mode: if middle.is_some() {
            Mode::Hab
        } else {
            Mode::Tlab
        },
        middle: middle.into_iter().collect(),
        ..scale.spec(Workload::AllocObject)
    }
}

pub(super) const SIMULATED: &str = "4x10x2";
/// Room for a buffer of every level in every domain of the simulated machine.
const SIMULATED_HEAP_BYTES: usize = 1 << 30;

pub(super) fn simulated(scale: &Scale, threads: usize, middle: &str) -> RunSpec {
    RunSpec {
        threads,
        mode: Mode::Hab,
        tlab: TlabPolicy::Fixed(4 << 10),
        middle: MiddleLevelSpec::parse_list(middle).expect("static list"),
        topology: Some(SIMULATED.into()),
        cpu_id: Some(CpuIdSource::Simulated {
            seed: 1,
            migrate_probability: 0.01,
        }),
        objects: scale.grid_objects / threads,
        heap_bytes: Some(SIMULATED_HEAP_BYTES),
        repeat: 1,
        warmup: 0,
        ..scale.spec(Workload::AllocObject)
    }
}

pub(super) const SIMULATED_MIDDLE: [&str; 3] = [
    "core:1MiB",
    "core:512KiB,package:32MiB",
    "cpu:256KiB,core:1MiB,package:32MiB,node:64MiB",
];
pub(super) const SIMULATED_THREADS: [usize; 2] = [8, 80];

pub fn specs(scale: &Scale) -> Vec<RunSpec> {
    let mut specs = Vec::new();
    for threads in grid_threads(scale) {
        for tlab in tlab_sizes(scale) {
            specs.push(grid(scale, threads, tlab, None));
            for middle in middle_configs(scale) {
                specs.push(grid(scale, threads, tlab, Some(middle)));
            }
        }
        for tlab in auto_tlabs(scale) {
            specs.push(grid_auto(scale, threads, tlab));
        }
    }
    for threads in refill_threads(scale) {
        for tlab_bytes in [SMALL_TLAB_BYTES, LARGE_TLAB_BYTES] {
            for middle in REFILL_SOURCES {
                specs.push(refill_run(scale, threads, tlab_bytes, middle));
            }
        }
    }
    for threads in SIMULATED_THREADS {
        for middle in SIMULATED_MIDDLE {
            specs.push(simulated(scale, threads, middle));
        }
    }
    specs
}

pub fn render(
    scale: &Scale,
    measured: &Measured,
    (costs, rematches): (&Costs, &[AutoRematch]),
    figures: &Figures,
    claims: &mut Claims,
) -> String {
    let mut s = String::new();
    let sizes = tlab_sizes(scale);
    let configs = middle_configs(scale);
    let _ = writeln!(
        s,
        "## Middle levels: speed-up of `hab` over `tlab` (Kirsch et al., Figures 2 and 3)\n"
    );
    render_seed_claim(&mut s, scale, measured, &sizes, &configs, claims);
    render_speedups(&mut s, scale, measured, &sizes, &configs);
    render_auto(&mut s, scale, measured, rematches, claims);
    render_plots(&mut s, scale, measured, &sizes, &configs, figures);
    render_foreign(&mut s, scale, measured, &sizes, &configs);
    render_refill_cost(&mut s, scale, measured, costs, claims);
    render_simulated(&mut s, scale, measured);
    s
}

/// The seed's claim, judged on the best middle level's speed-up at each count claims are
/// judged at (2 threads and every CPU).
fn render_seed_claim(
    s: &mut String,
    scale: &Scale,
    measured: &Measured,
    sizes: &[TlabPolicy],
    configs: &[MiddleLevelSpec],
    claims: &mut Claims,
) {
    // The best middle level's speed-up with the smallest and the largest fixed TLAB.
    let fixed: Vec<TlabPolicy> = sizes
        .iter()
        .copied()
        .filter(|policy| matches!(policy, TlabPolicy::Fixed(_)))
        .collect();
    // The best level's speed-up: base time over its time, the largest median.
    let speedup = |threads, tlab, level: Option<Level>| {
        let base = measured
            .get(&grid(scale, threads, tlab, None))
            .ns_per_object();
        configs
            .iter()
            .filter(|middle| level.is_none_or(|level| middle.level == level))
            .map(|&middle| {
                base.ratio(
                    measured
                        .get(&grid(scale, threads, tlab, Some(middle)))
                        .ns_per_object(),
                )
            })
            .max_by(|a, b| a.median.total_cmp(&b.median))
            .unwrap_or(Spread::exact(0.0))
    };
    let (smallest, largest) = (fixed[0], fixed[fixed.len() - 1]);
    let mut ours = Vec::new();
    let mut verdict: Option<Verdict> = None;
    for threads in scale.threads.claimed() {
        let (small_spread, large_spread) = (
            speedup(threads, smallest, None),
            speedup(threads, largest, None),
        );
        let here = Verdict::at_least(small_spread, 1.2)
            .and(Verdict::at_least(small_spread.ratio(large_spread), 1.0));
        verdict = Some(verdict.map_or(here, |earlier| earlier.and(here)));
        let (core_gain, package_gain) = (
            speedup(threads, smallest, Some(Level::Core)).median,
            speedup(threads, smallest, Some(Level::Package)).median,
        );
        ours.push(format!(
            "with {threads} threads the best middle level speeds `alloc-array` up {:.2}× with \
             {smallest} TLABs and {:.2}× with {largest} TLABs; with {smallest} TLABs per-core \
             buffers give {core_gain:.2}× and per-package ones {package_gain:.2}×",
            small_spread.median, large_spread.median
        ));
    }
    let packages = match scale.threads.topology() {
        Some(simulated) => {
            hab::Topology::simulated(&simulated).map_or(1, |t| t.domains(Level::Package))
        }
        None => hab::Topology::discover().domains(Level::Package),
    };
    *s += &seed_claim(
        claims,
        "Kirsch et al.",
        "refilling TLABs from per-core (CLAB) or per-processor (PLAB) buffers speeds allocation \
         up most for small TLABs, whose slow path runs most often, up to about 2× over HotSpot's \
         TLAB-only configuration; CLABs do slightly better than PLABs.",
        &format!(
            "{} (this machine has {packages} package(s){}).",
            ours.join("; "),
            if packages == 1 {
                ", so a per-package buffer is shared by every CPU"
            } else {
                ""
            }
        ),
        verdict.expect("claims are judged at one count at least"),
    );
}

/// Each middle level's speed-up over `tlab`, per TLAB size and thread count.
fn render_speedups(
    s: &mut String,
    scale: &Scale,
    measured: &Measured,
    sizes: &[TlabPolicy],
    configs: &[MiddleLevelSpec],
) {
    let _ =
        writeln!(
        s,
        "`alloc-array`, 16-byte objects, {} objects per run shared among the threads, median of \
         {} repetitions. Each cell: throughput of `hab` with that middle level over `tlab` with \
         the same TLAB size, then over `tlab` with adaptive TLABs. Threads: the scaling axis \
         from 2 to every CPU ({}), then 4 and 16 per CPU (oversubscribed). CPU id from `{}`.\n",
        scale.grid_objects,
        scale.repeat.min(3),
        scale.threads.cpus(),
        measured.get(&grid(scale, 2, sizes[0], Some(configs[0]))).cpu_id_source
    );
    for threads in grid_threads(scale) {
        let adaptive = measured.get(&grid(scale, threads, TlabPolicy::Adaptive, None));
        let _ = writeln!(
            s,
            "**{threads} threads** (`tlab` with adaptive TLABs: {:.2} ns/object)\n",
            adaptive.ns_per_alloc
        );
        table_header(s, configs, "`tlab` ns/object");
        for &tlab in sizes {
            let base = measured.get(&grid(scale, threads, tlab, None));
            let _ = write!(s, "| {tlab} | {} |", super::shared::spread(base));
            for &middle in configs {
                let hab = measured.get(&grid(scale, threads, tlab, Some(middle)));
                let _ = write!(
                    s,
                    " {:.2} / {:.2} |",
                    hab.allocs_per_sec / base.allocs_per_sec,
                    hab.allocs_per_sec / adaptive.allocs_per_sec
                );
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s);
    }
}

/// `auto` against the best configuration of the grid (every middle level, and none), per
/// thread count, at the smallest TLAB and with adaptive TLABs; the claim judged on the two
/// run again in turn (`rematches`).
fn render_auto(
    s: &mut String,
    scale: &Scale,
    measured: &Measured,
    rematches: &[AutoRematch],
    claims: &mut Claims,
) {
    let _ = writeln!(
        s,
        "### `auto` against the grid's best

The `hab` mode with no levels given picks them \
         from the machine and the heap (`auto`). Against the fastest configuration of the grid \
         above at the same TLAB setting (every middle level, and `tlab` alone), \
         ns/object `median (min–max)`. The fastest of several noisy runs is partly the \
         luckiest, so the two then run again, in turn, {REMATCH_ROUNDS} rounds (each first in \
         turn); the claim is judged on those rounds' ratios, each of two runs made one after \
         the other:\n"
    );
    let _ = writeln!(
        s,
        "| threads | TLABs | `auto` picks | `auto` | the grid's best | best / `auto` in the grid | run again in turn: best / `auto` | claim: `auto` ≥ 95 % of the best |"
    );
    let _ = writeln!(s, "| ---: | --- | --- | ---: | ---: | ---: | ---: | --- |");
    for threads in grid_threads(scale) {
        for tlab in auto_tlabs(scale) {
            let auto = measured.get(&grid_auto(scale, threads, tlab));
            let (best_name, best) = grid_best(scale, measured, threads, tlab);
            let best = measured.get(&best);
            let in_grid = best.ns_per_object().ratio(auto.ns_per_object());
            let again = rematches
                .iter()
                .find(|rematch| rematch.threads == threads && rematch.tlab == tlab)
                .map(|rematch| Spread::of(&rematch.ratios));
            let verdict = claims.judge(
                "Self-tuning",
                &format!(
                    "`auto` reaches 95 % of the grid's best ({threads} threads, {tlab} TLABs)"
                ),
                Verdict::at_least(again.unwrap_or(in_grid), 0.95),
            );
            let picked: Vec<String> = auto
                .levels
                .iter()
                .map(|level| format!("{}:{}", level.level, ByteSize::new(level.buffer_bytes)))
                .collect();
            let _ = writeln!(
                s,
                "| {threads} | {tlab} | `{}` | {} | {} {best_name} | {:.2} | {} | {verdict} |",
                picked.join(","),
                super::shared::spread(auto),
                super::shared::spread(best),
                in_grid.median,
                again.map_or("—".to_string(), |ratio| format!(
                    "{:.2} ({:.2}–{:.2})",
                    ratio.median, ratio.min, ratio.max
                )),
            );
        }
    }
    let _ = writeln!(s);
}

/// The speed-ups as plots, one per thread count.
fn render_plots(
    s: &mut String,
    scale: &Scale,
    measured: &Measured,
    sizes: &[TlabPolicy],
    configs: &[MiddleLevelSpec],
    figures: &Figures,
) {
    for threads in grid_threads(scale) {
        let series = configs
            .iter()
            .map(|&middle| Series {
                name: format!("hab {}", MiddleLevelSpec::list_to_string(&[middle])),
                points: sizes
                    .iter()
                    .filter_map(|&tlab| match tlab {
                        TlabPolicy::Fixed(bytes) => {
                            let base = measured.get(&grid(scale, threads, tlab, None));
                            let hab = measured.get(&grid(scale, threads, tlab, Some(middle)));
                            Some((bytes as f64, hab.allocs_per_sec / base.allocs_per_sec))
                        }
                        _ => None,
                    })
                    .collect(),
            })
            .collect();
        let title = format!("Speed-up of hab over tlab by TLAB size, {threads} threads");
        *s += &figures.lines(
            &format!("kirsch-{threads}-threads"),
            &LinePlot {
                title: &title,
                x_label: "TLAB size (bytes, log scale)",
                y_label: "throughput of hab / tlab (same TLAB size)",
                log_x: true,
                series,
            },
        );
    }
}

/// The experiment as the report runs it.
pub struct Middle;

impl Experiment for Middle {
    fn name(&self) -> &'static str {
        "Middle levels: speed-up of `hab` over `tlab` (Kirsch et al.)"
    }

    fn runs(&self, scale: &Scale) -> Vec<RunSpec> {
        specs(scale)
    }

    fn steps(&self, cx: &Context) -> usize {
        grid_threads(&cx.scale).len() * 2 * REMATCH_ROUNDS * 2
    }

    fn measure(&self, cx: &mut Context, progress: &indicatif::ProgressBar) -> Result<(), String> {
        let rematches = rematch(&cx.scale, &cx.measured, progress)?;
        cx.results.put(rematches);
        Ok(())
    }

    fn section(&self, cx: &Context, claims: &mut Claims) -> String {
        render(
            &cx.scale,
            &cx.measured,
            (
                super::costs::counted(cx),
                cx.results
                    .get::<Vec<AutoRematch>>()
                    .map_or(&[], Vec::as_slice),
            ),
            &cx.figures,
            claims,
        )
    }
}
