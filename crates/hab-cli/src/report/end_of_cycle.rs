//! The end of a cycle (Garthwaite et al.'s open question of when to stop handing out LABs):
//! the many-thread VM workloads in `tlab` mode with TLABs full-sized to the end of each cycle
//! (the seeds' TLABs, the runs of the VM section) and with Hab's end-of-cycle policy, beside
//! per-CPU LABs.

use std::fmt::Write as _;

use hab::Mode;
use indicatif::ProgressBar;

use super::claims::{Claims, Verdict};
use super::experiment::{Context, Experiment};
use super::scale::Scale;
use super::vm::{self, chat, chat_adaptive, find, warehouses};
use crate::vm_run::{self, VmRunSpec};

/// Whose claims the section's table checks, in the list of claims.
const SECTION: &str = "The end of a cycle";
/// The chat's rooms: 1000 threads.
const ROOMS: usize = 50;
/// The workloads compared, with TLABs full-sized to the end (the VM section's runs).
fn full_sized(scale: &Scale) -> Vec<(String, VmRunSpec)> {
    let mut specs = vec![
        (
            format!("chat, {ROOMS} rooms, 64 KiB TLABs"),
            chat(scale, Mode::Tlab, ROOMS),
        ),
        (
            format!("chat, {ROOMS} rooms, adaptive TLABs"),
            chat_adaptive(scale, Mode::Tlab, ROOMS),
        ),
    ];
    // 4 and 32 warehouse threads per CPU.
    for threads in [4, 32].map(|per_cpu| per_cpu * scale.threads.cpus()) {
        specs.push((
            format!("warehouses, {threads} threads, adaptive TLABs"),
            warehouses(scale, Mode::Tlab, threads),
        ));
    }
    specs
}

/// `spec` with the end-of-cycle policy (Hab's default).
fn with_end_of_cycle(spec: &VmRunSpec) -> VmRunSpec {
    VmRunSpec {
        end_of_cycle: true,
        ..spec.clone()
    }
}

/// The same workload in per-CPU LABs (of the TLABs' size or policy).
fn in_cpu_labs(spec: &VmRunSpec) -> VmRunSpec {
    VmRunSpec {
        mode: Mode::CpuLab,
        ..spec.clone()
    }
}

/// The experiment as the report runs it.
pub struct EndOfCycle;

impl Experiment for EndOfCycle {
    fn name(&self) -> &'static str {
        "The end of a cycle: TLABs that shrink as the space runs out"
    }

    fn steps(&self, cx: &Context) -> usize {
        full_sized(&cx.scale).len()
    }

    /// Runs the workloads with the policy (those without it, and in per-CPU LABs, are the
    /// VM section's runs).
    fn measure(&self, cx: &mut Context, progress: &ProgressBar) -> Result<(), String> {
        for (label, spec) in full_sized(&cx.scale) {
            progress.set_message(format!("VM {label}, end of cycle"));
            let spec = with_end_of_cycle(&spec);
            let results = (0..cx.scale.vm_repeat)
                .map(|_| vm_run::run(&spec))
                .collect::<Result<Vec<_>, _>>()?;
            cx.results
                .get_mut::<Vec<vm::Runs>>()
                .push(vm::Runs::new(spec, results));
            progress.inc(1);
        }
        Ok(())
    }

    fn section(&self, cx: &Context, claims: &mut Claims) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "## The end of a cycle\n");
        let _ = writeln!(
            s,
            "Garthwaite et al. show that the moment a heap stops handing out LABs decides how \
             many collections a many-threaded program pays, and leave open when that should \
             be. Hab's end-of-cycle policy (on by default, `--end-of-cycle off` to compare): \
             near the end of the space, a thread's next TLAB is its part of what is left (its \
             fraction of the last cycles' allocation, learned at each collection), and once \
             that part is below the smallest TLAB the thread's objects are allocated outside \
             TLABs. `tlab` mode on the VM, {} runs each (collections are means, times \
             `median (min–max)` ms); the rows without the policy are the VM section's runs.\n",
            cx.scale.vm_repeat
        );
        let _ = writeln!(
            s,
            "| workload | collections, full-sized TLABs | with the end of a cycle | per-CPU LABs | time, full-sized | time, end of a cycle | claim: no more collections than full-sized TLABs |"
        );
        let _ = writeln!(s, "| --- | ---: | ---: | ---: | ---: | ---: | --- |");
        for (label, spec) in full_sized(&cx.scale) {
            let off = find(vm::runs(cx), &spec);
            let on = find(vm::runs(cx), &with_end_of_cycle(&spec));
            let per_cpu = vm::runs(cx)
                .iter()
                .any(|runs| runs.spec() == &in_cpu_labs(&spec))
                .then(|| find(vm::runs(cx), &in_cpu_labs(&spec)).mean(|r| r.collections));
            let collections = |runs: &vm::Runs| runs.figure(|r| r.collections as f64);
            let verdict = claims.judge(
                SECTION,
                &format!(
                    "the end of a cycle runs no more collections than full-sized TLABs ({label})"
                ),
                Verdict::not_above(collections(on), collections(off)),
            );
            let _ = writeln!(
                s,
                "| {label} | {:.0} | {:.0} | {} | {} | {} | {verdict} |",
                off.mean(|r| r.collections),
                on.mean(|r| r.collections),
                per_cpu.map_or("—".into(), |n| format!("{n:.0}")),
                off.spread(|r| r.elapsed_ms, 1.0),
                on.spread(|r| r.elapsed_ms, 1.0),
            );
        }
        let chat_fixed = chat(&cx.scale, Mode::Tlab, ROOMS);
        let (off, on, per_cpu) = (
            find(vm::runs(cx), &chat_fixed).figure(|r| r.collections as f64),
            find(vm::runs(cx), &with_end_of_cycle(&chat_fixed)).figure(|r| r.collections as f64),
            find(vm::runs(cx), &in_cpu_labs(&chat_fixed)).figure(|r| r.collections as f64),
        );
        let toward = claims.judge(
            SECTION,
            "with 1000 chat threads and 64 KiB TLABs, the end of a cycle brings TLABs within 1.5× \
             the collections of per-CPU LABs",
            Verdict::not_above(on, per_cpu.scaled(1.5)),
        );
        let _ = writeln!(
            s,
            "\nClaim: with 1000 chat threads, 64 KiB TLABs and 4 MiB, the end of a cycle brings \
             TLABs within 1.5× the collections of per-CPU LABs ({:.0} against {:.0}; {:.0} \
             full-sized): {toward}. The adaptive rows size TLABs as HotSpot does; the policy \
             changes only how each cycle ends.\n",
            on.median, per_cpu.median, off.median,
        );
        s
    }
}
