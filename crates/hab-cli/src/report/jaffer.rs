//! Jaffer's experiment: TLABs against a shared compare-and-swap by object size, and how each
//! scales from 1 to 2 threads (`alloc-object`).

use std::fmt::Write as _;

use hab::{ByteSize, Mode};

use super::claims::{Claims, Verdict};
use super::hotspot::HotSpot;
use super::jvm::Point;
use super::plot::BarPlot;
use super::{seed_claim, spread, Extras, Figures, Measured, Scale};

/// Whose claims the section's tables check, in the list of claims.
const SECTION: &str = "Jaffer's experiment";
use super::experiment::{Context, Experiment};
use crate::figures::Spread;
use crate::workload::{RunResult, RunSpec, Workload};

const SIZES: [usize; 3] = [16, 48, 144];
const THREADS: [usize; 2] = [1, 2];
/// Threads of the oversubscribed runs: four per CPU of this 2-CPU machine.
const OVERSUBSCRIBED: usize = 8;
/// Every thread count of the tables.
const ALL_THREADS: [usize; 3] = [1, 2, OVERSUBSCRIBED];
/// The heap: small enough to stay in the caches.
pub const HEAP_BYTES: usize = 16 << 20;

/// A run of `threads` threads; oversubscribed runs share the objects of one thread among
/// their threads, so that the shared CAS finishes in reasonable time.
pub(super) fn run(scale: &Scale, mode: Mode, threads: usize, object_size: usize) -> RunSpec {
    let base = scale.spec(Workload::AllocObject);
    RunSpec {
        mode,
        threads,
        object_size,
        objects: if threads > 2 {
            base.objects / threads
        } else {
            base.objects
        },
        ..base
    }
}

pub fn specs(scale: &Scale) -> Vec<RunSpec> {
    let mut specs = Vec::new();
    for threads in ALL_THREADS {
        for size in SIZES {
            specs.push(run(scale, Mode::Tlab, threads, size));
            specs.push(run(scale, Mode::Shared, threads, size));
        }
    }
    specs
}

pub fn render(
    scale: &Scale,
    measured: &Measured,
    extras: &Extras,
    hotspot: &HotSpot,
    figures: &Figures,
    claims: &mut Claims,
) -> String {
    let mut s = String::new();
    let get = |mode, threads, size| measured.get(&run(scale, mode, threads, size));
    let (tlab_spread, shared_spread) = (
        scaling(&get, Mode::Tlab, 16),
        scaling(&get, Mode::Shared, 16),
    );
    let (tlab_scaling, shared_scaling) = (tlab_spread.median, shared_spread.median);
    let claim = seed_claim(
        claims,
        "Jaffer",
        "with TLABs, going from one thread to four nearly doubles the allocation rate of 16-byte \
         objects (280 M to 533 M objects/s); without, the shared compare-and-swap makes it drop \
         about 9× (101 M to 12 M).",
        &format!(
            "from one thread to two (this machine has two CPUs), `tlab` goes {tlab_scaling:.2}× \
             and `shared` {shared_scaling:.2}× (16-byte objects).",
        ),
        Verdict::at_least(tlab_spread, 1.3).and(Verdict::at_most(shared_spread, 0.5)),
    );
    let _ = writeln!(
        s,
        "## Jaffer's experiment: TLAB against a shared CAS, by object size\n"
    );
    s += &claim;
    let _ = writeln!(
        s,
        "`alloc-object`: each thread allocates {} objects ({OVERSUBSCRIBED} threads, on this \
         machine's CPUs: an eighth as many each), writes each header and drops it; the \
         heap is {} (it stays in the caches), and when it is full the thread that noticed stops \
         the world and resets it. TLABs use the adaptive policy. Median of {} repetitions. \
         HotSpot (1 and 2 threads): the same loop in JMH (`AllocObject`), Parallel GC with a 64 \
         MiB young generation, with TLABs and with `-XX:-UseTLAB`, average time over 3 \
         one-second iterations after 2 of warm-up.\n",
        scale.object_objects,
        ByteSize::new(HEAP_BYTES),
        scale.repeat
    );
    render_table(&mut s, &get, hotspot);
    render_plot(&mut s, &get, hotspot, figures);
    render_scaling(&mut s, &get, extras, claims);
    s
}

/// HotSpot's point: Parallel GC, with TLABs or without.
fn jvm_point(hotspot: &HotSpot, threads: usize, size: usize, tlab: bool) -> Option<&Point> {
    hotspot.find("alloc-object", |p| {
        p.size == size && p.threads == threads && p.config.contains("TLABs") == tlab
    })
}

/// The rate on two threads over the rate on one: each thread does the same work, so
/// 2 t(1) / t(2).
fn scaling<'m>(
    get: &dyn Fn(Mode, usize, usize) -> &'m RunResult,
    mode: Mode,
    size: usize,
) -> Spread {
    let time = |threads| {
        get(mode, threads, size)
            .ns_per_object()
            .scaled(threads as f64)
    };
    time(1).ratio(time(2)).scaled(2.0)
}

/// Time per object by object size and threads, Hab's modes beside HotSpot's.
fn render_table<'m>(
    s: &mut String,
    get: &dyn Fn(Mode, usize, usize) -> &'m RunResult,
    hotspot: &HotSpot,
) {
    let jvm_spread = |threads, size, tlab| {
        jvm_point(hotspot, threads, size, tlab).map_or("—".into(), |p| p.ns_spread())
    };
    let _ = writeln!(
        s,
        "| object | threads | tlab ns/object | shared ns/object | shared / tlab | collections | HotSpot TLABs ns/object | HotSpot no TLAB ns/object |"
    );
    let _ = writeln!(
        s,
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for size in SIZES {
        for threads in ALL_THREADS {
            let (tlab, shared) = (
                get(Mode::Tlab, threads, size),
                get(Mode::Shared, threads, size),
            );
            let _ = writeln!(
                s,
                "| {size} B | {threads} | {} | {} | {:.1}× | {} | {} | {} |",
                spread(tlab),
                spread(shared),
                shared.ns_per_alloc / tlab.ns_per_alloc,
                tlab.collections,
                jvm_spread(threads, size, true),
                jvm_spread(threads, size, false)
            );
        }
    }
}

/// The same as bars of objects per second.
fn render_plot<'m>(
    s: &mut String,
    get: &dyn Fn(Mode, usize, usize) -> &'m RunResult,
    hotspot: &HotSpot,
    figures: &Figures,
) {
    let jvm =
        |threads, size, tlab| jvm_point(hotspot, threads, size, tlab).and_then(|p| p.ns_per_object);
    let categories: Vec<String> = SIZES
        .iter()
        .flat_map(|size| THREADS.map(|threads| format!("{size} B, {threads} thr")))
        .collect();
    let mut series = [Mode::Tlab, Mode::Shared]
        .map(|mode| {
            let values = SIZES
                .iter()
                .flat_map(|&size| {
                    THREADS.map(|threads| get(mode, threads, size).allocs_per_sec / 1e6)
                })
                .collect();
            (format!("Hab {}", mode.name()), values)
        })
        .to_vec();
    if hotspot.measured() {
        for (name, tlab) in [("HotSpot TLABs", true), ("HotSpot no TLAB", false)] {
            let values = SIZES
                .iter()
                .flat_map(|&size| {
                    THREADS.map(|threads| jvm(threads, size, tlab).map_or(0.0, |ns| 1e3 / ns))
                })
                .collect();
            series.push((name.to_string(), values));
        }
    }
    *s += &figures.bars(
        "jaffer",
        &BarPlot {
            title: "alloc-object: TLABs against a shared CAS",
            y_label: "million objects per second",
            categories,
            series,
        },
    );
}

/// Scaling from one thread to two against the compute loop's, and its claims.
fn render_scaling<'m>(
    s: &mut String,
    get: &dyn Fn(Mode, usize, usize) -> &'m RunResult,
    extras: &Extras,
    claims: &mut Claims,
) {
    let compute = extras.compute_speedup;
    let _ = writeln!(
        s,
        "\nScaling from 1 to 2 threads (same work per thread; speed-up = 2 × t(1) / t(2)), \
         against the compute loop's {compute:.2}×:\n"
    );
    let _ = writeln!(
        s,
        "| object | mode | speed-up | ÷ compute loop's | claim: tlab ≥ 0.9× the compute loop's |"
    );
    let _ = writeln!(s, "| ---: | --- | ---: | ---: | --- |");
    for size in SIZES {
        for mode in [Mode::Tlab, Mode::Shared] {
            let speedup = scaling(get, mode, size);
            let relative = speedup.scaled(1.0 / compute);
            let holds = if mode == Mode::Tlab {
                let claim = format!(
                    "`tlab` with {size}-byte objects scales ≥ 0.9× as well as the compute loop"
                );
                let verdict = Verdict::at_least(relative, 0.9);
                claims.judge(SECTION, &claim, verdict).to_string()
            } else {
                "—".into()
            };
            let (speedup, relative) = (speedup.median, relative.median);
            let _ = writeln!(
                s,
                "| {size} B | {mode} | {speedup:.2}× | {relative:.2} | {holds} |"
            );
        }
    }
    let _ = writeln!(
        s,
        "\nIn `tlab` mode the threads share nothing but the refill CAS and the collections. Larger \
         objects write more fresh cache lines per object (zeroes at refill, then headers), so \
         their cost is the bandwidth of the cache level the heap lives in, which both CPUs share; \
         `hab run --workload alloc-object --object-size 144 --zero never` shows the part that \
         zeroing takes.\n"
    );
}

/// The experiment as the report runs it.
pub struct Jaffer;

impl Experiment for Jaffer {
    fn name(&self) -> &'static str {
        "Jaffer's experiment: TLAB against a shared CAS, by object size"
    }

    fn runs(&self, scale: &Scale) -> Vec<RunSpec> {
        specs(scale)
    }

    fn section(&self, cx: &Context, claims: &mut Claims) -> String {
        render(
            cx.scale,
            &cx.measured,
            &cx.extras,
            &cx.hotspot,
            &cx.figures,
            claims,
        )
    }
}
