//! Rounds of the real applications pooled across recordings (`hab hotspot-hab apps --pool`).
//!
//! Each round of each setting of a recording says, on its own, what a configuration does to
//! the suite: its geometric mean over the applications × stock's runs in the same round
//! ([`Relative::per_round`](super::hotspot_apps_section::Relative)). On a small shared machine
//! one such figure moves by several per cent with nothing changed (stock against stock, the
//! control), more than the claims' 2 %. Many rounds, from recordings of any settings, pooled
//! on the log scale with a confidence interval, can tell a few per cent apart where one cannot:
//! the control's own row shows how far the pooled mean of nothing is from 1.

use std::fmt::Write as _;

use super::claims::Verdict;
use super::hotspot_apps::AppsRuns;
use super::hotspot_apps_section::{
    relative, settings, FEWER_BOUND, NO_MORE_BOUND, THROUGHPUT_BOUND,
};
use super::hotspot_chat::STOCK;
use crate::figures::Spread;

/// One round of one setting of one recording: the suite's geometric means × stock.
#[derive(Clone, Debug, PartialEq)]
pub struct Round {
    /// The recording and setting it comes from.
    pub source: String,
    pub time: f64,
    pub collections: f64,
}

/// A configuration's rounds, from every recording that ran it.
#[derive(Clone, Debug)]
pub struct Pooled {
    pub label: String,
    pub rounds: Vec<Round>,
}

/// A mean of ratios on the log scale and its two-sided 95 % confidence interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub mean: f64,
    pub low: f64,
    pub high: f64,
}

/// Student's t at 97.5 % for 1 to 30 degrees of freedom (a standard table); beyond, the
/// normal's 1.96 (within 2 % of t there).
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The geometric mean of `ratios` with its 95 % interval, the ratios taken as independent
/// draws around one value (Student's t on their logarithms); none for fewer than two, or for
/// a ratio that is not positive.
pub fn interval(ratios: &[f64]) -> Option<Interval> {
    if ratios.len() < 2 || !ratios.iter().all(|r| r.is_finite() && *r > 0.0) {
        return None;
    }
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let variance = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let t = T_975.get(logs.len() - 2).copied().unwrap_or(1.96);
    let half_width = t * (variance / n).sqrt();
    Some(Interval {
        mean: mean.exp(),
        low: (mean - half_width).exp(),
        high: (mean + half_width).exp(),
    })
}

/// Every configuration's rounds over `recordings` (a name, the runs), in the order the
/// recordings' plans list them; stock itself is what each is divided by. A setting whose
/// applications did not all run a configuration and stock in the same rounds gives it none,
/// and a configuration without rounds is left out.
pub fn pool(recordings: &[(String, AppsRuns)]) -> Vec<Pooled> {
    let mut pooled: Vec<Pooled> = vec![];
    for (name, runs) in recordings {
        for setting in settings(runs) {
            for config in runs.plan.configs() {
                if config.label == STOCK {
                    continue;
                }
                let rounds = relative(runs, setting, &config.label).per_round;
                let index = match pooled.iter().position(|p| p.label == config.label) {
                    Some(index) => index,
                    None => {
                        pooled.push(Pooled {
                            label: config.label.clone(),
                            rounds: vec![],
                        });
                        pooled.len() - 1
                    }
                };
                for (time, collections) in rounds {
                    pooled[index].rounds.push(Round {
                        source: format!("{name}: {}", setting.title()),
                        time,
                        collections,
                    });
                }
            }
        }
    }
    pooled.retain(|p| !p.rounds.is_empty());
    pooled
}

/// The claim "`ratio` is at most `bound`" judged on its interval as the report judges a
/// figure on its range ([`Verdict::at_most`]), in this table's words: shown where the whole
/// interval is at or below the bound, refuted where it is wholly above, undecided otherwise.
fn verdict(ratio: Option<Interval>, bound: f64) -> &'static str {
    let Some(r) = ratio else { return "—" };
    let range = Spread {
        median: r.mean,
        min: r.low,
        max: r.high,
    };
    match Verdict::at_most(range, bound) {
        Verdict::Yes => "shown",
        Verdict::No => "refuted",
        Verdict::Inconclusive => "undecided",
    }
}

fn interval_cells(interval: Option<Interval>) -> String {
    interval.map_or("— | —".into(), |i| {
        format!("{:.3} | {:.3}–{:.3}", i.mean, i.low, i.high)
    })
}

/// The pooled table and every round behind it, in Markdown.
pub fn render(pooled: &[Pooled], recordings: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Rounds pooled from {recordings} recording(s): each round of each setting is one \
         figure, the suite's geometric mean × stock's runs in the same round; below, their \
         geometric mean and its 95 % confidence interval (Student's t on the logarithms, the \
         rounds taken as independent). Collections per GB the workers allocated where the runs \
         kept it. A claim is shown where its whole interval lies on its side of the bound, \
         refuted where the whole interval lies on the other.\n"
    );
    let _ = writeln!(
        out,
        "| configuration | rounds | time × stock | 95 % interval | collections × stock | \
         95 % interval | at least 0.98× stock's throughput | no more collections than stock \
         | at least 1 % fewer collections |"
    );
    let _ = writeln!(out, "|---|---:|---:|---|---:|---|---|---|---|");
    for p in pooled {
        let time = interval(&p.rounds.iter().map(|r| r.time).collect::<Vec<_>>());
        let collections = interval(&p.rounds.iter().map(|r| r.collections).collect::<Vec<_>>());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            p.label,
            p.rounds.len(),
            interval_cells(time),
            interval_cells(collections),
            verdict(time, THROUGHPUT_BOUND),
            verdict(collections, NO_MORE_BOUND),
            verdict(collections, FEWER_BOUND),
        );
    }
    let _ = writeln!(out, "\nEach round, time / collections × stock:\n");
    let mut sources: Vec<&str> = vec![];
    for source in pooled
        .iter()
        .flat_map(|p| &p.rounds)
        .map(|r| r.source.as_str())
    {
        if !sources.contains(&source) {
            sources.push(source);
        }
    }
    let _ = write!(out, "| recording: setting |");
    for p in pooled {
        let _ = write!(out, " {} |", p.label);
    }
    let _ = writeln!(out, "\n|---|{}", "---:|".repeat(pooled.len()));
    for source in sources {
        // A source holds several rounds where its recording merged them: one line each.
        let most = pooled
            .iter()
            .map(|p| p.rounds.iter().filter(|r| r.source == source).count())
            .max()
            .unwrap_or(0);
        for nth in 0..most {
            let _ = write!(out, "| {source} |");
            for p in pooled {
                let cell = p
                    .rounds
                    .iter()
                    .filter(|r| r.source == source)
                    .nth(nth)
                    .map_or("—".into(), |r| {
                        format!("{:.2} / {:.2}", r.time, r.collections)
                    });
                let _ = write!(out, " {cell} |");
            }
            let _ = writeln!(out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::hotspot_apps::{Plan, STOCK_AGAIN};
    use crate::report::hotspot_apps_section::tests::{point, runs};
    use crate::report::hotspot_chat::HABS;

    #[test]
    fn the_interval_is_students_t_around_the_geometric_mean() {
        // Logarithms ±0.1 around 0: mean 1, standard error 0.1, t(1) = 12.706.
        let i = interval(&[0.1f64.exp(), (-0.1f64).exp()]).unwrap();
        assert!((i.mean - 1.0).abs() < 1e-12, "{i:?}");
        assert!((i.high.ln() - 1.2706).abs() < 1e-9, "{i:?}");
        assert!((i.low.ln() + 1.2706).abs() < 1e-9, "{i:?}");
        // Many equal ratios: no width.
        let i = interval(&[1.05; 40]).unwrap();
        assert!((i.low - 1.05).abs() < 1e-12 && (i.high - 1.05).abs() < 1e-12);
        assert_eq!(interval(&[1.0]), None);
        assert_eq!(interval(&[1.0, 0.0]), None);
        assert_eq!(interval(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn rounds_pool_across_recordings_and_settings() {
        let control = Plan {
            control: true,
            ..runs(vec![]).plan
        };
        // Two rounds: HABs 10 % and 0 % slower; the control 2 % slower, then 2 % faster.
        let mut first = runs(vec![
            point("h2", STOCK, &[100.0, 100.0], &[9, 9]),
            point("h2", HABS, &[110.0, 100.0], &[9, 9]),
            point("h2", STOCK_AGAIN, &[102.0, 98.0], &[9, 9]),
            point("javac", STOCK, &[200.0, 200.0], &[4, 4]),
            point("javac", HABS, &[220.0, 200.0], &[4, 4]),
            point("javac", STOCK_AGAIN, &[204.0, 196.0], &[4, 4]),
        ]);
        first.plan = control;
        // A recording without the control, whose HABs ran in one round only.
        let second = runs(vec![
            point("h2", STOCK, &[100.0], &[9]),
            point("h2", HABS, &[105.0], &[4]),
            point("javac", STOCK, &[200.0], &[4]),
            point("javac", HABS, &[210.0], &[4]),
        ]);
        let pooled = pool(&[("a".into(), first), ("b".into(), second)]);
        let habs = pooled.iter().find(|p| p.label == HABS).unwrap();
        let times: Vec<f64> = habs.rounds.iter().map(|r| r.time).collect();
        assert_eq!(habs.rounds.len(), 3);
        for (got, want) in times.iter().zip([1.1, 1.0, 1.05]) {
            assert!((got - want).abs() < 1e-9, "{times:?}");
        }
        // h2 in b: (4+1)/(9+1) collections, javac 1: the round's geometric mean.
        assert!((habs.rounds[2].collections - 0.5f64.sqrt()).abs() < 1e-9);
        assert!(habs.rounds[2].source.starts_with("b: Parallel"));
        let again = pooled.iter().find(|p| p.label == STOCK_AGAIN).unwrap();
        assert_eq!(again.rounds.len(), 2, "only a ran the control");
        assert!(pooled.iter().all(|p| p.label != STOCK));
        let table = render(&pooled, 2);
        assert!(table.contains("from 2 recording(s)"), "{table}");
        assert!(table.contains(&format!("| {HABS} | 3 | ")), "{table}");
        // Three rounds this far apart decide nothing: t(2) = 4.303 makes every interval wide.
        let habs_row = table
            .lines()
            .find(|l| l.starts_with(&format!("| {HABS} | 3 |")))
            .unwrap();
        assert!(
            habs_row.ends_with("| undecided | undecided | undecided |"),
            "{habs_row}"
        );
        assert!(table.contains("| 1.10 / 1.00 |"), "{table}");
        assert!(table.contains("| 1.02 / 1.00 |"), "{table}");
    }

    #[test]
    fn the_verdict_needs_the_whole_interval_on_one_side_of_the_bound() {
        let at = |low: f64, high: f64, bound: f64| {
            verdict(
                Some(Interval {
                    mean: (low + high) / 2.0,
                    low,
                    high,
                }),
                bound,
            )
        };
        assert_eq!(at(0.95, 1.01, THROUGHPUT_BOUND), "shown");
        assert_eq!(at(0.99, 1.03, THROUGHPUT_BOUND), "undecided");
        assert_eq!(at(1.03, 1.09, THROUGHPUT_BOUND), "refuted");
        assert_eq!(verdict(None, THROUGHPUT_BOUND), "—");
        // Collections: 0.994-0.998 is fewer than stock's, but not by 1 %.
        assert_eq!(at(0.994, 0.998, NO_MORE_BOUND), "shown");
        assert_eq!(at(0.994, 0.998, FEWER_BOUND), "refuted");
        assert_eq!(at(0.989, 1.001, NO_MORE_BOUND), "undecided");
        assert_eq!(at(0.985, 0.989, FEWER_BOUND), "shown");
    }
}
