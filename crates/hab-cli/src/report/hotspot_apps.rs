//! Real applications on HotSpot with HABs: `bench/apps`, the libraries behind DaCapo's
//! allocation-heavy members (H2, Lucene indexing and searching, Jackson, javac, the Kotlin and
//! Scala compilers), each run DaCapo-style by `hab.apps.Main` (warm-up and timed iterations,
//! fixed work split among the threads, a checksum checked against the one recorded for stock
//! HotSpot). Every configuration runs each application back to back, round after round, under
//! each collector, young generation, thread count and observer asked for; the tables give
//! time and young collections relative to stock, and the geometric mean over the suite.
//!
//! `hab hotspot-hab --apps` runs it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::hotspot_chat::{self, ChatConfig, CPU_LABS, CPU_LABS_ALWAYS, HABS, HABS_SMALL, STOCK};
use super::hotspot_hab::{value, Collector};
use crate::figures::Spread;

/// The suite's applications, as `hab.apps.Main` names them.
pub const APPS: [&str; 7] = [
    "h2", "luindex", "lusearch", "jackson", "javac", "kotlinc", "scalac",
];

/// The heap (`-Xms` and `-Xmx`): room for the compilers' many threads.
const HEAP: &str = "2g";

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

/// The configurations: stock, HABs with adaptive TLABs (`-XX:+UseHAB`'s automatic levels)
/// and with 1 KiB TLABs, per-CPU LABs flipping with TLABs and in every cycle.
pub fn configs() -> Vec<ChatConfig> {
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
    pub repeat: usize,
}

impl Plan {
    /// The JVM runs the plan takes.
    pub fn run_count(&self) -> usize {
        self.apps.len()
            * self.collectors.len()
            * self.youngs.len()
            * self.threads.len()
            * self.jfr.len()
            * configs().len()
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
    /// The workers' allocation over the timed iterations, MB per second.
    pub allocated_mb_per_s: f64,
    /// TLAB tails over the whole run (HotSpot's `TLAB totals` `gc:` and `slow:`), bytes.
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
    pub config: ChatConfig,
    pub runs: Vec<AppRun>,
}

/// The suite's runs, and where they ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AppsRuns {
    pub machine: String,
    pub jvm: String,
    pub plan: Plan,
    pub points: Vec<AppPoint>,
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

/// Where one run writes its logs.
struct Files {
    gc_log: PathBuf,
    recording: PathBuf,
}

/// One run of `point`'s application.
fn run_once(
    java: &Path,
    classpath: &str,
    point: &AppPoint,
    plan: &Plan,
    files: &Files,
) -> Result<AppRun, String> {
    let _ = std::fs::remove_file(&files.gc_log);
    let mut command = Command::new(java);
    command
        .arg(point.collector.flag())
        .args([format!("-Xms{HEAP}"), format!("-Xmx{HEAP}")])
        .arg(point.young.flag())
        .args(&point.config.flags)
        .arg(format!(
            "-Xlog:gc+tlab=debug:file={}",
            files.gc_log.display()
        ));
    if point.jfr {
        command.arg(format!(
            "-XX:StartFlightRecording:filename={},settings=default",
            files.recording.display()
        ));
    }
    command
        .args(["-cp", classpath, "hab.apps.Main", &point.app])
        .arg(point.threads.to_string())
        .args(["--warmup", &plan.warmup.to_string()])
        .args(["--iterations", &plan.iterations.to_string()]);
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", java.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    // A checksum that differs exits 1 with the line printed: recorded, judged by the tables.
    let Some(line) = stdout.lines().rev().find(|l| l.starts_with("hab-apps: ")) else {
        return Err(format!(
            "{command:?}: no result line ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    };
    let missing = |key: &str| format!("{command:?}: no {key} in {line:?}");
    let number = |key: &str| value::<f64>(line, key).ok_or_else(|| missing(key));
    let word = |key: &str| value::<String>(line, key).ok_or_else(|| missing(key));
    let log = std::fs::read_to_string(&files.gc_log)
        .map_err(|e| format!("{}: {e}", files.gc_log.display()))?;
    let (gc_tails, _) = hotspot_chat::tlab_totals(&log, "gc:");
    let (refill_tails, _) = hotspot_chat::tlab_totals(&log, "slow:");
    Ok(AppRun {
        median_ms: number("median_ms")?,
        young_collections: number("young_collections")? as u64,
        allocated_mb_per_s: number("allocated_mb_per_s")?,
        tlab_waste_bytes: gc_tails + refill_tails,
        level_waste_bytes: hotspot_chat::level_waste_bytes(&log),
        checksum: word("checksum")?,
        checksum_status: word("checksum_status")?,
    })
}

/// Runs `plan` on the JDK `jdk` with `bench/apps`'s build in `apps_dir`; `step` before each
/// run, `save` after each round.
pub fn measure(
    jdk: &Path,
    apps_dir: &Path,
    plan: &Plan,
    mut step: impl FnMut(&str),
    mut save: impl FnMut(&AppsRuns) -> Result<(), String>,
) -> Result<AppsRuns, String> {
    let java = jdk.join("bin/java");
    let classpath = classpath(apps_dir)?;
    let dir = std::env::temp_dir().join(format!("hab-apps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let files = Files {
        gc_log: dir.join("gc.log"),
        recording: dir.join("recording.jfr"),
    };
    let mut runs = AppsRuns {
        machine: crate::machine::describe().join("; "),
        jvm: super::hotspot_hab::version(&java)?,
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
                        for config in configs() {
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
    let result = (|| {
        for round in 1..=plan.repeat {
            for index in 0..runs.points.len() {
                let point = &runs.points[index];
                step(&format!(
                    "{} on {}, {}, {} threads{}, {} (round {round})",
                    point.app,
                    point.collector.name(),
                    point.young.name(),
                    point.threads,
                    if point.jfr { ", JFR" } else { "" },
                    point.config.label
                ));
                let run = run_once(&java, &classpath, point, plan, &files)?;
                runs.points[index].runs.push(run);
            }
            save(&runs)?;
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|()| runs)
}

/// A point's median time as a spread over its rounds.
fn time(point: &AppPoint) -> Option<Spread> {
    let times: Vec<f64> = point.runs.iter().map(|r| r.median_ms).collect();
    (!times.is_empty()).then(|| Spread::of(&times))
}

fn collections(point: &AppPoint) -> Option<Spread> {
    let counts: Vec<f64> = point
        .runs
        .iter()
        .map(|r| r.young_collections as f64)
        .collect();
    (!counts.is_empty()).then(|| Spread::of(&counts))
}

/// The geometric mean of `ratios`' medians, smallest and largest values.
pub fn geomean(ratios: &[Spread]) -> Option<Spread> {
    if ratios.is_empty() {
        return None;
    }
    let mean = |f: fn(&Spread) -> f64| {
        (ratios.iter().map(|r| f(r).ln()).sum::<f64>() / ratios.len() as f64).exp()
    };
    Some(Spread {
        median: mean(|r| r.median),
        min: mean(|r| r.min),
        max: mean(|r| r.max),
    })
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
    fn holds(self, point: &AppPoint) -> bool {
        point.collector == self.collector
            && point.young == self.young
            && point.threads == self.threads
            && point.jfr == self.jfr
    }

    fn title(self) -> String {
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

/// The settings of `runs`, in the plan's order.
pub fn settings(runs: &AppsRuns) -> Vec<Setting> {
    let plan = &runs.plan;
    let mut all = vec![];
    for &collector in &plan.collectors {
        for &young in &plan.youngs {
            for &threads in &plan.threads {
                for &jfr in &plan.jfr {
                    all.push(Setting {
                        collector,
                        young,
                        threads,
                        jfr,
                    });
                }
            }
        }
    }
    all
}

fn find<'a>(runs: &'a AppsRuns, setting: Setting, app: &str, label: &str) -> Option<&'a AppPoint> {
    runs.points
        .iter()
        .find(|p| setting.holds(p) && p.app == app && p.config.label == label)
}

/// A configuration's time and young collections relative to stock over the suite, in
/// `setting`: the geometric means (time: > 1 slower) with their ranges, per-application
/// ratios alongside.
pub struct Relative {
    pub time: Option<Spread>,
    pub collections: Option<Spread>,
    pub per_app: Vec<(String, Option<Spread>, Option<Spread>)>,
}

/// [`Relative`] of `label` in `setting`.
pub fn relative(runs: &AppsRuns, setting: Setting, label: &str) -> Relative {
    let mut per_app = vec![];
    for app in &runs.plan.apps {
        let (Some(point), Some(stock)) = (
            find(runs, setting, app, label),
            find(runs, setting, app, STOCK),
        ) else {
            continue;
        };
        let time = time(point).zip(time(stock)).map(|(p, s)| p.ratio(s));
        // Collections: +1 on both sides, so that an application that collects rarely does not
        // divide by zero.
        let plus_one = |s: Spread| Spread {
            median: s.median + 1.0,
            min: s.min + 1.0,
            max: s.max + 1.0,
        };
        let gcs = collections(point)
            .zip(collections(stock))
            .map(|(p, s)| plus_one(p).ratio(plus_one(s)));
        per_app.push((app.clone(), time, gcs));
    }
    let times: Vec<Spread> = per_app.iter().filter_map(|(_, t, _)| *t).collect();
    let gcs: Vec<Spread> = per_app.iter().filter_map(|(_, _, c)| *c).collect();
    Relative {
        time: geomean(&times),
        collections: geomean(&gcs),
        per_app,
    }
}

/// Runs whose checksum was not stock's recorded one, as `app, configuration: status`.
pub fn checksum_failures(runs: &AppsRuns) -> Vec<String> {
    let mut failures = vec![];
    for point in &runs.points {
        for run in &point.runs {
            if run.checksum_status != "ok" {
                failures.push(format!(
                    "{} ({}, {}): checksum {} {}",
                    point.app,
                    point.collector.name(),
                    point.config.label,
                    run.checksum,
                    run.checksum_status
                ));
            }
        }
    }
    failures
}

fn ratio_cell(ratio: Option<Spread>) -> String {
    ratio.map_or("—".into(), |r| {
        format!("{:.2} ({:.2}–{:.2})", r.median, r.min, r.max)
    })
}

fn mib(bytes: f64) -> f64 {
    bytes / (1024.0 * 1024.0)
}

/// The tables of `runs`, in Markdown.
pub fn render(runs: &AppsRuns) -> String {
    let mut out = String::new();
    let plan = &runs.plan;
    let _ = writeln!(
        out,
        "Machine: {}. JVM: {}. `hab.apps.Main APP THREADS --warmup {} --iterations {}`, \
         -Xms{HEAP} -Xmx{HEAP}, {} round(s); time is the median timed iteration, a cell \
         `median (min–max)` over the rounds.\n",
        runs.machine, runs.jvm, plan.warmup, plan.iterations, plan.repeat
    );
    let labels: Vec<String> = configs().into_iter().map(|c| c.label).collect();
    for setting in settings(runs) {
        let _ = writeln!(out, "#### {}\n", setting.title());
        let _ = writeln!(
            out,
            "Time and young collections × stock (below 1: faster, fewer).\n"
        );
        let _ = write!(out, "| application | stock ms | stock young GCs |");
        for label in &labels[1..] {
            let _ = write!(out, " {label}: time | collections |");
        }
        let _ = writeln!(
            out,
            "\n|---|---:|---:|{}",
            "---:|---:|".repeat(labels.len() - 1)
        );
        let relatives: Vec<Relative> = labels[1..]
            .iter()
            .map(|l| relative(runs, setting, l))
            .collect();
        for app in &plan.apps {
            let Some(stock) = find(runs, setting, app, STOCK) else {
                continue;
            };
            let cell = |s: Option<Spread>, digits: usize| {
                s.map_or("—".into(), |s| {
                    format!(
                        "{:.digits$} ({:.digits$}–{:.digits$})",
                        s.median, s.min, s.max
                    )
                })
            };
            let _ = write!(
                out,
                "| {app} | {} | {} |",
                cell(time(stock), 0),
                cell(collections(stock), 0)
            );
            for relative in &relatives {
                let (time, gcs) = relative
                    .per_app
                    .iter()
                    .find(|(a, _, _)| a == app)
                    .map_or((None, None), |(_, t, c)| (*t, *c));
                let _ = write!(out, " {} | {} |", ratio_cell(time), ratio_cell(gcs));
            }
            let _ = writeln!(out);
        }
        let _ = write!(out, "| **geometric mean** | | |");
        for relative in &relatives {
            let _ = write!(
                out,
                " **{}** | **{}** |",
                ratio_cell(relative.time),
                ratio_cell(relative.collections)
            );
        }
        let _ = writeln!(out, "\n");
        let _ = writeln!(
            out,
            "| application | configuration | MB/s allocated | TLAB tails MiB | level tails MiB | checksums |"
        );
        let _ = writeln!(out, "|---|---|---:|---:|---:|---|");
        for app in &plan.apps {
            for label in &labels {
                let Some(point) = find(runs, setting, app, label) else {
                    continue;
                };
                let median = |f: fn(&AppRun) -> f64| {
                    crate::figures::median(&point.runs.iter().map(f).collect::<Vec<_>>())
                };
                let ok = point
                    .runs
                    .iter()
                    .filter(|r| r.checksum_status == "ok")
                    .count();
                let _ = writeln!(
                    out,
                    "| {app} | {label} | {:.0} | {:.1} | {:.1} | {ok}/{} ok |",
                    median(|r| r.allocated_mb_per_s),
                    mib(median(|r| r.tlab_waste_bytes as f64)),
                    mib(median(|r| r.level_waste_bytes as f64)),
                    point.runs.len()
                );
            }
        }
        let _ = writeln!(out);
    }
    let failures = checksum_failures(runs);
    if failures.is_empty() {
        let total: usize = runs.points.iter().map(|p| p.runs.len()).sum();
        let _ = writeln!(
            out,
            "Checksums: every one of the {total} runs equal to the value recorded for stock HotSpot."
        );
    } else {
        let _ = writeln!(out, "Checksums that are not stock's:\n");
        for failure in failures {
            let _ = writeln!(out, "- {failure}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(app: &str, label: &str, ms: &[f64], gcs: &[u64]) -> AppPoint {
        AppPoint {
            app: app.into(),
            collector: Collector::Parallel,
            young: Young::Tight,
            threads: 2,
            jfr: false,
            config: configs().into_iter().find(|c| c.label == label).unwrap(),
            runs: ms
                .iter()
                .zip(gcs)
                .map(|(&median_ms, &young_collections)| AppRun {
                    median_ms,
                    young_collections,
                    allocated_mb_per_s: 100.0,
                    tlab_waste_bytes: 0,
                    level_waste_bytes: 0,
                    checksum: "0x1".into(),
                    checksum_status: "ok".into(),
                })
                .collect(),
        }
    }

    fn runs(points: Vec<AppPoint>) -> AppsRuns {
        AppsRuns {
            machine: "test".into(),
            jvm: "test".into(),
            plan: Plan {
                apps: vec!["h2".into(), "javac".into()],
                collectors: vec![Collector::Parallel],
                youngs: vec![Young::Tight],
                threads: vec![2],
                jfr: vec![false],
                warmup: 1,
                iterations: 1,
                repeat: 1,
            },
            points,
        }
    }

    #[test]
    fn the_geometric_mean_of_two_ratios_is_their_root_product() {
        let g = geomean(&[Spread::exact(2.0), Spread::exact(0.5)]).unwrap();
        assert!((g.median - 1.0).abs() < 1e-12);
        assert!(geomean(&[]).is_none());
    }

    #[test]
    fn relative_times_and_collections_are_per_application_then_averaged() {
        let runs = runs(vec![
            point("h2", STOCK, &[100.0], &[9]),
            point("h2", CPU_LABS, &[110.0], &[4]),
            point("javac", STOCK, &[200.0], &[0]),
            point("javac", CPU_LABS, &[200.0], &[0]),
        ]);
        let setting = settings(&runs)[0];
        let r = relative(&runs, setting, CPU_LABS);
        let time = r.time.unwrap();
        assert!((time.median - (1.1f64).sqrt()).abs() < 1e-9, "{time:?}");
        // h2: (4+1)/(9+1) = 0.5; javac: 1/1.
        let gcs = r.collections.unwrap();
        assert!((gcs.median - 0.5f64.sqrt()).abs() < 1e-9, "{gcs:?}");
        assert!(checksum_failures(&runs).is_empty());
        let table = render(&runs);
        assert!(
            table.contains("| h2 | 100 (100–100) | 9 (9–9) |"),
            "{table}"
        );
        assert!(table.contains("every one of the 4 runs"), "{table}");
    }

    #[test]
    fn a_checksum_that_is_not_stocks_is_listed() {
        let mut bad = point("h2", CPU_LABS, &[110.0], &[4]);
        bad.runs[0].checksum_status = "differs".into();
        let runs = runs(vec![point("h2", STOCK, &[100.0], &[9]), bad]);
        let failures = checksum_failures(&runs);
        assert_eq!(failures.len(), 1);
        assert!(failures[0].contains("differs"), "{failures:?}");
        assert!(render(&runs).contains("Checksums that are not stock's"));
    }
}
