//! Per-CPU LABs indexed by concurrency ids (`mm_cid`) against CPU numbers: how many LABs the
//! threads spread over at each collection, what their tails waste, and the time, with one
//! thread and many. The index is chosen once per process, so each configuration runs as its
//! own `hab run` process (`HAB_RSEQ_INDEX=cpu` for the CPU numbers).

use std::fmt::Write as _;
use std::process::Command;

use hab::ByteSize;
use indicatif::ProgressBar;

use super::claims::{Claims, Verdict};
use super::experiment::{Context, Experiment};
use super::scale::{Scale, ALLOC_OBJECT_HEAP_BYTES};
use crate::figures::Spread;

/// Whose claims the section's table checks, in the list of claims.
const SECTION: &str = "Concurrency ids";
/// One thread, then 4 and 16 per CPU.
fn thread_counts(scale: &Scale) -> Vec<usize> {
    let [four, sixteen] = scale.threads.oversubscribed();
    vec![1, four, sixteen]
}

/// What the LABs are indexed by in one run: `HAB_RSEQ_INDEX`'s value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Index {
    /// The process's default: concurrency ids where the kernel has them.
    Default,
    Cpu,
}

/// One configuration's figures (means over its repetitions; the time a median).
#[derive(Clone, Debug)]
pub struct IndexRun {
    pub index: Index,
    pub threads: usize,
    /// What the process said it indexed by.
    pub indexed_by: String,
    pub collections: f64,
    pub labs_in_use: f64,
    pub tail_waste_bytes: f64,
    pub ns_per_object: f64,
}

impl IndexRun {
    /// Every collection of a run counts its LABs in use, the one `hab run` ends it with too.
    fn all_collections(&self) -> f64 {
        self.collections + 1.0
    }

    fn labs_per_collection(&self) -> f64 {
        self.labs_in_use / self.all_collections()
    }

    fn waste_per_collection(&self) -> f64 {
        self.tail_waste_bytes / self.all_collections()
    }
}

/// Objects per thread: a quarter of Jaffer's, so that 32 threads stay short.
fn objects(scale: &Scale) -> usize {
    scale.object_objects / 4
}

/// Runs `cpu-lab` `alloc-object` with `threads` threads in a process of its own.
fn run(scale: &Scale, index: Index, threads: usize) -> Result<IndexRun, String> {
    let program = std::env::current_exe().map_err(|e| format!("the hab program: {e}"))?;
    let mut command = Command::new(program);
    command
        .args(["run", "--workload", "alloc-object", "--mode", "cpu-lab"])
        .args(["--object-size", "16", "--no-compute", "--json"])
        .args(["--threads", &threads.to_string()])
        .args(["--objects", &objects(scale).to_string()])
        .args([
            "--heap",
            &ByteSize::new(ALLOC_OBJECT_HEAP_BYTES).to_string(),
        ])
        .args(["--repeat", &scale.repeat.to_string()])
        .args(["--warmup", &scale.warmup.to_string()]);
    match index {
        Index::Default => command.env_remove("HAB_RSEQ_INDEX"),
        Index::Cpu => command.env("HAB_RSEQ_INDEX", "cpu"),
    };
    let output = command
        .output()
        .map_err(|e| format!("hab run could not start: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "hab run failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("hab run's JSON does not parse: {e}"))?;
    let number = |path: &[&str]| -> Result<f64, String> {
        path.iter()
            .try_fold(&json, |value, key| value.get(key))
            .and_then(serde_json::Value::as_f64)
            .ok_or_else(|| format!("hab run's JSON has no {}", path.join(".")))
    };
    Ok(IndexRun {
        index,
        threads,
        indexed_by: json
            .get("slot_index")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("?")
            .to_string(),
        collections: number(&["collections"])?,
        labs_in_use: number(&["cpu_lab", "labs_in_use_at_collections"])?,
        tail_waste_bytes: number(&["cpu_lab", "partial_waste_bytes"])?,
        ns_per_object: number(&["ns_per_alloc"])?,
    })
}

/// The experiment as the report runs it.
pub struct ConcurrencyIds;

impl Experiment for ConcurrencyIds {
    fn name(&self) -> &'static str {
        "Concurrency ids: per-CPU LABs by mm_cid or by CPU"
    }

    fn steps(&self, cx: &Context) -> usize {
        thread_counts(&cx.scale).len() * 2
    }

    fn measure(&self, cx: &mut Context, progress: &ProgressBar) -> Result<(), String> {
        for threads in thread_counts(&cx.scale) {
            for index in [Index::Default, Index::Cpu] {
                progress.set_message(format!("cpu-lab, {threads} threads, by {index:?}"));
                let measured = run(&cx.scale, index, threads)?;
                cx.results.get_mut::<Vec<IndexRun>>().push(measured);
                progress.inc(1);
            }
        }
        Ok(())
    }

    fn section(&self, cx: &Context, claims: &mut Claims) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "## Concurrency ids: per-CPU LABs by `mm_cid` or by CPU\n"
        );
        let _ = writeln!(
            s,
            "Linux 6.3 and later write in every rseq area the thread's *concurrency id*: unique \
             among the process's running threads, compact near 0. Hab indexes its restartable \
             per-CPU LABs (and the `cpu` level's buffers) by it where the kernel has it, so a \
             process uses as many LABs as it runs threads at once, not as many as the CPUs its \
             threads visit. `cpu-lab` mode, `alloc-object`, 16-byte objects, {} per thread, a \
             {} heap, {} repetitions; each row a `hab run` process of its own, the second of \
             each pair with `HAB_RSEQ_INDEX=cpu`. Collections are those during a run (means); \
             LABs in use and tail waste are per collection, counting the one that ends each \
             run; time `ns/object` (median).\n",
            objects(&cx.scale),
            ByteSize::new(ALLOC_OBJECT_HEAP_BYTES),
            cx.scale.repeat
        );
        let _ = writeln!(
            s,
            "| threads | indexed by | collections | LABs in use per collection | LABs' tails wasted per collection | ns/object | claim: one LAB in use for one thread |"
        );
        let _ = writeln!(s, "| ---: | --- | ---: | ---: | ---: | ---: | --- |");
        let runs: &[IndexRun] = cx.results.get::<Vec<IndexRun>>().map_or(&[], Vec::as_slice);
        for threads in thread_counts(&cx.scale) {
            let find = |index| {
                runs.iter()
                    .find(|run| run.threads == threads && run.index == index)
            };
            let (Some(default), Some(by_cpu)) = (find(Index::Default), find(Index::Cpu)) else {
                continue;
            };
            // One thread has one concurrency id wherever it runs; with more threads than
            // CPUs both indexes are bounded by the CPUs.
            let verdict = if threads == 1 {
                claims
                    .judge(
                        SECTION,
                        "indexed by concurrency id, one thread leaves at most one LAB in use \
                         at a collection",
                        Verdict::at_most(Spread::of(&[default.labs_per_collection()]), 1.0),
                    )
                    .to_string()
            } else {
                String::new()
            };
            for (run, claim) in [(default, verdict), (by_cpu, String::new())] {
                let _ = writeln!(
                    s,
                    "| {threads} | {} | {:.1} | {:.2} | {} | {:.2} | {claim} |",
                    run.indexed_by,
                    run.collections,
                    run.labs_per_collection(),
                    ByteSize::new(run.waste_per_collection() as usize),
                    run.ns_per_object,
                );
            }
        }
        let _ = writeln!(
            s,
            "\nWhere the kernel lacks concurrency ids both rows of a pair say the CPU number. \
             On this machine's 2 CPUs, more threads than CPUs use at most 2 LABs either way \
             (the ids are unique among the threads *running*, at most 2 here), so the rows \
             with 8 and 32 threads differ only by where the collections caught the threads; \
             the difference is for machines with many more CPUs than running threads. One \
             thread that the test moves between the CPUs, in a process of its own, leaves \
             exactly one LAB in use at each collection with concurrency ids and one per CPU \
             it visited without (`crates/hab/tests/concurrency_ids.rs`, which CI runs both \
             ways).\n"
        );
        s
    }
}
