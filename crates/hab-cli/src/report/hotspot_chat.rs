//! Many threads on HotSpot with HABs, under Parallel and G1: `bench/jvm`'s chat (1000
//! threads in rooms of 20, a few small objects per message between blocking hand-offs) in a
//! 4 MiB young generation, the case Garthwaite et al.'s per-processor LABs were built for.
//! With that many threads a TLAB is small and each one's tail is unused at every
//! collection; the table shows what HotSpot's TLABs, with and without Hab's levels, leave
//! there, and how many young collections that costs, beside `-XX:-UseTLAB` (a
//! compare-and-swap on the young generation's top per object, no tails at all).
//!
//! `hab hotspot-hab chat` runs it alone; `hab report` runs it where the JVM with
//! HABs is built.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::claims::{Claims, Verdict};
use super::experiment::{Context, Experiment};
use super::hotspot_hab::Collector;
use super::hotspot_runner::{
    find, report_runs, report_steps, run_rounds, ConfigPoint, Jvm, JvmConfig, Progress, Rounds,
    SMALL_TLAB_FLAGS,
};
use crate::figures::{spread_cell, Spread};

/// Connections (threads) of the chat: 50 rooms of 20.
const ROOMS: usize = 50;
pub const THREADS: usize = ROOMS * 20;
/// The heap and the young generation (HotSpot's `-Xmx`, `-Xmn`).
const HEAP: &str = "64m";
const YOUNG: &str = "4m";

/// Per-CPU LABs' young collections at most this many times `-XX:-UseTLAB`'s (Garthwaite et
/// al.'s Table 2: as few as without TLABs), here and in the observed chat.
pub(super) const CPU_LAB_COLLECTIONS_BOUND: f64 = 1.15;
/// HABs' and per-CPU LABs' messages per second at least this many times stock's, here and in
/// the observed chat.
pub(super) const MESSAGES_BOUND: f64 = 0.95;
/// HABs with 1 KiB TLABs: messages per second at least this many times stock's.
const SMALL_TLAB_MESSAGES_BOUND: f64 = 0.9;

/// The configurations under either collector: stock with its adaptive TLABs, stock without
/// TLABs, HABs with adaptive TLABs, HABs with small fixed TLABs (1 KiB, below HotSpot's
/// smallest by default: refilled from the per-CPU buffer, not the young generation), and
/// objects in per-CPU LABs, with the flip between them and TLABs at collections (the default)
/// and in every cycle.
pub fn configs() -> Vec<JvmConfig> {
    vec![
        JvmConfig::new(STOCK, &["-XX:-UseHAB"]),
        JvmConfig::new(NO_TLABS, &["-XX:-UseHAB", "-XX:-UseTLAB"]),
        JvmConfig::new(HABS, &["-XX:+UseHAB"]),
        JvmConfig::new(HABS_SMALL, &["-XX:+UseHAB"]).with(SMALL_TLAB_FLAGS),
        JvmConfig::new(CPU_LABS, &["-XX:+UseHABCPULABs"]),
        JvmConfig::new(CPU_LABS_ALWAYS, &["-XX:+UseHABCPULABs", "-XX:-HABFlip"]),
    ]
}

/// The runs of every collector's configurations, `repeat` rounds each.
pub fn run_count(collectors: &[Collector], repeat: usize) -> usize {
    collectors.len() * configs().len() * repeat
}

pub(super) const STOCK: &str = "stock, adaptive TLABs";
pub(super) const NO_TLABS: &str = "stock, -XX:-UseTLAB";
pub(super) const HABS: &str = "-XX:+UseHAB, adaptive TLABs";
pub(super) const HABS_SMALL: &str = "-XX:+UseHAB, 1 KiB TLABs";
pub(super) const CPU_LABS: &str = "-XX:+UseHABCPULABs, flipping with TLABs";
pub(super) const CPU_LABS_ALWAYS: &str = "-XX:+UseHABCPULABs, every cycle";

/// One configuration under one collector, over the repetitions.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChatPoint {
    pub collector: Collector,
    pub config: JvmConfig,
    pub messages_per_sec: Vec<f64>,
    /// Young collections in the timed round.
    pub collections: Vec<u64>,
    /// TLAB space unused per collection over the run: the tails at collections and the
    /// tails retired at refills (the JVM's exit line, `tlab_gc_waste_bytes` and
    /// `tlab_refill_waste_bytes`), in KiB; with per-CPU LABs, over every collection, those of
    /// cycles without TLABs too.
    pub tlab_waste_kib_per_gc: Vec<f64>,
    /// The levels' buffer tails per collection over the run (HABs only), in KiB.
    pub level_waste_kib_per_gc: Vec<f64>,
}

impl ConfigPoint for ChatPoint {
    type Setting = Collector;
    fn setting(&self) -> Collector {
        self.collector
    }
    fn config(&self) -> &JvmConfig {
        &self.config
    }
}

/// The table's runs, and where they ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChatRuns {
    pub machine: String,
    pub jvm: String,
    pub messages: usize,
    pub repeat: usize,
    pub points: Vec<ChatPoint>,
}

/// What one run printed.
pub(super) struct Run {
    pub(super) messages_per_sec: f64,
    pub(super) collections: u64,
    tlab_waste_kib_per_gc: f64,
    level_waste_kib_per_gc: f64,
}

/// One run of the chat with `messages` per connection.
pub(super) fn run_once(
    jvm: &Jvm,
    bench_jar: &Path,
    collector: Collector,
    config: &JvmConfig,
    messages: usize,
) -> Result<Run, String> {
    let output = jvm
        .run()
        .options([
            collector.flag().to_string(),
            format!("-Xms{HEAP}"),
            format!("-Xmx{HEAP}"),
            format!("-Xmn{YOUNG}"),
        ])
        .options(&config.flags)
        .program(
            bench_jar,
            "hab.bench.Chat",
            [ROOMS.to_string(), messages.to_string()],
        )
        .run(&jvm.gc_log())?
        .succeeded()?;
    let exit = &output.exit;
    // Per collection that retired the TLABs (cycles in per-CPU LABs included).
    let per_gc = |bytes: u64| bytes as f64 / 1024.0 / exit.collections().max(1) as f64;
    Ok(Run {
        messages_per_sec: output.stderr_value("messages_per_sec")?,
        collections: output.stderr_value::<f64>("collections")? as u64,
        tlab_waste_kib_per_gc: per_gc(exit.tlab_waste_bytes()),
        level_waste_kib_per_gc: per_gc(exit.level_waste_bytes()),
    })
}

impl Rounds for ChatRuns {
    /// `bench/jvm`'s jar.
    type Inputs = PathBuf;

    fn runs_per_round(&self) -> usize {
        self.points.len()
    }

    fn describe(&self, index: usize) -> String {
        let point = &self.points[index];
        format!(
            "chat, {THREADS} threads, {}, {}",
            point.collector.name(),
            point.config.label
        )
    }

    fn run(&mut self, index: usize, jvm: &Jvm, bench_jar: &PathBuf) -> Result<(), String> {
        let point = &mut self.points[index];
        let run = run_once(
            jvm,
            bench_jar,
            point.collector,
            &point.config,
            self.messages,
        )?;
        point.messages_per_sec.push(run.messages_per_sec);
        point.collections.push(run.collections);
        point.tlab_waste_kib_per_gc.push(run.tlab_waste_kib_per_gc);
        point
            .level_waste_kib_per_gc
            .push(run.level_waste_kib_per_gc);
        Ok(())
    }
}

/// Runs every configuration under each of `collectors`, `repeat` rounds, the chat with
/// `messages` messages per connection.
pub fn measure(
    jdk: &Path,
    bench_jar: &Path,
    collectors: &[Collector],
    messages: usize,
    repeat: usize,
    progress: &mut Progress<'_, ChatRuns>,
) -> Result<ChatRuns, String> {
    let jvm = Jvm::open(jdk, "chat")?;
    let points = collectors
        .iter()
        .flat_map(|&collector| {
            configs().into_iter().map(move |config| ChatPoint {
                collector,
                config,
                messages_per_sec: vec![],
                collections: vec![],
                tlab_waste_kib_per_gc: vec![],
                level_waste_kib_per_gc: vec![],
            })
        })
        .collect();
    let mut runs = ChatRuns {
        machine: jvm.machine.clone(),
        jvm: jvm.version.clone(),
        messages,
        repeat,
        points,
    };
    run_rounds(&mut runs, &jvm, &bench_jar.to_path_buf(), repeat, progress)?;
    Ok(runs)
}

fn counts(values: &[u64]) -> Vec<f64> {
    values.iter().map(|&v| v as f64).collect()
}

/// The tables, one per collector.
pub fn render_runs(runs: &ChatRuns) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "Machine: {}. JVM: `{}`. `bench/jvm`'s chat: {ROOMS} rooms, {THREADS} threads, {} \
         messages per connection, `-Xms{HEAP} -Xmx{HEAP} -Xmn{YOUNG}`, {} round(s); median \
         (min–max).\n",
        runs.machine, runs.jvm, runs.messages, runs.repeat
    );
    let collectors: Vec<Collector> = Collector::ALL
        .into_iter()
        .filter(|&c| runs.points.iter().any(|p| p.collector == c))
        .collect();
    for collector in collectors {
        let _ = writeln!(
            text,
            "**{} (`{}`)**\n\n| run | young collections | messages/s | TLAB space unused per \
             collection (KiB) | levels' tails per collection (KiB) |\n| --- | ---: | ---: | ---: \
             | ---: |",
            collector.name(),
            collector.flag()
        );
        for point in runs.points.iter().filter(|p| p.collector == collector) {
            let cell = spread_cell;
            let with_levels = |f: &String| f == "-XX:+UseHAB" || f == "-XX:+UseHABCPULABs";
            let levels = if point.config.flags.iter().any(with_levels) {
                cell(&point.level_waste_kib_per_gc, 0)
            } else {
                "—".into()
            };
            let _ = writeln!(
                text,
                "| {} (`{}`) | {} | {} | {} | {levels} |",
                point.config.label,
                point.config.flags.join(" "),
                cell(&counts(&point.collections), 0),
                cell(&point.messages_per_sec, 0),
                cell(&point.tlab_waste_kib_per_gc, 0),
            );
        }
        text.push('\n');
    }
    text
}

/// The claims of HABs under many threads, per collector: with defaults, no more young
/// collections than stock at 0.95× its messages/s or more; with 1 KiB TLABs, fewer
/// collections than stock at 0.9× or more; with per-CPU LABs (Garthwaite et al.'s Table 2),
/// at most [`CPU_LAB_COLLECTIONS_BOUND`] × the collections of `-XX:-UseTLAB` at 0.95× stock's
/// messages/s or more.
fn judge(runs: &ChatRuns, claims: &mut Claims) {
    for collector in Collector::ALL {
        let Some(stock) = find(&runs.points, collector, STOCK) else {
            continue;
        };
        let (Some(stock_rate), Some(stock_collections)) = (
            Spread::of_some(&stock.messages_per_sec),
            Spread::of_some(&counts(&stock.collections)),
        ) else {
            continue;
        };
        let name = collector.name();
        let where_ = format!("{name}, {THREADS} threads, -Xmn{YOUNG}");
        if let Some(habs) = find(&runs.points, collector, HABS) {
            if let (Some(rate), Some(collections)) = (
                Spread::of_some(&habs.messages_per_sec),
                Spread::of_some(&counts(&habs.collections)),
            ) {
                claims.judge(
                    "HotSpot with HABs",
                    &format!("-XX:+UseHAB runs no more young collections than stock ({where_})"),
                    Verdict::not_above(collections, stock_collections),
                );
                claims.judge(
                    "HotSpot with HABs",
                    &format!(
                        "-XX:+UseHAB delivers ≥ {MESSAGES_BOUND}× stock's messages/s ({where_})"
                    ),
                    Verdict::at_least(rate.ratio(stock_rate), MESSAGES_BOUND),
                );
            }
        }
        let no_tlabs = find(&runs.points, collector, NO_TLABS)
            .map(|p| Spread::of_some(&counts(&p.collections)));
        for label in [CPU_LABS, CPU_LABS_ALWAYS] {
            let Some(labs) = find(&runs.points, collector, label) else {
                continue;
            };
            let (Some(rate), Some(collections)) = (
                Spread::of_some(&labs.messages_per_sec),
                Spread::of_some(&counts(&labs.collections)),
            ) else {
                continue;
            };
            if let Some(Some(no_tlabs)) = no_tlabs {
                claims.judge(
                    "HotSpot with HABs",
                    &format!(
                        "{label}: at most {CPU_LAB_COLLECTIONS_BOUND}× the young collections of \
                         -XX:-UseTLAB ({where_})"
                    ),
                    Verdict::at_most(collections, CPU_LAB_COLLECTIONS_BOUND * no_tlabs.max),
                );
            }
            claims.judge(
                "HotSpot with HABs",
                &format!("{label}: ≥ {MESSAGES_BOUND}× stock's messages/s ({where_})"),
                Verdict::at_least(rate.ratio(stock_rate), MESSAGES_BOUND),
            );
        }
        if let Some(small) = find(&runs.points, collector, HABS_SMALL) {
            if let (Some(rate), Some(collections)) = (
                Spread::of_some(&small.messages_per_sec),
                Spread::of_some(&counts(&small.collections)),
            ) {
                let fewer =
                    Verdict::not_above(collections, stock_collections).and(Verdict::at_most(
                        Spread::exact(collections.median),
                        stock_collections.median - 1.0,
                    ));
                claims.judge(
                    "HotSpot with HABs",
                    &format!(
                        "-XX:+UseHAB with 1 KiB TLABs runs fewer young collections than stock \
                         ({where_})"
                    ),
                    fewer,
                );
                claims.judge(
                    "HotSpot with HABs",
                    &format!(
                        "-XX:+UseHAB with 1 KiB TLABs delivers ≥ {SMALL_TLAB_MESSAGES_BOUND}× \
                         stock's messages/s ({where_})"
                    ),
                    Verdict::at_least(rate.ratio(stock_rate), SMALL_TLAB_MESSAGES_BOUND),
                );
            }
        }
    }
}

/// Messages per connection at the report's scales (none at the quick one).
fn messages_for(scale: &super::scale::Scale) -> Option<usize> {
    match scale.name {
        "default" => Some(40),
        "full" => Some(200),
        _ => None,
    }
}

/// Rounds at the report's scales.
const REPORT_ROUNDS: usize = 2;

/// The experiment as the report runs it, where HotSpot runs and the JVM with HABs is built.
pub struct HotSpotManyThreads;

impl Experiment for HotSpotManyThreads {
    fn name(&self) -> &'static str {
        "HotSpot with HABs, many threads"
    }

    fn steps(&self, cx: &Context) -> usize {
        let runs = messages_for(&cx.scale).map(|_| run_count(&Collector::ALL, REPORT_ROUNDS));
        report_steps(cx, runs)
    }

    fn measure(&self, cx: &mut Context, progress: &indicatif::ProgressBar) -> Result<(), String> {
        let measured = report_runs(cx, messages_for(&cx.scale), |jdk, jar, messages| {
            measure(
                jdk,
                jar,
                &Collector::ALL,
                messages,
                REPORT_ROUNDS,
                &mut Progress::bar(progress),
            )
        });
        if let Some(measured) = measured {
            cx.results.put(measured);
        }
        Ok(())
    }

    fn section(&self, cx: &Context, claims: &mut Claims) -> String {
        let text = String::from(
            "### Many threads\n\nGarthwaite et al.'s case inside HotSpot: a thousand threads, \
             each with a TLAB whose tail is unused at every young collection. Hab's levels \
             change where TLABs come from, so they bound the buffers' own tails, not the \
             TLABs'; `-XX:-UseTLAB` shows what no tails at all would give, and per-CPU LABs \
             (`-XX:+UseHABCPULABs`, Parallel) what they give without a compare-and-swap per \
             object: objects straight into the buffer of the CPU the thread runs on, in cycles \
             the flip policy gives them (by default) or in all.\n\n",
        );
        cx.hotspot_section(text, claims, judge, render_runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(collector: Collector, label: &str, collections: &[u64], rate: f64) -> ChatPoint {
        let config = configs().into_iter().find(|c| c.label == label).unwrap();
        ChatPoint {
            collector,
            config,
            messages_per_sec: vec![rate; collections.len()],
            collections: collections.to_vec(),
            tlab_waste_kib_per_gc: vec![1000.0; collections.len()],
            level_waste_kib_per_gc: vec![100.0; collections.len()],
        }
    }

    /// Two rounds of `points`, judged: the runs and the claims' verdicts.
    fn judged(points: Vec<ChatPoint>) -> (ChatRuns, Vec<Verdict>) {
        let runs = ChatRuns {
            machine: "m".into(),
            jvm: "j".into(),
            messages: 40,
            repeat: 2,
            points,
        };
        let mut claims = Claims::default();
        judge(&runs, &mut claims);
        (runs, claims.verdicts())
    }

    #[test]
    fn the_claims_follow_the_figures() {
        let (runs, verdicts) = judged(vec![
            point(Collector::G1, STOCK, &[100, 102], 1000.0),
            point(Collector::G1, HABS, &[98, 99], 990.0),
            point(Collector::G1, HABS_SMALL, &[110, 112], 800.0),
        ]);
        assert_eq!(
            verdicts,
            [Verdict::Yes, Verdict::Yes, Verdict::No, Verdict::No]
        );
        let text = render_runs(&runs);
        assert!(text.contains("**G1 (`-XX:+UseG1GC`)**"), "{text}");
        assert!(!text.contains("Parallel"), "{text}");
    }

    #[test]
    fn per_cpu_labs_are_judged_against_no_tlabs_and_stock_under_either_collector() {
        let with_labs = configs()
            .iter()
            .filter(|c| c.flags.iter().any(|f| f.contains("HABCPULABs")))
            .count();
        assert_eq!(with_labs, 2);
        assert_eq!(
            run_count(&[Collector::Parallel, Collector::G1], 2),
            2 * (6 + 6)
        );
        let (runs, verdicts) = judged(vec![
            point(Collector::Parallel, STOCK, &[150, 152], 500.0),
            point(Collector::Parallel, NO_TLABS, &[117, 118], 700.0),
            // Within 1.1x of -XX:-UseTLAB's collections, faster than stock.
            point(Collector::Parallel, CPU_LABS, &[118, 119], 700.0),
            // 1.2x the collections, and slower than 0.95x stock.
            point(Collector::Parallel, CPU_LABS_ALWAYS, &[140, 142], 400.0),
        ]);
        assert_eq!(
            verdicts,
            [Verdict::Yes, Verdict::Yes, Verdict::No, Verdict::No]
        );
        let text = render_runs(&runs);
        assert!(text.contains("`-XX:+UseHABCPULABs -XX:-HABFlip`"), "{text}");
        // The same claims under G1: as few collections as -XX:-UseTLAB, not as fast as stock.
        let (_, verdicts) = judged(vec![
            point(Collector::G1, STOCK, &[105, 105], 500.0),
            point(Collector::G1, NO_TLABS, &[78, 78], 520.0),
            point(Collector::G1, CPU_LABS, &[79, 80], 450.0),
        ]);
        assert_eq!(verdicts, [Verdict::Yes, Verdict::No]);
    }
}
