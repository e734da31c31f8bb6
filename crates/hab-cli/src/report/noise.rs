//! How noisy the machine was during the report: the same pure compute loop (no memory
//! traffic, one thread) timed at points all through the run. On a quiet machine every timing
//! is the same; other work on the machine, frequency changes and throttling spread them. The
//! report prints the spread so that a reader knows how far to trust differences of a few
//! percent.

use crate::figures::Spread;
use crate::workload;

/// Iterations of one probe: about 10 ms on a current CPU.
const PROBE_ITERATIONS: u64 = 10_000_000;

/// The probes' timings, in ms.
#[derive(Default)]
pub struct Noise {
    probes_ms: Vec<f64>,
}

impl Noise {
    /// Times the compute loop once more.
    pub fn probe(&mut self) {
        self.probes_ms.push(workload::compute_ms(PROBE_ITERATIONS));
    }

    /// The probes' spread; `None` before two probes.
    pub fn spread(&self) -> Option<Spread> {
        (self.probes_ms.len() >= 2).then(|| Spread::of(&self.probes_ms))
    }

    /// One line for the report's machine section.
    pub fn describe(&self) -> String {
        let Some(spread) = self.spread() else {
            return "The machine's noise was not measured (fewer than two probes).".into();
        };
        let width = spread.width_percent();
        let reading = match width {
            w if w <= 5.0 => "quiet: differences of a few percent are real",
            w if w <= 20.0 => "somewhat noisy: trust only differences well above this",
            _ => "noisy: other work competed for the CPUs, and close verdicts may not repeat",
        };
        format!(
            "Noise: a fixed compute loop on one thread, timed {} times through this run, took \
             {:.1} ms ({:.1}–{:.1}); its range is {width:.0} % of its median, so the machine was \
             {reading}.",
            self.probes_ms.len(),
            spread.median,
            spread.min,
            spread.max
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_reads_the_spread() {
        let quiet = Noise {
            probes_ms: vec![10.0, 10.2, 10.1],
        };
        assert!(quiet.describe().contains("quiet"), "{}", quiet.describe());
        let noisy = Noise {
            probes_ms: vec![10.0, 14.0, 10.5],
        };
        assert!(
            noisy.describe().contains("38 % of its median"),
            "{}",
            noisy.describe()
        );
        assert!(noisy.describe().contains("noisy:"));
        assert!(Noise::default().describe().contains("not measured"));
    }

    #[test]
    fn a_probe_takes_time() {
        let mut noise = Noise::default();
        noise.probe();
        noise.probe();
        assert!(noise.spread().is_some_and(|spread| spread.min > 0.0));
    }
}
