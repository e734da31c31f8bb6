//! What an experiment of the report is, and what it reads.
//!
//! An experiment names the `hab run` configurations it reads (run once each, whichever
//! experiments ask for them), measures what `hab run` does not (the VM, the C runtime,
//! HotSpot with HABs, callgrind), and writes its section with its claims. The report walks
//! its list (`report::EXPERIMENTS`) three times: for the runs and the progress bar's length,
//! to measure, and to write. What an experiment measures goes into [`Results`], by type, so
//! that this file names no experiment.

use std::any::{Any, TypeId};
use std::collections::HashMap;

use indicatif::ProgressBar;

use super::claims::Claims;
use super::hotspot;
use super::scale::Scale;
use super::shared::{Extras, Figures, Measured};
use crate::workload::RunSpec;

/// Everything the report measured, which experiments read to write their sections. Filled
/// in order: the machine's figures and the shared runs, stock HotSpot, then each
/// experiment's own measurements in the list's order.
pub struct Context {
    pub scale: Scale,
    /// Why HotSpot does not run in this report (`None`: it runs).
    pub jvm_skipped: Option<String>,
    /// The `hab run` runs every experiment asked for.
    pub measured: Measured,
    /// The compute loop and the noise probe.
    pub extras: Extras,
    /// Stock HotSpot on the same workloads, or why not.
    pub hotspot: hotspot::HotSpot,
    /// The benchmark jar HotSpot ran, for the runs of HotSpot with HABs.
    pub bench_jar: Option<std::path::PathBuf>,
    /// What each experiment measured itself, by type.
    pub results: Results,
    /// Where the plots go.
    pub figures: Figures,
}

impl Context {
    /// Why HotSpot's experiments have nothing to show when they did not measure: HotSpot does
    /// not run in this report, or `bench/jvm` did not build.
    pub fn why_no_jvm(&self) -> String {
        match &self.jvm_skipped {
            Some(why) => format!("HotSpot does not run in this report: {why}"),
            None => "bench/jvm did not build".into(),
        }
    }

    /// A HotSpot experiment's section after its opening `text`: its runs of type `T` (what
    /// its `measure` put, `Ok` or why not), judged into `claims` and rendered, or why there
    /// are none.
    pub fn hotspot_section<T: Any>(
        &self,
        mut text: String,
        claims: &mut super::claims::Claims,
        judge: fn(&T, &mut super::claims::Claims),
        render: fn(&T) -> String,
    ) -> String {
        match self.results.get::<Result<T, String>>() {
            Some(Ok(runs)) => {
                judge(runs, claims);
                text += &render(runs);
            }
            Some(Err(why)) => text += &format!("Not run on this machine: {why}.\n\n"),
            None => text += &format!("Not run on this machine: {}.\n\n", self.why_no_jvm()),
        }
        text
    }
}

/// What the experiments measured themselves, one value of each type: an experiment puts its
/// own results in, and any section reads them by their type.
#[derive(Default)]
pub struct Results(HashMap<TypeId, Box<dyn Any>>);

impl Results {
    /// Keeps `value`, replacing an earlier value of its type.
    pub fn put<T: Any>(&mut self, value: T) {
        self.0.insert(TypeId::of::<T>(), Box::new(value));
    }

    /// The value of type `T`, if an experiment put one.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.get(&TypeId::of::<T>())?.downcast_ref()
    }

    /// The value of type `T`, a default one put first if there was none.
    pub fn get_mut<T: Any + Default>(&mut self) -> &mut T {
        self.0
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Box::new(T::default()))
            .downcast_mut()
            .expect("a value is stored under its own type")
    }
}

/// One experiment of the report (see the module documentation).
pub trait Experiment: Sync {
    /// Its name in the report's list.
    fn name(&self) -> &'static str;

    /// The `hab run` configurations it reads at `scale`.
    fn runs(&self, _scale: &Scale) -> Vec<RunSpec> {
        Vec::new()
    }

    /// The progress steps of its own measurements.
    fn steps(&self, _context: &Context) -> usize {
        0
    }

    /// Measures what `hab run` does not, into `context`.
    fn measure(&self, _context: &mut Context, _progress: &ProgressBar) -> Result<(), String> {
        Ok(())
    }

    /// Its section of the report, its claims judged into `claims`.
    fn section(&self, context: &Context, claims: &mut Claims) -> String;
}

#[cfg(test)]
mod tests {
    use super::Results;

    #[test]
    fn results_are_kept_by_type() {
        let mut results = Results::default();
        assert_eq!(results.get::<Vec<u32>>(), None);
        results.get_mut::<Vec<u32>>().push(7);
        results.put(String::from("seven"));
        assert_eq!(results.get::<Vec<u32>>(), Some(&vec![7]));
        assert_eq!(results.get::<String>().map(String::as_str), Some("seven"));
        results.put(vec![8u32]);
        assert_eq!(results.get::<Vec<u32>>(), Some(&vec![8]));
    }
}
