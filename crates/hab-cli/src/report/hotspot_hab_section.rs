//! What HotSpot with HABs says (`hotspot_hab.rs` runs it): each grid's speed-ups and
//! collections against stock, the recorded runs, the claims on `-XX:+UseHAB` alone, and the
//! report's section.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::experiment::{Context, Experiment};
use super::hotspot_hab::*;
use super::hotspot_runner::{report_runs, report_steps, JvmConfig, Progress};
use crate::figures::Spread;

fn find<'a>(
    runs: &'a Runs,
    config: &JvmConfig,
    tlab_bytes: Option<usize>,
    threads: usize,
) -> Option<&'a Point> {
    super::hotspot_runner::find(&runs.points, (tlab_bytes, threads), &config.label)
}

/// `hab`'s median over stock's, as `1.07×`.
fn speedup(point: Option<&Point>, stock: Option<&Point>) -> String {
    match (
        point.and_then(Point::throughput),
        stock.and_then(Point::throughput),
    ) {
        (Some(hab), Some(stock)) if stock.median > 0.0 => {
            format!("{:.2}×", hab.median / stock.median)
        }
        _ => "—".into(),
    }
}

/// A Markdown table's header: the `first` columns (the first left-aligned, the others
/// numbers), then one numeric column per HAB configuration.
fn table_header(text: &mut String, first: &[&str], habs: &[&JvmConfig]) {
    let labels = first
        .iter()
        .copied()
        .chain(habs.iter().map(|c| c.label.as_str()));
    let _ = writeln!(text, "| {} |", labels.collect::<Vec<_>>().join(" | "));
    let aligns =
        std::iter::once("---").chain(std::iter::repeat_n("---:", first.len() - 1 + habs.len()));
    let _ = writeln!(text, "| {} |", aligns.collect::<Vec<_>>().join(" | "));
}

/// A point's collections: median (min–max) and total over the repetitions; beside
/// `base` (stock's point of the same grid cell), the rounds with fewer and with more (the
/// repetitions run in rounds, so the same index is the same round).
pub(super) fn collections_cell(point: Option<&Point>, base: Option<&Point>) -> String {
    let Some(point) = point.filter(|p| !p.collections.is_empty()) else {
        return "—".into();
    };
    let counts: Vec<f64> = point.collections.iter().map(|&c| c as f64).collect();
    let spread = Spread::of(&counts);
    let total: u64 = point.collections.iter().sum();
    let mut cell = format!(
        "{} ({}–{}), {total} in all",
        spread.median, spread.min, spread.max
    );
    if let Some(base) = base {
        let pairs = || point.collections.iter().zip(&base.collections);
        let fewer = pairs().filter(|(here, there)| here < there).count();
        let more = pairs().filter(|(here, there)| here > there).count();
        let rounds = pairs().count();
        let plural = if rounds == 1 { "" } else { "s" };
        let _ = write!(
            cell,
            "; {fewer} fewer, {more} more in {rounds} round{plural}"
        );
    }
    cell
}

/// The rest of a row: each HAB configuration's speed-up over `base` with this TLAB setting.
fn speedup_cells(
    text: &mut String,
    runs: &Runs,
    habs: &[&JvmConfig],
    tlab: Option<usize>,
    threads: usize,
    base: Option<&Point>,
) {
    for config in habs {
        let _ = write!(
            text,
            " {} |",
            speedup(find(runs, config, tlab, threads), base)
        );
    }
    text.push('\n');
}

pub fn render_runs(runs: &Runs) -> String {
    let mut text = String::new();
    let grid = &runs.grid;
    let stock = stock();
    let habs: Vec<&JvmConfig> = grid.configs.iter().filter(|c| !c.is_stock()).collect();
    let _ = writeln!(
        text,
        "Collector: {} (`{}`). Machine: {}. JVM: `{}`. Heap `-Xms{heap} -Xmx{heap} -Xmn{}`, {} \
         timed compiles per thread after one untimed, {} repetition(s); figures are medians of \
         compiles per minute.\n",
        grid.collector.name(),
        grid.collector.flag(),
        runs.machine,
        runs.jvm,
        grid.young,
        grid.compiles,
        grid.repeat,
        heap = grid.heap,
    );
    for &threads in &grid.threads {
        let _ = writeln!(
            text,
            "**{threads} threads: speed-up of HABs over stock HotSpot with the same TLAB \
             setting** (the seed's Figure 2; the last row is its Figure 3, both adaptive).\n"
        );
        table_header(&mut text, &["TLAB", "stock (compiles/min)"], &habs);
        for &tlab in &grid.tlab_bytes {
            let base = find(runs, &stock, tlab, threads);
            let base_text = base
                .and_then(Point::throughput)
                .map_or("—".into(), |s| s.to_string());
            let _ = write!(text, "| {} | {base_text} |", tlab_label(tlab));
            speedup_cells(&mut text, runs, &habs, tlab, threads, base);
        }
        let adaptive = find(runs, &stock, None, threads);
        if adaptive.is_some() {
            let _ = write!(
                text,
                "\n**{threads} threads: speed-up over stock HotSpot with adaptive TLABs** (the \
                 seed's Figure 3: HABs with fixed TLABs against HotSpot's own sizing).\n\n"
            );
            table_header(&mut text, &["TLAB"], &habs);
            for &tlab in &grid.tlab_bytes {
                let _ = write!(text, "| {} |", tlab_label(tlab));
                speedup_cells(&mut text, runs, &habs, tlab, threads, adaptive);
            }
        }
        let _ = writeln!(
            text,
            "\n**{threads} threads: foreign allocations** (the seed's Tables I and II: TLABs \
             carved from the buffer of a domain other than the thread's, per lowest level; \
             restartable per-CPU buffers have none by construction).\n"
        );
        table_header(&mut text, &["TLAB"], &habs);
        for &tlab in &grid.tlab_bytes {
            let _ = write!(text, "| {} |", tlab_label(tlab));
            for config in &habs {
                let cell = find(runs, config, tlab, threads).map_or("—".into(), |p| {
                    let direct = match p.direct_tlabs {
                        0 => String::new(),
                        n => format!(" (+{n} from the collector)"),
                    };
                    p.levels.first().map_or("—".into(), |l| {
                        format!(
                            "{:.2}% of {}{direct}",
                            crate::figures::percent_of_counts(l.foreign_allocs, l.allocs),
                            l.allocs
                        )
                    })
                });
                let _ = write!(text, " {cell} |");
            }
            text.push('\n');
        }
        let _ = writeln!(
            text,
            "\n**{threads} threads: collections** (what the JVM's collectors counted in the timed \
             compiles, per repetition: median (min–max) and the total; for HABs, the rounds \
             with fewer and with more than stock's run of the same round).\n"
        );
        table_header(&mut text, &["TLAB", "stock"], &habs);
        for &tlab in &grid.tlab_bytes {
            let base = find(runs, &stock, tlab, threads);
            let _ = write!(
                text,
                "| {} | {} |",
                tlab_label(tlab),
                collections_cell(base, None)
            );
            for config in &habs {
                let cell = collections_cell(find(runs, config, tlab, threads), base);
                let _ = write!(text, " {cell} |");
            }
            text.push('\n');
        }
    }
    if let Some(point) = runs
        .points
        .iter()
        .find(|p| !p.config.is_stock() && !p.log.is_empty())
    {
        let _ = writeln!(
            text,
            "\nThe `-Xlog:gc+tlab` summary of one run ({}, TLAB {}, {} threads):\n\n```",
            point.config.label,
            tlab_label(point.tlab_bytes),
            point.threads
        );
        for line in &point.log {
            let _ = writeln!(text, "{line}");
        }
        text.push_str("```\n");
    }
    text
}

/// The recorded runs (of this or other machines), `docs/results/hotspot-hab-*.json`.
pub fn recorded() -> Vec<(PathBuf, Runs)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return vec![];
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("hotspot-hab-"))
                && p.extension().is_some_and(|e| e == "json")
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            let runs = serde_json::from_str(&text).ok()?;
            Some((path, runs))
        })
        .collect()
}

/// The report's section: this machine's runs (or why there are none) and the recorded ones.
pub fn render(here: &Result<Vec<Runs>, String>) -> String {
    let mut text = String::from(
        "## HotSpot with HABs\n\nHotSpot's collectors, Parallel and G1, carving their TLABs \
         through Hab's middle levels (`jvm/hotspot`: `-XX:+UseHAB -XX:HABLevels=... \
         -XX:HABCpuId=rseq|getcpu`; under G1 the buffers are carved from its mutator \
         regions), as the Kirsch et al. seed built it into HotSpot, against the same JVM \
         with `-XX:-UseHAB` (stock). The workload is `bench/jvm`'s javac: each thread \
         compiles a real source tree (a sources jar from Maven Central) with the JDK's own \
         compiler, as SPECjvm2008's compiler benchmark does.\n\n",
    );
    match here {
        Ok(all) => {
            for runs in all {
                let _ = writeln!(
                    text,
                    "### On this machine, {}\n",
                    runs.grid.collector.name()
                );
                text += &render_runs(runs);
            }
        }
        Err(why) => {
            let _ = writeln!(text, "Not run on this machine: {why}.\n");
        }
    }
    for (path, runs) in recorded() {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let _ = writeln!(text, "\n### Recorded runs (`docs/results/{name}`)\n");
        text += &render_runs(&runs);
    }
    text.push_str(
        "\nWhat a machine of few CPUs can show: that HotSpot runs javac, its own jtreg tests \
         and heap verification on HABs, the foreign-allocation counts, and the cost of a \
         refill through the levels against eden's compare-and-swap when many threads share \
         the CPUs. What it cannot: contention on eden's top between many CPUs, which is what \
         the seed's HABs remove; that needs a machine with many cores (the recorded runs, or \
         this report run there: its thread counts follow the machine).\n",
    );
    text
}

/// The claims on `-XX:+UseHAB` with no other HAB flag (`HABLevels=auto`), where the grid
/// has it: at each point, not slower than stock beyond the run's noise (no when its range of
/// compiles per minute lies wholly below stock's), and no more young collections.
pub(super) fn judge_auto(runs: &Runs, claims: &mut super::claims::Claims) {
    let (stock, auto) = (stock(), habs("auto", "rseq"));
    for &threads in &runs.grid.threads {
        for &tlab in &runs.grid.tlab_bytes {
            let (Some(base), Some(habs)) = (
                find(runs, &stock, tlab, threads),
                find(runs, &auto, tlab, threads),
            ) else {
                continue;
            };
            let (Some(base_speed), Some(habs_speed)) = (base.throughput(), habs.throughput())
            else {
                continue;
            };
            let collections = |point: &Point| {
                Spread::of(
                    &point
                        .collections
                        .iter()
                        .map(|&c| c as f64)
                        .collect::<Vec<_>>(),
                )
            };
            let where_ = format!(
                "{}, {threads} threads, {} TLABs",
                runs.grid.collector.name(),
                tlab_label(tlab)
            );
            claims.judge(
                "HotSpot with HABs",
                &format!("-XX:+UseHAB alone (auto levels) is not slower than stock ({where_})"),
                super::claims::Verdict::not_above(base_speed, habs_speed),
            );
            claims.judge(
                "HotSpot with HABs",
                &format!(
                    "-XX:+UseHAB alone (auto levels) runs no more young collections than stock \
                     ({where_})"
                ),
                super::claims::Verdict::not_above(collections(habs), collections(base)),
            );
        }
    }
}

/// The experiment as the report runs it: the grids of [`grids_for`] with the JVM that
/// `jvm/hotspot/build.sh` built, where HotSpot runs in this report.
pub struct HotSpotWithHabs;

impl Experiment for HotSpotWithHabs {
    fn name(&self) -> &'static str {
        "HotSpot with HABs"
    }

    fn steps(&self, cx: &Context) -> usize {
        let grids = grids_for(&cx.scale);
        report_steps(cx, Some(grids.iter().map(Grid::runs).sum()))
    }

    fn measure(&self, cx: &mut Context, progress: &indicatif::ProgressBar) -> Result<(), String> {
        let grids = grids_for(&cx.scale);
        let plan = (!grids.is_empty()).then_some(grids);
        let measured = report_runs(cx, plan, |jdk, jar, grids| {
            let sources = jar.with_file_name("javac-sources.jar");
            grids
                .iter()
                .map(|grid| measure(jdk, jar, &sources, grid, &mut Progress::bar(progress)))
                .collect::<Result<Vec<Runs>, String>>()
        });
        if let Some(measured) = measured {
            cx.results.put(measured);
        }
        Ok(())
    }

    fn section(&self, cx: &Context, claims: &mut super::claims::Claims) -> String {
        let measured = cx
            .results
            .get::<Result<Vec<Runs>, String>>()
            .cloned()
            .unwrap_or_else(|| Err(cx.why_no_jvm()));
        if let Ok(runs) = &measured {
            for runs in runs {
                judge_auto(runs, claims);
            }
        }
        render(&measured)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runs recorded under docs/results parse and render (the report drops a file that
    /// does not parse, so this is where a stale one shows).
    #[test]
    fn the_recorded_runs_render() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results");
        let files: Vec<_> = std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.to_string_lossy().contains("hotspot-hab-"))
                    .collect()
            })
            .unwrap_or_default();
        for file in &files {
            let text = std::fs::read_to_string(file).expect("readable");
            let runs: Runs =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            assert!(runs.points.iter().any(|p| !p.compiles_per_min.is_empty()));
            assert!(render_runs(&runs).contains("speed-up of HABs"));
        }
        assert_eq!(recorded().len(), files.len());
        let section = render(&Err("not built".into()));
        assert!(section.contains("Not run on this machine: not built"));
    }

    #[test]
    fn the_grids_hold_what_the_seed_varied() {
        let grid = Grid::seed(Collector::G1, vec![80], 2, 1);
        assert_eq!(grid.tlab_bytes.len(), 6);
        assert!(grid.configs.iter().any(|c| c.label.contains("restartable")));
        assert!(grid
            .configs
            .iter()
            .any(|c| c.label.contains("compare-and-swap")));
        assert_eq!(grid.runs(), 6 * grid.configs.len());
    }

    /// A point of `config` with these collections per round.
    fn point_with(config: JvmConfig, collections: &[u64]) -> Point {
        Point {
            config,
            tlab_bytes: Some(4096),
            threads: 80,
            compiles_per_min: vec![600.0; collections.len()],
            collections: collections.to_vec(),
            levels: Vec::new(),
            direct_tlabs: 0,
            log: Vec::new(),
        }
    }

    #[test]
    fn the_collections_cell_compares_round_by_round() {
        let stock = point_with(stock(), &[7, 9, 8, 10]);
        let habs = point_with(habs("auto", "rseq"), &[8, 7, 8, 9]);
        assert_eq!(collections_cell(Some(&stock), None), "9 (7–10), 34 in all");
        assert_eq!(
            collections_cell(Some(&habs), Some(&stock)),
            "8 (7–9), 32 in all; 2 fewer, 1 more in 4 rounds"
        );
        assert_eq!(collections_cell(None, Some(&stock)), "—");
        let unrun = point_with(super::stock(), &[]);
        assert_eq!(collections_cell(Some(&unrun), None), "—");
    }
}
