//! HotSpot beside Hab: builds `bench/jvm` (the same workloads in Java) and runs it on the
//! installed JDK with the seeds' flags, in the same report run as Hab's measurements.
//!
//! Epsilon GC with fixed TLAB sizes (JDK 17 spells Shipilëv's `-XX:EpsilonTLABSize` as
//! `-XX:TLABSize` with `-XX:-ResizeTLAB -XX:-EpsilonElasticTLAB`) and `-XX:-UseTLAB` for
//! `alloc-array`; Parallel GC with and without TLABs for `alloc-object`; Parallel GC with a small
//! young generation for `warehouses`, `chat` and `binary-trees`, collections of the timed round
//! (after an untimed warm-up round, for `warehouses` and `chat`) as each program counts them
//! from the JVM's collector beans (its `collections=` line), not from the GC log's sentences.

use std::path::{Path, PathBuf};
use std::process::Command;

use indicatif::ProgressBar;
use serde_json::Value;

use super::hotspot_run::value;
use super::scale::Scale;
use crate::figures::{median, Spread};

/// Where the Java project is.
fn project_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/jvm")
}

/// A built benchmark jar and the `java` that runs it.
pub struct Jvm {
    pub jar: PathBuf,
    /// `java -version`'s first line.
    pub version: String,
}

/// Whether `java` and `mvn` are on the PATH.
pub fn available() -> bool {
    let runs = |program: &str, arg: &str| {
        Command::new(program)
            .arg(arg)
            .output()
            .is_ok_and(|output| output.status.success())
    };
    runs("java", "-version") && runs("mvn", "-v")
}

/// `mvn -q -B package` in `dir`, or why it failed.
pub fn mvn_package(dir: &std::path::Path) -> Result<(), String> {
    let output = Command::new("mvn")
        .args(["-q", "-B", "package", "-DskipTests"])
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run mvn: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "mvn package failed in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&output.stdout)
        ));
    }
    Ok(())
}

/// Builds `bench/jvm` with Maven.
pub fn build() -> Result<Jvm, String> {
    let dir = project_dir();
    mvn_package(&dir)?;
    let version = Command::new("java")
        .arg("-version")
        .output()
        .map(|output| {
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .next()
                .unwrap_or("java")
                .to_string()
        })
        .unwrap_or_default();
    Ok(Jvm {
        jar: dir.join("target/benchmarks.jar"),
        version,
    })
}

/// One HotSpot measurement: what was run, and its figures.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Point {
    pub workload: &'static str,
    /// The configuration in words, e.g. `Epsilon, 1 KiB TLABs`.
    pub config: String,
    pub threads: usize,
    /// Object size (alloc-object), rooms (chat).
    pub size: usize,
    /// Time per object (alloc-array, alloc-object) in ns: the median over JMH's iterations.
    pub ns_per_object: Option<f64>,
    /// The fastest and slowest iteration, in ns per object.
    pub ns_range: Option<(f64, f64)>,
    /// The workload's own throughput (warehouses, chat) or elapsed ms (binary-trees).
    pub value: Option<f64>,
    /// Collections in the timed round, from the JVM's collector beans (the program's
    /// `collections=` line).
    pub collections: Option<u64>,
    /// The command that reproduces it.
    pub command: String,
}

/// HotSpot's TLAB configurations of `alloc-array`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JvmTlab {
    /// Every TLAB this size.
    Fixed(usize),
    /// Epsilon's default: TLABs sized by the JVM (elastic).
    Adaptive,
    /// `-XX:-UseTLAB`.
    Off,
}

impl JvmTlab {
    /// The point's `config`.
    pub fn config(self) -> String {
        match self {
            JvmTlab::Fixed(bytes) => format!("Epsilon, {} TLABs", hab::ByteSize::new(bytes)),
            JvmTlab::Adaptive => "Epsilon, adaptive TLABs".into(),
            JvmTlab::Off => "Epsilon, -XX:-UseTLAB".into(),
        }
    }

    fn flags(self) -> String {
        match self {
            JvmTlab::Fixed(bytes) => format!(
                "-XX:TLABSize={bytes} -XX:MinTLABSize={bytes} -XX:-ResizeTLAB -XX:-EpsilonElasticTLAB -XX:EpsilonMaxTLABSize={}",
                bytes.max(4 << 20)
            ),
            JvmTlab::Adaptive => String::new(),
            JvmTlab::Off => "-XX:-UseTLAB".into(),
        }
    }
}

/// The TLAB configurations of `alloc-array`: the fixed sizes of Hab's sweep, adaptive, none.
pub const ALLOC_ARRAY_TLABS: [JvmTlab; 8] = [
    JvmTlab::Fixed(1 << 10),
    JvmTlab::Fixed(4 << 10),
    JvmTlab::Fixed(16 << 10),
    JvmTlab::Fixed(256 << 10),
    JvmTlab::Fixed(1 << 20),
    JvmTlab::Fixed(4 << 20),
    JvmTlab::Adaptive,
    JvmTlab::Off,
];

impl Point {
    /// Time per object as `median (min–max)`, or —.
    pub fn ns_spread(&self) -> String {
        match (self.ns(), self.ns_range) {
            (Some(spread), Some(_)) => spread.to_string(),
            (Some(spread), None) => format!("{:.2}", spread.median),
            _ => "—".into(),
        }
    }

    /// Time per object in ns with its range over the iterations (a point when JMH gave no
    /// range).
    pub fn ns(&self) -> Option<Spread> {
        let median = self.ns_per_object?;
        Some(match self.ns_range {
            Some((min, max)) => Spread { median, min, max },
            None => Spread::exact(median),
        })
    }
}

/// The smallest and largest of some values.
fn range(values: &[f64]) -> Option<(f64, f64)> {
    let spread = Spread::of(values);
    (!values.is_empty()).then_some((spread.min, spread.max))
}

impl Jvm {
    fn java(
        &self,
        jvm_args: &[String],
        main: &str,
        args: &[String],
    ) -> Result<(String, String), String> {
        let output = Command::new("java")
            .args(jvm_args)
            .arg("-cp")
            .arg(&self.jar)
            .arg(main)
            .args(args)
            .output()
            .map_err(|e| format!("cannot run java: {e}"))?;
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        if !output.status.success() {
            return Err(format!("java {main} failed: {stderr}"));
        }
        Ok((stdout, stderr))
    }

    /// Runs a JMH benchmark; returns each result's (benchmark name, raw scores).
    fn jmh(
        &self,
        benchmark: &str,
        jmh_args: &[String],
        jvm_args: &str,
    ) -> Result<Vec<(String, Vec<f64>)>, String> {
        let results = std::env::temp_dir().join(format!("hab-jmh-{}.json", std::process::id()));
        let output = Command::new("java")
            .arg("-jar")
            .arg(&self.jar)
            .arg(benchmark)
            .args(jmh_args)
            .args(["-jvmArgs", jvm_args, "-rf", "json", "-rff"])
            .arg(&results)
            .output()
            .map_err(|e| format!("cannot run JMH: {e}"))?;
        let text = std::fs::read_to_string(&results).unwrap_or_default();
        let _ = std::fs::remove_file(&results);
        let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let runs = parsed.as_array().cloned().unwrap_or_default();
        if runs.is_empty() {
            return Err(format!(
                "JMH {benchmark} with {jvm_args} produced no result: {}",
                String::from_utf8_lossy(&output.stdout)
                    .lines()
                    .filter(|line| line.contains("rror") || line.contains("Unrecognized"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        Ok(runs
            .iter()
            .map(|run| {
                let name = run["benchmark"].as_str().unwrap_or("?").to_string();
                let raw = run["primaryMetric"]["rawData"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|fork| fork.as_array().cloned().unwrap_or_default())
                    .filter_map(|value| value.as_f64())
                    .collect();
                (name, raw)
            })
            .collect())
    }
}

/// Every HotSpot measurement of the report.
pub fn measure(jvm: &Jvm, scale: &Scale, progress: &ProgressBar) -> Result<Vec<Point>, String> {
    let mut points = Vec::new();
    // As many objects as Hab's runs, so that both work in the same part of the memory
    // hierarchy. Epsilon never frees: every iteration's objects and array stay.
    let objects = scale.array_objects;
    let (warmups, iterations) = (1, 5);
    // 16 bytes per object for every iteration and two more, the array (4 or 8 bytes a slot)
    // and slack.
    let heap_mib = ((warmups + iterations + 2) * objects * 24).div_ceil(1 << 20) + 1024;
    for tlab in ALLOC_ARRAY_TLABS {
        progress.set_message(format!("HotSpot alloc-array, {}", tlab.config()));
        let tlab_flags = tlab.flags();
        let jvm_args = format!(
            "-XX:+UnlockExperimentalVMOptions -XX:+UseEpsilonGC {tlab_flags} -Xms{heap_mib}m -Xmx{heap_mib}m -XX:+AlwaysPreTouch"
        );
        let jmh_args = vec![
            "-f".into(),
            "1".into(),
            "-wi".into(),
            warmups.to_string(),
            "-i".into(),
            iterations.to_string(),
            "-p".into(),
            format!("size={objects}"),
        ];
        let results = jvm.jmh("AllocArray", &jmh_args, &jvm_args)?;
        let ms = median(&results[0].1);
        points.push(Point {
            workload: "alloc-array",
            config: tlab.config(),
            threads: 1,
            size: 16,
            ns_per_object: Some(ms * 1e6 / objects as f64),
            ns_range: range(&results[0].1)
                .map(|(min, max)| (min * 1e6 / objects as f64, max * 1e6 / objects as f64)),
            value: Some(ms),
            collections: Some(0),
            command: format!(
                "java -jar bench/jvm/target/benchmarks.jar AllocArray {} -jvmArgs \"{jvm_args}\"",
                jmh_args.join(" ")
            ),
        });
        progress.inc(1);
    }
    for threads in scale.threads.ends_and_two() {
        for use_tlab in [true, false] {
            progress.set_message(format!("HotSpot alloc-object, {threads} threads"));
            let jvm_args = format!(
                "-XX:+UseParallelGC -Xmn64m{}",
                if use_tlab { "" } else { " -XX:-UseTLAB" }
            );
            let jmh_args: Vec<String> = [
                "-f", "1", "-wi", "2", "-i", "3", "-w", "1s", "-r", "1s", "-t",
            ]
            .iter()
            .map(|s| s.to_string())
            .chain([threads.to_string()])
            .collect();
            for (name, raw) in jvm.jmh("AllocObject", &jmh_args, &jvm_args)? {
                let size = if name.ends_with("bytes144") {
                    144
                } else if name.ends_with("bytes48") {
                    48
                } else {
                    16
                };
                points.push(Point {
                    workload: "alloc-object",
                    config: format!("Parallel, {}", if use_tlab { "TLABs" } else { "-XX:-UseTLAB" }),
                    threads,
                    size,
                    // JMH's average time is per operation of one thread; over the threads it is
                    // the time per object of all of them together, as Hab's figures are.
                    ns_per_object: Some(median(&raw) / threads as f64),
                    ns_range: range(&raw)
                        .map(|(min, max)| (min / threads as f64, max / threads as f64)),
                    value: None,
                    collections: None,
                            command: format!(
                        "java -jar bench/jvm/target/benchmarks.jar AllocObject {} -jvmArgs \"{jvm_args}\"",
                        jmh_args.join(" ")
                    ),
                });
            }
            progress.inc(1);
        }
    }
    let run_main = |workload: &'static str,
                    config: String,
                    flags: Vec<String>,
                    main: &str,
                    args: Vec<String>,
                    key: &str,
                    threads: usize,
                    size: usize|
     -> Result<Point, String> {
        let (_, stderr) = jvm.java(&flags, main, &args)?;
        Ok(Point {
            workload,
            config,
            threads,
            size,
            ns_per_object: None,
            ns_range: None,
            value: value(&stderr, key),
            collections: value::<u64>(&stderr, "collections"),
            command: format!(
                "java {} -cp bench/jvm/target/benchmarks.jar {main} {}",
                flags.join(" "),
                args.join(" ")
            ),
        })
    };
    let parallel = |young: &str| vec!["-XX:+UseParallelGC".to_string(), format!("-Xmn{young}")];
    // The seed's 4 MiB young generation, with HotSpot's adaptive TLABs or fixed 64 KiB ones.
    let small_young = |fixed_tlabs: bool| {
        let mut flags = parallel("4m");
        if fixed_tlabs {
            flags.extend([
                "-XX:TLABSize=64k".to_string(),
                "-XX:-ResizeTLAB".to_string(),
            ]);
        }
        flags
    };
    for threads in scale.threads.ends_and_two() {
        progress.set_message(format!("HotSpot binary-trees, {threads} threads"));
        points.push(run_main(
            "binary-trees",
            "Parallel, default TLABs".into(),
            parallel("64m"),
            "hab.bench.BinaryTrees",
            vec![scale.tree_depth.to_string(), threads.to_string()],
            "elapsed_ms",
            threads,
            0,
        )?);
        progress.inc(1);
    }
    for (config, fixed_tlabs) in [(WAREHOUSES_ADAPTIVE, false), (WAREHOUSES_FIXED, true)] {
        for threads in scale.threads.warehouses() {
            progress.set_message(format!("HotSpot warehouses, {threads} threads, {config}"));
            points.push(run_main(
                "warehouses",
                config.into(),
                small_young(fixed_tlabs),
                "hab.bench.Warehouses",
                vec![
                    threads.to_string(),
                    scale.warehouse_orders.to_string(),
                    "25".into(),
                ],
                "orders_per_sec",
                threads,
                0,
            )?);
            progress.inc(1);
        }
    }
    for (config, fixed_tlabs) in [(CHAT_FIXED, true), (CHAT_ADAPTIVE, false)] {
        for rooms in [10usize, 50] {
            progress.set_message(format!("HotSpot chat, {rooms} rooms, {config}"));
            points.push(run_main(
                "chat",
                config.into(),
                small_young(fixed_tlabs),
                "hab.bench.Chat",
                vec![rooms.to_string(), scale.chat_messages.to_string()],
                "messages_per_sec",
                rooms * 20,
                rooms,
            )?);
            progress.inc(1);
        }
    }
    Ok(points)
}

/// The configurations of HotSpot's chat runs: the seed's fixed 64 KiB TLABs, and HotSpot's
/// own adaptive sizing.
pub const CHAT_FIXED: &str = "Parallel, 4 MiB young generation, 64 KiB TLABs";
pub const CHAT_ADAPTIVE: &str = "Parallel, 4 MiB young generation, adaptive TLABs";

/// The configurations of HotSpot's warehouses runs: its own adaptive sizing, and fixed 64 KiB
/// TLABs.
pub const WAREHOUSES_ADAPTIVE: &str = "Parallel, 4 MiB young generation, adaptive TLABs";
pub const WAREHOUSES_FIXED: &str = "Parallel, 4 MiB young generation, 64 KiB TLABs";

/// Progress steps `measure` takes.
pub fn steps(scale: &Scale) -> usize {
    let ends = scale.threads.ends_and_two().len();
    ALLOC_ARRAY_TLABS.len() + 2 * ends + ends + 2 * scale.threads.warehouses().len() + 4
}
