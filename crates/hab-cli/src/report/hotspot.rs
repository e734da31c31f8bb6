//! HotSpot beside Hab: the same workloads in Java, on the installed JDK, measured in the same
//! report run, in the same tables and plots as Hab's figures.

use std::fmt::Write as _;

use hab::{ByteSize, Mode, TlabPolicy};

use super::jvm::Point;
use super::plot::{LinePlot, Series};
use super::vm::{self, Runs};
use super::{check, jaffer, shipilev, Figures, Measured, Scale};

/// HotSpot's measurements, or why there are none.
pub enum HotSpot {
    Measured { version: String, points: Vec<Point> },
    Skipped(String),
}

fn point<'a>(
    points: &'a [Point],
    workload: &str,
    keep: impl Fn(&Point) -> bool,
) -> Option<&'a Point> {
    points.iter().find(|p| p.workload == workload && keep(p))
}

pub fn render(
    scale: &Scale,
    measured: &Measured,
    vm_runs: &[Runs],
    hotspot: &HotSpot,
    figures: &Figures,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## HotSpot beside Hab\n");
    let (version, points) = match hotspot {
        HotSpot::Skipped(why) => {
            let _ = writeln!(
                s,
                "Not measured in this run: {why}. With Java 17 or later and Maven on the PATH, \
                 `hab report` builds `bench/jvm` (the same workloads in Java) and runs it beside \
                 Hab; `hab report --quick --jvm` does so at the quick scale.\n"
            );
            return s;
        }
        HotSpot::Measured { version, points } => (version, points),
    };
    let _ = writeln!(
        s,
        "`bench/jvm` on {version}, in this run. Each point and the command that reproduces it are in `data/hotspot.json`.\n"
    );
    render_alloc_array(&mut s, scale, measured, points, figures);
    render_alloc_object(&mut s, scale, measured, points);
    render_vm(&mut s, scale, vm_runs, points, figures);
    s
}

fn render_alloc_array(
    s: &mut String,
    scale: &Scale,
    measured: &Measured,
    points: &[Point],
    figures: &Figures,
) {
    let _ = writeln!(
        s,
        "### Shipilëv's experiment: Hab and HotSpot by TLAB size\n"
    );
    let _ = writeln!(
        s,
        "`alloc-array`, 1 thread, {} objects of 16 bytes, each kept in an array (8-byte slots for \
         Hab, 4-byte compressed references for HotSpot). HotSpot: Epsilon \
         GC (no collection), pre-touched heap, fixed TLAB sizes (`-XX:TLABSize` with \
         `-XX:-ResizeTLAB -XX:-EpsilonElasticTLAB`, JDK 17's spelling of Shipilëv's \
         `-XX:EpsilonTLABSize`), JMH single-shot median. Hab: `tlab` mode, pre-touched heap; \
         `hab` mode refills from one 1 MiB buffer per core. GB/s counts the objects' 16 bytes; \
         this machine writes memory at {:.1} GB/s (zeroing 1 GiB, best of 3, in this run).\n",
        scale.array_objects,
        write_bandwidth_gbps()
    );
    let _ = writeln!(
        s,
        "| TLAB | Hab `tlab` ns/object | Hab `hab` ns/object | HotSpot ns/object | HotSpot GB/s | Hab `tlab` GB/s |"
    );
    let _ = writeln!(s, "| --- | ---: | ---: | ---: | ---: | ---: |");
    let gbps = |ns: f64| 16.0 / ns;
    let mut hab_series = Vec::new();
    let mut hotspot_series = Vec::new();
    for policy in shipilev::SWEEP {
        let TlabPolicy::Fixed(bytes) = policy else {
            continue;
        };
        let hab = measured
            .get(&shipilev::tlab(scale, Mode::Tlab, policy, 1))
            .ns_per_alloc;
        let hab_mode = (bytes == 1 << 10 || bytes == 1 << 20).then(|| {
            measured
                .get(&shipilev::tlab(scale, Mode::Hab, policy, 1))
                .ns_per_alloc
        });
        let hotspot = point(points, "alloc-array", |p| {
            p.config == format!("Epsilon, {} TLABs", ByteSize::new(bytes))
        })
        .and_then(|p| p.ns_per_object);
        hab_series.push((bytes as f64, hab));
        if let Some(ns) = hotspot {
            hotspot_series.push((bytes as f64, ns));
        }
        let _ = writeln!(
            s,
            "| {} | {hab:.2} | {} | {} | {} | {:.2} |",
            ByteSize::new(bytes),
            hab_mode.map_or("—".into(), |ns| format!("{ns:.2}")),
            hotspot.map_or("—".into(), |ns| format!("{ns:.2}")),
            hotspot.map_or("—".into(), |ns| format!("{:.2}", gbps(ns))),
            gbps(hab)
        );
    }
    let no_tlab = point(points, "alloc-array", |p| p.config.contains("UseTLAB"))
        .and_then(|p| p.ns_per_object);
    let shared = measured
        .get(&shipilev::tlab(
            scale,
            Mode::Shared,
            TlabPolicy::Adaptive,
            1,
        ))
        .ns_per_alloc;
    let _ = writeln!(
        s,
        "| no TLAB | {shared:.2} (`shared`) | — | {} | {} | {:.2} |\n",
        no_tlab.map_or("—".into(), |ns| format!("{ns:.2}")),
        no_tlab.map_or("—".into(), |ns| format!("{:.2}", gbps(ns))),
        gbps(shared)
    );
    *s += &figures.lines(
        "hotspot-shipilev",
        &LinePlot {
            title: "alloc-array, 1 thread: Hab and HotSpot by TLAB size",
            x_label: "TLAB size (bytes, log scale)",
            y_label: "ns per object",
            log_x: true,
            series: vec![
                Series {
                    name: "Hab tlab".into(),
                    points: hab_series.clone(),
                },
                Series {
                    name: "HotSpot (Epsilon)".into(),
                    points: hotspot_series.clone(),
                },
            ],
        },
    );
    let best = |series: &[(f64, f64)]| series.iter().map(|p| p.1).fold(f64::MAX, f64::min);
    let (hab_best, hotspot_best) = (best(&hab_series), best(&hotspot_series));
    let _ = writeln!(
        s,
        "Claim: Hab's best `tlab` time is at most HotSpot's best TLAB time ({hab_best:.2} against \
         {hotspot_best:.2} ns/object, {:.2} against {:.2} GB/s): {}.\n",
        gbps(hab_best),
        gbps(hotspot_best),
        check(hab_best <= hotspot_best)
    );
    let small = TlabPolicy::Fixed(1 << 10);
    let hab_small = measured
        .get(&shipilev::tlab(scale, Mode::Hab, small, 1))
        .ns_per_alloc;
    if let Some(hotspot_small) = point(points, "alloc-array", |p| {
        p.config == format!("Epsilon, {} TLABs", ByteSize::new(1 << 10))
    })
    .and_then(|p| p.ns_per_object)
    {
        let _ = writeln!(
            s,
            "Claim: with 1 KiB TLABs, Hab's `hab` mode is at least 3× faster than HotSpot \
             ({hab_small:.2} against {hotspot_small:.2} ns/object, {:.1}×): {}.\n",
            hotspot_small / hab_small,
            check(hotspot_small >= 3.0 * hab_small)
        );
    }
}

/// How fast this machine writes memory: zeroing a pre-touched GiB, best of 3, in GB/s.
fn write_bandwidth_gbps() -> f64 {
    let mut buffer = vec![1u8; 1 << 30];
    (0..3)
        .map(|round| {
            let started = std::time::Instant::now();
            buffer.fill(round);
            std::hint::black_box(&buffer);
            buffer.len() as f64 / started.elapsed().as_secs_f64() / 1e9
        })
        .fold(0.0, f64::max)
}

fn render_alloc_object(s: &mut String, scale: &Scale, measured: &Measured, points: &[Point]) {
    let _ = writeln!(
        s,
        "### Jaffer's experiment: Hab and HotSpot, TLABs against none\n"
    );
    let _ = writeln!(
        s,
        "`alloc-object`, objects dropped at once. HotSpot: Parallel GC, 64 MiB young generation, \
         JMH average time (`-XX:-UseTLAB` for the shared column). ns per object:\n"
    );
    let _ = writeln!(
        s,
        "| object | threads | Hab `tlab` | HotSpot TLABs | Hab `shared` | HotSpot no TLAB |"
    );
    let _ = writeln!(s, "| ---: | ---: | ---: | ---: | ---: | ---: |");
    for size in [16usize, 48, 144] {
        for threads in [1usize, 2] {
            let hab = |mode| {
                measured
                    .get(&jaffer::run(scale, mode, threads, size))
                    .ns_per_alloc
            };
            let hotspot = |tlab: bool| {
                point(points, "alloc-object", |p| {
                    p.size == size && p.threads == threads && p.config.contains("TLABs") == tlab
                })
                .and_then(|p| p.ns_per_object)
                .map_or("—".to_string(), |ns| format!("{ns:.2}"))
            };
            let _ = writeln!(
                s,
                "| {size} B | {threads} | {:.2} | {} | {:.2} | {} |",
                hab(Mode::Tlab),
                hotspot(true),
                hab(Mode::Shared),
                hotspot(false)
            );
        }
    }
    let _ = writeln!(s);
}

fn render_vm(s: &mut String, scale: &Scale, vm_runs: &[Runs], points: &[Point], figures: &Figures) {
    let _ = writeln!(s, "### On the VM and on HotSpot: warehouses and chat\n");
    let _ = writeln!(
        s,
        "HotSpot: Parallel GC with a 4 MiB young generation (the seed's setting), collections \
         counted by the JVM's collector beans, after an untimed warm-up round so that the timed \
         one runs compiled code. Hab: the VM with a 4 MiB allocation space. Thousands of orders \
         per second (collections):\n"
    );
    let _ = writeln!(
        s,
        "| threads | Hab `tlab` | Hab `plab` | Hab `flip` | HotSpot |"
    );
    let _ = writeln!(s, "| ---: | ---: | ---: | ---: | ---: |");
    let mut hotspot_series = Vec::new();
    let mut hab_series = Vec::new();
    for threads in [1usize, 2, 4, 8, 16, 32, 64] {
        let hab = |mode| {
            let runs = vm::find(vm_runs, &vm::warehouses(scale, mode, threads));
            (runs.median(|r| r.ops_per_sec), runs.mean(|r| r.collections))
        };
        let hotspot = point(points, "warehouses", |p| p.threads == threads);
        let cell = |(rate, gcs): (f64, f64)| format!("{:.0} ({gcs:.0})", rate / 1e3);
        let (tlab, plab, flip) = (hab(Mode::Tlab), hab(Mode::Plab), hab(Mode::Flip));
        hab_series.push((threads as f64, tlab.0 / 1e3));
        if let Some(rate) = hotspot.and_then(|p| p.value) {
            hotspot_series.push((threads as f64, rate / 1e3));
        }
        let _ = writeln!(
            s,
            "| {threads} | {} | {} | {} | {} |",
            cell(tlab),
            cell(plab),
            cell(flip),
            hotspot.map_or("—".into(), |p| cell((
                p.value.unwrap_or(f64::NAN),
                p.collections.unwrap_or(0) as f64
            )))
        );
    }
    let _ = writeln!(s);
    *s += &figures.lines(
        "hotspot-warehouses",
        &LinePlot {
            title: "warehouses: Hab's VM and HotSpot by threads",
            x_label: "warehouse threads (log scale)",
            y_label: "thousand orders per second",
            log_x: true,
            series: vec![
                Series {
                    name: "Hab tlab".into(),
                    points: hab_series,
                },
                Series {
                    name: "HotSpot".into(),
                    points: hotspot_series,
                },
            ],
        },
    );
    let _ = writeln!(
        s,
        "chat with 64 KiB TLABs (HotSpot: `-XX:TLABSize=64k -XX:-ResizeTLAB`): collections, and \
         thousands of messages per second:\n"
    );
    let _ = writeln!(
        s,
        "| rooms | Hab `tlab` | Hab `plab` | Hab `flip` | HotSpot |"
    );
    let _ = writeln!(s, "| ---: | ---: | ---: | ---: | ---: |");
    for rooms in [10usize, 50] {
        let hab = |mode| {
            let runs = vm::find(vm_runs, &vm::chat(scale, mode, rooms));
            format!(
                "{:.0}, {:.0}",
                runs.mean(|r| r.collections),
                runs.median(|r| r.ops_per_sec) / 1e3
            )
        };
        let hotspot = point(points, "chat", |p| p.size == rooms).map_or("—".into(), |p| {
            format!(
                "{}, {:.0}",
                p.collections.unwrap_or(0),
                p.value.unwrap_or(f64::NAN) / 1e3
            )
        });
        let _ = writeln!(
            s,
            "| {rooms} | {} | {} | {} | {hotspot} |",
            hab(Mode::Tlab),
            hab(Mode::Plab),
            hab(Mode::Flip)
        );
    }
    let _ = writeln!(s);
    if let Some(trees) = point(points, "binary-trees", |_| true) {
        let hab = vm::find(
            vm_runs,
            &vm::trees(scale, crate::vm_run::VmWorkload::BinaryTrees, Mode::Tlab),
        );
        let _ = writeln!(
            s,
            "binary-trees, depth {}: HotSpot (Parallel GC, 64 MiB young generation) {:.0} ms with \
             {} collections; Hab's VM (`tlab`) {:.0} ms with {:.0}.\n",
            scale.tree_depth,
            trees.value.unwrap_or(f64::NAN),
            trees.collections.unwrap_or(0),
            hab.median(|r| r.elapsed_ms),
            hab.mean(|r| r.collections)
        );
    }
}
