//! Costs counted rather than timed: instructions per allocation on the fast paths, and what
//! each CPU-id source costs per reading (ns, and instructions).

use std::fmt::Write as _;

use hab::{CpuIdReader, CpuIdSource, Topology};
use indicatif::ProgressBar;

use super::claims::{Claims, Verdict};
use super::experiment::{Context, Experiment};
use crate::callgrind::{self, COUNT};
use crate::figures::Spread;

/// The counted runs other sections quote, by label ([`Costs::instructions`]).
pub const TLAB_OBJECTS: &str = "alloc-object, 16 B, tlab (256 KiB)";
pub const SHARED_OBJECTS: &str = "alloc-object, 16 B, shared";
pub const SMALL_TLAB_OBJECTS: &str = "alloc-object, 16 B, tlab (1 KiB)";
pub const HAB_OBJECTS: &str = "alloc-object, 16 B, hab (1 KiB TLABs, core:1MiB)";
pub const CPU_LAB_OBJECTS: &str = "alloc-object, 16 B, cpu-lab (256 KiB LABs)";

/// The counted runs behind the instructions per refill, as the middle levels' refill-cost
/// section times them ([`Costs::instructions_per_refill`]): `alloc-object` with 256-byte and
/// with 1 MiB TLABs, refilled from the source named first (its `--middle`, or none: the
/// global heap), labelled as the last two say.
pub const REFILL_RUNS: [(&str, Option<&str>, [&str; 2]); 3] = [
    (
        "global heap",
        None,
        [
            "alloc-object, 16 B, tlab (256 B TLABs)",
            "alloc-object, 16 B, tlab (1 MiB TLABs)",
        ],
    ),
    (
        "core:1MiB",
        Some("core:1MiB"),
        [
            "alloc-object, 16 B, hab (256 B TLABs, core:1MiB)",
            "alloc-object, 16 B, hab (1 MiB TLABs, core:1MiB)",
        ],
    ),
    (
        "cpu:1MiB",
        Some("cpu:1MiB"),
        [
            "alloc-object, 16 B, hab (256 B TLABs, cpu:1MiB)",
            "alloc-object, 16 B, hab (1 MiB TLABs, cpu:1MiB)",
        ],
    ),
];
/// The TLAB sizes of [`REFILL_RUNS`], and the 16-byte objects a small one holds.
const REFILL_TLAB_SIZES: [&str; 2] = ["256", "1MiB"];
const OBJECTS_PER_SMALL_TLAB: f64 = 16.0;

/// `hab run` arguments whose instructions per object are counted.
const ALLOCATION_RUNS: [(&str, &[&str]); 6] = [
    (
        TLAB_OBJECTS,
        &["--workload", "alloc-object", "--tlab-size", "256KiB"],
    ),
    (
        "alloc-array, 16 B, tlab (256 KiB)",
        &["--workload", "alloc-array", "--tlab-size", "256KiB"],
    ),
    (
        SHARED_OBJECTS,
        &["--workload", "alloc-object", "--mode", "shared"],
    ),
    (
        SMALL_TLAB_OBJECTS,
        &["--workload", "alloc-object", "--tlab-size", "1KiB"],
    ),
    (
        HAB_OBJECTS,
        &[
            "--workload",
            "alloc-object",
            "--tlab-size",
            "1KiB",
            "--mode",
            "hab",
            "--middle",
            "core:1MiB",
        ],
    ),
    (
        CPU_LAB_OBJECTS,
        &[
            "--workload",
            "alloc-object",
            "--tlab-size",
            "256KiB",
            "--mode",
            "cpu-lab",
        ],
    ),
];
/// valgrind does not implement rseq: the runs that use it (`cpu-lab`, and `hab`, whose levels
/// read the CPU from the rseq area and whose `cpu` level bumps in restartable sections) count
/// the same sections and loads on glibc's area without a registration, which is exact for one
/// thread (nothing can interrupt them), instead of falling back to `sched_getcpu`.
const RSEQ_ENV: [(&str, &str); 1] = [("HAB_RSEQ", "unregistered")];
const RUN_TAIL: [&str; 9] = [
    "--objects",
    COUNT,
    "--repeat",
    "1",
    "--warmup",
    "0",
    "--no-compute",
    "--heap",
    "16MiB",
];
const OBJECTS: (u64, u64) = (200_000, 400_000);
const CALLS: (u64, u64) = (1_000_000, 2_000_000);

/// What a CPU-id source costs here, or why it is unavailable.
pub struct CpuIdCost {
    pub name: &'static str,
    /// ns per reading, or why the source does not work here.
    pub ns: Result<f64, String>,
    /// Instructions per loop iteration under callgrind, or why they could not be counted.
    pub instructions: Result<f64, String>,
}

/// What callgrind counted, once this experiment measured it (before: nothing), for the
/// sections that quote its counts.
pub(super) fn counted(cx: &Context) -> &Costs {
    static NOTHING: Costs = Costs {
        valgrind: false,
        allocation: Vec::new(),
        cpu_id: Vec::new(),
    };
    cx.results.get::<Costs>().unwrap_or(&NOTHING)
}

/// What callgrind counted (empty until the experiment measured).
#[derive(Default)]
pub struct Costs {
    pub valgrind: bool,
    /// Label, command, instructions per object.
    pub allocation: Vec<(&'static str, String, f64)>,
    pub cpu_id: Vec<CpuIdCost>,
}

impl Costs {
    /// Instructions per object of the allocation run labelled `label` (one of the constants
    /// above); `None` where it was not counted (valgrind missing).
    pub fn instructions(&self, label: &str) -> Option<f64> {
        self.allocation
            .iter()
            .find(|(run, _, _)| *run == label)
            .map(|(_, _, count)| *count)
    }

    /// Instructions one refill of a 256-byte TLAB takes from `source` (a name of
    /// [`REFILL_RUNS`]): (per object with 256-byte TLABs − per object with 1 MiB TLABs) × 16.
    pub fn instructions_per_refill(&self, source: &str) -> Option<f64> {
        let (_, _, [small, large]) = REFILL_RUNS.iter().find(|(name, _, _)| *name == source)?;
        Some((self.instructions(small)? - self.instructions(large)?) * OBJECTS_PER_SMALL_TLAB)
    }
}

/// Progress steps `measure` takes.
pub fn steps() -> usize {
    counted_runs().len() + CpuIdSource::NAMES.len()
}

/// Every counted `hab run`: [`ALLOCATION_RUNS`], then [`REFILL_RUNS`] at both TLAB sizes.
fn counted_runs() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut runs: Vec<_> = ALLOCATION_RUNS
        .iter()
        .map(|(label, args)| (*label, args.to_vec()))
        .collect();
    for (_, middle, labels) in REFILL_RUNS {
        for (label, tlab) in labels.into_iter().zip(REFILL_TLAB_SIZES) {
            let mut args = vec!["--workload", "alloc-object", "--tlab-size", tlab];
            if let Some(middle) = middle {
                args.extend(["--mode", "hab", "--middle", middle]);
            }
            runs.push((label, args));
        }
    }
    runs
}

pub fn measure(progress: &ProgressBar) -> Result<Costs, String> {
    let valgrind = callgrind::available();
    let mut allocation = Vec::new();
    for (label, args) in counted_runs() {
        progress.set_message(format!("callgrind: {label}"));
        if valgrind {
            let args: Vec<&str> = ["run"]
                .iter()
                .chain(&args)
                .chain(&RUN_TAIL)
                .copied()
                .collect();
            let uses_rseq = args.contains(&"cpu-lab") || args.contains(&"hab");
            let env: &[(&str, &str)] = if uses_rseq { &RSEQ_ENV } else { &[] };
            let count = callgrind::instructions_per_unit_with(env, &args, OBJECTS.0, OBJECTS.1)?;
            let prefix: String = env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
            allocation.push((
                label,
                format!("{prefix}{}", callgrind::command_line(&args)),
                count,
            ));
        }
        progress.inc(1);
    }
    let slots = Topology::discover().cpu_slots();
    let mut cpu_id = Vec::new();
    for name in CpuIdSource::NAMES {
        progress.set_message(format!("CPU id: {name}"));
        let source: CpuIdSource = name.parse()?;
        let ns = CpuIdReader::new(source, slots)
            .map(|reader| crate::machine::cpu_id_ns_per_call(&reader, 20_000_000));
        let args = ["cpu-id", "--source", name, "--calls", COUNT];
        let instructions = match &ns {
            Err(why) => Err(why.clone()),
            Ok(_) if !valgrind => Err("valgrind not found".into()),
            Ok(_) => callgrind::instructions_per_unit(&args, CALLS.0, CALLS.1)
                .map_err(|why| format!("not under valgrind: {why}")),
        };
        cpu_id.push(CpuIdCost {
            name,
            ns,
            instructions,
        });
        progress.inc(1);
    }
    Ok(Costs {
        valgrind,
        allocation,
        cpu_id,
    })
}

pub fn render(costs: &Costs, claims: &mut Claims) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## Instructions per allocation (callgrind)\n");
    if !costs.valgrind {
        let _ = writeln!(
            s,
            "valgrind was not found, so this run counted no instructions.\n"
        );
    } else {
        let _ = writeln!(
            s,
            "Difference between runs of {} and {} objects, divided by the difference: set-up \
             cancels out, refills and collections are amortised in. The loop is the workload's \
             own: fast path, header store and loop counter (and, for alloc-array, the \
             compression and store of the reference).\n",
            OBJECTS.1, OBJECTS.0
        );
        let _ = writeln!(s, "| run | instructions/object | command |");
        let _ = writeln!(s, "| --- | ---: | --- |");
        for (label, command, count) in &costs.allocation {
            let _ = writeln!(s, "| {label} | {count:.2} | `{command}` |");
        }
        if let Some((_, _, count)) = costs.allocation.first() {
            let _ = writeln!(
                s,
                "\nClaim: `alloc-object` with 16-byte objects costs at most 10 instructions per \
                 object: {}. (The bound was set for the TLAB-only path, 9 instructions; the one \
                 allocation call of every mode adds the per-CPU cursor test and its branch.)\n",
                claims.judge(
                    "Instruction counts",
                    "`alloc-object` with 16-byte objects costs at most 10 instructions per object",
                    Verdict::at_most(Spread::exact(*count), 10.0)
                )
            );
        }
        if let Some(cpu_lab) = costs.instructions(CPU_LAB_OBJECTS) {
            // The loop around the allocation: header store, counter, compare, branch.
            let path = cpu_lab - 4.0;
            let _ = writeln!(
                s,
                "`cpu-lab` allocates through `Mutator::alloc_sized`, the one allocation call of every \
                 mode, which reaches the per-CPU fast path while the thread allocates in \
                 per-CPU LABs. Under valgrind it runs with `HAB_RSEQ=unregistered`: valgrind \
                 does not implement rseq, so the sections run on glibc's area without a \
                 registration (exact with one thread). Per object, {cpu_lab:.2} instructions = 4 \
                 of the loop and header + {path:.2} of the allocation; docs/performance.md's disassembly \
                 of this loop splits them into the test of the mutator's per-CPU cursor (2), \
                 the restartable bump (10: arm the descriptor, load the index field's offset \
                 from the slot, check the index and branch, load, add, compare, branch, commit; \
                 the seed's SPARC PLAB path took 17) and the test of its result (2). Claim: a \
                 `cpu-lab` allocation costs at most 12 instructions: {} (the bound was set for the \
                 dedicated path, 11, before the cursor test).\n",
                claims.judge(
                    "Instruction counts",
                    "a `cpu-lab` allocation costs at most 12 instructions",
                    Verdict::at_most(Spread::exact(path), 12.0)
                )
            );
        }
    }
    let _ = writeln!(s, "## What each CPU-id source costs\n");
    let _ = writeln!(
        s,
        "Read once per TLAB refill in mode `hab` (and again after the commit, to count foreign \
         allocations). Time: best of 3 loops of 20 M readings in this process (through the \
         heap's reader, so a branch on the source is included). Instructions: callgrind, \
         `hab cpu-id --source S --calls N` for N = {} and {}.\n",
        CALLS.0, CALLS.1
    );
    let _ = writeln!(s, "| source | ns/reading | instructions/iteration |");
    let _ = writeln!(s, "| --- | ---: | ---: |");
    for cost in &costs.cpu_id {
        let ns = cost
            .ns
            .as_ref()
            .map_or_else(|why| format!("unavailable: {why}"), |ns| format!("{ns:.2}"));
        let count = cost
            .instructions
            .as_ref()
            .map_or_else(|why| why.clone(), |n| format!("{n:.1}"));
        let _ = writeln!(s, "| {} | {ns} | {count} |", cost.name);
    }
    let _ = writeln!(
        s,
        "\nAn iteration of the counting loop is the reading plus 3 instructions of loop and sum. \
         valgrind runs threads without an rseq registration and does not emulate RDPID, so those \
         two cannot be counted there; in the code a reading is one `fs`-relative load with a \
         sign check (rseq), or one `rdpid` and a mask.\n"
    );
    s
}

/// The experiment as the report runs it.
pub struct CostsExperiment;

impl Experiment for CostsExperiment {
    fn name(&self) -> &'static str {
        "Instructions per allocation and per CPU-id read (callgrind)"
    }

    fn steps(&self, _: &Context) -> usize {
        steps()
    }

    fn measure(&self, cx: &mut Context, progress: &ProgressBar) -> Result<(), String> {
        let measured = measure(progress)?;
        cx.results.put(measured);
        Ok(())
    }

    fn section(&self, cx: &Context, claims: &mut Claims) -> String {
        render(counted(cx), claims)
    }
}
