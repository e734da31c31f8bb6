//! The middle levels of Kirsch, Payer and Röck: speed-up of `hab` over `tlab` for TLAB sizes
//! and middle-level buffer sizes (their Figures 2 and 3), foreign allocations (their Tables I
//! and II), what a refill costs through each, and a simulated many-CPU machine.
//!
//! What the runs say, and the report's section, is `middle_section.rs`.

use hab::{CpuIdSource, Level, MiddleLevelSpec, Mode, TlabPolicy};

use super::scale::Scale;
use super::shared::Measured;
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
pub(super) const REMATCH_ROUNDS: usize = 3;

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

pub(super) fn tlab_sizes(scale: &Scale) -> Vec<TlabPolicy> {
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

pub(super) fn middle_configs(scale: &Scale) -> Vec<MiddleLevelSpec> {
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
pub(super) fn grid_auto(scale: &Scale, threads: usize, tlab: TlabPolicy) -> RunSpec {
    RunSpec {
        mode: Mode::Hab,
        middle: Vec::new(),
        ..grid(scale, threads, tlab, None)
    }
}

/// The TLAB settings `auto` is compared at: the smallest fixed size and adaptive sizing.
pub(super) fn auto_tlabs(scale: &Scale) -> [TlabPolicy; 2] {
    [tlab_sizes(scale)[0], TlabPolicy::Adaptive]
}

/// The fastest configuration of the grid (every middle level, and `tlab` alone) at one
/// point, by median time per object: its name and its run.
pub(super) fn grid_best(
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
pub(super) fn rematch(
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
