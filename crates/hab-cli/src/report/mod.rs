//! `hab report`: runs the seeds' experiments and writes `DIR/README.md` (tables, and the claims
//! each experiment is meant to show, checked against this run's figures) and
//! `DIR/results.jsonl` (every run, one JSON line each).
//!
//! Each experiment is a file: the runs it needs (`specs`) and the section it writes (`render`).

mod c_runtime;
mod claims;
mod costs;
mod hotspot;
pub mod hotspot_hab;
mod html;
mod jaffer;
mod jvm;
mod middle;
mod noise;
mod plab;
mod plot;
mod shipilev;
mod summary;
mod vm;

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use crate::machine;
use crate::workload::{self, RunResult, RunSpec, Workload};
use claims::{Claims, Verdict};

/// How big the experiments are.
pub struct Scale {
    /// `quick`, `default` or `full`.
    pub name: &'static str,
    pub quick: bool,
    /// Objects per thread in Shipilëv's experiment (the seed: 50 M).
    pub array_objects: usize,
    /// Objects per thread in Jaffer's experiment.
    pub object_objects: usize,
    /// Objects per run, shared among its threads, in the middle-level grid.
    pub grid_objects: usize,
    pub repeat: usize,
    pub warmup: usize,
    /// Orders per warehouse thread (VM).
    pub warehouse_orders: usize,
    /// Messages per chat connection (VM).
    pub chat_messages: usize,
    /// Depth of binary-trees and GCBench (VM).
    pub tree_depth: u32,
    /// Repetitions of each VM run.
    pub vm_repeat: usize,
}

const DEFAULT: Scale = Scale {
    name: "default",
    quick: false,
    array_objects: 50_000_000,
    object_objects: 20_000_000,
    grid_objects: 16_000_000,
    repeat: 5,
    warmup: 1,
    warehouse_orders: 20_000,
    chat_messages: 40,
    tree_depth: 16,
    vm_repeat: 3,
};
/// The seeds' sizes where they differ from the default: deeper trees, longer runs, more
/// repetitions.
const FULL: Scale = Scale {
    name: "full",
    quick: false,
    array_objects: 50_000_000,
    object_objects: 50_000_000,
    grid_objects: 50_000_000,
    repeat: 10,
    warmup: 2,
    warehouse_orders: 100_000,
    chat_messages: 200,
    tree_depth: 20,
    vm_repeat: 5,
};
const QUICK: Scale = Scale {
    name: "quick",
    quick: true,
    array_objects: 2_000_000,
    object_objects: 2_000_000,
    grid_objects: 2_000_000,
    repeat: 3,
    warmup: 1,
    warehouse_orders: 2_000,
    chat_messages: 8,
    tree_depth: 12,
    vm_repeat: 1,
};

impl Scale {
    /// A run of `workload` at this scale: 16-byte objects, 1 thread, TLAB mode, adaptive.
    pub fn spec(&self, workload: Workload) -> RunSpec {
        let (objects, heap_bytes) = match workload {
            Workload::AllocArray => (self.array_objects, None),
            Workload::AllocObject => (self.object_objects, Some(jaffer::HEAP_BYTES)),
        };
        RunSpec {
            workload,
            objects,
            heap_bytes,
            repeat: self.repeat,
            warmup: self.warmup,
            ..RunSpec::default()
        }
    }
}

/// Every run of this report, with the spec it was run from.
pub struct Measured {
    runs: Vec<(RunSpec, RunResult)>,
}

impl Measured {
    /// The result of a run; every experiment only asks for runs its `specs` listed.
    pub fn get(&self, spec: &RunSpec) -> &RunResult {
        self.runs
            .iter()
            .find(|(run, _)| run == spec)
            .map(|(_, result)| result)
            .expect("every configuration of the report was run")
    }
}

/// Where the report's plots go. Each plot is written as SVG and PNG; the section links the
/// PNG (and names the SVG) in its Markdown.
pub struct Figures {
    dir: std::path::PathBuf,
}

impl Figures {
    /// A line plot, as Markdown.
    pub fn lines(&self, stem: &str, plot: &plot::LinePlot<'_>) -> String {
        Self::link(plot.title, plot::write(&self.dir, stem, plot))
    }

    /// A bar plot, as Markdown.
    pub fn bars(&self, stem: &str, plot: &plot::BarPlot<'_>) -> String {
        Self::link(plot.title, plot::write(&self.dir, stem, plot))
    }

    fn link(title: &str, written: Result<[String; 2], String>) -> String {
        match written {
            Ok([svg, png]) => format!(
                "![{title}]({png})

(vector: [{svg}]({svg}))

"
            ),
            Err(why) => format!("(plot \"{title}\" not drawn: {why})\n\n"),
        }
    }
}

/// Figures measured outside `hab run`.
pub struct Extras {
    /// The compute loop's speed-up from 1 to 2 threads.
    pub compute_speedup: f64,
    /// The compute loop timed all through the run.
    pub noise: noise::Noise,
    pub costs: costs::Costs,
}

/// Which experiments' sizes, and whether HotSpot runs beside Hab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    Quick,
    Default,
    Full,
}

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

/// Runs every experiment and writes the report.
pub fn write(size: Size, jvm: Option<bool>, out: &Path) -> Result<(), String> {
    let scale = match size {
        Size::Quick => &QUICK,
        Size::Default => &DEFAULT,
        Size::Full => &FULL,
    };
    // HotSpot runs when asked, else at the default and full scales when Java and Maven exist.
    let run_jvm = jvm.unwrap_or(!scale.quick) && jvm::available();
    let jvm_skipped = match jvm {
        Some(false) => Some("turned off with --no-jvm".to_string()),
        _ if scale.quick && jvm.is_none() => Some("the quick scale skips it (add --jvm)".into()),
        _ if !jvm::available() => Some("`java` or `mvn` is not on the PATH".into()),
        _ => None,
    };
    check_writable(out)?;
    let started = Instant::now();
    let mut specs: Vec<RunSpec> = Vec::new();
    for spec in shipilev::specs(scale)
        .into_iter()
        .chain(jaffer::specs(scale))
        .chain(middle::specs(scale))
        .chain(plab::specs(scale))
    {
        if !specs.contains(&spec) {
            specs.push(spec);
        }
    }
    let cost_steps = costs::steps();
    let vm_steps = vm::specs(scale).len();
    let jvm_steps = if run_jvm { jvm::steps() + 1 } else { 0 };
    let hotspot_hab_grid = hotspot_hab::grid_for(scale);
    let hotspot_hab_steps = match (&hotspot_hab_grid, run_jvm) {
        (Some(grid), true) if hotspot_hab::built_jdk().is_some() => grid.runs(),
        _ => 0,
    };
    let c_steps = c_runtime::steps();
    let progress = ProgressBar::new(
        (specs.len() + 1 + cost_steps + vm_steps + c_steps + jvm_steps + hotspot_hab_steps) as u64,
    );
    progress.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} (about {eta} left) {msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );

    progress.set_message("compute loop on 1 and 2 threads");
    let compute_speedup = workload::compute_speedup(2);
    let mut noise = noise::Noise::default();
    noise.probe();
    progress.inc(1);
    let mut runs = Vec::new();
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
        runs.push((spec, result));
        noise.probe();
        progress.inc(1);
    }
    let vm_runs = vm::measure(scale, &progress)?;
    noise.probe();
    let c_runs = c_runtime::measure(scale, &progress)?;
    noise.probe();
    let mut hotspot_with_habs: Result<hotspot_hab::Runs, String> = Err(match &jvm_skipped {
        Some(why) => format!("HotSpot does not run in this report: {why}"),
        None => "bench/jvm did not build".into(),
    });
    let hotspot = match jvm_skipped {
        Some(why) => hotspot::HotSpot::Skipped(why),
        None => {
            progress.set_message("building bench/jvm with Maven");
            // HotSpot's side failing must not cost the rest of the report.
            let measured = jvm::build().and_then(|built| {
                progress.inc(1);
                let points = jvm::measure(&built, scale, &progress)?;
                Ok((
                    hotspot::HotSpot::Measured {
                        version: built.version.clone(),
                        points,
                    },
                    built,
                ))
            });
            match measured {
                Ok((hotspot, built)) => {
                    hotspot_with_habs = hotspot_hab::measure_for_report(
                        hotspot_hab_grid.as_ref(),
                        &built.jar,
                        &progress,
                    );
                    hotspot
                }
                Err(why) => hotspot::HotSpot::Skipped(format!("it failed: {why}")),
            }
        }
    };
    let costs = costs::measure(&progress)?;
    noise.probe();
    progress.finish_and_clear();
    let measured = Measured { runs };
    let extras = Extras {
        compute_speedup,
        noise,
        costs,
    };

    fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let figures = Figures {
        dir: out.to_path_buf(),
    };
    let mut lines = String::new();
    for (_, result) in &measured.runs {
        lines.push_str(&serde_json::to_string(result).map_err(|e| e.to_string())?);
        lines.push('\n');
    }
    for result in vm::results(&vm_runs) {
        lines.push_str(&serde_json::to_string(result).map_err(|e| e.to_string())?);
        lines.push('\n');
    }
    fs::write(out.join("results.jsonl"), lines).map_err(|e| e.to_string())?;
    write_data(out, &measured, &vm_runs)?;
    if let hotspot::HotSpot::Measured { points, .. } = &hotspot {
        let json = serde_json::to_string_pretty(points).map_err(|e| e.to_string())?;
        fs::write(out.join("data/hotspot.json"), json).map_err(|e| e.to_string())?;
    }

    let mut claims = Claims::default();
    let mut sections = shipilev::render(scale, &measured, &hotspot, &figures, &mut claims);
    sections += &jaffer::render(scale, &measured, &extras, &hotspot, &figures, &mut claims);
    sections += &middle::render(scale, &measured, &figures, &mut claims);
    sections += &plab::render(scale, &measured, &mut claims);
    sections += &vm::render(
        scale,
        &vm_runs,
        &hotspot,
        (
            extras.costs.instructions(costs::TLAB_OBJECTS),
            extras.costs.instructions(costs::CPU_LAB_OBJECTS),
        ),
        &figures,
        &mut claims,
    );
    sections += &c_runtime::render(scale, &c_runs, &vm_runs, &hotspot);
    sections += &hotspot_hab::render(&hotspot_with_habs);
    sections += &costs::render(&extras.costs, &mut claims);
    let mut text = header(scale, &extras, started.elapsed().as_secs_f64());
    text += &hotspot.note();
    text += &summary::render(scale, &measured, &extras, &vm_runs, &hotspot);
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

/// One row of `alloc-runs.csv`: a workload run (times with min, median and max over the
/// repetitions).
#[derive(serde::Serialize)]
struct AllocRow<'a> {
    workload: String,
    mode: String,
    tlab: String,
    middle: &'a str,
    threads: usize,
    object_bytes: usize,
    objects_per_thread: usize,
    heap_bytes: usize,
    zero: String,
    ms_min: f64,
    ms_median: f64,
    ms_max: f64,
    ns_per_object: f64,
    objects_per_sec: f64,
    refills: u64,
    slow_allocs: u64,
    waste_bytes: u64,
    collections: u64,
    foreign_allocs: u64,
    cpu_lab_labs: u64,
    cpu_lab_partial_waste_bytes: u64,
    command: String,
}

/// One row of `vm-runs.csv`: a run of a workload on Hab's VM.
#[derive(serde::Serialize)]
struct VmRow<'a> {
    workload: String,
    mode: String,
    tlab: String,
    middle: &'a str,
    threads: usize,
    heap_bytes: usize,
    ms: f64,
    ops_per_sec: f64,
    op: &'a str,
    collections: u64,
    cpu_lab_collections: u64,
    gc_ms: f64,
    live_bytes_after_gc: usize,
    tlabs: u64,
    partial_tlabs: u64,
    tlab_waste_bytes: u64,
    cpu_lab_labs: u64,
    cpu_lab_transactions: u64,
    cpu_lab_failed: u64,
    cpu_lab_invalid: u64,
    cpu_lab_sidelined: u64,
    cpu_lab_partial: u64,
    cpu_lab_partial_waste_bytes: u64,
    command: &'a str,
}

/// `value` to `decimals` places: the precision a measured figure carries in the CSV files.
fn rounded(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// Writes `rows` to `path` as CSV with a header row.
fn write_csv<T: serde::Serialize>(
    path: &Path,
    rows: impl IntoIterator<Item = T>,
) -> Result<(), String> {
    let fail = |e: csv::Error| format!("cannot write {}: {e}", path.display());
    let mut writer = csv::Writer::from_path(path).map_err(fail)?;
    for row in rows {
        writer.serialize(row).map_err(fail)?;
    }
    writer
        .flush()
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `DIR/data/*.csv`: every measured point, one row per run.
fn write_data(out: &Path, measured: &Measured, vm_runs: &[vm::Runs]) -> Result<(), String> {
    let dir = out.join("data");
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let alloc = measured.runs.iter().map(|(spec, r)| AllocRow {
        workload: r.workload.to_string(),
        mode: r.mode.to_string(),
        tlab: spec.tlab.to_string(),
        middle: &r.middle,
        threads: r.threads,
        object_bytes: r.object_size,
        objects_per_thread: r.objects,
        heap_bytes: r.heap_bytes,
        zero: r.zero.to_string(),
        ms_min: rounded(r.elapsed_ms_min, 3),
        ms_median: rounded(r.elapsed_ms_median, 3),
        ms_max: rounded(r.elapsed_ms.iter().copied().fold(f64::MIN, f64::max), 3),
        ns_per_object: rounded(r.ns_per_alloc, 4),
        objects_per_sec: rounded(r.allocs_per_sec, 0),
        refills: r.refills,
        slow_allocs: r.slow_allocs,
        waste_bytes: r.waste_bytes,
        collections: r.collections,
        foreign_allocs: r.foreign_allocs,
        cpu_lab_labs: r.cpu_lab.labs,
        cpu_lab_partial_waste_bytes: r.cpu_lab.partial_waste_bytes,
        command: spec.command(),
    });
    write_csv(&dir.join("alloc-runs.csv"), alloc)?;
    let vm = vm::results(vm_runs).map(|r| VmRow {
        workload: r.workload.to_string(),
        mode: r.mode.to_string(),
        tlab: r.tlab_policy.to_string(),
        middle: &r.middle,
        threads: r.threads,
        heap_bytes: r.heap_bytes,
        ms: rounded(r.elapsed_ms, 3),
        ops_per_sec: rounded(r.ops_per_sec, 1),
        op: r.op,
        collections: r.collections,
        cpu_lab_collections: r.cpu_lab_collections,
        gc_ms: rounded(r.gc_ms, 3),
        live_bytes_after_gc: r.live_bytes_after_gc,
        tlabs: r.tlabs,
        partial_tlabs: r.partial_tlabs,
        tlab_waste_bytes: r.tlab_waste_bytes,
        cpu_lab_labs: r.cpu_lab.labs,
        cpu_lab_transactions: r.cpu_lab.transactions,
        cpu_lab_failed: r.cpu_lab.failed_transactions,
        cpu_lab_invalid: r.cpu_lab.invalid_transactions,
        cpu_lab_sidelined: r.cpu_lab.sidelined_labs,
        cpu_lab_partial: r.cpu_lab.partial_labs,
        cpu_lab_partial_waste_bytes: r.cpu_lab.partial_waste_bytes,
        command: &r.command,
    });
    write_csv(&dir.join("vm-runs.csv"), vm)
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
         bump objects straight into the LAB of their CPU inside a restartable sequence (`plab` \
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
    let _ = writeln!(
        s,
        "- A pure compute loop ran {:.2}× faster on 2 threads than on 1 in this run (2.00 would \
         be perfect scaling); multi-thread figures are judged against it.",
        extras.compute_speedup
    );
    let _ = writeln!(s, "- {}\n", extras.noise.describe());
    s
}

/// A run's time per object as `median (min–max)` over its repetitions, in ns.
pub fn spread(result: &RunResult) -> String {
    result.ns_per_object().to_string()
}

/// How a section opens: the seed's claim with its own numbers, ours, and whether ours
/// confirm it (recorded in `claims`).
pub fn seed_claim(
    claims: &mut Claims,
    seed: &str,
    original: &str,
    ours: &str,
    verdict: Verdict,
) -> String {
    claims.judge(seed, original, verdict);
    format!("**The seed ({seed}):** {original}\n\n**Here:** {ours}\n\n**Confirmed here:** {verdict}\n\n")
}

#[cfg(test)]
mod tests {
    use super::{rounded, write_csv};

    #[test]
    fn csv_figures_keep_their_precision() {
        assert_eq!(rounded(3.4639710000000004, 3), 3.464);
        assert_eq!(rounded(1105634534.7158186, 0), 1105634535.0);
    }

    #[test]
    fn csv_rows_get_a_header_and_quoting() {
        #[derive(serde::Serialize)]
        struct Row<'a> {
            mode: &'a str,
            ms: f64,
            command: &'a str,
        }
        let path = std::env::temp_dir().join(format!("hab-csv-{}.csv", std::process::id()));
        let rows = [Row {
            mode: "cpu-lab",
            ms: 1.5,
            command: "hab run --middle core:1MiB,package:4MiB",
        }];
        write_csv(&path, rows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            text,
            "mode,ms,command\ncpu-lab,1.5,\"hab run --middle core:1MiB,package:4MiB\"\n"
        );
    }
}
