//! Real applications on HotSpot with HABs: `bench/apps`, the libraries behind DaCapo's
//! allocation-heavy members (H2, Lucene indexing and searching, Jackson, javac, the Kotlin and
//! Scala compilers), each run DaCapo-style by `hab.apps.Main` (warm-up and timed iterations,
//! fixed work split among the threads, a checksum checked against the one recorded for stock
//! HotSpot). Every configuration runs each application back to back, round after round, under
//! each collector, young generation, thread count and observer asked for;
//! `hotspot_apps_section.rs` gives time and young collections relative to stock and the
//! geometric mean over the suite, and the report's section.
//!
//! `hab hotspot-hab apps` runs it; `hab report` runs a part of it where the JVM with HABs is
//! built.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::hotspot_chat::{self, CPU_LABS, CPU_LABS_ALWAYS, HABS, HABS_SMALL, STOCK};
use super::hotspot_hab::Collector;
use super::hotspot_run::value;
use super::hotspot_runner::{jfr_flag, run_rounds, ConfigPoint, Jvm, JvmConfig, Progress, Rounds};

/// The suite's applications, as `hab.apps.Main` names them.
pub const APPS: [&str; 7] = [
    "h2", "luindex", "lusearch", "jackson", "javac", "kotlinc", "scalac",
];

/// Untimed iterations before the timed ones. On 2 CPUs an application's iterations keep
/// getting faster for 8 to 12 iterations while C2 compiles its code (G1, 2 threads, 24 MiB:
/// `lusearch` 1,841 ms at the first, 1,061 at the fifth, 566 at the twelfth); timing iterations
/// 3 to 5 timed the compiler as much as the allocation paths.
pub const WARMUP_ITERATIONS: usize = 10;

/// Timed iterations; a run's time is their median.
pub const TIMED_ITERATIONS: usize = 3;

/// The heap (`-Xms` and `-Xmx`): room for the compilers' many threads.
pub(super) const HEAP: &str = "2g";

/// The young generation: roomy, or tight enough that TLAB and level tails turn into
/// collections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Young {
    Roomy,
    Tight,
}

impl Young {
    pub fn flag(self) -> &'static str {
        match self {
            Young::Roomy => "-Xmn256m",
            Young::Tight => "-Xmn24m",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Young::Roomy => "roomy young generation (256 MiB)",
            Young::Tight => "tight young generation (24 MiB)",
        }
    }
}

impl std::str::FromStr for Young {
    type Err = String;

    fn from_str(text: &str) -> Result<Young, String> {
        match text {
            "roomy" => Ok(Young::Roomy),
            "tight" => Ok(Young::Tight),
            _ => Err(format!("'{text}': the young generation is roomy or tight")),
        }
    }
}

/// The control: stock run a second time in each round, after the other configurations. Stock
/// against stock in the same round is what the machine and each run's compilation alone make
/// of a ratio, the floor under which no configuration is told apart from stock.
pub const STOCK_AGAIN: &str = "stock again (control)";

/// The configurations: stock, HABs with adaptive TLABs (`-XX:+UseHAB`'s automatic levels)
/// and with 1 KiB TLABs, per-CPU LABs flipping with TLABs and in every cycle.
pub fn configs() -> Vec<JvmConfig> {
    hotspot_chat::configs()
        .into_iter()
        .filter(|c| {
            [STOCK, HABS, HABS_SMALL, CPU_LABS, CPU_LABS_ALWAYS].contains(&c.label.as_str())
        })
        .collect()
}

/// What to run: every combination of these, `repeat` rounds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    pub apps: Vec<String>,
    pub collectors: Vec<Collector>,
    pub youngs: Vec<Young>,
    pub threads: Vec<usize>,
    /// Without (false) and with (true) JFR's default recording.
    pub jfr: Vec<bool>,
    pub warmup: usize,
    pub iterations: usize,
    /// A full collection (`System.gc()`, untimed) before each iteration, as DaCapo's harness
    /// does: `jackson` at 8 threads per CPU promotes about 1 MiB per young collection, and mean
    /// young pauses grow from 1.1–1.5 ms to 3.6–3.8 ms as the old generation fills, so without
    /// it an iteration's time depends on how full the old generation happens to be. Absent in
    /// recordings made before it was on (false: they ran without).
    #[serde(default)]
    pub pre_iteration_gc: bool,
    /// Stock a second time in each round, after the other configurations ([`STOCK_AGAIN`]).
    /// Absent in recordings made before it could be asked for (false).
    #[serde(default)]
    pub control: bool,
    pub repeat: usize,
}

impl Plan {
    /// The configurations each application runs in each round, in order: [`configs`], and
    /// the control last where asked for.
    pub fn configs(&self) -> Vec<JvmConfig> {
        let mut all = configs();
        let stock = all.iter().find(|c| c.label == STOCK).cloned();
        if let (true, Some(stock)) = (self.control, stock) {
            all.push(JvmConfig {
                label: STOCK_AGAIN.into(),
                flags: stock.flags,
            });
        }
        all
    }

    /// The JVM runs the plan takes.
    pub fn run_count(&self) -> usize {
        self.apps.len()
            * self.collectors.len()
            * self.youngs.len()
            * self.threads.len()
            * self.jfr.len()
            * self.configs().len()
            * self.repeat
    }
}

/// What one run printed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AppRun {
    /// The median timed iteration, in milliseconds.
    pub median_ms: f64,
    /// Young collections over the timed iterations.
    pub young_collections: u64,
    /// The workers' allocation over the timed iterations, bytes (absent in runs recorded
    /// before it was kept). The same work allocates more or less as the JIT eliminates
    /// allocations (`jackson`, stock, 16 threads: 24.3 to 25.6 GB in two runs), and
    /// collections follow it.
    #[serde(default)]
    pub allocated_bytes: Option<u64>,
    /// The workers' allocation over the timed iterations, MB per second.
    pub allocated_mb_per_s: f64,
    /// TLAB tails over the whole run, at collections and at refills (the JVM's exit line),
    /// bytes.
    pub tlab_waste_bytes: u64,
    /// The levels' buffer tails over the whole run (HABs only), bytes.
    pub level_waste_bytes: u64,
    pub checksum: String,
    /// `ok` (equal to stock's recorded value), `differs`, `varies` (between iterations) or
    /// `unrecorded`.
    pub checksum_status: String,
}

/// One application in one configuration and setting, over the rounds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AppPoint {
    pub app: String,
    pub collector: Collector,
    pub young: Young,
    pub threads: usize,
    pub jfr: bool,
    pub config: JvmConfig,
    pub runs: Vec<AppRun>,
}

/// One setting of the plan: a table is printed for each.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Setting {
    pub collector: Collector,
    pub young: Young,
    pub threads: usize,
    pub jfr: bool,
}

impl Setting {
    /// The setting `point` ran in.
    pub(super) fn of(point: &AppPoint) -> Setting {
        Setting {
            collector: point.collector,
            young: point.young,
            threads: point.threads,
            jfr: point.jfr,
        }
    }

    pub(super) fn holds(self, point: &AppPoint) -> bool {
        Setting::of(point) == self
    }

    pub(crate) fn title(self) -> String {
        format!(
            "{}, {}, {} threads, {}",
            self.collector.name(),
            self.young.name(),
            self.threads,
            if self.jfr {
                "JFR's default recording"
            } else {
                "no observer"
            }
        )
    }
}

/// A point is found by its setting and application, then its configuration's label.
impl ConfigPoint for AppPoint {
    type Setting = (Setting, String);
    fn setting(&self) -> (Setting, String) {
        (Setting::of(self), self.app.clone())
    }
    fn config(&self) -> &JvmConfig {
        &self.config
    }
}

/// The suite's runs, and where they ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AppsRuns {
    pub machine: String,
    pub jvm: String,
    pub plan: Plan,
    pub points: Vec<AppPoint>,
}

impl AppsRuns {
    /// Takes `other`'s runs in as further rounds: a point both hold gets `other`'s runs after
    /// its own, a point only `other` holds is added, and the plan becomes both plans' union
    /// (`repeat`: the most rounds a point now has). Rounds recorded apart (another evening,
    /// another setting) are comparable only from the same machine, JVM, iterations,
    /// harness (with or without a full collection before each iteration) and control, and
    /// a configuration must mean the same flags in both: otherwise an error says what differs
    /// and nothing is taken.
    pub fn absorb(&mut self, other: AppsRuns) -> Result<(), String> {
        let differs = if other.machine != self.machine {
            Some(format!(
                "machines ({:?}, {:?})",
                self.machine, other.machine
            ))
        } else if other.jvm != self.jvm {
            Some(format!("JVMs ({:?}, {:?})", self.jvm, other.jvm))
        } else if (other.plan.warmup, other.plan.iterations)
            != (self.plan.warmup, self.plan.iterations)
        {
            Some(format!(
                "iterations (--warmup {} --iterations {}, --warmup {} --iterations {})",
                self.plan.warmup, self.plan.iterations, other.plan.warmup, other.plan.iterations
            ))
        } else if other.plan.pre_iteration_gc != self.plan.pre_iteration_gc {
            Some(format!(
                "harnesses (a full collection before each iteration: {}, {})",
                on_off(self.plan.pre_iteration_gc),
                on_off(other.plan.pre_iteration_gc)
            ))
        } else if other.plan.control != self.plan.control {
            Some(format!(
                "controls (stock again in each round: {}, {})",
                on_off(self.plan.control),
                on_off(other.plan.control)
            ))
        } else {
            other.points.iter().find_map(|theirs| {
                let ours = self.points.iter().find(|p| p.label_matches(theirs))?;
                (ours.config.flags != theirs.config.flags).then(|| {
                    format!(
                        "flags for {:?} ({:?}, {:?})",
                        ours.config.label, ours.config.flags, theirs.config.flags
                    )
                })
            })
        };
        if let Some(what) = differs {
            return Err(format!(
                "recorded on different {what}: not rounds of one plan"
            ));
        }
        union(&mut self.plan.apps, other.plan.apps);
        union(&mut self.plan.collectors, other.plan.collectors);
        union(&mut self.plan.youngs, other.plan.youngs);
        union(&mut self.plan.threads, other.plan.threads);
        union(&mut self.plan.jfr, other.plan.jfr);
        for theirs in other.points {
            match self.points.iter_mut().find(|p| p.label_matches(&theirs)) {
                Some(ours) => ours.runs.extend(theirs.runs),
                None => self.points.push(theirs),
            }
        }
        self.plan.repeat = self.points.iter().map(|p| p.runs.len()).max().unwrap_or(0);
        Ok(())
    }
}

impl AppPoint {
    /// Whether `other` is the same application, setting and configuration.
    fn label_matches(&self, other: &AppPoint) -> bool {
        self.setting() == other.setting() && self.config.label == other.config.label
    }
}

/// `hab.apps.Main`'s words for a switch.
pub(super) fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

/// `into` followed by the items of `from` it lacks, in `from`'s order.
fn union<T: PartialEq>(into: &mut Vec<T>, from: Vec<T>) {
    for item in from {
        if !into.contains(&item) {
            into.push(item);
        }
    }
}

/// `bench/apps`, in this repository.
pub fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/apps")
}

/// Builds `bench/apps` with Maven; the folder of its jar and libraries.
pub fn build_suite() -> Result<PathBuf, String> {
    let dir = suite_dir();
    super::jvm::mvn_package(&dir)?;
    Ok(dir.join("target"))
}

/// The classpath of `bench/apps`'s build: its jar and the libraries beside it.
fn classpath(apps_dir: &Path) -> Result<String, String> {
    let jar = apps_dir.join("apps.jar");
    let lib = apps_dir.join("lib");
    if !jar.exists() || !lib.is_dir() {
        return Err(format!(
            "{}: no apps.jar and lib/ there (mvn -q -B package in bench/apps builds them)",
            apps_dir.display()
        ));
    }
    Ok(format!("{}:{}/*", jar.display(), lib.display()))
}

/// One run of `point`'s application.
fn run_once(jvm: &Jvm, classpath: &str, point: &AppPoint, plan: &Plan) -> Result<AppRun, String> {
    let mut options = vec![
        point.collector.flag().to_string(),
        format!("-Xms{HEAP}"),
        format!("-Xmx{HEAP}"),
        point.young.flag().to_string(),
    ];
    options.extend(point.config.flags.iter().cloned());
    if point.jfr {
        options.push(jfr_flag(&jvm.recording()));
    }
    let output = jvm
        .run()
        .options(options)
        .program(
            classpath,
            "hab.apps.Main",
            [
                point.app.clone(),
                point.threads.to_string(),
                "--warmup".into(),
                plan.warmup.to_string(),
                "--iterations".into(),
                plan.iterations.to_string(),
                "--pre-iteration-gc".into(),
                on_off(plan.pre_iteration_gc).into(),
            ],
        )
        .run(&jvm.gc_log())?;
    // A checksum that differs exits 1 with the line printed: recorded, judged by the tables.
    let Some(line) = output
        .stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("hab-apps: "))
    else {
        return Err(format!(
            "{}: no result line ({}): {}",
            output.command, output.status, output.stderr
        ));
    };
    let missing = |key: &str| format!("{}: no {key} in {line:?}", output.command);
    let number = |key: &str| value::<f64>(line, key).ok_or_else(|| missing(key));
    let word = |key: &str| value::<String>(line, key).ok_or_else(|| missing(key));
    Ok(AppRun {
        median_ms: number("median_ms")?,
        young_collections: number("young_collections")? as u64,
        allocated_bytes: Some(number("allocated_bytes")? as u64),
        allocated_mb_per_s: number("allocated_mb_per_s")?,
        tlab_waste_bytes: output.exit.tlab_waste_bytes(),
        level_waste_bytes: output.exit.level_waste_bytes(),
        checksum: word("checksum")?,
        checksum_status: word("checksum_status")?,
    })
}

impl Rounds for AppsRuns {
    /// `bench/apps`'s classpath.
    type Inputs = String;

    fn runs_per_round(&self) -> usize {
        self.points.len()
    }

    fn describe(&self, index: usize) -> String {
        let point = &self.points[index];
        format!(
            "{} on {}, {}, {} threads{}, {}",
            point.app,
            point.collector.name(),
            point.young.name(),
            point.threads,
            if point.jfr { ", JFR" } else { "" },
            point.config.label
        )
    }

    fn run(&mut self, index: usize, jvm: &Jvm, classpath: &String) -> Result<(), String> {
        let run = run_once(jvm, classpath, &self.points[index], &self.plan)?;
        self.points[index].runs.push(run);
        Ok(())
    }
}

/// Runs `plan` on the JDK `jdk` with `bench/apps`'s build in `apps_dir`.
pub fn measure(
    jdk: &Path,
    apps_dir: &Path,
    plan: &Plan,
    progress: &mut Progress<'_, AppsRuns>,
) -> Result<AppsRuns, String> {
    let classpath = classpath(apps_dir)?;
    let jvm = Jvm::open(jdk, "apps")?;
    let mut runs = AppsRuns {
        machine: jvm.machine.clone(),
        jvm: jvm.version.clone(),
        plan: plan.clone(),
        points: vec![],
    };
    // Every configuration of one application and setting back to back, so that a slow spell
    // of a shared machine falls on all of them.
    for &collector in &plan.collectors {
        for &young in &plan.youngs {
            for &threads in &plan.threads {
                for &jfr in &plan.jfr {
                    for app in &plan.apps {
                        for config in plan.configs() {
                            runs.points.push(AppPoint {
                                app: app.clone(),
                                collector,
                                young,
                                threads,
                                jfr,
                                config,
                                runs: vec![],
                            });
                        }
                    }
                }
            }
        }
    }
    run_rounds(&mut runs, &jvm, &classpath, plan.repeat, progress)?;
    Ok(runs)
}
