//! `hab report`: runs the seeds' experiments and writes `DIR/README.md` (tables, and the claims
//! each experiment is meant to show, checked against this run's figures) and
//! `DIR/results.jsonl` (every run, one JSON line each).
//!
//! Each experiment is a file with a type that implements [`experiment::Experiment`] (the runs
//! it needs, its own measurements, its section), listed once in [`EXPERIMENTS`]; this file
//! runs the list and frames its sections (the machine, the summary, the claims). What every
//! experiment reads is in `shared.rs`, and no file here imports one that imports it back.

mod c_runtime;
mod claims;
mod concurrency_ids;
mod costs;
mod cpu_labs;
mod data;
mod end_of_cycle;
mod experiment;
mod hotspot;
pub mod hotspot_apps;
pub mod hotspot_apps_pool;
pub mod hotspot_apps_section;
pub mod hotspot_chat;
pub mod hotspot_hab;
pub mod hotspot_hab_section;
pub mod hotspot_observed;
pub mod hotspot_observed_section;
mod hotspot_run;
pub mod hotspot_runner;
mod html;
mod jaffer;
mod jvm;
mod middle;
pub mod middle_section;
mod noise;
mod plot;
mod scale;
mod shared;
mod shipilev;
pub mod shipilev_section;
mod summary;
mod threads;
mod vm;
pub mod vm_section;

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use crate::machine;
use crate::workload::{self, RunSpec};
use claims::Claims;
use experiment::{Context, Experiment, Results};
pub use scale::{Scale, Size};
use shared::{Extras, Figures, Measured};

/// The report's experiments, in the order of their sections. Adding one is a file with a type
/// that implements [`Experiment`] and a line here.
pub const EXPERIMENTS: &[&dyn Experiment] = &[
    &shipilev_section::Shipilev,
    &jaffer::Jaffer,
    &middle_section::Middle,
    &cpu_labs::CpuLabs,
    &concurrency_ids::ConcurrencyIds,
    &vm_section::Vm,
    &end_of_cycle::EndOfCycle,
    &c_runtime::CRuntimeExperiment,
    &hotspot_hab_section::HotSpotWithHabs,
    &hotspot_chat::HotSpotManyThreads,
    &hotspot_observed_section::HotSpotObserved,
    &hotspot_apps_section::HotSpotApps,
    &costs::CostsExperiment,
];

/// Fails at once, naming `--out`, when the report could not be written there: before minutes
/// of measurements, not after.
fn check_writable(out: &Path) -> Result<(), String> {
    let probe = out.join(".hab-write-check");
    fs::create_dir_all(out)
        .and_then(|()| fs::write(&probe, b""))
        .and_then(|()| fs::remove_file(&probe))
        .map_err(|e| {
            format!(
                "--out {}: cannot write the report there: {e}",
                out.display()
            )
        })
}

/// Runs every experiment and writes the report; `cpus` simulates a machine of that many CPUs.
pub fn write(size: Size, jvm: Option<bool>, cpus: Option<usize>, out: &Path) -> Result<(), String> {
    let threads = cpus.map_or_else(
        threads::Threads::of_this_machine,
        threads::Threads::simulated,
    );
    let scale = Scale::new(size, threads);
    // HotSpot runs when asked, else at the default and full scales when Java and Maven exist.
    let jvm_skipped = match jvm {
        Some(false) => Some("turned off with --no-jvm".to_string()),
        _ if scale.threads.is_simulated() => {
            Some("the machine is simulated (`--cpus`), and HotSpot sees the real one".into())
        }
        _ if scale.quick && jvm.is_none() => Some("the quick scale skips it (add --jvm)".into()),
        _ if !jvm::available() => Some("`java` or `mvn` is not on the PATH".into()),
        _ => None,
    };
    check_writable(out)?;
    let started = Instant::now();
    let mut specs: Vec<RunSpec> = Vec::new();
    for spec in EXPERIMENTS.iter().flat_map(|e| e.runs(&scale)) {
        if !specs.contains(&spec) {
            specs.push(spec);
        }
    }
    let mut cx = Context {
        scale,
        hotspot: hotspot::HotSpot::Skipped(
            jvm_skipped.clone().unwrap_or_else(|| "not measured".into()),
        ),
        jvm_skipped,
        measured: Measured { runs: Vec::new() },
        extras: Extras {
            compute_speedups: Vec::new(),
            noise: noise::Noise::default(),
        },
        bench_jar: None,
        results: Results::default(),
        figures: Figures {
            dir: out.to_path_buf(),
        },
    };
    let jvm_steps = if cx.jvm_skipped.is_none() {
        jvm::steps(&cx.scale) + 1
    } else {
        0
    };
    let own_steps: usize = EXPERIMENTS.iter().map(|e| e.steps(&cx)).sum();
    let compute_counts = cx.scale.threads.scaling();
    let progress =
        ProgressBar::new((compute_counts.len() + specs.len() + jvm_steps + own_steps) as u64);
    progress.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} (about {eta} left) {msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );

    let mut timings = Timings::starting_now();
    for threads in compute_counts {
        progress.set_message(format!("compute loop on 1 and {threads} threads"));
        let speedup = if threads == 1 {
            1.0
        } else {
            workload::compute_speedup(threads)
        };
        cx.extras.compute_speedups.push((threads, speedup));
        progress.inc(1);
    }
    cx.extras.noise.probe();
    timings.mark("the compute loop");
    for spec in specs {
        progress.set_message(format!(
            "{} {} {} {} {} threads {} B",
            spec.workload.name(),
            spec.mode,
            hab::MiddleLevelSpec::list_to_string(&spec.middle),
            spec.tlab,
            spec.threads,
            spec.object_size
        ));
        let result = workload::run(&spec)?;
        cx.measured.runs.push((spec, result));
        cx.extras.noise.probe();
        progress.inc(1);
    }
    timings.mark("the `hab run` runs every experiment reads");
    if cx.jvm_skipped.is_none() {
        measure_hotspot(&mut cx, &progress);
        timings.mark("stock HotSpot on the same workloads");
    }
    for experiment in EXPERIMENTS {
        experiment.measure(&mut cx, &progress)?;
        cx.extras.noise.probe();
        timings.mark(experiment.name());
    }
    progress.finish_and_clear();

    fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    data::write_all(out, &cx.measured, vm::runs(&cx))?;
    if let hotspot::HotSpot::Measured { points, .. } = &cx.hotspot {
        let json = serde_json::to_string_pretty(points).map_err(|e| e.to_string())?;
        fs::write(out.join("data/hotspot.json"), json).map_err(|e| e.to_string())?;
    }

    let mut claims = Claims::default();
    let sections: String = EXPERIMENTS
        .iter()
        .map(|experiment| experiment.section(&cx, &mut claims))
        .collect();
    let mut text = header(&cx.scale, &cx.extras, started.elapsed().as_secs_f64());
    text += &timings.render();
    text += &experiment_list();
    text += &cx.hotspot.note();
    text += &summary::render(
        &cx.scale,
        &cx.measured,
        costs::counted(&cx),
        vm::runs(&cx),
        &cx.hotspot,
    );
    if cx.scale.threads.is_simulated() {
        text += "**The machine is simulated (`--cpus`): claims judged on times mean nothing in \
                 this run; those on counts (collections, waste, foreign allocations, \
                 instructions) hold for the simulated machine.**\n\n";
    }
    text += &claims.render();
    text += &sections;
    let path = out.join("README.md");
    fs::write(&path, &text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let page = out.join("index.html");
    fs::write(&page, html::page(&text, out))
        .map_err(|e| format!("cannot write {}: {e}", page.display()))?;
    println!(
        "wrote {} ({:.0} s)",
        path.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Stock HotSpot on the same workloads (`bench/jvm`, built with Maven). Its failing costs
/// only HotSpot's columns, not the report.
fn measure_hotspot(cx: &mut Context, progress: &ProgressBar) {
    progress.set_message("building bench/jvm with Maven");
    let measured = jvm::build().and_then(|built| {
        progress.inc(1);
        let points = jvm::measure(&built, &cx.scale, progress)?;
        Ok((built, points))
    });
    match measured {
        Ok((built, points)) => {
            cx.hotspot = hotspot::HotSpot::Measured {
                version: built.version.clone(),
                points,
            };
            cx.bench_jar = Some(built.jar);
        }
        Err(why) => cx.hotspot = hotspot::HotSpot::Skipped(format!("it failed: {why}")),
    }
}

/// The list of the report's experiments, linked to their sections.
fn experiment_list() -> String {
    let mut s = String::from("## Experiments\n\n");
    for (number, experiment) in EXPERIMENTS.iter().enumerate() {
        let _ = writeln!(s, "{}. {}", number + 1, experiment.name());
    }
    s.push('\n');
    s
}

fn header(scale: &Scale, extras: &Extras, seconds: f64) -> String {
    let mut s = String::new();
    let flag = match scale.name {
        "default" => String::new(),
        name => format!(" --{name}"),
    };
    let _ = writeln!(s, "# Hab report\n");
    let _ = writeln!(
        s,
        "Hab is the allocation subsystem a garbage-collected runtime embeds: threads bump a \
         pointer in their TLAB; TLABs refill from per-CPU, per-core or per-package buffers chosen \
         by the CPU the thread runs on (`hab` mode), which refill from a global heap; or threads \
         bump objects straight into the LAB of their CPU inside a restartable sequence (`cpu-lab` \
         mode), and `flip` chooses between TLABs and per-CPU LABs at each collection. This \
         report measures each mode on this machine against the seed papers' experiments, and \
         against HotSpot running the same workloads.\n"
    );
    let _ = writeln!(
        s,
        "Written by `hab report{flag}` (`cargo run --release -p hab-cli -- report{flag}`) in \
         {seconds:.0} s. Every figure below was measured in this run; `results.jsonl` beside this \
         file has every run as one JSON line, and `data/alloc-runs.csv` the `hab run` command \
         that reproduces each. Times per object read `median (min–max)` over the repetitions. \
         A claim holds (yes) when its figure's whole range over the repetitions is on the right \
         side of its bound, does not (**no**) when the whole range is on the wrong side, and is \
         *inconclusive* when the range straddles the bound: this run was too noisy to say.\n"
    );
    let _ = writeln!(s, "## Machine\n");
    for line in machine::describe() {
        let _ = writeln!(s, "- {line}");
    }
    let _ = writeln!(s, "- {}", scale.threads.describe());
    let speedups: Vec<String> = extras
        .compute_speedups
        .iter()
        .filter(|(threads, _)| *threads > 1)
        .map(|(threads, speedup)| format!("{speedup:.2}× on {threads} threads"))
        .collect();
    let _ = writeln!(
        s,
        "- A pure compute loop's speed-up over one thread in this run: {} (perfect scaling \
         would equal the thread count); multi-thread figures are judged against it at the same \
         count.",
        speedups.join(", ")
    );
    let _ = writeln!(s, "- {}\n", extras.noise.describe());
    s
}

/// Where the report's time went: each stage's seconds, in order.
struct Timings {
    /// When the stage now running began.
    last: Instant,
    stages: Vec<(String, f64)>,
}

impl Timings {
    /// The first stage begins now.
    fn starting_now() -> Timings {
        Timings {
            last: Instant::now(),
            stages: Vec::new(),
        }
    }

    /// Ends the stage named `what`; the next begins.
    fn mark(&mut self, what: &str) {
        let now = Instant::now();
        self.stages
            .push((what.to_string(), (now - self.last).as_secs_f64()));
        self.last = now;
    }

    fn render(&self) -> String {
        let mut s = String::from(
            "Where this run's time went (seconds; each experiment's own measurements, after \
             the `hab run` runs they share):\n\n| stage | s |\n| --- | ---: |\n",
        );
        for (what, seconds) in &self.stages {
            let _ = writeln!(s, "| {what} | {seconds:.0} |");
        }
        s.push('\n');
        s
    }
}
