//! Garthwaite et al.'s per-processor LABs: objects bumped straight in the LAB of the CPU the
//! thread runs on (mode `cpu-lab`), against TLABs and a shared CAS (`alloc-object`, 16 B).

use std::fmt::Write as _;

use hab::{ByteSize, Mode};

use super::claims::{Claims, Verdict};
use super::costs::{Costs, CPU_LAB_OBJECTS, SHARED_OBJECTS, TLAB_OBJECTS};
use super::scale::{Scale, ALLOC_OBJECT_HEAP_BYTES};
use super::shared::{spread, Measured};

/// Whose claims the section's tables check, in the list of claims.
const SECTION: &str = "Per-CPU LABs";
use super::experiment::{Context, Experiment};
use crate::workload::{RunResult, RunSpec, Workload};

const MODES: [Mode; 3] = [Mode::Shared, Mode::Tlab, Mode::CpuLab];

pub(super) fn run(scale: &Scale, mode: Mode, threads: usize) -> RunSpec {
    RunSpec {
        mode,
        object_size: 16,
        ..scale.spec_on(Workload::AllocObject, threads)
    }
}

pub fn specs(scale: &Scale) -> Vec<RunSpec> {
    scale
        .threads
        .scaling()
        .into_iter()
        .flat_map(|threads| MODES.map(|mode| run(scale, mode, threads)))
        .collect()
}

pub fn render(scale: &Scale, measured: &Measured, costs: &Costs, claims: &mut Claims) -> String {
    let mut s = String::new();
    let get = |mode, threads| measured.get(&run(scale, mode, threads));
    let _ = writeln!(
        s,
        "## Per-CPU LABs (`cpu-lab`) against TLABs and a shared CAS\n"
    );
    let restartable = get(Mode::CpuLab, 1).cpu_labs_restartable;
    let _ = writeln!(
        s,
        "`alloc-object`, 16-byte objects, {} per thread, a {} heap, as in Jaffer's experiment. \
         In `cpu-lab` mode there is no TLAB: each object is bumped in the LAB of the CPU the thread \
         runs on, inside a restartable sequence{}; LABs are sized like adaptive TLABs (the heap \
         shared by the CPUs over 50 refills per collection). Median \
         of {} repetitions; all three modes in the same run.\n",
        scale.object_objects,
        ByteSize::new(ALLOC_OBJECT_HEAP_BYTES),
        match restartable {
            Some(true) => "",
            _ => " (**rseq did not work in this run: per-CPU compare-and-swap buffers instead**)",
        },
        scale.repeat
    );
    let _ = writeln!(
        s,
        "| threads | shared ns/object | tlab ns/object | cpu-lab ns/object | cpu-lab / tlab | shared / cpu-lab | claim: cpu-lab ≤ 1.6× tlab | claim: cpu-lab ≥ 2× faster than shared |"
    );
    let _ = writeln!(s, "| ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |");
    // Judged on one thread, at 2 and on every CPU; reported at the other counts.
    let judged = scale.threads.ends_and_two();
    for threads in scale.threads.scaling() {
        let runs = [Mode::Shared, Mode::Tlab, Mode::CpuLab].map(|mode| get(mode, threads));
        let [shared, tlab, cpu_lab] = runs.map(RunResult::ns_per_object);
        let mut judge = |claim: String, verdict| {
            if judged.contains(&threads) {
                claims.judge(SECTION, &claim, verdict).to_string()
            } else {
                format!("({verdict}, not judged)")
            }
        };
        let near_tlab = judge(
            format!("`cpu-lab` ≤ 1.6× `tlab` time per object ({threads} thread(s))"),
            Verdict::at_most(cpu_lab.ratio(tlab), 1.6),
        );
        let beats_shared = judge(
            format!("`cpu-lab` ≥ 2× faster than `shared` ({threads} thread(s))"),
            Verdict::at_least(shared.ratio(cpu_lab), 2.0),
        );
        let [shared, tlab, cpu_lab] = [shared, tlab, cpu_lab].map(|spread| spread.median);
        let _ = writeln!(
            s,
            "| {threads} | {} | {} | {} | {:.2} | {:.1}× | {} | {} |",
            spread(runs[0]),
            spread(runs[1]),
            spread(runs[2]),
            cpu_lab / tlab,
            shared / cpu_lab,
            near_tlab,
            beats_shared
        );
    }
    let counted =
        [SHARED_OBJECTS, TLAB_OBJECTS, CPU_LAB_OBJECTS].map(|run| costs.instructions(run));
    if let [Some(shared), Some(tlab), Some(cpu_lab)] = counted {
        let _ = writeln!(
            s,
            "\nBehind the times, the work counted (callgrind, one thread, the runs of \
             *Instructions per allocation*): {shared:.2} instructions per object in `shared`, \
             {tlab:.2} in `tlab`, {cpu_lab:.2} in `cpu-lab`: `cpu-lab` / `tlab` {:.2} and `shared` / \
             `cpu-lab` {:.1}× in instructions. Where a time ratio above strays far from these, \
             the difference is the machine (caches, contention, noise), not the allocator's \
             work.",
            cpu_lab / tlab,
            shared / cpu_lab
        );
    }
    let _ = writeln!(
        s,
        "\nWhat the per-CPU LABs did (means per repetition; the rows of the seed's Table 2):\n"
    );
    let _ = writeln!(
        s,
        "| threads | LABs | transactions | failed | invalid | sidelined | partially used | wasted in them | aborts | CAS fallback allocs |"
    );
    let _ = writeln!(
        s,
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for threads in scale.threads.scaling() {
        let RunResult { cpu_lab, .. } = get(Mode::CpuLab, threads);
        let _ = writeln!(
            s,
            "| {threads} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cpu_lab.labs,
            cpu_lab.transactions,
            cpu_lab.failed_transactions,
            cpu_lab.invalid_transactions,
            cpu_lab.sidelined_labs,
            cpu_lab.partial_labs,
            ByteSize::new(cpu_lab.partial_waste_bytes as usize),
            cpu_lab.rseq_aborts,
            cpu_lab.fallback_allocs
        );
    }
    let _ = writeln!(
        s,
        "\nA *transaction* installs a new LAB as a CPU's; it *failed* when its section aborted or \
         found the LAB refilled by another thread, and is *invalid* when it could not install at \
         all (the LAB is then sidelined for the next refill). With one LAB per CPU and the heap \
         reset when full, each collection leaves at most one partially used LAB per CPU.\n"
    );
    s
}

/// The experiment as the report runs it.
pub struct CpuLabs;

impl Experiment for CpuLabs {
    fn name(&self) -> &'static str {
        "Per-CPU LABs against TLABs and a shared CAS"
    }

    fn runs(&self, scale: &Scale) -> Vec<RunSpec> {
        specs(scale)
    }

    fn section(&self, cx: &Context, claims: &mut Claims) -> String {
        render(&cx.scale, &cx.measured, super::costs::counted(cx), claims)
    }
}
