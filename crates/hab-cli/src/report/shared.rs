//! What every experiment reads, and how every section opens: the `hab run` runs of the report,
//! where its plots go, the figures measured beside the runs (the compute loop, the noise
//! probe), a run's time as the tables print it, and a seed's claim with its verdict.

use super::claims::{Claims, Verdict};
use super::{noise, plot};
use crate::workload::{RunResult, RunSpec};

/// Every run of this report, with the spec it was run from.
pub struct Measured {
    pub(super) runs: Vec<(RunSpec, RunResult)>,
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
    pub(super) dir: std::path::PathBuf,
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
    /// The compute loop's speed-up from 1 thread to each count of the scaling axis.
    pub compute_speedups: Vec<(usize, f64)>,
    /// The compute loop timed all through the run.
    pub noise: noise::Noise,
}

impl Extras {
    /// The compute loop's speed-up from 1 to `threads` threads: what a perfectly scaling
    /// workload reaches on this machine (NaN where it was not timed).
    pub fn compute_speedup(&self, threads: usize) -> f64 {
        self.compute_speedups
            .iter()
            .find(|(count, _)| *count == threads)
            .map_or(f64::NAN, |(_, speedup)| *speedup)
    }
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
