//! The seeds' experiments on the VM, where LAB waste turns into collections: Garthwaite et
//! al.'s Figure 9 (warehouses by thread count), Figure 10 and Table 2 (chat rooms with
//! 64 KiB LABs), and binary-trees and GCBench in every mode.
//!
//! What the runs say, and the report's section, is `vm_section.rs`.

use hab::{MiddleLevelSpec, Mode, TlabPolicy};
use indicatif::ProgressBar;

use super::experiment::Context;
use super::scale::Scale;
use crate::figures::Spread;
use crate::vm_run::{self, VmRunResult, VmRunSpec, VmWorkload};

/// Whose claims the section's tables check, in the list of claims.
pub(super) const SECTION: &str = "On the VM";
pub(super) const LAB_MODES: [Mode; 3] = [Mode::Tlab, Mode::CpuLab, Mode::Flip];
pub(super) const ROOMS: [usize; 2] = [10, 50];
/// The seed's young generation for both experiments.
pub(super) const SMALL_SPACE_BYTES: usize = 4 << 20;
pub(super) const CHAT_LAB_BYTES: usize = 64 << 10;
/// Orders each warehouse keeps alive: 64 warehouses fit the small space three times over.
pub(super) const LIVE_ORDERS: usize = 25;
/// Every mode, in the library's order.
pub(super) const ALL_MODES: [Mode; 5] = Mode::ALL;

fn base(scale: &Scale, workload: VmWorkload, mode: Mode) -> VmRunSpec {
    VmRunSpec {
        workload,
        mode,
        tlab: TlabPolicy::Adaptive,
        middle: if mode == Mode::Hab {
            MiddleLevelSpec::parse_list("core:1MiB").expect("static list")
        } else {
            Vec::new()
        },
        space_bytes: None,
        depth: 10,
        threads: 1,
        ops: None,
        rooms: 10,
        live_orders: LIVE_ORDERS,
        object_size: 16,
        verify: false,
        log_gc: false,
        log_tlab: false,
        // The seeds' TLABs: full-sized to the end of each cycle.
        end_of_cycle: false,
        cpu_id: scale.threads.cpu_id(),
        topology: scale.threads.topology(),
    }
}

/// The warehouses' allocation space: the seed's 4 MiB, which holds the live orders of 64
/// warehouses three times over, grown with the most threads the axis reaches on a machine of
/// more than 2 CPUs (2 MiB per CPU).
pub(super) fn warehouse_space_bytes(scale: &Scale) -> usize {
    SMALL_SPACE_BYTES * (scale.threads.cpus() / 2).max(1)
}

pub(super) fn warehouses(scale: &Scale, mode: Mode, threads: usize) -> VmRunSpec {
    VmRunSpec {
        threads,
        ops: Some(scale.warehouse_orders),
        space_bytes: Some(warehouse_space_bytes(scale)),
        ..base(scale, VmWorkload::Warehouses, mode)
    }
}

pub(super) fn chat(scale: &Scale, mode: Mode, rooms: usize) -> VmRunSpec {
    VmRunSpec {
        rooms,
        ops: Some(scale.chat_messages),
        tlab: TlabPolicy::Fixed(CHAT_LAB_BYTES),
        space_bytes: Some(SMALL_SPACE_BYTES),
        ..base(scale, VmWorkload::Chat, mode)
    }
}

/// The chat with adaptive TLAB (and per-CPU LAB) sizing instead of the seed's fixed 64 KiB.
pub(super) fn chat_adaptive(scale: &Scale, mode: Mode, rooms: usize) -> VmRunSpec {
    VmRunSpec {
        tlab: TlabPolicy::Adaptive,
        ..chat(scale, mode, rooms)
    }
}

pub(super) fn trees(scale: &Scale, workload: VmWorkload, mode: Mode) -> VmRunSpec {
    VmRunSpec {
        depth: scale.tree_depth,
        ..base(scale, workload, mode)
    }
}

/// Every VM run of the report, `scale.vm_repeat` times each.
pub fn specs(scale: &Scale) -> Vec<VmRunSpec> {
    let mut specs = Vec::new();
    for threads in scale.threads.warehouses() {
        for mode in LAB_MODES {
            specs.push(warehouses(scale, mode, threads));
        }
    }
    for rooms in ROOMS {
        for mode in LAB_MODES {
            specs.push(chat(scale, mode, rooms));
            specs.push(chat_adaptive(scale, mode, rooms));
        }
    }
    for workload in [VmWorkload::BinaryTrees, VmWorkload::GcBench] {
        for mode in ALL_MODES {
            specs.push(trees(scale, workload, mode));
        }
    }
    specs
}

/// The runs of one spec.
pub struct Runs {
    pub(super) spec: VmRunSpec,
    pub(super) results: Vec<VmRunResult>,
}

impl Runs {
    /// The repetitions of `spec`.
    pub(super) fn new(spec: VmRunSpec, results: Vec<VmRunResult>) -> Runs {
        Runs { spec, results }
    }

    /// What was run.
    pub(super) fn spec(&self) -> &VmRunSpec {
        &self.spec
    }

    /// The median of a figure over the repetitions.
    pub(super) fn median(&self, figure: impl Fn(&VmRunResult) -> f64) -> f64 {
        self.figure(figure).median
    }

    /// A figure over the repetitions.
    pub(super) fn figure(&self, figure: impl Fn(&VmRunResult) -> f64) -> Spread {
        let values: Vec<f64> = self.results.iter().map(figure).collect();
        Spread::of(&values)
    }

    /// A figure as `median (min–max)` over the repetitions, divided by `unit`.
    pub(super) fn spread(&self, figure: impl Fn(&VmRunResult) -> f64, unit: f64) -> String {
        let Spread { median, min, max } = self.figure(figure).scaled(1.0 / unit);
        let digits = if max < 100.0 { 1 } else { 0 };
        format!("{median:.digits$} ({min:.digits$}–{max:.digits$})")
    }

    /// The mean of a count over the repetitions.
    pub(super) fn mean(&self, figure: impl Fn(&VmRunResult) -> u64) -> f64 {
        self.results.iter().map(|r| figure(r) as f64).sum::<f64>() / self.results.len() as f64
    }
}

/// Runs every spec; the results are also returned for `results.jsonl`.
pub fn measure(scale: &Scale, progress: &ProgressBar) -> Result<Vec<Runs>, String> {
    let mut all = Vec::new();
    for spec in specs(scale) {
        progress.set_message(format!(
            "VM {} {} {} threads",
            spec.workload.name(),
            spec.mode,
            spec.threads
                .max(spec.rooms * 20 * usize::from(spec.workload == VmWorkload::Chat))
        ));
        let results = (0..scale.vm_repeat)
            .map(|_| vm_run::run(&spec))
            .collect::<Result<Vec<_>, _>>()?;
        all.push(Runs { spec, results });
        progress.inc(1);
    }
    Ok(all)
}

/// Every VM run of the report so far (this experiment's, then the end of a cycle's).
pub(super) fn runs(cx: &Context) -> &[Runs] {
    cx.results.get::<Vec<Runs>>().map_or(&[], Vec::as_slice)
}

pub(super) fn find<'a>(runs: &'a [Runs], spec: &VmRunSpec) -> &'a Runs {
    runs.iter()
        .find(|runs| runs.spec == *spec)
        .expect("every VM configuration of the report was run")
}

/// Bytes left unused in retired LABs (TLABs and per-CPU LABs).
pub(super) fn wasted_bytes(result: &VmRunResult) -> u64 {
    result.tlab_waste_bytes + result.cpu_lab.partial_waste_bytes
}

/// Every result, for `results.jsonl`.
pub fn results(runs: &[Runs]) -> impl Iterator<Item = &VmRunResult> {
    runs.iter().flat_map(|runs| runs.results.iter())
}
