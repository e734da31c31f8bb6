//! What HotSpot observed says (`hotspot_observed.rs` runs it): the loop's and the chat's figures
//! per configuration and observer, what the samplers said, the claims, and the report's section.

use std::fmt::Write as _;

use super::claims::{Claims, Verdict};
use super::experiment::{Context, Experiment};
use super::hotspot_chat::{
    self, CPU_LABS, CPU_LAB_COLLECTIONS_BOUND, HABS_SMALL, MESSAGES_BOUND, NO_TLABS, STOCK,
};
use super::hotspot_hab::Collector;
use super::hotspot_observed::*;
use super::hotspot_runner::{find, report_runs, report_steps, Progress};
use crate::figures::{spread_cell as cell, Spread};

/// JFR's weights over the bytes allocated, per run.
pub(super) fn weight_ratios(sampling: &[Sampling]) -> Vec<f64> {
    sampling
        .iter()
        .filter(|s| s.allocated_bytes > 0)
        .map(|s| s.weight_bytes as f64 / s.allocated_bytes as f64)
        .collect()
}

/// The JVMTI samples over the bytes allocated / the interval, per run.
pub(super) fn sample_ratios(sampling: &[Sampling]) -> Vec<f64> {
    sampling
        .iter()
        .filter(|s| s.allocated_bytes > 0)
        .map(|s| s.samples as f64 * JVMTI_INTERVAL_BYTES as f64 / s.allocated_bytes as f64)
        .collect()
}

pub(super) fn collectors_of(runs: &ObservedRuns) -> Vec<Collector> {
    Collector::ALL
        .into_iter()
        .filter(|&c| runs.loops.iter().any(|p| p.collector == c))
        .collect()
}

/// The tables, per collector.
pub fn render_runs(runs: &ObservedRuns) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "Machine: {}. JVM: `{}`. {} round(s) of each run, interleaved; median (min–max). The \
         loop: `bench/jvm`'s `Observed`, one thread, {} rounds of {} million objects, \
         `-Xmn{LOOP_YOUNG}`, ns per object (the median round); × its own time without an \
         observer. The chat: {} threads, {} messages per connection, as in the many-threads \
         table.\n",
        runs.machine,
        runs.jvm,
        runs.repeat,
        runs.rounds,
        runs.objects_millions,
        hotspot_chat::THREADS,
        runs.messages
    );
    for collector in collectors_of(runs) {
        let _ = writeln!(
            text,
            "**{} (`{}`), the loop (ns per object)**\n\n| configuration | {} | {} | {} |\n| --- \
             | ---: | ---: | ---: |",
            collector.name(),
            collector.flag(),
            Observer::None.name(),
            Observer::Jfr.name(),
            Observer::Jvmti.name()
        );
        for config in loop_configs() {
            let alone = find(&runs.loops, (collector, Observer::None), &config.label)
                .and_then(|p| Spread::of_some(&p.ns_per_object));
            let mut row = format!("| {} (`{}`) |", config.label, config.flags.join(" "));
            for observer in Observer::ALL {
                let point = find(&runs.loops, (collector, observer), &config.label);
                let ns = point.map_or(vec![], |p| p.ns_per_object.clone());
                let ratio = match (observer, Spread::of_some(&ns), alone) {
                    (Observer::None, _, _) | (_, None, _) | (_, _, None) => String::new(),
                    (_, Some(ns), Some(alone)) => format!(", {:.2}×", ns.ratio(alone).median),
                };
                let _ = write!(row, " {}{ratio} |", cell(&ns, 2));
            }
            let _ = writeln!(text, "{row}");
        }
        let _ = writeln!(
            text,
            "\n**{}, what the samplers said (the loop)**\n\n| configuration | JFR samples | JFR \
             weights / bytes allocated | JFR's classes by weight | JVMTI samples | JVMTI samples \
             × interval / bytes allocated | JVMTI's classes by samples |\n| --- | ---: | ---: | \
             --- | ---: | ---: | --- |",
            collector.name()
        );
        for config in loop_configs() {
            let jfr = find(&runs.loops, (collector, Observer::Jfr), &config.label)
                .map_or(vec![], |p| p.sampling.clone());
            let jvmti = find(&runs.loops, (collector, Observer::Jvmti), &config.label)
                .map_or(vec![], |p| p.sampling.clone());
            let samples =
                |s: &[Sampling]| cell(&s.iter().map(|s| s.samples as f64).collect::<Vec<_>>(), 0);
            let top = |s: &[Sampling]| s.first().map_or("—".into(), |s| format!("`{}`", s.top));
            let _ = writeln!(
                text,
                "| {} | {} | {} | {} | {} | {} | {} |",
                config.label,
                samples(&jfr),
                cell(&weight_ratios(&jfr), 3),
                top(&jfr),
                samples(&jvmti),
                cell(&sample_ratios(&jvmti), 3),
                top(&jvmti),
            );
        }
        let _ = writeln!(
            text,
            "\n**{}, the chat (messages/s; young collections)**\n\n| configuration | {} | {} | \
             {} |\n| --- | ---: | ---: | ---: |",
            collector.name(),
            Observer::None.name(),
            Observer::Jfr.name(),
            Observer::Jvmti.name()
        );
        for config in chat_configs() {
            let mut row = format!("| {} (`{}`) |", config.label, config.flags.join(" "));
            for observer in Observer::ALL {
                let point = find(&runs.chats, (collector, observer), &config.label);
                let rate = point.map_or(vec![], |p| p.messages_per_sec.clone());
                let collections: Vec<f64> = point.map_or(vec![], |p| {
                    p.collections.iter().map(|&c| c as f64).collect()
                });
                let _ = write!(row, " {}; {} |", cell(&rate, 0), cell(&collections, 0));
            }
            let _ = writeln!(text, "{row}");
        }
        text.push('\n');
    }
    text
}

/// The observed JVM's claims, per collector and sampler: every HAB configuration of the loop
/// within 1.3× its own time unobserved, HABs with 1 KiB TLABs within 1.25× stock's adaptive
/// TLABs under the same observer; the chat in per-CPU LABs at ≥ 0.95× stock's messages/s under
/// the same observer, with at most [`CPU_LAB_COLLECTIONS_BOUND`] × the collections of
/// `-XX:-UseTLAB`; JFR's weights
/// over the bytes allocated within 10 % of stock's ratio; JVMTI's samples within 10 % of the
/// bytes allocated over the interval.
/// Every HAB configuration's time observed, at most this many times its own unobserved.
const OBSERVED_TIME_BOUND: f64 = 1.3;
/// HABs with 1 KiB TLABs' time, at most this many times stock's adaptive TLABs'.
const SMALL_TLAB_TIME_BOUND: f64 = 1.25;
/// What the samplers said, within this share of what was allocated (JFR: of stock's ratio).
const SAMPLING_TOLERANCE: f64 = 0.1;

pub(super) fn judge(runs: &ObservedRuns, claims: &mut Claims) {
    const SOURCE: &str = "HotSpot with HABs, observed";
    let percent = SAMPLING_TOLERANCE * 100.0;
    let within = |ratio: Spread| {
        Verdict::at_least(ratio, 1.0 - SAMPLING_TOLERANCE)
            .and(Verdict::at_most(ratio, 1.0 + SAMPLING_TOLERANCE))
    };
    for collector in collectors_of(runs) {
        let name = collector.name();
        for observer in [Observer::Jfr, Observer::Jvmti] {
            let who = observer.name();
            for config in loop_configs()
                .iter()
                .filter(|c| c.flags.iter().any(|f| f.starts_with("-XX:+UseHAB")))
            {
                let time = |o| {
                    find(&runs.loops, (collector, o), &config.label)
                        .and_then(|p| Spread::of_some(&p.ns_per_object))
                };
                if let (Some(observed), Some(alone)) = (time(observer), time(Observer::None)) {
                    claims.judge(
                        SOURCE,
                        &format!("{}: within {OBSERVED_TIME_BOUND}× its own time unobserved under {who} (the loop, {name})", config.label),
                        Verdict::at_most(observed.ratio(alone), OBSERVED_TIME_BOUND),
                    );
                }
            }
            let time = |label| {
                find(&runs.loops, (collector, observer), label)
                    .and_then(|p| Spread::of_some(&p.ns_per_object))
            };
            if let (Some(small), Some(stock)) = (time(HABS_SMALL), time(STOCK)) {
                claims.judge(
                    SOURCE,
                    &format!("{HABS_SMALL}: within {SMALL_TLAB_TIME_BOUND}× stock's adaptive TLABs under {who} (the loop, {name})"),
                    Verdict::at_most(small.ratio(stock), SMALL_TLAB_TIME_BOUND),
                );
            }
            let chat = |label| find(&runs.chats, (collector, observer), label);
            if let (Some(labs), Some(stock)) = (chat(CPU_LABS), chat(STOCK)) {
                if let (Some(rate), Some(stock_rate)) = (
                    Spread::of_some(&labs.messages_per_sec),
                    Spread::of_some(&stock.messages_per_sec),
                ) {
                    claims.judge(
                        SOURCE,
                        &format!(
                            "{CPU_LABS}: ≥ {MESSAGES_BOUND}× stock's messages/s under {who} (the chat, {name})"
                        ),
                        Verdict::at_least(rate.ratio(stock_rate), MESSAGES_BOUND),
                    );
                }
                let collections = |p: &ChatPoint| {
                    Spread::of_some(&p.collections.iter().map(|&c| c as f64).collect::<Vec<_>>())
                };
                if let (Some(labs), Some(no_tlabs)) =
                    (collections(labs), chat(NO_TLABS).and_then(collections))
                {
                    claims.judge(
                        SOURCE,
                        &format!("{CPU_LABS}: at most {CPU_LAB_COLLECTIONS_BOUND}× the young collections of -XX:-UseTLAB under {who} (the chat, {name})"),
                        Verdict::at_most(labs, CPU_LAB_COLLECTIONS_BOUND * no_tlabs.max),
                    );
                }
            }
        }
        let jfr_stock = find(&runs.loops, (collector, Observer::Jfr), STOCK)
            .and_then(|p| Spread::of_some(&weight_ratios(&p.sampling)));
        for config in loop_configs()
            .iter()
            .filter(|c| c.flags.iter().any(|f| f.starts_with("-XX:+UseHAB")))
        {
            let point = |o| find(&runs.loops, (collector, o), &config.label);
            if let (Some(ratio), Some(stock)) = (
                point(Observer::Jfr).and_then(|p| Spread::of_some(&weight_ratios(&p.sampling))),
                jfr_stock,
            ) {
                let relative = ratio.ratio(stock);
                claims.judge(
                    SOURCE,
                    &format!("{}: JFR's sample weights add up to the bytes allocated as stock's do, within {percent:.0} % (the loop, {name})", config.label),
                    within(relative),
                );
            }
            if let Some(ratio) =
                point(Observer::Jvmti).and_then(|p| Spread::of_some(&sample_ratios(&p.sampling)))
            {
                claims.judge(
                    SOURCE,
                    &format!("{}: JVMTI's samples within {percent:.0} % of the bytes allocated / the interval (the loop, {name})", config.label),
                    within(ratio),
                );
            }
        }
    }
}

/// The experiment as the report runs it, where HotSpot runs and the JVM with HABs is built.
pub struct HotSpotObserved;

impl Experiment for HotSpotObserved {
    fn name(&self) -> &'static str {
        "HotSpot with HABs, observed"
    }

    fn steps(&self, cx: &Context) -> usize {
        let runs = sizes_for(&cx.scale).map(|_| run_count(&REPORT_COLLECTORS, REPORT_ROUNDS));
        report_steps(cx, runs)
    }

    fn measure(&self, cx: &mut Context, progress: &indicatif::ProgressBar) -> Result<(), String> {
        let measured = report_runs(
            cx,
            sizes_for(&cx.scale),
            |jdk, jar, (rounds, objects, messages)| {
                measure(
                    jdk,
                    jar,
                    &REPORT_COLLECTORS,
                    rounds,
                    objects,
                    messages,
                    REPORT_ROUNDS,
                    &mut Progress::bar(progress),
                )
            },
        );
        if let Some(measured) = measured {
            cx.results.put(measured);
        }
        Ok(())
    }

    fn section(&self, cx: &Context, claims: &mut Claims) -> String {
        let text = String::from(
            "### Observed\n\nProduction JVMs are watched: JFR's default recording samples \
             allocations, and so do allocation profilers (a JVMTI agent). Both samplers live in \
             the runtime, which Hab's compiled paths skip; while one is on, the paths come back \
             to it only where the thread reaches its sample mark, so the costs below should \
             stay near those without an observer, and the samples should say what stock's \
             say.\n\n",
        );
        cx.hotspot_section(text, claims, judge, render_runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loop_point(
        label: &str,
        observer: Observer,
        ns: &[f64],
        sampling: Vec<Sampling>,
    ) -> LoopPoint {
        LoopPoint {
            collector: Collector::Parallel,
            config: loop_configs()
                .into_iter()
                .find(|c| c.label == label)
                .expect("a config"),
            observer,
            ns_per_object: ns.to_vec(),
            sampling,
        }
    }

    fn chat_point(label: &str, observer: Observer, rate: f64, collections: u64) -> ChatPoint {
        ChatPoint {
            collector: Collector::Parallel,
            config: chat_configs()
                .into_iter()
                .find(|c| c.label == label)
                .expect("a config"),
            observer,
            messages_per_sec: vec![rate, rate],
            collections: vec![collections, collections],
        }
    }

    fn runs(loops: Vec<LoopPoint>, chats: Vec<ChatPoint>) -> ObservedRuns {
        ObservedRuns {
            machine: "test".into(),
            jvm: "test".into(),
            rounds: 5,
            objects_millions: 10,
            messages: 40,
            repeat: 2,
            loops,
            chats,
        }
    }

    fn verdicts(runs: &ObservedRuns) -> Vec<(String, Verdict)> {
        let mut claims = Claims::default();
        judge(runs, &mut claims);
        claims
            .claims()
            .iter()
            .map(|c| (c.statement.clone(), c.verdict))
            .collect()
    }

    #[test]
    fn the_claims_follow_the_figures() {
        let sampled = |weight: u64, samples: u64| Sampling {
            allocated_bytes: 1 << 30,
            samples,
            weight_bytes: weight,
            top: "x".into(),
        };
        let right = (1u64 << 30) / JVMTI_INTERVAL_BYTES;
        let loops = vec![
            loop_point(STOCK, Observer::None, &[3.0, 3.1], vec![]),
            loop_point(
                STOCK,
                Observer::Jfr,
                &[3.0, 3.1],
                vec![sampled(1 << 30, 600)],
            ),
            loop_point(STOCK, Observer::Jvmti, &[3.2, 3.3], vec![sampled(0, right)]),
            // Within its bounds under JFR; twice as slow, with half the samples, under JVMTI.
            loop_point(HABS_SMALL, Observer::None, &[3.0, 3.1], vec![]),
            loop_point(
                HABS_SMALL,
                Observer::Jfr,
                &[3.2, 3.3],
                vec![sampled(1 << 30, 650)],
            ),
            loop_point(
                HABS_SMALL,
                Observer::Jvmti,
                &[6.5, 6.6],
                vec![sampled(0, right / 2)],
            ),
        ];
        let chats = vec![
            chat_point(STOCK, Observer::Jfr, 100_000.0, 170),
            chat_point(NO_TLABS, Observer::Jfr, 90_000.0, 90),
            chat_point(CPU_LABS, Observer::Jfr, 120_000.0, 95),
        ];
        let verdicts = verdicts(&runs(loops, chats));
        let verdict = |part: &str, observer: &str| {
            verdicts
                .iter()
                .find(|(s, _)| s.contains(part) && s.contains(observer))
                .unwrap_or_else(|| {
                    panic!("no claim with {part:?} and {observer:?} in {verdicts:?}")
                })
                .1
        };
        assert_eq!(verdict("its own time unobserved", "JFR"), Verdict::Yes);
        assert_eq!(verdict("its own time unobserved", "JVMTI"), Verdict::No);
        assert_eq!(verdict("1.25× stock's adaptive", "JFR"), Verdict::Yes);
        assert_eq!(verdict("1.25× stock's adaptive", "JVMTI"), Verdict::No);
        assert_eq!(verdict("weights add up", ""), Verdict::Yes);
        assert_eq!(verdict("JVMTI's samples within", ""), Verdict::No);
        assert_eq!(verdict("stock's messages/s", "JFR"), Verdict::Yes);
        assert_eq!(verdict("-XX:-UseTLAB", "JFR"), Verdict::Yes);
    }

    #[test]
    fn the_tables_render_every_configuration() {
        let loops = vec![loop_point(STOCK, Observer::None, &[3.0], vec![])];
        let text = render_runs(&runs(loops, vec![]));
        for config in loop_configs() {
            assert!(
                text.contains(&config.label),
                "{} missing in {text}",
                config.label
            );
        }
        assert!(text.contains("3.00 (3.00–3.00)"));
    }
}
