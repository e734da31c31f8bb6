//! `hab hotspot-hab`: the HotSpot experiments, one subcommand each (the javac grid, the
//! many-threads chat, the observed JVM, the real applications), each printing its tables and
//! keeping its runs as JSON after every round.

use std::path::{Path, PathBuf};

use report::hotspot_hab::Collector;
use report::hotspot_runner::{built_jdk, Progress};

use crate::{limits, parse_size, report};

#[derive(clap::Args)]
pub(crate) struct HotspotHabArgs {
    #[command(subcommand)]
    experiment: Experiment,
}

#[derive(clap::Subcommand)]
enum Experiment {
    /// The javac grid (Kirsch et al.): `bench/jvm`'s javac workload, stock and with HABs over
    /// a grid of TLAB sizes and middle levels; the seed's Figures 2 and 3 and Tables I and II.
    Javac(JavacArgs),
    /// The many-threads chat (Garthwaite et al.): 1000 threads in a 4 MiB young generation,
    /// stock, -XX:-UseTLAB, HABs with adaptive and 1 KiB TLABs, per-CPU LABs flipping with
    /// TLABs and in every cycle; young collections, TLAB tails, messages per second.
    Chat(ChatArgs),
    /// Observed JVMs: `bench/jvm`'s Observed loop and the chat, each configuration without an
    /// observer, under JFR's default recording and under a JVMTI allocation sampler (512 KiB),
    /// with what the samplers said.
    Observed(ObservedArgs),
    /// Real applications: `bench/apps` (H2, Lucene indexing and searching, Jackson, javac, the
    /// Kotlin and Scala compilers) stock and in every HAB configuration; time and young
    /// collections relative to stock, every checksum against stock's.
    Apps(AppsArgs),
}

/// What every experiment takes: the JVM, the rounds, where its runs go or come from.
#[derive(clap::Args)]
struct Common {
    /// The JDK with HABs (default: target/hotspot-hab/jdk, which jvm/hotspot/build.sh builds).
    #[arg(long)]
    jdk: Option<PathBuf>,
    /// Rounds: each runs every configuration once, back to back.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Where to write the runs as JSON, after every round.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// `bench/jvm`'s jar, which the javac grid, the chat and the observed JVM run.
#[derive(clap::Args)]
struct BenchJar {
    /// `bench/jvm`'s jar.
    #[arg(long, default_value = "bench/jvm/target/benchmarks.jar")]
    bench_jar: PathBuf,
}

#[derive(clap::Args)]
struct JavacArgs {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    bench: BenchJar,
    /// The sources jar the javac workload compiles.
    #[arg(long, default_value = "bench/jvm/target/javac-sources.jar")]
    sources: PathBuf,
    /// Thread counts, comma-separated (default: every CPU this process may use, and 16 per
    /// CPU but at least the seed's own 80).
    #[arg(long, value_delimiter = ',')]
    threads: Vec<usize>,
    /// `seed` (the seed's TLAB sizes and buffers) or `small` (a few of them).
    #[arg(long, default_value = "small")]
    grid: String,
    /// The collector: `parallel` or `g1`.
    #[arg(long, default_value = "parallel")]
    collector: Collector,
    /// Timed compiles per thread (after one untimed).
    #[arg(long, default_value_t = 2)]
    compiles: usize,
    /// Only these TLAB settings of the grid (sizes like 4K, or `adaptive`), comma-separated.
    #[arg(long, value_delimiter = ',')]
    tlabs: Vec<String>,
    /// Leave out the grid's configurations whose levels are these (e.g. core:1M).
    #[arg(long, value_delimiter = ',')]
    skip_levels: Vec<String>,
    /// Print the tables of runs written earlier with --out, and run nothing.
    #[arg(long, conflicts_with = "out")]
    from: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ChatArgs {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    bench: BenchJar,
    /// The collector: `parallel` or `g1` (default: both).
    #[arg(long)]
    collector: Option<Collector>,
    /// Messages per connection.
    #[arg(long, default_value_t = 40)]
    messages: usize,
    /// Print the tables of runs written earlier with --out, and run nothing.
    #[arg(long, conflicts_with = "out")]
    from: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ObservedArgs {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    bench: BenchJar,
    /// The collector: `parallel` or `g1`.
    #[arg(long, default_value = "parallel")]
    collector: Collector,
    /// Timed rounds of the Observed loop per run.
    #[arg(long, default_value_t = 5)]
    loop_rounds: usize,
    /// Millions of objects per round of the Observed loop.
    #[arg(long, default_value_t = 20)]
    loop_objects_millions: usize,
    /// Messages per connection of the chat.
    #[arg(long, default_value_t = 40)]
    messages: usize,
    /// Print the tables of runs written earlier with --out, and run nothing.
    #[arg(long, conflicts_with = "out")]
    from: Option<PathBuf>,
}

#[derive(clap::Args)]
struct AppsArgs {
    #[command(flatten)]
    common: Common,
    /// `bench/apps`'s build: apps.jar and lib/.
    #[arg(long, default_value = "bench/apps/target")]
    apps_dir: PathBuf,
    /// Only these applications, comma-separated.
    #[arg(long = "app", value_delimiter = ',')]
    app_names: Vec<String>,
    /// The collector: `parallel` or `g1` (default: both).
    #[arg(long)]
    collector: Option<Collector>,
    /// Young generations: `roomy` (256 MiB), `tight` (24 MiB); default both.
    #[arg(long, value_delimiter = ',')]
    young: Vec<report::hotspot_apps::Young>,
    /// Thread counts, comma-separated (default: every CPU this process may use, and 8 per CPU).
    #[arg(long, value_delimiter = ',')]
    threads: Vec<usize>,
    /// Without and with JFR's default recording: `off`, `on`; default both.
    #[arg(long, value_delimiter = ',', value_parser = on_off)]
    jfr: Vec<bool>,
    /// Untimed iterations of each application per run.
    #[arg(long, default_value_t = report::hotspot_apps::WARMUP_ITERATIONS)]
    warmup: usize,
    /// Timed iterations of each application per run.
    #[arg(long, default_value_t = report::hotspot_apps::TIMED_ITERATIONS)]
    iterations: usize,
    /// Run stock a second time in each round, after the other configurations: a control,
    /// stock against stock in the same round, that shows how far a ratio moves with nothing
    /// changed.
    #[arg(long)]
    control: bool,
    /// Print the tables of runs written earlier with --out, and run nothing; several files,
    /// comma-separated, are taken as rounds of one plan (the same machine, JVM and
    /// iterations): each point's runs one file after another, which --out then writes as one.
    #[arg(long, value_delimiter = ',')]
    from: Vec<PathBuf>,
    /// Pool the rounds of these recordings (--out files of any settings, comma-separated),
    /// each round of each setting one figure of the suite × stock, into each configuration's
    /// geometric mean with its 95 % confidence interval; run nothing.
    #[arg(long, conflicts_with_all = ["from", "out"], value_delimiter = ',')]
    pool: Vec<PathBuf>,
}

pub(crate) fn hotspot_hab(args: HotspotHabArgs) -> Result<(), String> {
    match args.experiment {
        Experiment::Javac(args) => javac(args),
        Experiment::Chat(args) => chat(args),
        Experiment::Observed(args) => observed(args),
        Experiment::Apps(args) => apps(args),
    }
}

impl Common {
    /// The user's own numbers and paths first, then what this machine has: `--repeat`, and
    /// `--out` found writable now rather than after minutes of runs.
    fn check(&self) -> Result<(), String> {
        limits::repetitions("--repeat", self.repeat, false)?;
        if let Some(out) = &self.out {
            // A probe file leaves nothing behind.
            let existed = out.exists();
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(out)
                .map_err(|e| format!("--out {}: cannot write there: {e}", out.display()))?;
            if !existed {
                let _ = std::fs::remove_file(out);
            }
        }
        Ok(())
    }

    /// The JDK with HABs to run (`--jdk`, else the one `jvm/hotspot/build.sh` built).
    fn jdk(&self) -> Result<PathBuf, String> {
        self.jdk.clone().or_else(built_jdk).ok_or_else(|| {
            "no JDK with HABs: build it with jvm/hotspot/build.sh, or name one with --jdk".into()
        })
    }

    /// Progress lines on standard error, and the runs written to `--out` after every round.
    fn progress<R: serde::Serialize>(&self, total: usize) -> Progress<'_, R> {
        Progress::counting(total, move |runs: &R| match &self.out {
            Some(out) => write_json(out, runs),
            None => Ok(()),
        })
    }
}

impl BenchJar {
    fn check(&self) -> Result<(), String> {
        jar_is_there(&self.bench_jar)
    }
}

fn jar_is_there(jar: &Path) -> Result<(), String> {
    if jar.exists() {
        Ok(())
    } else {
        Err(format!(
            "{}: not there (mvn -q -B package in bench/jvm makes it)",
            jar.display()
        ))
    }
}

/// `hab hotspot-hab javac`: the javac grid's tables.
fn javac(args: JavacArgs) -> Result<(), String> {
    use report::hotspot_hab::{self, Grid};
    if let Some(from) = &args.from {
        return print_recorded(from, report::hotspot_hab_section::render_runs);
    }
    let threads = if args.threads.is_empty() {
        hotspot_hab::default_threads()
    } else {
        args.threads.clone()
    };
    for &t in &threads {
        limits::threads("--threads", t)?;
    }
    limits::operations("--compiles", args.compiles)?;
    args.common.check()?;
    let (collector, compiles, repeat) = (args.collector, args.compiles, args.common.repeat);
    let mut grid = match args.grid.as_str() {
        "seed" => Grid::seed(collector, threads, compiles, repeat),
        "small" => Grid::small(collector, threads, compiles, repeat),
        other => return Err(format!("--grid {other}: expected seed or small")),
    };
    if !args.tlabs.is_empty() {
        grid.tlab_bytes = args
            .tlabs
            .iter()
            .map(|text| match text.as_str() {
                "adaptive" => Ok(None),
                size => parse_size(size).map(Some),
            })
            .collect::<Result<_, _>>()
            .map_err(|e| format!("--tlabs: {e}"))?;
    }
    grid.configs.retain(|c| {
        c.levels()
            .is_none_or(|l| !args.skip_levels.iter().any(|s| s == l))
    });
    let jdk = args.common.jdk()?;
    args.bench.check()?;
    jar_is_there(&args.sources)?;
    let mut progress = args.common.progress(grid.runs());
    let runs = hotspot_hab::measure(
        &jdk,
        &args.bench.bench_jar,
        &args.sources,
        &grid,
        &mut progress,
    )?;
    print!("{}", report::hotspot_hab_section::render_runs(&runs));
    Ok(())
}

/// `hab hotspot-hab chat`: the many-threads table, both collectors unless `--collector`.
fn chat(args: ChatArgs) -> Result<(), String> {
    use report::hotspot_chat;
    if let Some(from) = &args.from {
        return print_recorded(from, hotspot_chat::render_runs);
    }
    limits::operations("--messages", args.messages)?;
    args.common.check()?;
    let collectors = args.collector.map_or(Collector::ALL.to_vec(), |c| vec![c]);
    let jdk = args.common.jdk()?;
    args.bench.check()?;
    let mut progress = args
        .common
        .progress(hotspot_chat::run_count(&collectors, args.common.repeat));
    let runs = hotspot_chat::measure(
        &jdk,
        &args.bench.bench_jar,
        &collectors,
        args.messages,
        args.common.repeat,
        &mut progress,
    )?;
    print!("{}", hotspot_chat::render_runs(&runs));
    Ok(())
}

/// `hab hotspot-hab observed`: the observed-JVM tables.
fn observed(args: ObservedArgs) -> Result<(), String> {
    use report::hotspot_observed;
    use report::hotspot_observed_section::render_runs;
    if let Some(from) = &args.from {
        return print_recorded(from, render_runs);
    }
    limits::operations("--messages", args.messages)?;
    limits::operations("--loop-rounds", args.loop_rounds)?;
    limits::operations("--loop-objects-millions", args.loop_objects_millions)?;
    args.common.check()?;
    let collectors = [args.collector];
    let jdk = args.common.jdk()?;
    args.bench.check()?;
    let mut progress = args
        .common
        .progress(hotspot_observed::run_count(&collectors, args.common.repeat));
    let runs = hotspot_observed::measure(
        &jdk,
        &args.bench.bench_jar,
        &collectors,
        args.loop_rounds,
        args.loop_objects_millions,
        args.messages,
        args.common.repeat,
        &mut progress,
    )?;
    print!("{}", render_runs(&runs));
    Ok(())
}

/// `hab hotspot-hab apps`: the real applications' tables (or those of `--from`'s runs, or
/// `--pool`'s pooled rounds).
fn apps(args: AppsArgs) -> Result<(), String> {
    use report::hotspot_apps::{self, AppsRuns, Plan, Young, APPS};
    use report::hotspot_apps_section::{checksum_failures, render};
    if !args.pool.is_empty() {
        return pool(&args.pool);
    }
    if let Some((first, rest)) = args.from.split_first() {
        let read = |path: &PathBuf| read_json::<AppsRuns>(path).map_err(|e| format!("--from {e}"));
        let mut runs = read(first)?;
        for path in rest {
            runs.absorb(read(path)?)
                .map_err(|e| format!("--from {} and {}: {e}", first.display(), path.display()))?;
        }
        if let Some(out) = &args.common.out {
            write_json(out, &runs)?;
        }
        print!("{}", render(&runs));
        return Ok(());
    }
    for name in &args.app_names {
        if !APPS.contains(&name.as_str()) {
            return Err(format!(
                "--app {name}: the applications are {}",
                APPS.join(", ")
            ));
        }
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if args.threads.is_empty() {
        vec![cpus, 8 * cpus]
    } else {
        args.threads.clone()
    };
    for &t in &threads {
        limits::threads("--threads", t)?;
    }
    limits::repetitions("--warmup", args.warmup, true)?;
    limits::repetitions("--iterations", args.iterations, false)?;
    args.common.check()?;
    let plan = Plan {
        apps: or_all(&args.app_names, &APPS.map(String::from)),
        collectors: args.collector.map_or(Collector::ALL.to_vec(), |c| vec![c]),
        youngs: or_all(&args.young, &[Young::Roomy, Young::Tight]),
        threads,
        jfr: or_all(&args.jfr, &[false, true]),
        warmup: args.warmup,
        iterations: args.iterations,
        pre_iteration_gc: true,
        control: args.control,
        repeat: args.common.repeat,
    };
    let jdk = args.common.jdk()?;
    let mut progress = args.common.progress(plan.run_count());
    let runs = hotspot_apps::measure(&jdk, &args.apps_dir, &plan, &mut progress)?;
    print!("{}", render(&runs));
    let failures = checksum_failures(&runs);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} run(s) with a checksum that is not stock's",
            failures.len()
        ))
    }
}

/// `--pool`: the rounds of `paths` pooled into each configuration's geometric mean × stock.
fn pool(paths: &[PathBuf]) -> Result<(), String> {
    use report::hotspot_apps::AppsRuns;
    let mut recordings = vec![];
    for path in paths {
        let runs = read_json::<AppsRuns>(path).map_err(|e| format!("--pool {e}"))?;
        let name = path.file_stem().map_or_else(
            || path.display().to_string(),
            |stem| stem.to_string_lossy().into_owned(),
        );
        recordings.push((name, runs));
    }
    let pooled = report::hotspot_apps_pool::pool(&recordings);
    if pooled.is_empty() {
        return Err("--pool: no configuration ran in the same rounds as stock".into());
    }
    print!(
        "{}",
        report::hotspot_apps_pool::render(&pooled, recordings.len())
    );
    Ok(())
}

/// `--from`: the tables of runs written earlier to `from`.
fn print_recorded<T: serde::de::DeserializeOwned>(
    from: &Path,
    render: fn(&T) -> String,
) -> Result<(), String> {
    let runs: T = read_json(from).map_err(|e| format!("--from {e}"))?;
    print!("{}", render(&runs));
    Ok(())
}

/// Runs written earlier as JSON, read back.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `runs` written to `path` as JSON.
fn write_json(path: &Path, runs: &impl serde::Serialize) -> Result<(), String> {
    let json = serde_json::to_string_pretty(runs).map_err(|e| e.to_string())?;
    std::fs::write(path, json).map_err(|e| format!("{}: {e}", path.display()))
}

/// `given`, or `all` when nothing is given.
fn or_all<T: Clone>(given: &[T], all: &[T]) -> Vec<T> {
    if given.is_empty() {
        all.to_vec()
    } else {
        given.to_vec()
    }
}

/// `on` or `off`.
fn on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("'{text}': on or off")),
    }
}
