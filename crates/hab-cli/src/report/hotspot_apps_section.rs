//! What the real applications' runs say (`hotspot_apps.rs` runs them): time and young
//! collections relative to stock per application and their geometric mean over the suite, the
//! checksums, the claims the report judges, its plot, and the report's section.

use std::fmt::Write as _;

use super::claims::{Claims, Verdict};
use super::experiment::{Context, Experiment};
pub use super::hotspot_apps::Setting;
use super::hotspot_apps::{
    measure, on_off, AppPoint, AppRun, AppsRuns, Plan, Young, APPS, HEAP, STOCK_AGAIN,
    TIMED_ITERATIONS, WARMUP_ITERATIONS,
};
use super::hotspot_chat::{CPU_LABS, CPU_LABS_ALWAYS, HABS, STOCK};
use super::hotspot_hab::Collector;
use super::hotspot_runner::{report_runs, report_steps, Progress};
use super::plot::BarPlot;
use crate::figures::Spread;

/// `value` of each of a point's runs as a spread over its rounds.
fn spread(point: &AppPoint, value: impl Fn(&AppRun) -> f64) -> Option<Spread> {
    Spread::of_some(&point.runs.iter().map(value).collect::<Vec<_>>())
}

/// A point's median time as a spread over its rounds.
fn time(point: &AppPoint) -> Option<Spread> {
    spread(point, |r| r.median_ms)
}

/// `value` of `point` over `stock`'s in each round, where both ran the same rounds: a round
/// runs an application's configurations back to back, so a slow spell of a shared machine
/// falls on both sides of a ratio.
fn round_ratios(
    point: &AppPoint,
    stock: &AppPoint,
    value: impl Fn(&AppRun) -> f64,
) -> Option<Vec<f64>> {
    (point.runs.len() == stock.runs.len() && !point.runs.is_empty()).then(|| {
        point
            .runs
            .iter()
            .zip(&stock.runs)
            .map(|(p, s)| value(p) / value(s))
            .collect()
    })
}

/// `value` of `point` over `stock`'s as a spread over the rounds: of each round's own ratio
/// where both ran the same rounds, else (rounds merged from recordings that lack one of them)
/// the widest ratio of the two spreads.
fn paired(point: &AppPoint, stock: &AppPoint, value: impl Fn(&AppRun) -> f64) -> Option<Spread> {
    match round_ratios(point, stock, &value) {
        Some(ratios) => Some(Spread::of(&ratios)),
        None => spread(point, &value)
            .zip(spread(stock, &value))
            .map(|(p, s)| p.ratio(s)),
    }
}

/// A point's young collections as a spread over its rounds.
fn young_counts(point: &AppPoint) -> Option<Spread> {
    spread(point, |r| r.young_collections as f64)
}

/// Whether every run of `points` kept its allocated bytes.
fn all_allocated(points: [&AppPoint; 2]) -> bool {
    points
        .iter()
        .all(|p| p.runs.iter().all(|r| r.allocated_bytes.is_some()))
}

/// A run's young collections + 1 (so that an application that collects rarely does not divide
/// by zero), per GB the workers allocated where `per_gb`.
fn collections(run: &AppRun, per_gb: bool) -> f64 {
    let count = run.young_collections as f64 + 1.0;
    match run.allocated_bytes {
        Some(bytes) if per_gb => count / (bytes.max(1) as f64 / 1e9),
        _ => count,
    }
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

/// The settings of `runs` that have runs, in the plan's order (a union of plans may name
/// settings none of them ran).
pub fn settings(runs: &AppsRuns) -> Vec<Setting> {
    let plan = &runs.plan;
    let mut all = vec![];
    for &collector in &plan.collectors {
        for &young in &plan.youngs {
            for &threads in &plan.threads {
                for &jfr in &plan.jfr {
                    let setting = Setting {
                        collector,
                        young,
                        threads,
                        jfr,
                    };
                    if runs
                        .points
                        .iter()
                        .any(|p| setting.holds(p) && !p.runs.is_empty())
                    {
                        all.push(setting);
                    }
                }
            }
        }
    }
    all
}

fn find<'a>(runs: &'a AppsRuns, setting: Setting, app: &str, label: &str) -> Option<&'a AppPoint> {
    super::hotspot_runner::find(&runs.points, (setting, app.to_string()), label)
}

/// An application's time and young collections × stock.
pub type AppRatios = (String, Option<Spread>, Option<Spread>);

/// A configuration's time and young collections relative to stock over the suite, in
/// `setting`: the geometric means (time: > 1 slower) with their ranges, per-application
/// ratios alongside.
pub struct Relative {
    pub time: Option<Spread>,
    pub collections: Option<Spread>,
    pub per_app: Vec<AppRatios>,
    /// The suite's geometric means (time, collections) round by round, where every
    /// application ran the configuration and stock in the same rounds: what each whole round
    /// of the suite said on its own. Empty otherwise.
    pub per_round: Vec<(f64, f64)>,
}

/// [`Relative`] of `label` in `setting`.
pub fn relative(runs: &AppsRuns, setting: Setting, label: &str) -> Relative {
    let mut per_app = vec![];
    // Each application's (time, collections) ratios round by round, where paired.
    let mut rounds: Vec<Option<Vec<(f64, f64)>>> = vec![];
    for app in &runs.plan.apps {
        let (Some(point), Some(stock)) = (
            find(runs, setting, app, label),
            find(runs, setting, app, STOCK),
        ) else {
            continue;
        };
        let time = paired(point, stock, |r| r.median_ms);
        // Collections per GB allocated where both points kept their allocated bytes: the same
        // work allocates more or less as the JIT eliminates allocations.
        let per_gb = all_allocated([point, stock]);
        let gcs = paired(point, stock, |r| collections(r, per_gb));
        per_app.push((app.clone(), time, gcs));
        let time_rounds = round_ratios(point, stock, |r| r.median_ms);
        let gcs_rounds = round_ratios(point, stock, |r| collections(r, per_gb));
        rounds.push(
            time_rounds
                .zip(gcs_rounds)
                .map(|(t, c)| t.into_iter().zip(c).collect()),
        );
    }
    let times: Vec<Spread> = per_app.iter().filter_map(|(_, t, _)| *t).collect();
    let gcs: Vec<Spread> = per_app.iter().filter_map(|(_, _, c)| *c).collect();
    Relative {
        time: geomean(&times),
        collections: geomean(&gcs),
        per_app,
        per_round: suite_per_round(&rounds),
    }
}

/// The geometric means over the applications of each round's ratios, where every application
/// has the same paired rounds.
fn suite_per_round(rounds: &[Option<Vec<(f64, f64)>>]) -> Vec<(f64, f64)> {
    let Some(Some(first)) = rounds.first() else {
        return vec![];
    };
    let count = first.len();
    if rounds
        .iter()
        .any(|r| r.as_ref().is_none_or(|r| r.len() != count))
    {
        return vec![];
    }
    let apps = rounds.len() as f64;
    (0..count)
        .map(|round| {
            let log_sum = |pick: fn(&(f64, f64)) -> f64| {
                rounds
                    .iter()
                    .flatten()
                    .map(|r| pick(&r[round]).ln())
                    .sum::<f64>()
            };
            (
                (log_sum(|r| r.0) / apps).exp(),
                (log_sum(|r| r.1) / apps).exp(),
            )
        })
        .collect()
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
    ratio.map_or("—".into(), |r| r.cell(2))
}

fn mib(bytes: f64) -> f64 {
    bytes / (1024.0 * 1024.0)
}

/// How many rounds `runs`' points have: `3`, or `1–3` where they differ.
fn rounds(runs: &AppsRuns) -> String {
    let counts = runs.points.iter().map(|p| p.runs.len());
    match (counts.clone().min(), counts.max()) {
        (Some(fewest), Some(most)) if fewest != most => format!("{fewest}–{most}"),
        (_, most) => most.unwrap_or(0).to_string(),
    }
}

/// The tables of `runs`, in Markdown.
pub fn render(runs: &AppsRuns) -> String {
    let mut out = String::new();
    let plan = &runs.plan;
    let _ = writeln!(
        out,
        "Machine: {}. JVM: {}. `hab.apps.Main APP THREADS --warmup {} --iterations {} \
         --pre-iteration-gc {}` ({}), -Xms{HEAP} -Xmx{HEAP}, {} round(s); time is the median \
         timed iteration, a cell `median (min–max)` over the rounds (of an even number, the \
         higher middle one).\n",
        runs.machine,
        runs.jvm,
        plan.warmup,
        plan.iterations,
        on_off(plan.pre_iteration_gc),
        if plan.pre_iteration_gc {
            "a full collection before each iteration"
        } else {
            "no collection between iterations: the old generation fills from one to the next"
        },
        rounds(runs)
    );
    if plan.control {
        let _ = writeln!(
            out,
            "*{STOCK_AGAIN}* is stock run again in each round after the other configurations: \
             its ratios are what the machine and each run's compilation alone make of a ratio, \
             and a configuration no farther from 1 is not told apart from stock.\n"
        );
    }
    let labels: Vec<String> = plan.configs().into_iter().map(|c| c.label).collect();
    for setting in settings(runs) {
        let _ = writeln!(out, "#### {}\n", setting.title());
        let _ = writeln!(
            out,
            "Time and young collections × stock (below 1: faster, fewer), each round's own \
             ratio against stock's run in the same round; collections per GB the workers \
             allocated where the runs kept it (the same work allocates more or less as the JIT \
             eliminates allocations).\n"
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
            let cell =
                |s: Option<Spread>, digits: usize| s.map_or("—".into(), |s| s.cell(digits));
            let _ = write!(
                out,
                "| {app} | {} | {} |",
                cell(time(stock), 0),
                cell(young_counts(stock), 0)
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
        let _ = writeln!(out);
        if relatives.iter().any(|r| r.per_round.len() > 1) {
            let _ = write!(out, "| *each round's geometric mean* | | |");
            for relative in &relatives {
                let list = |pick: fn(&(f64, f64)) -> f64| {
                    let values: Vec<String> = relative
                        .per_round
                        .iter()
                        .map(|r| format!("{:.2}", pick(r)))
                        .collect();
                    if values.is_empty() {
                        "—".to_string()
                    } else {
                        values.join(", ")
                    }
                };
                let _ = write!(out, " {} | {} |", list(|r| r.0), list(|r| r.1));
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(out);
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

/// The claims' bounds on a configuration's geometric mean × stock: time at most 1/0.98 of
/// stock's (at least 0.98× its throughput), collections per GB no more than stock's, and at
/// least 1 % fewer (per-CPU LABs at the most threads in the tight young generation).
pub(crate) const THROUGHPUT_BOUND: f64 = 1.0 / 0.98;
pub(crate) const NO_MORE_BOUND: f64 = 1.0;
pub(crate) const FEWER_BOUND: f64 = 0.99;

/// The report's claims on `runs` (those without an observer): the checksums everywhere; at
/// the fewest threads, HABs (automatic levels) and per-CPU LABs flipping at least 0.98× stock's
/// throughput with no more young collections, as geometric means over the suite; at the most
/// threads in the tight young generation, per-CPU LABs with fewer young collections.
pub fn judge(runs: &AppsRuns, claims: &mut Claims) {
    const SOURCE: &str = "HotSpot with HABs, real applications";
    let failures = checksum_failures(runs).len();
    claims.judge(
        SOURCE,
        "every application's checksum is stock's in every configuration",
        Verdict::at_most(Spread::exact(failures as f64), 0.0),
    );
    let fewest = runs.plan.threads.iter().copied().min().unwrap_or(0);
    let most = runs.plan.threads.iter().copied().max().unwrap_or(0);
    for setting in settings(runs).into_iter().filter(|s| !s.jfr) {
        let title = setting.title();
        if setting.threads == fewest {
            for label in [HABS, CPU_LABS] {
                let relative = relative(runs, setting, label);
                if let Some(time) = relative.time {
                    claims.judge(
                        SOURCE,
                        &format!("{label}: at least 0.98× stock's throughput, geometric mean over the suite ({title})"),
                        Verdict::at_most(time, THROUGHPUT_BOUND),
                    );
                }
                if let Some(collections) = relative.collections {
                    claims.judge(
                        SOURCE,
                        &format!("{label}: no more young collections per GB allocated than stock, geometric mean over the suite ({title})"),
                        Verdict::at_most(collections, NO_MORE_BOUND),
                    );
                }
            }
        }
        if setting.threads == most && most > fewest && setting.young == Young::Tight {
            for label in [CPU_LABS, CPU_LABS_ALWAYS] {
                if let Some(collections) = relative(runs, setting, label).collections {
                    claims.judge(
                        SOURCE,
                        &format!("{label}: at least 1 % fewer young collections per GB allocated than stock, geometric mean over the suite ({title})"),
                        Verdict::at_most(collections, FEWER_BOUND),
                    );
                }
            }
        }
    }
}

/// The plot: time and young collections × stock per application, HABs and per-CPU LABs
/// flipping, in the first setting without an observer at the most threads.
fn plot(runs: &AppsRuns) -> Option<(String, BarPlot<'static>)> {
    let most = runs.plan.threads.iter().copied().max()?;
    let setting = settings(runs)
        .into_iter()
        .find(|s| !s.jfr && s.threads == most)?;
    let mut series = vec![];
    for label in [HABS, CPU_LABS] {
        let relative = relative(runs, setting, label);
        let values = |pick: fn(&AppRatios) -> Option<Spread>| {
            relative
                .per_app
                .iter()
                .map(|entry| pick(entry).map_or(0.0, |s| s.median))
                .collect::<Vec<f64>>()
        };
        series.push((format!("{label}: time"), values(|e| e.1)));
        series.push((format!("{label}: young collections"), values(|e| e.2)));
    }
    let categories = relative(runs, setting, HABS)
        .per_app
        .into_iter()
        .map(|(app, _, _)| app)
        .collect();
    Some((
        setting.title(),
        BarPlot {
            title: "Real applications: time and young collections × stock",
            y_label: "× stock (below 1: faster, fewer)",
            categories,
            series,
        },
    ))
}

/// The report's plan at its scale (none at the quick one): Parallel, the tight young
/// generation, every CPU busy and 8 threads per CPU, no observer, one round (the full scale
/// adds the roomy young generation, JFR and a second round).
pub fn report_plan(scale: &super::scale::Scale) -> Option<Plan> {
    let cpus = super::threads::Threads::of_this_machine().cpus();
    let mut plan = Plan {
        apps: APPS.map(String::from).to_vec(),
        collectors: vec![Collector::Parallel],
        youngs: vec![Young::Tight],
        threads: vec![cpus, 8 * cpus],
        jfr: vec![false],
        warmup: WARMUP_ITERATIONS,
        iterations: TIMED_ITERATIONS,
        pre_iteration_gc: true,
        control: false,
        repeat: 1,
    };
    match scale.name {
        "default" => Some(plan),
        "full" => {
            plan.youngs = vec![Young::Roomy, Young::Tight];
            plan.jfr = vec![false, true];
            plan.repeat = 2;
            Some(plan)
        }
        _ => None,
    }
}

/// The experiment as the report runs it, where HotSpot runs and the JVM with HABs is built.
pub struct HotSpotApps;

impl Experiment for HotSpotApps {
    fn name(&self) -> &'static str {
        "HotSpot with HABs, real applications"
    }

    fn steps(&self, cx: &Context) -> usize {
        report_steps(cx, report_plan(&cx.scale).map(|plan| plan.run_count()))
    }

    fn measure(&self, cx: &mut Context, progress: &indicatif::ProgressBar) -> Result<(), String> {
        let measured = report_runs(cx, report_plan(&cx.scale), |jdk, _, plan| {
            let apps = super::hotspot_apps::build_suite()?;
            measure(jdk, &apps, &plan, &mut Progress::bar(progress))
        });
        if let Some(measured) = measured {
            cx.results.put(measured);
        }
        Ok(())
    }

    fn section(&self, cx: &Context, claims: &mut Claims) -> String {
        let mut text = format!(
            "### Real applications\n\nThe libraries behind DaCapo's allocation-heavy members \
             (`bench/apps`: H2, Lucene indexing and searching, Jackson, javac, the Kotlin and \
             Scala compilers), each with fixed work split among the threads and a checksum that \
             must be stock's, in every HAB configuration against stock. A time ratio below 1 is \
             faster than stock; collections are young ones over the timed iterations, per GB the \
             workers allocated (ratios of counts + 1), after {WARMUP_ITERATIONS} untimed \
             iterations that let C2 compile the applications. `hab hotspot-hab apps` runs the \
             same with both collectors, both young generations and JFR.\n\n",
        );
        match cx.results.get::<Result<AppsRuns, String>>() {
            Some(Ok(runs)) => {
                judge(runs, claims);
                text += &render(runs);
                if let Some((title, bars)) = plot(runs) {
                    let _ = writeln!(text, "\n{title}:\n");
                    text += &cx.figures.bars("hotspot-apps", &bars);
                }
            }
            Some(Err(why)) => text += &format!("Not run on this machine: {why}.\n\n"),
            None => text += &format!("Not run on this machine: {}.\n\n", cx.why_no_jvm()),
        }
        text
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::hotspot_apps::Young;

    /// An application's point in Parallel, tight young generation, 2 threads, no observer.
    pub(crate) fn point(app: &str, label: &str, ms: &[f64], gcs: &[u64]) -> AppPoint {
        let control = Plan {
            control: true,
            ..runs(vec![]).plan
        };
        AppPoint {
            app: app.into(),
            collector: Collector::Parallel,
            young: Young::Tight,
            threads: 2,
            jfr: false,
            config: control
                .configs()
                .into_iter()
                .find(|c| c.label == label)
                .unwrap(),
            runs: ms
                .iter()
                .zip(gcs)
                .map(|(&median_ms, &young_collections)| AppRun {
                    median_ms,
                    young_collections,
                    allocated_bytes: None,
                    allocated_mb_per_s: 100.0,
                    tlab_waste_bytes: 0,
                    level_waste_bytes: 0,
                    checksum: "0x1".into(),
                    checksum_status: "ok".into(),
                })
                .collect(),
        }
    }

    /// `points` as runs of a plan of h2 and javac in that one setting.
    pub(crate) fn runs(points: Vec<AppPoint>) -> AppsRuns {
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
                pre_iteration_gc: true,
                control: false,
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
    fn collections_are_per_allocated_gigabyte_where_every_run_kept_it() {
        let with_bytes = |mut p: AppPoint, bytes: u64| {
            p.runs[0].allocated_bytes = Some(bytes);
            p
        };
        // Stock: 10 collections for 2 GB; per-CPU LABs: 10 for 4 GB, half as many per GB.
        let both = runs(vec![
            with_bytes(point("h2", STOCK, &[100.0], &[9]), 2_000_000_000),
            with_bytes(point("h2", CPU_LABS, &[100.0], &[9]), 4_000_000_000),
        ]);
        let gcs = relative(&both, settings(&both)[0], CPU_LABS).collections;
        assert!((gcs.unwrap().median - 0.5).abs() < 1e-9, "{gcs:?}");
        // One side without its bytes (a run recorded before they were kept): raw counts.
        let one = runs(vec![
            point("h2", STOCK, &[100.0], &[9]),
            with_bytes(point("h2", CPU_LABS, &[100.0], &[9]), 4_000_000_000),
        ]);
        let gcs = relative(&one, settings(&one)[0], CPU_LABS).collections;
        assert!((gcs.unwrap().median - 1.0).abs() < 1e-9, "{gcs:?}");
    }

    #[test]
    fn the_control_is_stock_again_last_in_each_round_and_a_column_of_its_own() {
        let plain = runs(vec![]).plan;
        let control = Plan {
            control: true,
            ..plain.clone()
        };
        let configs = control.configs();
        assert_eq!(configs.len(), plain.configs().len() + 1);
        let last = configs.last().unwrap();
        assert_eq!(last.label, STOCK_AGAIN);
        assert_eq!(
            last.flags, configs[0].flags,
            "the control runs stock's flags"
        );
        assert_eq!(control.run_count() * 5, plain.run_count() * 6);
        // Stock again 5 % slower in h2 and 5 % faster in javac, round by round.
        let mut with_control = runs(vec![
            point("h2", STOCK, &[100.0, 100.0], &[9, 9]),
            point("h2", STOCK_AGAIN, &[105.0, 105.0], &[9, 9]),
            point("javac", STOCK, &[200.0, 200.0], &[4, 4]),
            point("javac", STOCK_AGAIN, &[190.0, 190.0], &[4, 4]),
        ]);
        with_control.plan = control;
        let relative = relative(&with_control, settings(&with_control)[0], STOCK_AGAIN);
        let time = relative.time.unwrap();
        assert!(
            (time.median - (1.05f64 * 0.95).sqrt()).abs() < 1e-9,
            "{time:?}"
        );
        let table = render(&with_control);
        assert!(
            table.contains("*stock again (control)* is stock run again"),
            "{table}"
        );
        assert!(
            table.contains(" stock again (control): time | collections |"),
            "{table}"
        );
        assert!(
            table.contains("| h2 | 100 (100–100) | 9 (9–9) |"),
            "{table}"
        );
        assert!(
            table.contains(" 1.05 (1.05–1.05) | 1.00 (1.00–1.00) |"),
            "{table}"
        );
        // Without the control, neither the column nor the sentence.
        let table = render(&runs(vec![point("h2", STOCK, &[100.0], &[9])]));
        assert!(!table.contains("stock again"), "{table}");
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

    #[test]
    fn recordings_of_one_plan_merge_into_rounds() {
        let mut first = runs(vec![
            point("h2", STOCK, &[100.0], &[9]),
            point("h2", CPU_LABS, &[110.0], &[9]),
        ]);
        let mut second = runs(vec![
            point("h2", STOCK, &[120.0, 100.0], &[9, 9]),
            point("h2", CPU_LABS, &[108.0, 100.0], &[9, 9]),
            point("javac", STOCK, &[300.0], &[5]),
        ]);
        second.plan.threads = vec![2, 16];
        first.absorb(second).unwrap();
        assert_eq!(first.points.len(), 3);
        assert_eq!(first.points[0].runs.len(), 3);
        assert_eq!(first.points[1].runs[1].median_ms, 108.0);
        assert_eq!(first.plan.threads, vec![2, 16]);
        assert_eq!(first.plan.repeat, 3);
        // Per-CPU LABs over stock, round by round: 110 / 100, 108 / 120 and 100 / 100.
        let time = relative(&first, settings(&first)[0], CPU_LABS)
            .time
            .unwrap();
        assert!((time.min - 0.9).abs() < 1e-9 && (time.max - 1.1).abs() < 1e-9);
        assert!((time.median - 1.0).abs() < 1e-9, "{time:?}");
        // 16 threads are in the plan but no point ran them: no table for them.
        assert_eq!(settings(&first).len(), 1);
        let table = render(&first);
        assert!(table.contains("1–3 round(s)"), "{table}");
        assert!(!table.contains("16 threads"), "{table}");
    }

    #[test]
    fn recordings_that_are_not_rounds_of_one_plan_are_refused() {
        let base = || runs(vec![point("h2", STOCK, &[100.0], &[9])]);
        let mut other_machine = base();
        other_machine.machine = "another".into();
        let mut other_warmup = base();
        other_warmup.plan.warmup = 10;
        let mut without_collections = base();
        without_collections.plan.pre_iteration_gc = false;
        let mut with_control = base();
        with_control.plan.control = true;
        let mut other_flags = base();
        other_flags.points[0]
            .config
            .flags
            .push("-XX:+UseHAB".into());
        for (other, what) in [
            (other_machine, "machines"),
            (other_warmup, "iterations"),
            (without_collections, "harnesses"),
            (with_control, "controls"),
            (other_flags, "flags"),
        ] {
            let mut first = base();
            let error = first.absorb(other).unwrap_err();
            assert!(error.contains(what), "{error}");
            assert_eq!(first.points[0].runs.len(), 1, "nothing taken");
        }
    }

    #[test]
    fn recordings_from_before_the_pre_iteration_collection_read_as_without_it() {
        let old = r#"{"apps":["h2"],"collectors":["parallel"],"youngs":["tight"],"threads":[2],
                      "jfr":[false],"warmup":10,"iterations":3,"repeat":1}"#;
        let plan: Plan = serde_json::from_str(old).unwrap();
        assert!(!plan.pre_iteration_gc);
        assert!(!plan.control, "recorded before the control: without it");
        let rendered = render(&AppsRuns {
            plan,
            ..runs(vec![point("h2", STOCK, &[100.0], &[9])])
        });
        assert!(
            rendered.contains("--pre-iteration-gc off` (no collection"),
            "{rendered}"
        );
    }

    #[test]
    fn ratios_pair_the_rounds_where_both_sides_ran_them() {
        // A slow second round for both: each round's ratio is 1.1, unpaired 110/200 to 220/100.
        let both = runs(vec![
            point("h2", STOCK, &[100.0, 200.0], &[9, 9]),
            point("h2", CPU_LABS, &[110.0, 220.0], &[9, 9]),
        ]);
        let relative_both = relative(&both, settings(&both)[0], CPU_LABS);
        let time = relative_both.time.unwrap();
        assert!((time.min - 1.1).abs() < 1e-9 && (time.max - 1.1).abs() < 1e-9);
        assert_eq!(relative_both.per_round.len(), 2);
        assert!((relative_both.per_round[1].0 - 1.1).abs() < 1e-9);
        assert!(render(&both).contains(" 1.10, 1.10 | 1.00, 1.00 |"));
        // Stock with a round more: the spreads' widest ratio.
        let unequal = runs(vec![
            point("h2", STOCK, &[100.0, 200.0], &[9, 9]),
            point("h2", CPU_LABS, &[110.0], &[9]),
        ]);
        let relative_unequal = relative(&unequal, settings(&unequal)[0], CPU_LABS);
        let time = relative_unequal.time.unwrap();
        assert!((time.min - 0.55).abs() < 1e-9 && (time.max - 1.1).abs() < 1e-9);
        assert!(relative_unequal.per_round.is_empty());
    }
}
