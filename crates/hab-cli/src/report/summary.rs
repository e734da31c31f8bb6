//! The report's first table: each mode's figures from the experiments below, side by side.

use std::fmt::Write as _;

use hab::{Level, MiddleLevelSpec, Mode};

use super::costs::{self, Costs};
use super::hotspot::HotSpot;
use super::scale::Scale;
use super::shared::Measured;
use super::vm::{self, Runs};
use super::{cpu_labs, jaffer, middle};
use crate::figures::percent;

/// One mode's row: its figures, then where it wins.
struct Row {
    mode: &'static str,
    /// `alloc-object`, 16-byte objects, ns per object on 1 thread and on every CPU.
    ns: Vec<Option<f64>>,
    /// Instructions per object (callgrind), or what stands in for the count.
    instructions: String,
    /// The 50-room chat: collections and the share of LAB bytes wasted, in percent (HotSpot
    /// reports no waste).
    chat: Option<(f64, Option<f64>)>,
    wins: String,
}

pub fn render(
    scale: &Scale,
    measured: &Measured,
    costs: &Costs,
    vm_runs: &[Runs],
    hotspot: &HotSpot,
) -> String {
    let mut s = String::new();
    let counts = scale.threads.ends();
    let _ = writeln!(s, "## Summary\n");
    let _ = writeln!(
        s,
        "Each mode at a glance, from the experiments below: `alloc-object` with 16-byte objects \
         (ns per object, on 1 thread and on every CPU), instructions per allocation in that loop (callgrind, \
         loop and header included), and collections of the 1000-thread chat on the VM with the \
         share of the LABs' bytes its partially used LABs left unused (waste); HotSpot \
         runs the same loop (Parallel GC, TLABs) and the same chat (64 KiB TLABs, 4 MiB young \
         generation) in Java.\n"
    );
    let columns: String = counts
        .iter()
        .map(|&threads| {
            let plural = if threads == 1 { "" } else { "s" };
            format!(" ns/object, {threads} thread{plural} |")
        })
        .collect();
    let _ = writeln!(
        s,
        "| mode |{columns} instructions/object | chat (50 rooms): collections (waste %) | where it wins here |"
    );
    let _ = writeln!(
        s,
        "| --- |{} ---: | ---: | --- |",
        " ---: |".repeat(counts.len())
    );
    let cell = |value: Option<f64>| value.map_or("—".to_string(), |ns| format!("{ns:.2}"));
    for row in rows(scale, measured, costs, vm_runs, hotspot) {
        let chat = match row.chat {
            Some((collections, Some(waste))) => format!("{collections:.0} ({waste:.1} %)"),
            Some((collections, None)) => format!("{collections:.0}"),
            None => "—".into(),
        };
        let times: String = row
            .ns
            .iter()
            .map(|&ns| format!(" {} |", cell(ns)))
            .collect();
        let _ = writeln!(
            s,
            "| {} |{times} {} | {chat} | {} |",
            row.mode, row.instructions, row.wins
        );
    }
    let _ = writeln!(s);
    s
}

/// Every mode's figures, gathered from the experiments' runs.
fn rows(
    scale: &Scale,
    measured: &Measured,
    costs: &Costs,
    vm_runs: &[Runs],
    hotspot: &HotSpot,
) -> Vec<Row> {
    let ns = |spec: &crate::workload::RunSpec| measured.get(spec).ns_per_alloc;
    let instructions = |needle: &str| {
        costs
            .instructions(needle)
            .map_or("—".to_string(), |count| format!("{count:.1}"))
    };
    let chat = |mode| {
        let runs = vm::find(vm_runs, &vm::chat(scale, mode, 50));
        let lab_bytes = runs.mean(|r| r.tlab_bytes + r.cpu_lab.lab_bytes);
        let waste = percent(runs.mean(vm::wasted_bytes), lab_bytes);
        Some((runs.mean(|r| r.collections), Some(waste)))
    };
    let core = Some(MiddleLevelSpec {
        level: Level::Core,
        buffer_bytes: 1 << 20,
    });
    let small_tlabs = |threads, middle| {
        ns(&middle::refill_run(
            scale,
            threads,
            middle::SMALL_TLAB_BYTES,
            middle,
        ))
    };
    let alloc_object = |mode, threads| ns(&jaffer::run(scale, mode, threads, 16));
    let counts = scale.threads.ends();
    let all = scale.threads.cpus();
    let both = |figure: &dyn Fn(usize) -> f64| -> Vec<Option<f64>> {
        counts
            .iter()
            .map(|&threads| Some(figure(threads)))
            .collect()
    };
    let last = |figures: &[Option<f64>]| figures.last().copied().flatten().unwrap_or(f64::NAN);
    let (shared, tlab) = (
        both(&|threads| alloc_object(Mode::Shared, threads)),
        both(&|threads| alloc_object(Mode::Tlab, threads)),
    );
    let shared_over_tlab = last(&shared) / last(&tlab);
    let jvm_ns = |threads: usize| {
        hotspot
            .find("alloc-object", |p| {
                p.size == 16 && p.threads == threads && p.config.contains("TLABs")
            })
            .and_then(|p| p.ns_per_object)
    };
    let jvm_chat = hotspot
        .find("chat", |p| {
            p.size == 50 && p.config == super::jvm::CHAT_FIXED
        })
        .and_then(|p| p.collections)
        .map(|collections| (collections as f64, None));
    vec![
        Row {
            mode: "`shared`",
            ns: shared,
            instructions: instructions(costs::SHARED_OBJECTS),
            chat: None,
            wins: format!(
                "nowhere: one CAS per object, {:.0}× `tlab`'s time with {all} threads",
                shared_over_tlab
            ),
        },
        Row {
            mode: "`tlab`",
            ns: tlab,
            instructions: instructions(costs::TLAB_OBJECTS),
            chat: chat(Mode::Tlab),
            wins: "the shortest fast path, with large TLABs and few threads".into(),
        },
        Row {
            mode: "`hab` (`core:1MiB`, 256 B TLABs)",
            ns: both(&|threads| small_tlabs(threads, core)),
            // The counted run has 1 KiB TLABs; the timed ones 256 B.
            instructions: format!("{} (1 KiB TLABs)", instructions(costs::HAB_OBJECTS)),
            chat: None,
            wins: format!(
                "small TLABs: {:.2}× the speed of `tlab` with the same 256 B TLABs at {all} \
                 threads",
                small_tlabs(all, None) / small_tlabs(all, core)
            ),
        },
        Row {
            mode: "`cpu-lab`",
            ns: both(&|threads| ns(&cpu_labs::run(scale, Mode::CpuLab, threads))),
            instructions: instructions(costs::CPU_LAB_OBJECTS),
            chat: chat(Mode::CpuLab),
            wins: "many more threads than CPUs: LAB waste bounded by the CPUs, not the threads"
                .into(),
        },
        Row {
            mode: "`flip`",
            ns: vec![None; counts.len()],
            instructions: "as `tlab` or `cpu-lab`".into(),
            chat: chat(Mode::Flip),
            wins: "chooses between the two at each collection".into(),
        },
        Row {
            mode: "HotSpot, TLABs",
            ns: counts.iter().map(|&threads| jvm_ns(threads)).collect(),
            instructions: "—".into(),
            chat: jvm_chat,
            wins: match hotspot {
                HotSpot::Measured { .. } => "the same TLAB fast path, in compiled Java".into(),
                HotSpot::Skipped(_) => "not measured in this run".into(),
            },
        },
    ]
}
