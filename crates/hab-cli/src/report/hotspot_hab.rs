//! HotSpot with HABs (`jvm/hotspot`): the Kirsch et al. seed's experiment on the JVM that
//! `jvm/hotspot/build.sh` builds. `bench/jvm`'s javac workload (N threads, each compiling a
//! real sources jar with `javax.tools`) runs on a collector (Parallel or G1) as shipped and
//! with `-XX:+UseHAB` over a grid of TLAB sizes (fixed, or HotSpot's adaptive sizing) and
//! middle levels (per-core and per-package buffers with compare-and-swap, per-CPU buffers
//! restartable or not). Everything runs the same `libjvm.so`: with `-XX:-UseHAB` its TLAB path
//! is stock.
//!
//! `hab hotspot-hab javac` runs a grid and writes its runs as JSON; `hab report` runs one when the
//! JVM is built, and renders the runs recorded under `docs/results/` (each with its machine).
//!
//! What the runs say, and the report's section, is `hotspot_hab_section.rs`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::hotspot_runner::{run_rounds, ConfigPoint, Jvm, JvmConfig, Progress, Rounds};
use crate::figures::Spread;

/// Stock HotSpot in the grid.
pub(super) fn stock() -> JvmConfig {
    JvmConfig::new("stock", &["-XX:-UseHAB"])
}

/// HABs with `levels` (`-XX:HABLevels`), the CPU read by `cpu_id` (`-XX:HABCpuId`).
pub(super) fn habs(levels: &str, cpu_id: &str) -> JvmConfig {
    let label = if levels.starts_with("cpu") {
        let kind = if cpu_id == "rseq" {
            "restartable"
        } else {
            "compare-and-swap"
        };
        format!("{levels} ({kind})")
    } else {
        levels.to_string()
    };
    JvmConfig::new(&label, &["-XX:+UseHAB"]).with([
        format!("-XX:HABLevels={levels}"),
        format!("-XX:HABCpuId={cpu_id}"),
    ])
}

/// A HotSpot collector HABs work with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Collector {
    /// `-XX:+UseParallelGC` (the runs recorded before G1 had HABs are Parallel's).
    #[default]
    Parallel,
    /// `-XX:+UseG1GC`, HotSpot's default.
    G1,
}

impl Collector {
    pub const ALL: [Collector; 2] = [Collector::Parallel, Collector::G1];

    /// The flag that selects it.
    pub fn flag(self) -> &'static str {
        match self {
            Collector::Parallel => "-XX:+UseParallelGC",
            Collector::G1 => "-XX:+UseG1GC",
        }
    }

    /// Its name in tables and headings.
    pub fn name(self) -> &'static str {
        match self {
            Collector::Parallel => "Parallel",
            Collector::G1 => "G1",
        }
    }
}

impl std::str::FromStr for Collector {
    type Err = String;

    fn from_str(text: &str) -> Result<Collector, String> {
        match text {
            "parallel" => Ok(Collector::Parallel),
            "g1" => Ok(Collector::G1),
            other => Err(format!("{other:?}: expected parallel or g1")),
        }
    }
}

/// What to run: every configuration at every TLAB setting, for each thread count.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Grid {
    /// The collector every run of the grid uses.
    #[serde(default)]
    pub collector: Collector,
    pub threads: Vec<usize>,
    /// Fixed TLAB sizes in bytes; `None` is HotSpot's adaptive sizing.
    pub tlab_bytes: Vec<Option<usize>>,
    pub configs: Vec<JvmConfig>,
    /// Timed compiles per thread (after one untimed).
    pub compiles: usize,
    pub repeat: usize,
    /// `-Xms`/`-Xmx` and `-Xmn`.
    pub heap: String,
    pub young: String,
}

impl Grid {
    /// The seed's grid: TLABs of 1 KiB to 512 KiB and adaptive; per-core buffers of 512 KiB to
    /// 16 MiB; per-package buffers of 8 to 128 MiB; per-CPU buffers of 256 KiB both ways.
    pub fn seed(collector: Collector, threads: Vec<usize>, compiles: usize, repeat: usize) -> Grid {
        let mut configs = vec![stock()];
        for levels in ["core:512K", "core:1M", "core:2M", "core:4M", "core:16M"] {
            configs.push(habs(levels, "rseq"));
        }
        for levels in ["package:8M", "package:32M", "package:128M"] {
            configs.push(habs(levels, "rseq"));
        }
        configs.push(habs("cpu:256K", "rseq"));
        configs.push(habs("cpu:256K", "getcpu"));
        Grid {
            collector,
            threads,
            tlab_bytes: [1, 4, 16, 64, 512]
                .iter()
                .map(|kib| Some(kib << 10))
                .chain([None])
                .collect(),
            configs,
            compiles,
            repeat,
            heap: "2g".into(),
            young: "1g".into(),
        }
    }

    /// A few points of the seed's grid, for the default report: stock, `auto` and per-CPU
    /// buffers both ways under Parallel, stock and `auto` under G1, to keep the report's time.
    pub fn small(
        collector: Collector,
        threads: Vec<usize>,
        compiles: usize,
        repeat: usize,
    ) -> Grid {
        let configs = match collector {
            Collector::Parallel => vec![
                stock(),
                // `-XX:+UseHAB` and no other HAB flag: the levels libhab picks for the
                // machine and eden.
                habs("auto", "rseq"),
                habs("cpu:256K", "rseq"),
                habs("cpu:256K", "getcpu"),
            ],
            Collector::G1 => vec![stock(), habs("auto", "rseq")],
        };
        Grid {
            collector,
            threads,
            tlab_bytes: vec![Some(4 << 10), None],
            configs,
            compiles,
            repeat,
            heap: "2g".into(),
            young: "1g".into(),
        }
    }

    pub fn runs(&self) -> usize {
        self.threads.len() * self.tlab_bytes.len() * self.configs.len() * self.repeat
    }
}

/// One level's totals at exit, from the JVM's `gc+tlab` summary.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LevelTotals {
    pub level: String,
    pub allocs: u64,
    pub foreign_allocs: u64,
    pub refills: u64,
    pub waste_kib: u64,
}

/// One configuration at one TLAB setting and thread count, over the repetitions.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    pub config: JvmConfig,
    pub tlab_bytes: Option<usize>,
    pub threads: usize,
    pub compiles_per_min: Vec<f64>,
    pub collections: Vec<u64>,
    /// Each level's totals, summed over the repetitions.
    pub levels: Vec<LevelTotals>,
    /// TLABs the levels left to the collector (summed): larger than the lowest buffer, or
    /// asked when eden had no room for a buffer (declined).
    pub direct_tlabs: u64,
    /// The `gc+tlab` lines of the first repetition.
    pub log: Vec<String>,
}

impl Point {
    pub(super) fn throughput(&self) -> Option<Spread> {
        Spread::of_some(&self.compiles_per_min)
    }
}

impl ConfigPoint for Point {
    /// The TLAB setting and the threads.
    type Setting = (Option<usize>, usize);
    fn setting(&self) -> (Option<usize>, usize) {
        (self.tlab_bytes, self.threads)
    }
    fn config(&self) -> &JvmConfig {
        &self.config
    }
}

/// A grid's runs, and where they ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Runs {
    pub machine: String,
    pub jvm: String,
    pub grid: Grid,
    pub points: Vec<Point>,
}

/// The grids `hab report` runs at `scale`, one per collector: none at the quick scale; a few
/// points with many threads at the default ([`many_threads`]); the seed's grid at the full
/// scale, on every CPU and with many threads.
pub fn grids_for(scale: &super::scale::Scale) -> Vec<Grid> {
    let threads = &scale.threads;
    Collector::ALL
        .into_iter()
        .filter_map(|collector| match scale.name {
            "default" => Some(Grid::small(collector, vec![many_threads(threads)], 1, 2)),
            "full" => Some(Grid::seed(collector, machine_threads(threads), 2, 3)),
            _ => None,
        })
        .collect()
}

/// `hab hotspot-hab`'s thread counts where none are given: every CPU of this machine busy,
/// and [`many_threads`].
pub fn default_threads() -> Vec<usize> {
    machine_threads(&super::threads::Threads::of_this_machine())
}

/// Every CPU busy, and [`many_threads`].
fn machine_threads(threads: &super::threads::Threads) -> Vec<usize> {
    vec![threads.cpus(), many_threads(threads)]
}

/// Threads far more numerous than CPUs: 16 per CPU, and at least the seed's own 80 (fewer
/// threads compile too little for a 1 GiB young generation to collect more than once or
/// twice per run).
fn many_threads(threads: &super::threads::Threads) -> usize {
    (16 * threads.cpus()).max(80)
}

/// What one javac run gave: compiles per minute, collections, each level's totals and the
/// TLABs the levels left to the collector (from the JVM's exit line), and the `HAB` lines of
/// its `gc+tlab` summary, to show.
struct JavacRun {
    compiles_per_min: f64,
    collections: u64,
    levels: Vec<LevelTotals>,
    direct_tlabs: u64,
    log: Vec<String>,
}

/// What a javac run needs besides the JVM: `bench/jvm`'s jar and the sources it compiles.
pub(crate) struct JavacInputs {
    bench_jar: PathBuf,
    sources_jar: PathBuf,
}

/// Runs the javac workload once for `point` of `grid`.
fn run_once(
    jvm: &Jvm,
    inputs: &JavacInputs,
    grid: &Grid,
    point: &Point,
) -> Result<JavacRun, String> {
    let mut options = vec![
        grid.collector.flag().to_string(),
        format!("-Xms{}", grid.heap),
        format!("-Xmx{}", grid.heap),
        format!("-Xmn{}", grid.young),
        // The sentences for people too, on standard output, to show.
        "-Xlog:gc+tlab=info".to_string(),
    ];
    if let Some(bytes) = point.tlab_bytes {
        options.extend([
            format!("-XX:TLABSize={bytes}"),
            format!("-XX:MinTLABSize={}", bytes.min(2048)),
            "-XX:-ResizeTLAB".to_string(),
        ]);
    }
    let output = jvm
        .run()
        .options(options)
        .options(&point.config.flags)
        .program(
            &inputs.bench_jar,
            "hab.bench.Javac",
            [
                inputs.sources_jar.as_os_str().to_os_string(),
                point.threads.to_string().into(),
                grid.compiles.to_string().into(),
            ],
        )
        .run(&jvm.gc_log())?
        .succeeded()?;
    let levels = output
        .exit
        .levels()
        .into_iter()
        .map(|(level, stats)| LevelTotals {
            level,
            allocs: stats.allocs,
            foreign_allocs: stats.foreign_allocs,
            refills: stats.refills,
            waste_kib: stats.waste_bytes / 1024,
        })
        .collect();
    Ok(JavacRun {
        compiles_per_min: output.stderr_value("compiles_per_min")?,
        collections: output.stderr_value("collections")?,
        levels,
        direct_tlabs: output.exit.tlabs_from_the_collector(),
        log: output
            .stdout
            .lines()
            .filter(|line| line.contains("HAB"))
            .map(str::to_string)
            .collect(),
    })
}

impl Rounds for Runs {
    type Inputs = JavacInputs;

    fn runs_per_round(&self) -> usize {
        self.points.len()
    }

    fn describe(&self, index: usize) -> String {
        let point = &self.points[index];
        format!(
            "javac, {} threads, TLAB {}, {}",
            point.threads,
            tlab_label(point.tlab_bytes),
            point.config.label
        )
    }

    fn run(&mut self, index: usize, jvm: &Jvm, inputs: &JavacInputs) -> Result<(), String> {
        let run = run_once(jvm, inputs, &self.grid, &self.points[index])?;
        let point = &mut self.points[index];
        let first = point.compiles_per_min.is_empty();
        point.compiles_per_min.push(run.compiles_per_min);
        point.collections.push(run.collections);
        for totals in run.levels {
            match point.levels.iter_mut().find(|l| l.level == totals.level) {
                Some(sum) => {
                    sum.allocs += totals.allocs;
                    sum.foreign_allocs += totals.foreign_allocs;
                    sum.refills += totals.refills;
                    sum.waste_kib += totals.waste_kib;
                }
                None => point.levels.push(totals),
            }
        }
        point.direct_tlabs += run.direct_tlabs;
        if first {
            point.log = run.log;
        }
        Ok(())
    }
}

/// Runs `grid` on `jdk`, the configurations of one TLAB setting back to back in each round.
pub fn measure(
    jdk: &Path,
    bench_jar: &Path,
    sources_jar: &Path,
    grid: &Grid,
    progress: &mut Progress<'_, Runs>,
) -> Result<Runs, String> {
    let jvm = Jvm::open(jdk, "javac")?;
    let inputs = JavacInputs {
        bench_jar: bench_jar.to_path_buf(),
        sources_jar: sources_jar.to_path_buf(),
    };
    let mut points: Vec<Point> = Vec::new();
    for &threads in &grid.threads {
        for &tlab_bytes in &grid.tlab_bytes {
            for config in &grid.configs {
                points.push(Point {
                    config: config.clone(),
                    tlab_bytes,
                    threads,
                    compiles_per_min: vec![],
                    collections: vec![],
                    levels: vec![],
                    direct_tlabs: 0,
                    log: vec![],
                });
            }
        }
    }
    let mut runs = Runs {
        machine: jvm.machine.clone(),
        jvm: jvm.version.clone(),
        grid: grid.clone(),
        points,
    };
    run_rounds(&mut runs, &jvm, &inputs, grid.repeat, progress)?;
    Ok(runs)
}

pub(super) fn tlab_label(bytes: Option<usize>) -> String {
    match bytes {
        Some(bytes) => format!("{} KiB", bytes >> 10),
        None => "adaptive".into(),
    }
}
