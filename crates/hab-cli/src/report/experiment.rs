//! What an experiment of the report is, what it reads, and the list the report walks.
//!
//! An experiment names the `hab run` configurations it reads (run once each, whichever
//! experiments ask for them), measures what `hab run` does not (the VM, the C runtime,
//! HotSpot with HABs, callgrind), and writes its section with its claims. The report walks
//! [`EXPERIMENTS`] three times: for the runs and the progress bar's length, to measure, and
//! to write. Adding an experiment is a file with a type that implements [`Experiment`] and a
//! line in that list.

use indicatif::ProgressBar;

use super::claims::Claims;
use super::{
    c_runtime, concurrency_ids, costs, end_of_cycle, hotspot, hotspot_chat, hotspot_hab, jaffer,
    middle, plab, shipilev, vm, Extras, Figures, Measured, Scale,
};
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
    /// The compute loop, the noise probe, and the instruction counts.
    pub extras: Extras,
    /// Stock HotSpot on the same workloads, or why not.
    pub hotspot: hotspot::HotSpot,
    /// The benchmark jar HotSpot ran, for the runs of HotSpot with HABs.
    pub bench_jar: Option<std::path::PathBuf>,
    /// Hab's VM runs (the VM experiment's).
    pub vm_runs: Vec<vm::Runs>,
    /// The per-CPU LABs by concurrency id and by CPU (their experiment's).
    pub concurrency_ids: Vec<concurrency_ids::IndexRun>,
    /// `auto` and the grid's best run again in turn (the middle levels' experiment's).
    pub auto_rematch: Vec<middle::AutoRematch>,
    /// The C runtime's runs (its experiment's), once measured.
    pub c_runtime: Option<c_runtime::CRuntime>,
    /// HotSpot with HABs (its experiment's): one grid's runs per collector, or why not.
    pub hotspot_with_habs: Result<Vec<hotspot_hab::Runs>, String>,
    /// HotSpot with HABs under many threads (its experiment's), or why not.
    pub hotspot_chat: Result<hotspot_chat::ChatRuns, String>,
    /// Where the plots go.
    pub figures: Figures,
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

/// The report's experiments, in the order of their sections.
pub const EXPERIMENTS: &[&dyn Experiment] = &[
    &shipilev::Shipilev,
    &jaffer::Jaffer,
    &middle::Middle,
    &plab::CpuLabs,
    &concurrency_ids::ConcurrencyIds,
    &vm::Vm,
    &end_of_cycle::EndOfCycle,
    &c_runtime::CRuntimeExperiment,
    &hotspot_hab::HotSpotWithHabs,
    &hotspot_chat::HotSpotManyThreads,
    &costs::CostsExperiment,
];
