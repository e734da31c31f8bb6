//! Shipilëv's experiment: allocation throughput against TLAB size (`alloc-array`), the same
//! with and without zeroing, and with a per-core middle level under the TLABs.

use std::fmt::Write as _;

use hab::{Level, MiddleLevelSpec, Mode, TlabPolicy, ZeroMemory};

use super::plot::{LinePlot, Series};
use super::{check, seed_claim, Figures, Measured, Scale};
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
const SMALL_AND_LARGE: [TlabPolicy; 2] = [TlabPolicy::Fixed(1 << 10), TlabPolicy::Fixed(1 << 20)];
const THREADS: [usize; 2] = [1, 2];
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
        threads,
        middle,
        ..scale.spec(Workload::AllocArray)
    }
}

fn unzeroed(scale: &Scale, policy: TlabPolicy, threads: usize) -> RunSpec {
    RunSpec {
        zero: ZeroMemory::Never,
        ..tlab(scale, Mode::Tlab, policy, threads)
    }
}

pub fn specs(scale: &Scale) -> Vec<RunSpec> {
    let mut specs = Vec::new();
    for threads in THREADS {
        specs.extend(SWEEP.map(|policy| tlab(scale, Mode::Tlab, policy, threads)));
        specs.push(tlab(scale, Mode::Shared, TlabPolicy::Adaptive, threads));
        specs.extend(SMALL_AND_LARGE.map(|policy| unzeroed(scale, policy, threads)));
        specs.extend(SMALL_AND_LARGE.map(|policy| tlab(scale, Mode::Hab, policy, threads)));
        specs.push(tlab(scale, Mode::Hab, TlabPolicy::Adaptive, threads));
    }
    specs
}

fn label(policy: TlabPolicy, mode: Mode) -> String {
    match mode {
        Mode::Shared => "shared (no TLAB)".into(),
        _ => policy.to_string(),
    }
}

pub fn render(scale: &Scale, measured: &Measured, figures: &Figures) -> String {
    let mut s = String::new();
    let get = |mode, policy, threads| measured.get(&tlab(scale, mode, policy, threads));
    let small = TlabPolicy::Fixed(1 << 10);
    let large = TlabPolicy::Fixed(1 << 20);
    let _ = writeln!(
        s,
        "## Shipilëv's experiment: allocation throughput against TLAB size\n"
    );
    let per_50m = |ns: f64| ns * 50e6 / 1e6;
    let best = SWEEP
        .iter()
        .map(|&policy| get(Mode::Tlab, policy, 1).ns_per_alloc)
        .fold(f64::MAX, f64::min);
    let one_kib = get(Mode::Tlab, small, 1).ns_per_alloc;
    let shared = get(Mode::Shared, TlabPolicy::Adaptive, 1).ns_per_alloc;
    s += &seed_claim(
        "JVM Anatomy Park #4",
        "allocation in a TLAB is a pointer bump: on one thread 50 M 16-byte objects take about \
         225 ms with TLABs of 16 KiB to 1 MiB (2.5 GB/s), 548 ms with 1 KiB TLABs, and 2785 ms \
         (12×) with TLABs off.",
        &format!(
            "per 50 M objects on one thread, {:.0} ms with the best TLAB size ({:.1} GB/s), {:.0} \
             ms with 1 KiB TLABs and {:.0} ms ({:.1}×) in `shared` mode (no TLAB).",
            per_50m(best),
            16.0 / best,
            per_50m(one_kib),
            per_50m(shared),
            shared / best
        ),
        shared >= 5.0 * best && one_kib >= best,
    );
    let _ = writeln!(
        s,
        "`alloc-array`: each thread allocates {} objects of 16 bytes, writes each header and keeps \
         each address in its own pre-touched array, in a pre-touched heap that needs no \
         collection. Median of {} repetitions after {} warm-up; `shared` is `-XX:-UseTLAB`.\n",
        scale.array_objects, scale.repeat, scale.warmup
    );
    let _ = writeln!(s, "| threads | TLAB | median ms | min ms | ns/object | M objects/s | MB/s | refills | waste % | vs 1 MiB TLAB |");
    let _ = writeln!(
        s,
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for threads in THREADS {
        let reference = get(Mode::Tlab, large, threads);
        let rows = SWEEP
            .iter()
            .map(|&p| (p, Mode::Tlab))
            .chain([(TlabPolicy::Adaptive, Mode::Shared)]);
        for (policy, mode) in rows {
            let r = get(mode, policy, threads);
            let _ = writeln!(
                s,
                "| {threads} | {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.0} | {} | {:.2} | {:.2}× |",
                label(policy, mode),
                r.elapsed_ms_median,
                r.elapsed_ms_min,
                r.ns_per_alloc,
                r.allocs_per_sec / 1e6,
                r.bytes_per_sec / 1e6,
                r.refills,
                r.waste_pct,
                r.allocs_per_sec / reference.allocs_per_sec
            );
        }
    }
    let _ = writeln!(s, "\n| claim | threads | measured | holds |");
    let _ = writeln!(s, "| --- | ---: | ---: | --- |");
    for threads in THREADS {
        let ratio = get(Mode::Tlab, TlabPolicy::Fixed(256 << 10), threads).allocs_per_sec
            / get(Mode::Shared, TlabPolicy::Adaptive, threads).allocs_per_sec;
        let (claim, holds) = if threads == 1 {
            (
                "`tlab` (256 KiB) ≥ 2× `shared` throughput",
                check(ratio >= 2.0),
            )
        } else {
            ("`tlab` (256 KiB) / `shared` throughput (reported)", "—")
        };
        let _ = writeln!(s, "| {claim} | {threads} | {ratio:.2}× | {holds} |");
    }
    for threads in THREADS {
        let ratio = get(Mode::Tlab, small, threads).allocs_per_sec
            / get(Mode::Tlab, large, threads).allocs_per_sec;
        let _ = writeln!(s, "| `tlab`: 1 KiB / 1 MiB TLAB throughput, the baseline a middle level must beat | {threads} | {ratio:.2} | — |");
    }
    let big = get(Mode::Tlab, large, 1);
    let written = big.allocs_per_sec * (big.object_size + std::mem::size_of::<usize>()) as f64;
    let _ = writeln!(
        s,
        "\nWith 1 MiB TLABs one thread writes {:.1} GB/s (objects plus the array of addresses). \
         Reused memory is zeroed when a TLAB is taken (the library's default). When the heap does \
         not fit in the caches, a large TLAB zeroed at refill goes through memory twice (zeroes, \
         then objects), while a small one is zeroed in the L1 cache just before its objects are \
         written. The same runs without zeroing (`--zero never`, the runtime initialises \
         objects):\n",
        written / 1e9
    );
    let _ = writeln!(
        s,
        "| threads | TLAB | zeroed at refill: ns/object | not zeroed: ns/object |"
    );
    let _ = writeln!(s, "| ---: | --- | ---: | ---: |");
    for threads in THREADS {
        for policy in SMALL_AND_LARGE {
            let zeroed = get(Mode::Tlab, policy, threads);
            let raw = measured.get(&unzeroed(scale, policy, threads));
            let _ = writeln!(
                s,
                "| {threads} | {policy} | {:.2} | {:.2} |",
                zeroed.ns_per_alloc, raw.ns_per_alloc
            );
        }
    }
    let series = THREADS
        .iter()
        .map(|&threads| Series {
            name: format!("{threads} thread{}", if threads == 1 { "" } else { "s" }),
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
    s += &figures.lines(
        "shipilev",
        &LinePlot {
            title: "alloc-array: time per object against TLAB size (tlab mode)",
            x_label: "TLAB size (bytes, log scale)",
            y_label: "ns per object",
            log_x: true,
            series,
        },
    );
    render_middle_claim(&mut s, &get);
    s
}

/// Kirsch et al.'s claim made stronger: small TLABs over a per-core level as fast as big ones.
fn render_middle_claim<'m>(s: &mut String, get: &dyn Fn(Mode, TlabPolicy, usize) -> &'m RunResult) {
    let small = TlabPolicy::Fixed(1 << 10);
    let large = TlabPolicy::Fixed(1 << 20);
    let _ = writeln!(
        s,
        "\n### The same with a per-core middle level (`hab`, `--middle {}`)\n",
        MiddleLevelSpec::list_to_string(&[DEFAULT_MIDDLE])
    );
    let _ = writeln!(s, "| threads | TLAB | `tlab` ns/object | `hab` ns/object | hab / tlab throughput | foreign % |");
    let _ = writeln!(s, "| ---: | --- | ---: | ---: | ---: | ---: |");
    for threads in THREADS {
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
    let _ = writeln!(s, "\n| claim (2 threads) | measured | holds |");
    let _ = writeln!(s, "| --- | ---: | --- |");
    let hab_small = get(Mode::Hab, small, 2);
    let ratio = hab_small.allocs_per_sec / get(Mode::Tlab, large, 2).allocs_per_sec;
    let _ = writeln!(
        s,
        "| `hab` with 1 KiB TLABs ≥ 90 % of `tlab` with 1 MiB TLABs | {:.0} % | {} |",
        ratio * 100.0,
        check(ratio >= 0.9)
    );
    let baseline =
        get(Mode::Tlab, small, 2).allocs_per_sec / get(Mode::Tlab, large, 2).allocs_per_sec;
    let _ = writeln!(
        s,
        "| … where `tlab` with 1 KiB TLABs reaches | {:.0} % | {} |",
        baseline * 100.0,
        check(baseline < ratio)
    );
    let default = get(Mode::Hab, TlabPolicy::Adaptive, 2);
    let _ = writeln!(
        s,
        "| foreign allocations ≤ 1 % (default: adaptive TLABs, `core:1MiB`) | {:.3} % | {} |\n",
        default.foreign_pct,
        check(default.foreign_pct <= 1.0)
    );
}
