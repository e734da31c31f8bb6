//! What the middle levels' runs say (`middle.rs` runs them): the seed's claim, the speed-ups
//! over the grid, `auto` against the best fixed levels, the plots, foreign allocations, the cost
//! of a refill by where it comes from, the simulated machines, and the report's section.

use std::fmt::Write as _;

use hab::{ByteSize, Level, MiddleLevelSpec, TlabPolicy};

use super::claims::{Claims, Verdict};
use super::costs::Costs;
use super::experiment::{Context, Experiment};
use super::middle::*;
use super::plot::{LinePlot, Series};
use super::scale::Scale;
use super::shared::{seed_claim, Figures, Measured};
use crate::figures::Spread;
use crate::workload::{RunResult, RunSpec};

/// The share of foreign allocations (Kirsch et al.'s Tables I and II).
pub(super) fn render_foreign(
    s: &mut String,
    scale: &Scale,
    measured: &Measured,
    sizes: &[TlabPolicy],
    configs: &[MiddleLevelSpec],
) {
    let _ = writeln!(
        s,
        "### Foreign allocations (Kirsch et al., Tables I and II)\n"
    );
    let _ = writeln!(
        s,
        "Share of the middle level's allocations served by a domain other than the one the thread \
         ran on when its carve committed (the CPU id is read again after the commit), same runs.\n"
    );
    for threads in grid_threads(scale) {
        let _ = writeln!(s, "**{threads} threads**\n");
        table_header(s, configs, "refills/run");
        for &tlab in sizes {
            let base = measured.get(&grid(scale, threads, tlab, None));
            let _ = write!(s, "| {tlab} | {} |", base.refills);
            for &middle in configs {
                let hab = measured.get(&grid(scale, threads, tlab, Some(middle)));
                let _ = write!(s, " {:.3} % |", hab.foreign_pct);
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s);
    }
    let foreign: u64 = grid_threads(scale)
        .into_iter()
        .flat_map(|threads| sizes.iter().map(move |&tlab| (threads, tlab)))
        .flat_map(|(threads, tlab)| {
            configs
                .iter()
                .map(move |&middle| grid(scale, threads, tlab, Some(middle)))
        })
        .map(|spec| measured.get(&spec).foreign_allocs)
        .sum();
    let _ = writeln!(
        s,
        "{foreign} foreign allocations in all these runs together. A carve is foreign when its \
         thread moved to another domain between reading its CPU and committing (a preemption in \
         a window of a few nanoseconds), or when its own buffer was being refilled by a thread \
         that was preempted while holding it; with few CPUs both are rare. The tests force both \
         (`tests/middle_stress.rs`, `tests/simulated_topology.rs`) to check that they are \
         counted.\n"
    );
}

pub(super) fn table_header(s: &mut String, configs: &[MiddleLevelSpec], second: &str) {
    let _ = write!(s, "| TLAB | {second} |");
    for middle in configs {
        let _ = write!(s, " `{}` |", MiddleLevelSpec::list_to_string(&[*middle]));
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "| --- | ---: |{}", " ---: |".repeat(configs.len()));
}

/// Time per refill: what small TLABs cost over large ones, per extra refill, in CPU time.
pub(super) fn render_refill_cost(
    s: &mut String,
    scale: &Scale,
    measured: &Measured,
    costs: &Costs,
    claims: &mut Claims,
) {
    let _ = writeln!(s, "### What a TLAB refill costs\n");
    let _ = writeln!(
        s,
        "`alloc-object`, 16-byte objects, {} per thread, in a 16 MiB heap, with {small} and {large} \
         TLABs. ns per refill = (t(small) − t(large)) × threads / (refills(small) − \
         refills(large)): the CPU time each extra refill takes, carving from the global heap, \
         from the per-core compare-and-swap buffer, or from the per-CPU buffer in a restartable \
         sequence. Beside each time, what stands behind it without noise: the instructions \
         one refill takes (callgrind, 1 thread: (per object with {small} TLABs − per object \
         with {large} TLABs) × 16; the counted runs are in the last section).\n",
        scale.object_objects,
        small = ByteSize::new(SMALL_TLAB_BYTES),
        large = ByteSize::new(LARGE_TLAB_BYTES),
    );
    let _ = writeln!(s, "| threads | refills from | ns/object, small TLABs | ns/object, large TLABs | refills/run (small) | ns per refill | instructions per refill |");
    let _ = writeln!(s, "| ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    for threads in refill_threads(scale) {
        for middle in REFILL_SOURCES {
            let small = measured.get(&refill_run(scale, threads, SMALL_TLAB_BYTES, middle));
            let large = measured.get(&refill_run(scale, threads, LARGE_TLAB_BYTES, middle));
            let source = match (middle, small.levels.first()) {
                (Some(spec), Some(level)) => format!(
                    "`hab`, `{}` ({})",
                    MiddleLevelSpec::list_to_string(&[spec]),
                    if level.restartable {
                        "rseq"
                    } else {
                        "compare-and-swap"
                    }
                ),
                _ => "`tlab`: global heap".to_string(),
            };
            let counted = costs
                .instructions_per_refill(&middle.map_or("global heap".to_string(), |spec| {
                    MiddleLevelSpec::list_to_string(&[spec])
                }))
                .map_or("—".to_string(), |count| format!("{count:.0}"));
            let _ = writeln!(
                s,
                "| {threads} | {} | {} | {} | {} | {:.1} | {counted} |",
                source,
                super::shared::spread(small),
                super::shared::spread(large),
                small.refills,
                per_refill_ns(small, large, threads)
            );
        }
    }
    // Both runs take the same refills of small TLABs; only where they come from differs.
    let [_, core, cpu] = REFILL_SOURCES;
    for threads in refill_threads(scale) {
        let core_run = measured.get(&refill_run(scale, threads, SMALL_TLAB_BYTES, core));
        let cpu_run = measured.get(&refill_run(scale, threads, SMALL_TLAB_BYTES, cpu));
        if cpu_run
            .levels
            .first()
            .is_some_and(|level| level.restartable)
        {
            let claim = format!(
                "a refill from the rseq `cpu` level is cheaper than one from the \
                 compare-and-swap `core` level ({threads} thread(s))"
            );
            let cheaper =
                Verdict::at_least(core_run.ns_per_object().ratio(cpu_run.ns_per_object()), 1.0);
            let saved_ns =
                (core_run.elapsed_ms_median - cpu_run.elapsed_ms_median) * 1e6 * threads as f64
                    / cpu_run.refills.max(1) as f64;
            let _ = writeln!(
                s,
                "\nClaim, {threads} thread(s): a refill from the rseq `cpu` level is cheaper than one \
                 from the compare-and-swap `core` level ({} TLABs: {:.2} against {:.2} ns/object, \
                 {saved_ns:.1} ns saved per refill): {}.",
                ByteSize::new(SMALL_TLAB_BYTES),
                cpu_run.ns_per_alloc,
                core_run.ns_per_alloc,
                claims.judge("Middle levels", &claim, cheaper)
            );
        }
    }
    let _ = writeln!(s);
}

pub(super) fn per_refill_ns(small: &RunResult, large: &RunResult, threads: usize) -> f64 {
    let extra_ms = small.elapsed_ms_median - large.elapsed_ms_median;
    let extra_refills = small.refills.saturating_sub(large.refills).max(1);
    extra_ms * 1e6 * threads as f64 / extra_refills as f64
}

pub(super) fn render_simulated(s: &mut String, scale: &Scale, measured: &Measured) {
    let _ = writeln!(
        s,
        "### A simulated {SIMULATED} machine (4 packages × 10 cores × 2 threads)\n"
    );
    let _ = writeln!(
        s,
        "`alloc-object`, 16-byte objects, {} objects per run shared among the threads, a 1 GiB \
         heap, 4 KiB TLABs; each thread has a virtual CPU and moves to another with probability 1 % at each \
         refill (`--cpu-id sim:0.01:1`), before it reads its CPU, so it never moves between \
         choosing a buffer and committing. Times mean nothing here (2 real CPUs); the figures are \
         how the levels share the work.\n",
        scale.grid_objects
    );
    let _ = writeln!(
        s,
        "| threads | middle levels | level | buffers | allocs/run | foreign % | refills/run |"
    );
    let _ = writeln!(s, "| ---: | --- | --- | ---: | ---: | ---: | ---: |");
    for threads in SIMULATED_THREADS {
        for middle in SIMULATED_MIDDLE {
            let run = measured.get(&simulated(scale, threads, middle));
            for level in &run.levels {
                let _ = writeln!(
                    s,
                    "| {threads} | `{middle}` | {} | {} | {} | {:.2} | {} |",
                    level.level,
                    level.domains,
                    level.stats.allocs,
                    level.foreign_pct,
                    level.stats.refills
                );
            }
        }
    }
    let _ = writeln!(s);
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
