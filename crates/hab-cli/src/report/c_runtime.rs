//! The C example runtime (`crates/hab-capi/examples/c`: a copying collector on `libhab`
//! through `hab.h`): binary-trees on 1 and 2 threads and GCBench, in every mode, beside the
//! same programs on `hab-vm` and HotSpot. The programs are built here with the system C
//! compiler against the release `libhab_capi.a`; binary-trees' lines are checked against the
//! reference program's.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use hab::Mode;
use indicatif::ProgressBar;

use super::experiment::{Context, Experiment};
use super::hotspot::{self, HotSpot};
use super::scale::Scale;
use super::vm::{self, ALL_MODES};
use crate::figures::Spread;
use crate::vm_run::VmWorkload;

/// One program in one configuration, over the repetitions.
pub struct Point {
    workload: &'static str,
    mode: Mode,
    threads: usize,
    elapsed_ms: Vec<f64>,
    collections: Vec<u64>,
}

/// The C runtime's figures, or why there are none.
pub enum CRuntime {
    Measured(Vec<Point>),
    Skipped(String),
}

/// Progress steps of [`measure`].
pub fn steps(scale: &Scale) -> usize {
    ALL_MODES.len() * (scale.threads.ends_and_two().len() + 1) + 1
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds `libhab_capi.a` in release mode and the two programs; their paths.
fn build() -> Result<[PathBuf; 2], String> {
    let root = workspace();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = Command::new(cargo)
        .current_dir(&root)
        .args(["build", "--release", "--quiet", "-p", "hab-capi"])
        .output()
        .map_err(|e| format!("cargo build -p hab-capi: {e}"))?;
    if !built.status.success() {
        return Err(format!(
            "cargo build -p hab-capi: {}",
            String::from_utf8_lossy(&built.stderr)
        ));
    }
    let examples = root.join("crates/hab-capi/examples/c");
    let out = root.join("target/c-runtime");
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let programs = ["binary_trees", "gcbench"].map(|name| out.join(name));
    for program in &programs {
        let name = program.file_name().expect("a file").to_string_lossy();
        let compiled = Command::new("cc")
            .args(["-std=c11", "-O2", "-I"])
            .arg(root.join("crates/hab-capi/include"))
            .arg(examples.join(format!("{name}.c")))
            .arg(examples.join("runtime.c"))
            .arg(root.join("target/release/libhab_capi.a"))
            .args(["-lpthread", "-ldl", "-lm", "-o"])
            .arg(program)
            .output()
            .map_err(|e| format!("cc: {e}"))?;
        if !compiled.status.success() {
            return Err(format!(
                "cc {name}.c: {}",
                String::from_utf8_lossy(&compiled.stderr)
            ));
        }
    }
    Ok(programs)
}

/// Runs `program` with `args`: its figures (elapsed ms, collections) and stdout lines.
fn run(program: &Path, args: &[String]) -> Result<(f64, u64, Vec<String>), String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("{} {args:?}: {stderr}", program.display()));
    }
    let figures: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap_or(""))
        .map_err(|e| format!("{} {args:?}: figures {stderr:?}: {e}", program.display()))?;
    let elapsed = figures["elapsed_ms"].as_f64().unwrap_or(f64::NAN);
    let collections = figures["collections"].as_u64().unwrap_or(0);
    let lines = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    Ok((elapsed, collections, lines))
}

/// Builds and runs the C programs, `scale.vm_repeat` times each. Building failing (no C
/// compiler, say) skips the section; a program printing wrong lines fails the report.
pub fn measure(scale: &Scale, progress: &ProgressBar) -> Result<CRuntime, String> {
    progress.set_message("building the C example runtime");
    let [binary_trees, gcbench] = match build() {
        Ok(programs) => programs,
        Err(why) => return Ok(CRuntime::Skipped(why)),
    };
    progress.inc(1);
    let depth = scale.tree_depth;
    let expected = hab_vm::workloads::binary_trees::expected(depth);
    let mut points = Vec::new();
    for mode in ALL_MODES {
        let runs = scale
            .threads
            .ends_and_two()
            .into_iter()
            .map(|threads| ("binary-trees", threads))
            .chain([("gcbench", 1)]);
        for (workload, threads) in runs {
            progress.set_message(format!("C runtime {workload} {mode} {threads} threads"));
            let mut point = Point {
                workload,
                mode,
                threads,
                elapsed_ms: Vec::new(),
                collections: Vec::new(),
            };
            for _ in 0..scale.vm_repeat {
                let (elapsed, collections, lines) = if workload == "gcbench" {
                    run(&gcbench, &[depth.to_string(), mode.to_string()])?
                } else {
                    let args = [depth.to_string(), threads.to_string(), mode.to_string()];
                    run(&binary_trees, &args)?
                };
                let right = match workload {
                    "gcbench" => lines.last().is_some_and(|l| l.contains("still reachable")),
                    _ => lines == expected,
                };
                if !right {
                    return Err(format!(
                        "the C {workload} ({mode}, {threads} threads) printed {lines:?}"
                    ));
                }
                point.elapsed_ms.push(elapsed);
                point.collections.push(collections);
            }
            points.push(point);
            progress.inc(1);
        }
    }
    Ok(CRuntime::Measured(points))
}

impl Point {
    fn cell(&self) -> String {
        let Spread { median, min, max } = Spread::of(&self.elapsed_ms);
        let collections =
            self.collections.iter().sum::<u64>() as f64 / self.collections.len().max(1) as f64;
        format!("{median:.0} ({min:.0}–{max:.0}); {collections:.0} GCs")
    }
}

/// The section: a table of elapsed ms per program and mode, with `hab-vm`'s and HotSpot's.
pub fn render(scale: &Scale, c: &CRuntime, vm_runs: &[vm::Runs], hotspot: &HotSpot) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "### The C example runtime on `libhab`\n");
    let points = match c {
        CRuntime::Measured(points) => points,
        CRuntime::Skipped(why) => {
            let _ = writeln!(s, "Not measured: {why}.\n");
            return s;
        }
    };
    let _ = writeln!(
        s,
        "`crates/hab-capi/examples/c`: a small runtime in C on `hab.h` (one header word per \
         object, root stacks, a Cheney copying collector over `hab_collection_*` between the \
         two halves of Hab's heap, each half three times the live data), running binary-trees \
         (the depths shared among worker threads; its lines checked against the reference \
         program's) and GCBench, depth {}. Time in ms `median (min–max)` over {} runs, and \
         collections; `hab-vm` runs the same programs on one thread (its table above), \
         HotSpot binary-trees on as many threads as the C runtime, sharing the depths the same \
         way (Parallel GC, 64 MiB young generation, one run):\n",
        scale.tree_depth, scale.vm_repeat
    );
    let _ = writeln!(
        s,
        "| program | {} | HotSpot |",
        ALL_MODES.map(|m| m.name()).join(" | ")
    );
    let _ = writeln!(s, "| --- |{}", " ---: |".repeat(ALL_MODES.len() + 1));
    let rows = scale
        .threads
        .ends_and_two()
        .into_iter()
        .map(|threads| ("binary-trees", threads))
        .chain([("gcbench", 1)]);
    for (workload, threads) in rows {
        let plural = if threads == 1 { "" } else { "s" };
        let _ = write!(s, "| C runtime, {workload}, {threads} thread{plural} |");
        for mode in ALL_MODES {
            let cell = points
                .iter()
                .find(|p| p.workload == workload && p.mode == mode && p.threads == threads)
                .map_or("—".into(), Point::cell);
            let _ = write!(s, " {cell} |");
        }
        let jvm = (workload == "binary-trees")
            .then(|| hotspot.find("binary-trees", |p| p.threads == threads))
            .flatten();
        let _ = writeln!(s, " {} |", hotspot::time_and_collections(jvm));
    }
    for workload in [VmWorkload::BinaryTrees, VmWorkload::GcBench] {
        let _ = write!(s, "| hab-vm, {}, 1 thread |", workload.name());
        for mode in ALL_MODES {
            let runs = vm::find(vm_runs, &vm::trees(scale, workload, mode));
            let _ = write!(
                s,
                " {}; {:.0} GCs |",
                runs.spread(|r| r.elapsed_ms, 1.0),
                runs.mean(|r| r.collections)
            );
        }
        let _ = writeln!(s, " — |");
    }
    let _ = writeln!(
        s,
        "\nThe C runtime and `hab-vm` differ in more than the language (the C runtime's space \
         also holds one iterated tree per thread, so it collects at other times); compare \
         modes within a row. With 2 CPUs, 2 threads show contention only; scaling needs a \
         machine with more.\n"
    );
    s
}

/// The experiment as the report runs it.
pub struct CRuntimeExperiment;

impl Experiment for CRuntimeExperiment {
    fn name(&self) -> &'static str {
        "The C example runtime through libhab"
    }

    fn steps(&self, cx: &Context) -> usize {
        steps(&cx.scale)
    }

    fn measure(&self, cx: &mut Context, progress: &ProgressBar) -> Result<(), String> {
        let measured = measure(&cx.scale, progress)?;
        cx.results.put(measured);
        Ok(())
    }

    fn section(&self, cx: &Context, _: &mut super::claims::Claims) -> String {
        match cx.results.get::<CRuntime>() {
            Some(c) => render(&cx.scale, c, vm::runs(cx), &cx.hotspot),
            None => String::new(),
        }
    }
}
