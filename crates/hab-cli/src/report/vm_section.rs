//! What the VM's runs say (`vm.rs` runs them): warehouses, the chat (collections and time per
//! mode and room count, its plots and claims, with adaptive TLABs), binary trees, and the
//! report's section.

use std::fmt::Write as _;

use hab::Mode;
use hab_vm::approximate;
use indicatif::ProgressBar;

use super::claims::{Claims, Verdict};
use super::experiment::{Context, Experiment};
use super::hotspot::{self, HotSpot};
use super::jvm::Point;
use super::plot::{BarPlot, LinePlot, Series};
use super::scale::Scale;
use super::shared::{seed_claim, Figures};
use super::vm::*;
use crate::vm_run::VmWorkload;

pub(super) fn render_chat(
    s: &mut String,
    scale: &Scale,
    runs: &[Runs],
    hotspot: &HotSpot,
    figures: &Figures,
    claims: &mut Claims,
) {
    let _ = writeln!(
        s,
        "### Garthwaite et al., Figure 10 and Table 2: chat rooms with 64 KiB LABs\n"
    );
    let _ = writeln!(
        s,
        "VolanoMark-like `chat`: rooms of 20 connection threads, blocked on their inboxes most of \
         the time; each sends {} messages, broadcast to its room. {} LABs, a {} allocation space \
         (HotSpot: `-Xmn4m -XX:TLABSize=64k -XX:-ResizeTLAB`); e.g. `{}`. The rows of the seed's \
         Table 2 (means per run, rates and times `median (min–max)`):\n",
        scale.chat_messages,
        approximate(CHAT_LAB_BYTES),
        approximate(SMALL_SPACE_BYTES),
        chat(scale, Mode::CpuLab, 50).command()
    );
    render_chat_table(s, scale, runs, hotspot);
    render_chat_plots(s, scale, runs, hotspot, figures);
    render_chat_claims(s, scale, runs, claims);
    render_chat_adaptive(s, scale, runs, hotspot);
}

/// HotSpot's chat with `rooms` rooms and fixed 64 KiB TLABs.
pub(super) fn chat_point(hotspot: &HotSpot, rooms: usize) -> Option<&Point> {
    hotspot.find("chat", |p| {
        p.size == rooms && p.config == super::jvm::CHAT_FIXED
    })
}

/// The rows of the seed's Table 2, for each room count and mode, beside HotSpot's.
pub(super) fn render_chat_table(s: &mut String, scale: &Scale, runs: &[Runs], hotspot: &HotSpot) {
    let jvm = |rooms| chat_point(hotspot, rooms);
    let mut header = String::from("| | ");
    let mut rule = String::from("| --- |");
    for rooms in ROOMS {
        for mode in LAB_MODES {
            let _ = write!(header, "{rooms} rooms, {mode} | ");
            rule.push_str(" ---: |");
        }
        let _ = write!(header, "{rooms} rooms, HotSpot | ");
        rule.push_str(" ---: |");
    }
    let _ = writeln!(s, "{}", header.trim_end());
    let _ = writeln!(s, "{rule}");
    type Row = (&'static str, fn(&Runs) -> String);
    let rows: [Row; 13] = [
        ("thousand messages delivered per second", |r| {
            r.spread(|r| r.ops_per_sec, 1e3)
        }),
        ("collections", |r| {
            format!("{:.1}", r.mean(|r| r.collections))
        }),
        ("GC time (ms)", |r| r.spread(|r| r.gc_ms, 1.0)),
        ("collections using TLABs", |r| {
            format!("{:.1}", r.mean(|r| r.collections - r.cpu_lab_collections))
        }),
        ("collections using per-CPU LABs", |r| {
            format!("{:.1}", r.mean(|r| r.cpu_lab_collections))
        }),
        ("LABs allocated", |r| {
            format!("{:.0}", r.mean(|r| r.tlabs + r.cpu_lab.labs))
        }),
        ("MiB allocated in LABs", |r| {
            format!(
                "{:.1}",
                r.mean(|r| r.tlab_bytes + r.cpu_lab.lab_bytes) / (1 << 20) as f64
            )
        }),
        ("successful transactions", |r| {
            format!("{:.0}", r.mean(|r| r.cpu_lab.transactions))
        }),
        ("failed transactions", |r| {
            format!("{:.1}", r.mean(|r| r.cpu_lab.failed_transactions))
        }),
        ("invalid transactions", |r| {
            format!("{:.1}", r.mean(|r| r.cpu_lab.invalid_transactions))
        }),
        ("sidelined LABs", |r| {
            format!("{:.1}", r.mean(|r| r.cpu_lab.sidelined_labs))
        }),
        ("partially used LABs", |r| {
            format!(
                "{:.0}",
                r.mean(|r| r.partial_tlabs + r.cpu_lab.partial_labs)
            )
        }),
        ("MiB wasted in partially used LABs", |r| {
            format!("{:.2}", r.mean(wasted_bytes) / (1 << 20) as f64)
        }),
    ];
    for (row, (name, value)) in rows.into_iter().enumerate() {
        let _ = write!(s, "| {name} |");
        for rooms in ROOMS {
            for mode in LAB_MODES {
                let _ = write!(s, " {} |", value(find(runs, &chat(scale, mode, rooms))));
            }
            // HotSpot reports its rate and its collections.
            let point = jvm(rooms);
            let jvm_value = match row {
                0 => hotspot::cell(point.and_then(|p| p.value).map(|v| v / 1e3), 0),
                1 => hotspot::cell(point.and_then(|p| p.collections).map(|c| c as f64), 0),
                _ => "—".into(),
            };
            let _ = write!(s, " {jvm_value} |");
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s);
}

/// Collections and delivery rate as bars (the seed's Table 2 and Figure 10).
pub(super) fn render_chat_plots(
    s: &mut String,
    scale: &Scale,
    runs: &[Runs],
    hotspot: &HotSpot,
    figures: &Figures,
) {
    let jvm = |rooms| chat_point(hotspot, rooms);
    let bars =
        |stem, title, y_label, hab: fn(&Runs) -> f64, jvm_value: fn(&Point) -> Option<f64>| {
            let mut series = LAB_MODES
                .map(|mode| {
                    let values = ROOMS
                        .iter()
                        .map(|&rooms| hab(find(runs, &chat(scale, mode, rooms))))
                        .collect();
                    (format!("Hab {}", mode.name()), values)
                })
                .to_vec();
            if hotspot.measured() {
                // A missing HotSpot point draws no bar.
                let values = ROOMS
                    .iter()
                    .map(|&rooms| jvm(rooms).and_then(jvm_value).unwrap_or(0.0))
                    .collect();
                series.push(("HotSpot".into(), values));
            }
            figures.bars(
                stem,
                &BarPlot {
                    title,
                    y_label,
                    categories: ROOMS.iter().map(|rooms| format!("{rooms} rooms")).collect(),
                    series,
                },
            )
        };
    *s += &bars(
        "garthwaite-table-2-collections",
        "chat: collections with 64 KiB LABs in a 4 MiB space",
        "collections per run",
        |runs| runs.mean(|r| r.collections),
        |p| p.collections.map(|c| c as f64),
    );
    *s += &bars(
        "garthwaite-figure-10",
        "chat: messages delivered per second",
        "thousand messages per second",
        |runs| runs.median(|r| r.ops_per_sec) / 1e3,
        |p| p.value.map(|v| v / 1e3),
    );
}

/// The claims on collections and waste with 50 rooms.
pub(super) fn render_chat_claims(
    s: &mut String,
    scale: &Scale,
    runs: &[Runs],
    claims: &mut Claims,
) {
    let rooms = 50;
    let get = |mode| find(runs, &chat(scale, mode, rooms));
    let tlab = get(Mode::Tlab);
    for mode in [Mode::CpuLab, Mode::Flip] {
        let other = get(mode);
        let collections = other.mean(|r| r.collections) / tlab.mean(|r| r.collections);
        let waste = other.mean(wasted_bytes) / tlab.mean(wasted_bytes);
        let count = |runs: &Runs| runs.figure(|r| r.collections as f64);
        let wasted = |runs: &Runs| runs.figure(|r| wasted_bytes(r) as f64);
        let fewer_collections = claims.judge(
            SECTION,
            &format!(
                "`{mode}` causes at most a fifth of the collections `tlab` causes ({rooms} rooms)"
            ),
            Verdict::not_above(count(other).scaled(5.0), count(tlab)),
        );
        let less_waste = claims.judge(
            SECTION,
            &format!("`{mode}` wastes at most a tenth of the bytes `tlab` wastes ({rooms} rooms)"),
            Verdict::not_above(wasted(other).scaled(10.0), wasted(tlab)),
        );
        let _ = writeln!(
            s,
            "Claim, {rooms} rooms: `{mode}` causes at most a fifth of the collections `tlab` causes \
             ({collections:.3}×): {}; and wastes at most a tenth of its bytes ({waste:.4}×): {}.\n",
            fewer_collections,
            less_waste
        );
    }
}

/// The chat again with adaptive sizing, Hab's and HotSpot's: sizes that follow the thread
/// count shrink the waste TLABs leave without per-CPU LABs.
pub(super) fn render_chat_adaptive(
    s: &mut String,
    scale: &Scale,
    runs: &[Runs],
    hotspot: &HotSpot,
) {
    let _ = writeln!(
        s,
        "The same chat with adaptive sizing instead of fixed 64 KiB LABs (Hab: TLABs, and \
         per-CPU LABs, sized by the allocation space, the threads that allocated and the target \
         of 50 refills per collection; HotSpot: its defaults, `-XX:+ResizeTLAB`). Collections, \
         and thousands of messages per second `median (min–max)`:\n"
    );
    let _ = writeln!(
        s,
        "| rooms | {} | HotSpot |",
        LAB_MODES.map(|mode| format!("`{mode}`")).join(" | ")
    );
    let _ = writeln!(s, "| ---: |{}", " ---: |".repeat(LAB_MODES.len() + 1));
    for rooms in ROOMS {
        let _ = write!(s, "| {rooms} |");
        for mode in LAB_MODES {
            let runs = find(runs, &chat_adaptive(scale, mode, rooms));
            let _ = write!(
                s,
                " {:.0}; {} |",
                runs.mean(|r| r.collections),
                runs.spread(|r| r.ops_per_sec, 1e3)
            );
        }
        let jvm = hotspot.find("chat", |p| {
            p.size == rooms && p.config == super::jvm::CHAT_ADAPTIVE
        });
        let _ = writeln!(
            s,
            " {} |",
            jvm.map_or("—".into(), |p| format!(
                "{}; {}",
                p.collections.map_or("—".into(), |gcs| gcs.to_string()),
                hotspot::cell(p.value.map(|v| v / 1e3), 0)
            ))
        );
    }
    let _ = writeln!(s);
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
