//! The middle levels' tables beyond the grid (`middle`): foreign allocations, the cost of a refill
//! by where it comes from, and the simulated machines.

use super::claims::{Claims, Verdict};
use super::costs::Costs;
use super::middle::*;
use super::scale::Scale;
use super::shared::Measured;
use crate::workload::RunResult;
use hab::{ByteSize, MiddleLevelSpec, TlabPolicy};
use std::fmt::Write as _;

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
