//! `hab hotspot-hab`: the HotSpot experiments one at a time (the javac grid, the many-threads
//! chat, the observed JVM, the real applications), each printing its tables and keeping its
//! runs as JSON.

use std::path::{Path, PathBuf};

use crate::{limits, parse_size, report};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("chat").args(["many_threads", "observed"])))]
pub(crate) struct HotspotHabArgs {
    /// The JDK with HABs (default: target/hotspot-hab/jdk).
    #[arg(long)]
    jdk: Option<PathBuf>,
    /// `bench/jvm`'s jar.
    #[arg(long, default_value = "bench/jvm/target/benchmarks.jar")]
    bench_jar: PathBuf,
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
    /// The collector: `parallel` or `g1` (HotSpot's default); default: Parallel for the javac
    /// grid, both for --many-threads.
    #[arg(long)]
    collector: Option<report::hotspot_hab::Collector>,
    /// Instead of the javac grid, the many-threads table: the chat with 1000 threads in a
    /// 4 MiB young generation (stock, -XX:-UseTLAB, HABs with adaptive and 1 KiB TLABs, and
    /// per-CPU LABs, flipping with TLABs and in every cycle).
    #[arg(long, conflicts_with_all = ["from", "out", "tlabs", "skip_levels"])]
    many_threads: bool,
    /// Instead of the javac grid, the observed-JVM tables: `bench/jvm`'s Observed loop and the
    /// chat with 1000 threads, each configuration without an observer, under JFR's default
    /// recording and under a JVMTI allocation sampler (512 KiB), with what the samplers said.
    #[arg(long, conflicts_with_all = ["from", "out", "tlabs", "skip_levels", "many_threads"])]
    observed: bool,
    /// Instead of the javac grid, the real applications of `bench/apps` (H2, Lucene indexing
    /// and searching, Jackson, javac, the Kotlin and Scala compilers) in every configuration
    /// (stock, HABs with adaptive and 1 KiB TLABs, per-CPU LABs flipping and in every cycle),
    /// each collector, young generation, thread count and observer asked for: time and young
    /// collections relative to stock, and every application's checksum against stock's.
    #[arg(long, conflicts_with_all = ["out", "tlabs", "skip_levels", "many_threads", "observed"])]
    apps: bool,
    /// Only these applications (--apps), comma-separated.
    #[arg(long = "app", value_delimiter = ',', requires = "apps")]
    app_names: Vec<String>,
    /// Young generations (--apps): `roomy` (256 MiB), `tight` (24 MiB); default both.
    #[arg(long, value_delimiter = ',', requires = "apps")]
    young: Vec<report::hotspot_apps::Young>,
    /// Without and with JFR's default recording (--apps): `off`, `on`; default both.
    #[arg(long, value_delimiter = ',', value_parser = on_off, requires = "apps")]
    jfr: Vec<bool>,
    /// Untimed and timed iterations of each application per run (--apps).
    #[arg(long, default_value_t = report::hotspot_apps::WARMUP_ITERATIONS, requires = "apps")]
    warmup: usize,
    #[arg(long, default_value_t = report::hotspot_apps::TIMED_ITERATIONS, requires = "apps")]
    iterations: usize,
    /// Run stock a second time in each round, after the other configurations (--apps): a
    /// control, stock against stock in the same round, that shows how far a ratio moves with
    /// nothing changed.
    #[arg(long, requires = "apps")]
    control: bool,
    /// `bench/apps`'s build: apps.jar and lib/ (--apps).
    #[arg(long, default_value = "bench/apps/target", requires = "apps")]
    apps_dir: PathBuf,
    /// Where to write the applications' runs as JSON, after every round (--apps); with
    /// --from, the files' runs merged into one.
    #[arg(long, requires = "apps")]
    apps_out: Option<PathBuf>,
    /// Timed rounds of the Observed loop per run, and millions of objects per round
    /// (--observed).
    #[arg(long, default_value_t = 5, requires = "observed")]
    loop_rounds: usize,
    #[arg(long, default_value_t = 20, requires = "observed")]
    loop_objects_millions: usize,
    /// Where to write the observed runs as JSON (--observed).
    #[arg(long, requires = "observed")]
    observed_out: Option<PathBuf>,
    /// Messages per connection of the chat (--many-threads, --observed).
    #[arg(long, default_value_t = 40, requires = "chat")]
    messages: usize,
    /// Timed compiles per thread.
    #[arg(long, default_value_t = 2)]
    compiles: usize,
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Only these TLAB settings of the grid (sizes like 4K, or `adaptive`), comma-separated.
    #[arg(long, value_delimiter = ',')]
    tlabs: Vec<String>,
    /// Leave out the grid's configurations whose levels are these (e.g. core:1M).
    #[arg(long, value_delimiter = ',')]
    skip_levels: Vec<String>,
    /// Print the tables of runs written earlier with --out (--apps-out), and run nothing.
    /// With --apps, several files, comma-separated, are taken as rounds of one plan (the same
    /// machine, JVM and iterations): each point's runs one file after another; --apps-out
    /// then writes them as one file.
    #[arg(long, conflicts_with = "out", value_delimiter = ',')]
    from: Vec<PathBuf>,
    /// With --apps: pool the rounds of these recordings (--apps-out files of any settings,
    /// comma-separated), each round of each setting one figure of the suite × stock, into
    /// each configuration's geometric mean with its 95 % confidence interval; run nothing.
    #[arg(long, requires = "apps", conflicts_with_all = ["from", "apps_out"], value_delimiter = ',')]
    pool: Vec<PathBuf>,
    /// Where to write the runs as JSON, after every run (`hab report` renders docs/results/hotspot-hab-*.json).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub(crate) fn hotspot_hab(mut args: HotspotHabArgs) -> Result<(), String> {
    use report::hotspot_hab::{self, Grid, Runs};
    if args.apps {
        return hotspot_apps(&args);
    }
    if let Some(from) = args.from.first() {
        if args.from.len() > 1 {
            return Err("--from: the javac grid's tables come from one file".into());
        }
        let runs: Runs = read_json(from).map_err(|e| format!("--from {e}"))?;
        print!("{}", report::hotspot_hab_section::render_runs(&runs));
        return Ok(());
    }
    if args.threads.is_empty() {
        args.threads = hotspot_hab::default_threads();
    }
    // The user's own numbers and paths first, then what this machine has (the JDK, the jars).
    for &threads in &args.threads {
        limits::threads("--threads", threads)?;
    }
    limits::operations("--compiles", args.compiles)?;
    limits::repetitions("--repeat", args.repeat, false)?;
    if args.observed {
        return hotspot_observed(&args);
    }
    if args.many_threads {
        return hotspot_many_threads(&args);
    }
    let collector = args.collector.unwrap_or_default();
    let grid = match args.grid.as_str() {
        "seed" => Grid::seed(collector, args.threads.clone(), args.compiles, args.repeat),
        "small" => Grid::small(collector, args.threads.clone(), args.compiles, args.repeat),
        other => return Err(format!("--grid {other}: expected seed or small")),
    };
    let mut grid = grid;
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
    if let Some(out) = &args.out {
        // Found now, not after the grid's minutes of runs; a probe file leaves nothing behind.
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
    let jdk = args
        .jdk
        .or_else(hotspot_hab::built_jdk)
        .ok_or("no JDK with HABs: build it with jvm/hotspot/build.sh, or name one with --jdk")?;
    for jar in [&args.bench_jar, &args.sources] {
        if !jar.exists() {
            return Err(format!(
                "{}: not there (mvn -q -B package in bench/jvm makes it)",
                jar.display()
            ));
        }
    }
    grid.configs.retain(|c| {
        c.levels
            .as_ref()
            .is_none_or(|l| !args.skip_levels.contains(l))
    });
    let total = grid.runs();
    let mut done = 0;
    let mut write_error = None;
    let runs = hotspot_hab::measure(
        &jdk,
        &args.bench_jar,
        &args.sources,
        &grid,
        |what| {
            done += 1;
            eprintln!("[{done}/{total}] {what}");
        },
        |runs| {
            if let Some(out) = &args.out {
                if let Err(e) = write_json(out, runs) {
                    write_error.get_or_insert(e);
                }
            }
        },
    )?;
    if let Some(error) = write_error {
        return Err(error);
    }
    print!("{}", report::hotspot_hab_section::render_runs(&runs));
    Ok(())
}

/// The JDK with HABs `hab hotspot-hab` runs (`--jdk`, else the one `jvm/hotspot/build.sh`
/// built), once `bench/jvm`'s jar is there.
fn jdk_with_habs(args: &HotspotHabArgs) -> Result<PathBuf, String> {
    let jdk = args
        .jdk
        .clone()
        .or_else(report::hotspot_hab::built_jdk)
        .ok_or("no JDK with HABs: build it with jvm/hotspot/build.sh, or name one with --jdk")?;
    if !args.bench_jar.exists() {
        return Err(format!(
            "{}: not there (mvn -q -B package in bench/jvm makes it)",
            args.bench_jar.display()
        ));
    }
    Ok(jdk)
}

/// `hab hotspot-hab --observed`: the observed-JVM tables (Parallel unless --collector).
fn hotspot_observed(args: &HotspotHabArgs) -> Result<(), String> {
    use report::{hotspot_hab, hotspot_observed};
    limits::operations("--messages", args.messages)?;
    limits::operations("--loop-rounds", args.loop_rounds)?;
    limits::operations("--loop-objects-millions", args.loop_objects_millions)?;
    let collectors = vec![args.collector.unwrap_or(hotspot_hab::Collector::Parallel)];
    let jdk = jdk_with_habs(args)?;
    let total = hotspot_observed::run_count(&collectors, args.repeat);
    let mut done = 0;
    let runs = hotspot_observed::measure(
        &jdk,
        &args.bench_jar,
        &collectors,
        args.loop_rounds,
        args.loop_objects_millions,
        args.messages,
        args.repeat,
        |what| {
            done += 1;
            eprintln!("[{done}/{total}] {what}");
        },
    )?;
    if let Some(out) = &args.observed_out {
        write_json(out, &runs)?;
    }
    print!("{}", report::hotspot_observed_section::render_runs(&runs));
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

/// `hab hotspot-hab --apps`: the real applications' tables (or those of `--from`'s runs).
fn hotspot_apps(args: &HotspotHabArgs) -> Result<(), String> {
    use report::hotspot_apps::{self, AppsRuns, Plan, Young, APPS};
    use report::hotspot_apps_section::{checksum_failures, render};
    if !args.pool.is_empty() {
        let mut recordings = vec![];
        for path in &args.pool {
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
        return Ok(());
    }
    if let Some((first, rest)) = args.from.split_first() {
        let read = |path: &PathBuf| read_json::<AppsRuns>(path).map_err(|e| format!("--from {e}"));
        let mut runs = read(first)?;
        for path in rest {
            runs.absorb(read(path)?)
                .map_err(|e| format!("--from {} and {}: {e}", first.display(), path.display()))?;
        }
        if let Some(out) = &args.apps_out {
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
    limits::repetitions("--repeat", args.repeat, false)?;
    limits::repetitions("--warmup", args.warmup, true)?;
    limits::repetitions("--iterations", args.iterations, false)?;
    let plan = Plan {
        apps: or_all(&args.app_names, &APPS.map(String::from)),
        collectors: args
            .collector
            .map_or(report::hotspot_hab::Collector::ALL.to_vec(), |c| vec![c]),
        youngs: or_all(&args.young, &[Young::Roomy, Young::Tight]),
        threads,
        jfr: or_all(&args.jfr, &[false, true]),
        warmup: args.warmup,
        iterations: args.iterations,
        pre_iteration_gc: true,
        control: args.control,
        repeat: args.repeat,
    };
    let jdk = args
        .jdk
        .clone()
        .or_else(report::hotspot_hab::built_jdk)
        .ok_or("no JDK with HABs: build it with jvm/hotspot/build.sh, or name one with --jdk")?;
    let total = plan.run_count();
    let mut done = 0;
    let runs = hotspot_apps::measure(
        &jdk,
        &args.apps_dir,
        &plan,
        |what| {
            done += 1;
            eprintln!("[{done}/{total}] {what}");
        },
        |runs| match &args.apps_out {
            Some(out) => write_json(out, runs),
            None => Ok(()),
        },
    )?;
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

/// `hab hotspot-hab --many-threads`: the chat table.
fn hotspot_many_threads(args: &HotspotHabArgs) -> Result<(), String> {
    use report::{hotspot_chat, hotspot_hab};
    limits::operations("--messages", args.messages)?;
    let collectors: Vec<_> = match args.collector {
        Some(collector) => vec![collector],
        None => hotspot_hab::Collector::ALL.to_vec(),
    };
    let jdk = jdk_with_habs(args)?;
    let total = hotspot_chat::run_count(&collectors, args.repeat);
    let mut done = 0;
    let runs = hotspot_chat::measure(
        &jdk,
        &args.bench_jar,
        &collectors,
        args.messages,
        args.repeat,
        |what| {
            done += 1;
            eprintln!("[{done}/{total}] {what}");
        },
    )?;
    print!("{}", hotspot_chat::render_runs(&runs));
    Ok(())
}
