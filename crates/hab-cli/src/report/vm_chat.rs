//! The VM's chat tables (`vm`): the chat's collections and time per mode and room count, its plots
//! and claims, with adaptive TLABs.

use super::claims::{Claims, Verdict};
use super::hotspot::{self, HotSpot};
use super::jvm::Point;
use super::plot::BarPlot;
use super::scale::Scale;
use super::shared::Figures;
use super::vm::*;
use hab::Mode;
use hab_vm::approximate;
use std::fmt::Write as _;

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
