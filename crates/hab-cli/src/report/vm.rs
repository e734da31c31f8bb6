//! The seeds' experiments on the VM, where LAB waste turns into collections: Garthwaite et
//! al.'s Figure 9 (warehouses by thread count), Figure 10 and Table 2 (chat rooms with
//! 64 KiB LABs), and binary-trees and GCBench in every mode.

use std::fmt::Write as _;

use hab::{MiddleLevelSpec, Mode, TlabPolicy};
use hab_vm::approximate;
use indicatif::ProgressBar;

use super::claims::{Claims, Verdict};
use super::experiment::{Context, Experiment};
use super::hotspot::{self, HotSpot};
use super::plot::{LinePlot, Series};
use super::scale::Scale;
use super::shared::{seed_claim, Figures};
use super::vm_chat::render_chat;
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
const LIVE_ORDERS: usize = 25;
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
fn warehouse_space_bytes(scale: &Scale) -> usize {
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
    spec: VmRunSpec,
    results: Vec<VmRunResult>,
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

/// `instructions`: callgrind's instructions per object of `alloc-object` in `tlab` and `cpu-lab`
/// mode (loop and header included), where measured.
pub fn render(
    scale: &Scale,
    runs: &[Runs],
    hotspot: &HotSpot,
    instructions: (Option<f64>, Option<f64>),
    figures: &Figures,
    claims: &mut Claims,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## On the VM: LAB waste becomes collections\n");
    let chat_50 = |mode| find(runs, &chat(scale, mode, 50)).mean(|r| r.collections);
    let (tlab, cpu_lab, flip) = (
        chat_50(Mode::Tlab),
        chat_50(Mode::CpuLab),
        chat_50(Mode::Flip),
    );
    let collections = |mode| find(runs, &chat(scale, mode, 50)).figure(|r| r.collections as f64);
    let fewer = |mode| Verdict::not_above(collections(mode).scaled(5.0), collections(Mode::Tlab));
    s += &seed_claim(
        claims,
        "Garthwaite et al.",
        "when threads far outnumber processors, per-processor LABs cut collections by an order of \
         magnitude: VolanoMark with 50 rooms, 64 KB LABs and a 4 MB young generation ran 958 \
         young collections with TLABs, 55 with per-processor LABs and 58 in flip mode.",
        &format!(
            "the chat with 50 rooms (1000 threads), 64 KiB LABs and a 4 MiB space runs \
             {tlab:.0} collections with TLABs, {cpu_lab:.0} with per-CPU LABs and {flip:.0} in \
             `flip` mode.",
        ),
        fewer(Mode::CpuLab).and(fewer(Mode::Flip)),
    );
    let _ = writeln!(
        s,
        "`hab-vm` collects by copying when its allocation space is full, so memory left in LABs \
         costs collections. Runs per configuration: {}; times and rates read `median (min–max)`, \
         counts are means. `data/vm-runs.csv` has every run with the `hab run` command that \
         reproduces it. HotSpot runs the same programs in Java (`bench/jvm`), once each, with \
         Parallel GC and the young generation the seed used, collections of the timed round \
         (after an untimed warm-up round) as each program reads them from the JVM's collector \
         beans.\n",
        scale.vm_repeat,
    );
    let count = |value: Option<f64>| {
        value.map_or(
            "— (not counted in this run; see the last section)".into(),
            |n| format!("{n:.1}"),
        )
    };
    let _ = writeln!(
        s,
        "Instructions per allocation (callgrind, `alloc-object` with 16-byte objects, the loop's \
         4 instructions of loop and header included; see the last section): `tlab` {}, `cpu-lab` \
         {}. The seed's SPARC fast paths took 7 instructions from a TLAB and 17 from a \
         per-processor LAB (with its preemption-notified restartable transaction), and it \
         measured 10.2 more per allocation in a whole run; here the difference is the \
         restartable section's arming, CPU check and commit.\n",
        count(instructions.0),
        count(instructions.1)
    );
    render_warehouses(&mut s, scale, runs, hotspot, figures);
    render_chat(&mut s, scale, runs, hotspot, figures, claims);
    render_trees(&mut s, scale, runs, hotspot);
    s
}

fn render_warehouses(
    s: &mut String,
    scale: &Scale,
    runs: &[Runs],
    hotspot: &HotSpot,
    figures: &Figures,
) {
    let _ = writeln!(
        s,
        "### Garthwaite et al., Figure 9: warehouses by thread count\n"
    );
    let _ = writeln!(
        s,
        "SPECjbb-like `warehouses`: each thread creates {} orders (5 to 15 lines each) and keeps \
         the last {LIVE_ORDERS}; a {} allocation space (HotSpot: `-Xmn4m` on every machine); \
         adaptive TLAB \
         sizing (HotSpot also with fixed 64 KiB TLABs, `-XX:TLABSize=64k -XX:-ResizeTLAB`). \
         Thousands of orders per second, and collections; e.g. `{}`:\n",
        scale.warehouse_orders,
        approximate(warehouse_space_bytes(scale)),
        warehouses(scale, Mode::Tlab, 8).command()
    );
    let _ = writeln!(
        s,
        "| threads | tlab | cpu-lab | flip | cpu-lab / tlab | flip / tlab | HotSpot | HotSpot, 64 KiB TLABs |"
    );
    let _ = writeln!(
        s,
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let jvm_with = |threads: usize, config: &str| {
        hotspot.find("warehouses", |p| p.threads == threads && p.config == config)
    };
    let jvm = |threads| jvm_with(threads, super::jvm::WAREHOUSES_ADAPTIVE);
    for threads in scale.threads.warehouses() {
        let runs_of = |mode| find(runs, &warehouses(scale, mode, threads));
        let cell = |mode| {
            let runs = runs_of(mode);
            format!(
                "{}; {:.0} GCs",
                runs.spread(|r| r.ops_per_sec, 1e3),
                runs.mean(|r| r.collections)
            )
        };
        let rate = |mode| runs_of(mode).median(|r| r.ops_per_sec);
        let jvm_cell = |config| {
            jvm_with(threads, config).map_or("—".into(), |p| {
                format!(
                    "{}; {} GCs",
                    hotspot::cell(p.value.map(|rate| rate / 1e3), 0),
                    p.collections.map_or("—".into(), |gcs| gcs.to_string())
                )
            })
        };
        let _ = writeln!(
            s,
            "| {threads} | {} | {} | {} | {:.2} | {:.2} | {} | {} |",
            cell(Mode::Tlab),
            cell(Mode::CpuLab),
            cell(Mode::Flip),
            rate(Mode::CpuLab) / rate(Mode::Tlab),
            rate(Mode::Flip) / rate(Mode::Tlab),
            jvm_cell(super::jvm::WAREHOUSES_ADAPTIVE),
            jvm_cell(super::jvm::WAREHOUSES_FIXED)
        );
    }
    let _ = writeln!(s);
    let mut series = LAB_MODES
        .map(|mode| Series {
            name: format!("Hab {}", mode.name()),
            points: scale
                .threads
                .warehouses()
                .into_iter()
                .map(|threads| {
                    let runs = find(runs, &warehouses(scale, mode, threads));
                    (threads as f64, runs.median(|r| r.ops_per_sec) / 1e3)
                })
                .collect(),
        })
        .to_vec();
    if hotspot.measured() {
        series.push(Series {
            name: "HotSpot".into(),
            points: scale
                .threads
                .warehouses()
                .into_iter()
                .filter_map(|threads| {
                    let rate = jvm(threads)?.value?;
                    Some((threads as f64, rate / 1e3))
                })
                .collect(),
        });
    }
    *s += &figures.lines(
        "garthwaite-figure-9",
        &LinePlot {
            title: "warehouses: throughput by threads (2 CPUs), Hab's VM and HotSpot",
            x_label: "warehouse threads (log scale)",
            y_label: "thousand orders per second",
            log_x: true,
            series,
        },
    );
}

/// Bytes left unused in retired LABs (TLABs and per-CPU LABs).
pub(super) fn wasted_bytes(result: &VmRunResult) -> u64 {
    result.tlab_waste_bytes + result.cpu_lab.partial_waste_bytes
}

fn render_trees(s: &mut String, scale: &Scale, runs: &[Runs], hotspot: &HotSpot) {
    let _ = writeln!(s, "### binary-trees and GCBench in every mode\n");
    let _ = writeln!(
        s,
        "Depth {}, one thread, an allocation space three times the live data; `hab` has one \
         1 MiB buffer per core; e.g. `{}`. HotSpot: binary-trees only, Parallel GC with a 64 MiB \
         young generation, one run. Time in ms `median (min–max)`, and collections:\n",
        scale.tree_depth,
        trees(scale, VmWorkload::BinaryTrees, Mode::Tlab).command()
    );
    let _ = writeln!(
        s,
        "| workload | {} | HotSpot |",
        ALL_MODES.map(|m| m.name()).join(" | ")
    );
    let _ = writeln!(s, "| --- |{}", " ---: |".repeat(ALL_MODES.len() + 1));
    for workload in [VmWorkload::BinaryTrees, VmWorkload::GcBench] {
        let _ = write!(s, "| {} |", workload.name());
        for mode in ALL_MODES {
            let runs = find(runs, &trees(scale, workload, mode));
            let _ = write!(
                s,
                " {}; {:.0} GCs |",
                runs.spread(|r| r.elapsed_ms, 1.0),
                runs.mean(|r| r.collections)
            );
        }
        let jvm = match workload {
            VmWorkload::BinaryTrees => hotspot.find("binary-trees", |p| p.threads == 1),
            _ => None,
        };
        let _ = writeln!(s, " {} |", hotspot::time_and_collections(jvm));
    }
    let _ = writeln!(s);
}

/// Every result, for `results.jsonl`.
pub fn results(runs: &[Runs]) -> impl Iterator<Item = &VmRunResult> {
    runs.iter().flat_map(|runs| runs.results.iter())
}

/// The experiment as the report runs it.
pub struct Vm;

impl Experiment for Vm {
    fn name(&self) -> &'static str {
        "On the VM: LAB waste becomes collections (Garthwaite et al.)"
    }

    fn steps(&self, cx: &Context) -> usize {
        specs(&cx.scale).len()
    }

    fn measure(&self, cx: &mut Context, progress: &ProgressBar) -> Result<(), String> {
        let measured = measure(&cx.scale, progress)?;
        cx.results.get_mut::<Vec<Runs>>().extend(measured);
        Ok(())
    }

    fn section(&self, cx: &Context, claims: &mut Claims) -> String {
        let costs = super::costs::counted(cx);
        render(
            &cx.scale,
            runs(cx),
            &cx.hotspot,
            (
                costs.instructions(super::costs::TLAB_OBJECTS),
                costs.instructions(super::costs::CPU_LAB_OBJECTS),
            ),
            &cx.figures,
            claims,
        )
    }
}
