//! The report's first table: each mode's figures from the experiments below, side by side.

use std::fmt::Write as _;

use hab::{Level, MiddleLevelSpec, Mode};

use super::hotspot::HotSpot;
use super::vm::{self, Runs};
use super::{jaffer, middle, plab, Extras, Measured, Scale};

pub fn render(
    scale: &Scale,
    measured: &Measured,
    extras: &Extras,
    vm_runs: &[Runs],
    hotspot: &HotSpot,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## Summary\n");
    let _ = writeln!(
        s,
        "Each mode at a glance, from the experiments below: `alloc-object` with 16-byte objects \
         (ns per object, 1 and 2 threads), instructions per allocation in that loop (callgrind, \
         loop and header included), and collections of the 1000-thread chat on the VM with the \
         share of the LABs' bytes its partially used LABs left unused (waste); HotSpot \
         runs the same loop (Parallel GC, TLABs) and the same chat (64 KiB TLABs, 4 MiB young \
         generation) in Java.\n"
    );
    let _ = writeln!(
        s,
        "| mode | ns/object, 1 thread | ns/object, 2 threads | instructions/object | chat (50 rooms): collections (waste %) | where it wins here |"
    );
    let _ = writeln!(s, "| --- | ---: | ---: | ---: | ---: | --- |");
    let ns = |spec: &crate::workload::RunSpec| measured.get(spec).ns_per_alloc;
    let instructions = |needle: &str| {
        extras
            .costs
            .instructions(needle)
            .map_or("—".to_string(), |count| format!("{count:.1}"))
    };
    let chat = |mode| {
        let runs = vm::find(vm_runs, &vm::chat(scale, mode, 50));
        let lab_bytes = runs.mean(|r| r.tlab_bytes + r.cpu_lab.lab_bytes);
        format!(
            "{:.0} ({:.1} %)",
            runs.mean(|r| r.collections),
            100.0 * runs.mean(vm::wasted_bytes) / lab_bytes.max(1.0)
        )
    };
    let core = Some(MiddleLevelSpec {
        level: Level::Core,
        buffer_bytes: 1 << 20,
    });
    let hab = |threads| {
        ns(&middle::refill_run(
            scale,
            threads,
            middle::SMALL_TLAB_BYTES,
            core,
        ))
    };
    let tlab_small = |threads| {
        ns(&middle::refill_run(
            scale,
            threads,
            middle::SMALL_TLAB_BYTES,
            None,
        ))
    };
    let shared = (
        ns(&jaffer::run(scale, Mode::Shared, 1, 16)),
        ns(&jaffer::run(scale, Mode::Shared, 2, 16)),
    );
    let tlab = (
        ns(&jaffer::run(scale, Mode::Tlab, 1, 16)),
        ns(&jaffer::run(scale, Mode::Tlab, 2, 16)),
    );
    let plab = (
        ns(&plab::run(scale, Mode::CpuLab, 1)),
        ns(&plab::run(scale, Mode::CpuLab, 2)),
    );
    let rows = [
        (
            "`shared`",
            format!("{:.2}", shared.0),
            format!("{:.2}", shared.1),
            instructions("shared"),
            "—".to_string(),
            format!(
                "nowhere: one CAS per object, {:.0}× `tlab`'s time with 2 threads",
                shared.1 / tlab.1
            ),
        ),
        (
            "`tlab`",
            format!("{:.2}", tlab.0),
            format!("{:.2}", tlab.1),
            instructions("tlab (256 KiB)"),
            chat(Mode::Tlab),
            "the shortest fast path, with large TLABs and few threads".to_string(),
        ),
        (
            "`hab` (`core:1MiB`, 256 B TLABs)",
            format!("{:.2}", hab(1)),
            format!("{:.2}", hab(2)),
            instructions("hab (1 KiB"),
            "—".to_string(),
            format!(
                "small TLABs: {:.2}× the speed of `tlab` with the same 256 B TLABs at 2 threads",
                tlab_small(2) / hab(2)
            ),
        ),
        (
            "`plab`",
            format!("{:.2}", plab.0),
            format!("{:.2}", plab.1),
            instructions("cpu-lab"),
            chat(Mode::CpuLab),
            "many more threads than CPUs: LAB waste bounded by the CPUs, not the threads".into(),
        ),
        (
            "`flip`",
            "—".into(),
            "—".into(),
            "as `tlab` or `plab`".into(),
            chat(Mode::Flip),
            "chooses between the two at each collection".into(),
        ),
    ];
    let mut rows = rows.to_vec();
    let jvm_ns = |threads: usize| {
        hotspot
            .find("alloc-object", |p| {
                p.size == 16 && p.threads == threads && p.config.contains("TLABs")
            })
            .and_then(|p| p.ns_per_object)
            .map_or("—".to_string(), |ns| format!("{ns:.2}"))
    };
    let jvm_chat = hotspot
        .find("chat", |p| {
            p.size == 50 && p.config == super::jvm::CHAT_FIXED
        })
        .and_then(|p| p.collections)
        .map_or("—".to_string(), |gcs| gcs.to_string());
    rows.push((
        "HotSpot, TLABs",
        jvm_ns(1),
        jvm_ns(2),
        "—".into(),
        jvm_chat,
        match hotspot {
            HotSpot::Measured { .. } => "the same TLAB fast path, in compiled Java".into(),
            HotSpot::Skipped(_) => "not measured in this run".into(),
        },
    ));
    for (mode, one, two, count, gcs, wins) in rows {
        let _ = writeln!(s, "| {mode} | {one} | {two} | {count} | {gcs} | {wins} |");
    }
    let _ = writeln!(s);
    s
}
