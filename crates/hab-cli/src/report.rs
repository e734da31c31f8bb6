//! `hab report`: runs the seeds' experiments and writes `DIR/README.md` (tables and the checks
//! each experiment is meant to show) and `DIR/results.jsonl` (every run, one JSON line each).

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::Instant;

use hab::{ByteSize, Mode, TlabPolicy, ZeroMemory};
use indicatif::{ProgressBar, ProgressStyle};

use crate::callgrind;
use crate::machine;
use crate::workload::{self, RunResult, RunSpec, Workload};

/// How big the experiments are.
struct Scale {
    /// Objects per thread in Shipilëv's experiment (the seed: 50 M).
    array_objects: usize,
    /// Objects per thread in Jaffer's experiment.
    object_objects: usize,
    repeat: usize,
    warmup: usize,
}

const FULL: Scale = Scale {
    array_objects: 50_000_000,
    object_objects: 20_000_000,
    repeat: 5,
    warmup: 1,
};
const QUICK: Scale = Scale {
    array_objects: 2_000_000,
    object_objects: 2_000_000,
    repeat: 3,
    warmup: 1,
};

/// The TLAB sizes of Shipilëv's sweep, then adaptive.
const SWEEP: [TlabPolicy; 6] = [
    TlabPolicy::Fixed(1 << 10),
    TlabPolicy::Fixed(4 << 10),
    TlabPolicy::Fixed(16 << 10),
    TlabPolicy::Fixed(256 << 10),
    TlabPolicy::Fixed(1 << 20),
    TlabPolicy::Adaptive,
];
/// TLAB sizes also run without zeroing at refill, to show what zeroing costs.
const ZEROING_SWEEP: [TlabPolicy; 2] = [TlabPolicy::Fixed(1 << 10), TlabPolicy::Fixed(1 << 20)];
const THREADS: [usize; 2] = [1, 2];
const JAFFER_SIZES: [usize; 3] = [16, 48, 144];
/// Heap of Jaffer's runs: small enough to stay in the caches.
const JAFFER_HEAP_BYTES: usize = 16 << 20;

fn spec(
    workload: Workload,
    mode: Mode,
    tlab: TlabPolicy,
    threads: usize,
    size: usize,
    scale: &Scale,
) -> RunSpec {
    let (objects, heap_bytes) = match workload {
        Workload::AllocArray => (scale.array_objects, None),
        Workload::AllocObject => (scale.object_objects, Some(JAFFER_HEAP_BYTES)),
    };
    RunSpec {
        workload,
        mode,
        tlab,
        threads,
        objects,
        object_size: size,
        heap_bytes,
        repeat: scale.repeat,
        warmup: scale.warmup,
        zero: ZeroMemory::AtRefill,
        min_tlab: None,
        max_tlab: None,
        waste_target_percent: 1.0,
        refill_waste_fraction: 64,
        compute: false,
    }
}

/// Runs every experiment and writes the report.
pub fn write(quick: bool, out: &Path) -> Result<(), String> {
    let scale = if quick { &QUICK } else { &FULL };
    let started = Instant::now();
    let mut specs = Vec::new();
    for threads in THREADS {
        for policy in SWEEP {
            specs.push(spec(
                Workload::AllocArray,
                Mode::Tlab,
                policy,
                threads,
                16,
                scale,
            ));
        }
        specs.push(spec(
            Workload::AllocArray,
            Mode::Shared,
            TlabPolicy::Adaptive,
            threads,
            16,
            scale,
        ));
    }
    for threads in THREADS {
        for policy in ZEROING_SWEEP {
            let mut spec = spec(Workload::AllocArray, Mode::Tlab, policy, threads, 16, scale);
            spec.zero = ZeroMemory::Never;
            specs.push(spec);
        }
    }
    for threads in THREADS {
        for size in JAFFER_SIZES {
            for mode in [Mode::Tlab, Mode::Shared] {
                specs.push(spec(
                    Workload::AllocObject,
                    mode,
                    TlabPolicy::Adaptive,
                    threads,
                    size,
                    scale,
                ));
            }
        }
    }
    let callgrind_runs: [(&str, &[&str]); 3] = [
        (
            "alloc-object, 16 B, tlab (256 KiB)",
            &[
                "--workload",
                "alloc-object",
                "--object-size",
                "16",
                "--tlab-size",
                "256KiB",
                "--heap",
                "16MiB",
            ],
        ),
        (
            "alloc-array, 16 B, tlab (256 KiB)",
            &[
                "--workload",
                "alloc-array",
                "--object-size",
                "16",
                "--tlab-size",
                "256KiB",
            ],
        ),
        (
            "alloc-object, 16 B, shared",
            &[
                "--workload",
                "alloc-object",
                "--object-size",
                "16",
                "--mode",
                "shared",
                "--heap",
                "16MiB",
            ],
        ),
    ];
    let use_callgrind = callgrind::available();
    let steps = specs.len()
        + 1
        + if use_callgrind {
            callgrind_runs.len()
        } else {
            0
        };
    let progress = ProgressBar::new(steps as u64);
    progress.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );

    progress.set_message("compute loop on 1 and 2 threads");
    let compute_speedup = workload::compute_speedup(2);
    progress.inc(1);
    let mut results = Vec::new();
    for spec in &specs {
        progress.set_message(format!(
            "{} {} {} {} threads {} B",
            spec.workload.name(),
            spec.mode,
            spec.tlab,
            spec.threads,
            spec.object_size
        ));
        results.push(workload::run(spec)?);
        progress.inc(1);
    }
    let mut instructions = Vec::new();
    if use_callgrind {
        for (label, args) in callgrind_runs {
            progress.set_message(format!("callgrind: {label}"));
            let (small, large) = (200_000, 400_000);
            instructions.push((
                label,
                args,
                callgrind::instructions_per_object(args, small, large)?,
            ));
            progress.inc(1);
        }
    }
    progress.finish_and_clear();

    fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut lines = String::new();
    for result in &results {
        lines.push_str(&serde_json::to_string(result).map_err(|e| e.to_string())?);
        lines.push('\n');
    }
    fs::write(out.join("results.jsonl"), lines).map_err(|e| e.to_string())?;
    let text = render(
        quick,
        scale,
        compute_speedup,
        &results,
        &instructions,
        started.elapsed().as_secs_f64(),
    );
    let path = out.join("README.md");
    fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!(
        "wrote {} ({:.0} s)",
        path.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn find<'r>(
    results: &'r [RunResult],
    workload: Workload,
    mode: Mode,
    policy: &str,
    threads: usize,
    size: usize,
) -> &'r RunResult {
    find_zeroing(results, workload, mode, policy, threads, size, "refill")
}

fn find_zeroing<'r>(
    results: &'r [RunResult],
    workload: Workload,
    mode: Mode,
    policy: &str,
    threads: usize,
    size: usize,
    zero: &str,
) -> &'r RunResult {
    results
        .iter()
        .find(|r| {
            r.zero == zero
                && r.workload == workload.name()
                && r.mode == mode.name()
                && r.threads == threads
                && r.object_size == size
                && (mode == Mode::Shared || tlab_label(r) == policy)
        })
        .expect("every configuration of the report was run")
}

fn tlab_label(result: &RunResult) -> String {
    match result.tlab_policy {
        "fixed" => ByteSize::new(result.tlab_size as usize).to_string(),
        other => other.to_string(),
    }
}

fn check(holds: bool) -> &'static str {
    if holds {
        "yes"
    } else {
        "**no**"
    }
}

fn render(
    quick: bool,
    scale: &Scale,
    compute_speedup: f64,
    results: &[RunResult],
    instructions: &[(&str, &[&str], f64)],
    seconds: f64,
) -> String {
    let mut s = String::new();
    let command = if quick {
        "hab report --quick"
    } else {
        "hab report"
    };
    let _ = writeln!(s, "# Hab report\n");
    let _ = writeln!(
        s,
        "Written by `{command}` (`cargo run --release -p hab-cli -- report{}`) in {seconds:.0} s. \
         Every figure below was measured in this run; `results.jsonl` beside this file has every \
         run as one JSON line.\n",
        if quick { " --quick" } else { "" }
    );
    let _ = writeln!(s, "## Machine\n");
    for line in machine::describe() {
        let _ = writeln!(s, "- {line}");
    }
    let _ = writeln!(
        s,
        "- A pure compute loop ran {compute_speedup:.2}× faster on 2 threads than on 1 in this run \
         (2.00 would be perfect scaling); multi-thread figures are judged against it.\n"
    );

    // Shipilëv.
    let _ = writeln!(
        s,
        "## Shipilëv's experiment: allocation throughput against TLAB size\n"
    );
    let _ = writeln!(
        s,
        "`alloc-array`: each thread allocates {} objects of 16 bytes, writes each header and keeps \
         each address in its own pre-touched array, in a pre-touched heap that needs no collection. \
         Median of {} repetitions after {} warm-up; `shared` is `-XX:-UseTLAB`.\n",
        scale.array_objects, scale.repeat, scale.warmup
    );
    let _ = writeln!(s, "| threads | TLAB | median ms | min ms | ns/object | M objects/s | MB/s | refills | waste % | vs 1 MiB TLAB |");
    let _ = writeln!(
        s,
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for threads in THREADS {
        let big = find(
            results,
            Workload::AllocArray,
            Mode::Tlab,
            "1MiB",
            threads,
            16,
        );
        for r in results
            .iter()
            .filter(|r| r.workload == "alloc-array" && r.threads == threads && r.zero == "refill")
        {
            let label = if r.mode == "shared" {
                "shared (no TLAB)".to_string()
            } else {
                tlab_label(r)
            };
            let _ = writeln!(
                s,
                "| {} | {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.0} | {} | {:.2} | {:.2}× |",
                threads,
                label,
                r.elapsed_ms_median,
                r.elapsed_ms_min,
                r.ns_per_alloc,
                r.allocs_per_sec / 1e6,
                r.bytes_per_sec / 1e6,
                r.refills,
                r.waste_pct,
                r.allocs_per_sec / big.allocs_per_sec
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "| claim | threads | measured | holds |");
    let _ = writeln!(s, "| --- | ---: | ---: | --- |");
    for threads in THREADS {
        let tlab = find(
            results,
            Workload::AllocArray,
            Mode::Tlab,
            "256KiB",
            threads,
            16,
        );
        let shared = find(results, Workload::AllocArray, Mode::Shared, "", threads, 16);
        let ratio = tlab.allocs_per_sec / shared.allocs_per_sec;
        let claim = if threads == 1 {
            "`tlab` (256 KiB) ≥ 2× `shared` throughput"
        } else {
            "`tlab` (256 KiB) / `shared` throughput (reported)"
        };
        let holds = if threads == 1 {
            check(ratio >= 2.0)
        } else {
            "—"
        };
        let _ = writeln!(s, "| {claim} | {threads} | {ratio:.2}× | {holds} |");
    }
    for threads in THREADS {
        let small = find(
            results,
            Workload::AllocArray,
            Mode::Tlab,
            "1KiB",
            threads,
            16,
        );
        let big = find(
            results,
            Workload::AllocArray,
            Mode::Tlab,
            "1MiB",
            threads,
            16,
        );
        let _ = writeln!(
            s,
            "| 1 KiB / 1 MiB TLAB throughput: the baseline a middle level must beat | {threads} | {:.2} | — |",
            small.allocs_per_sec / big.allocs_per_sec
        );
    }
    let _ = writeln!(s);
    let big = find(results, Workload::AllocArray, Mode::Tlab, "1MiB", 1, 16);
    let written = big.allocs_per_sec * (big.object_size + std::mem::size_of::<usize>()) as f64;
    let _ = writeln!(
        s,
        "With 1 MiB TLABs one thread writes {:.1} GB/s (objects plus the array of addresses). \
         Reused memory is zeroed when a TLAB is taken (the library's default). When the heap \
         does not fit in the caches, a large TLAB zeroed at refill goes through memory twice \
         (zeroes, then objects), while a small one is zeroed in the L1 cache just before its \
         objects are written. The same runs without zeroing (`--zero never`, the runtime initialises \
         objects):\n",
        written / 1e9
    );
    let _ = writeln!(
        s,
        "| threads | TLAB | zeroed at refill: ns/object | not zeroed: ns/object |"
    );
    let _ = writeln!(s, "| ---: | --- | ---: | ---: |");
    for threads in THREADS {
        for policy in ZEROING_SWEEP {
            let label = policy.to_string();
            let zeroed = find(
                results,
                Workload::AllocArray,
                Mode::Tlab,
                &label,
                threads,
                16,
            );
            let raw = find_zeroing(
                results,
                Workload::AllocArray,
                Mode::Tlab,
                &label,
                threads,
                16,
                "never",
            );
            let _ = writeln!(
                s,
                "| {threads} | {label} | {:.2} | {:.2} |",
                zeroed.ns_per_alloc, raw.ns_per_alloc
            );
        }
    }
    let _ = writeln!(s);

    // Jaffer.
    let _ = writeln!(
        s,
        "## Jaffer's experiment: TLAB against a shared CAS, by object size\n"
    );
    let _ = writeln!(
        s,
        "`alloc-object`: each thread allocates {} objects, writes each header and drops it; the \
         heap is {} (it stays in the caches), and when it is full the thread that noticed stops the \
         world and resets it. TLABs use the adaptive policy. Median of {} repetitions.\n",
        scale.object_objects,
        ByteSize::new(JAFFER_HEAP_BYTES),
        scale.repeat
    );
    let _ = writeln!(
        s,
        "| object | threads | tlab ns/object | shared ns/object | shared / tlab | collections |"
    );
    let _ = writeln!(s, "| ---: | ---: | ---: | ---: | ---: | ---: |");
    for size in JAFFER_SIZES {
        for threads in THREADS {
            let tlab = find(
                results,
                Workload::AllocObject,
                Mode::Tlab,
                "adaptive",
                threads,
                size,
            );
            let shared = find(
                results,
                Workload::AllocObject,
                Mode::Shared,
                "",
                threads,
                size,
            );
            let _ = writeln!(
                s,
                "| {size} B | {threads} | {:.2} | {:.2} | {:.1}× | {} |",
                tlab.ns_per_alloc,
                shared.ns_per_alloc,
                shared.ns_per_alloc / tlab.ns_per_alloc,
                tlab.collections
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "Scaling from 1 to 2 threads (same work per thread; speed-up = 2 × t(1) / t(2)), against the compute loop's {compute_speedup:.2}×:\n");
    let _ = writeln!(
        s,
        "| object | mode | speed-up | ÷ compute loop's | claim: tlab ≥ 0.9× the compute loop's |"
    );
    let _ = writeln!(s, "| ---: | --- | ---: | ---: | --- |");
    for size in JAFFER_SIZES {
        for mode in [Mode::Tlab, Mode::Shared] {
            let one = find(results, Workload::AllocObject, mode, "adaptive", 1, size);
            let two = find(results, Workload::AllocObject, mode, "adaptive", 2, size);
            let speedup = 2.0 * one.elapsed_ms_median / two.elapsed_ms_median;
            let relative = speedup / compute_speedup;
            let holds = if mode == Mode::Tlab {
                check(relative >= 0.9)
            } else {
                "—"
            };
            let _ = writeln!(
                s,
                "| {size} B | {mode} | {speedup:.2}× | {relative:.2} | {holds} |"
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "In `tlab` mode the threads share nothing but the refill CAS and the collections. Larger \
         objects write more fresh cache lines per object (zeroes at refill, then headers), so \
         their cost is the bandwidth of the cache level the heap lives in, which both CPUs share; \
         `hab run --workload alloc-object --object-size 144 --zero never` shows the part that \
         zeroing takes.\n"
    );

    // Instructions.
    let _ = writeln!(s, "## Instructions per allocation (callgrind)\n");
    if instructions.is_empty() {
        let _ = writeln!(
            s,
            "valgrind was not found, so this run counted no instructions.\n"
        );
    } else {
        let _ = writeln!(
            s,
            "Difference between runs of 400 000 and 200 000 objects, divided by 200 000: set-up \
             cancels out, refills and collections are amortised in. The loop is the workload's \
             own: fast path, header store and loop counter.\n"
        );
        let _ = writeln!(s, "| run | instructions/object | command |");
        let _ = writeln!(s, "| --- | ---: | --- |");
        for (label, args, count) in instructions {
            let _ = writeln!(
                s,
                "| {label} | {count:.2} | `{}` |",
                callgrind::command_line(args)
            );
        }
        if let Some((_, _, count)) = instructions.first() {
            let _ = writeln!(s, "\nClaim: `alloc-object` with 16-byte objects costs at most 10 instructions per object: {}.\n", check(*count <= 10.0));
        }
    }
    s
}
