//! HotSpot with HABs while the JVM is observed: JFR's default recording (which samples
//! allocations: `jdk.ObjectAllocationSample`) and a JVMTI allocation sampler (`SampledObjectAlloc`
//! every 512 KiB, async-profiler's default; `jvm/hotspot/test/sampler.c`). Hab's compiled paths
//! allocate without the runtime, where the samplers live; while one is on, they come back to it
//! at a per-thread sample mark (docs/hotspot/design.md and results.md). Two tables per collector:
//! `bench/jvm`'s `Observed` loop (one thread allocating small objects and arrays: ns per object)
//! and the chat with 1000 threads, each configuration without an observer and under each; then
//! what the samplers said (JFR's weights against the bytes allocated, the JVMTI samples against
//! bytes / interval, the classes sampled most).
//!
//! `hab hotspot-hab --observed` runs it alone; `hab report` runs it where the JVM with HABs is
//! built.
//!
//! What the runs say, and the report's section, is `hotspot_observed_section.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::hotspot_chat::{
    self, ChatConfig, CPU_LABS, CPU_LABS_ALWAYS, HABS_SMALL, NO_TLABS, STOCK,
};
use super::hotspot_hab::Collector;
use super::hotspot_run::{value, JavaRun};

/// The JVMTI sampler's interval: async-profiler's default for `event=alloc`.
pub const JVMTI_INTERVAL_BYTES: u64 = 512 * 1024;
/// The loop's young generation (`-Xmn`).
pub(super) const LOOP_YOUNG: &str = "128m";

/// Who watches the allocations in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Observer {
    None,
    /// `-XX:StartFlightRecording` with `settings=default`.
    Jfr,
    /// `jvm/hotspot/test/sampler.c` at [`JVMTI_INTERVAL_BYTES`].
    Jvmti,
}

impl Observer {
    pub const ALL: [Observer; 3] = [Observer::None, Observer::Jfr, Observer::Jvmti];

    pub fn name(self) -> &'static str {
        match self {
            Observer::None => "no observer",
            Observer::Jfr => "JFR, settings=default",
            Observer::Jvmti => "JVMTI sampler, 512 KiB",
        }
    }

    /// The JVM options that start the observer, its output in `files`.
    fn flags(self, files: &Files) -> Vec<String> {
        match self {
            Observer::None => vec![],
            Observer::Jfr => vec![format!(
                "-XX:StartFlightRecording:filename={},settings=default",
                files.recording.display()
            )],
            Observer::Jvmti => vec![format!(
                "-agentpath:{}=interval={JVMTI_INTERVAL_BYTES}",
                files.agent.display()
            )],
        }
    }
}

/// The loop's configurations: stock with adaptive and with 1 KiB TLABs, HABs with 1 KiB
/// TLABs (refilled by C2's stub), per-CPU LABs flipping with TLABs and in every cycle.
pub fn loop_configs() -> Vec<ChatConfig> {
    let small = ["-XX:TLABSize=1k", "-XX:MinTLABSize=1k", "-XX:-ResizeTLAB"];
    let config = |label: &str, flags: &[&str]| ChatConfig {
        label: label.into(),
        flags: flags.iter().map(|f| f.to_string()).collect(),
    };
    let with_small = |first: &'static str| {
        let mut flags = vec![first];
        flags.extend(small);
        flags
    };
    vec![
        config(STOCK, &["-XX:-UseHAB"]),
        config(STOCK_SMALL, &with_small("-XX:-UseHAB")),
        config(HABS_SMALL, &with_small("-XX:+UseHAB")),
        config(CPU_LABS, &["-XX:+UseHABCPULABs"]),
        config(CPU_LABS_ALWAYS, &["-XX:+UseHABCPULABs", "-XX:-HABFlip"]),
    ]
}

const STOCK_SMALL: &str = "stock, 1 KiB TLABs";

/// The chat's configurations: stock, stock without TLABs (the collections per-CPU LABs aim
/// at), per-CPU LABs flipping with TLABs.
pub fn chat_configs() -> Vec<ChatConfig> {
    hotspot_chat::configs()
        .into_iter()
        .filter(|c| [STOCK, NO_TLABS, CPU_LABS].contains(&c.label.as_str()))
        .collect()
}

/// What a sampler said over one run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Sampling {
    /// The main thread's allocated bytes over the run (`ThreadMXBean`).
    pub allocated_bytes: u64,
    /// Samples of the main thread (JFR) or of every thread (JVMTI).
    pub samples: u64,
    /// JFR: the samples' weights summed (the bytes they stand for).
    pub weight_bytes: u64,
    /// The classes sampled most, as the tool printed them.
    pub top: String,
}

/// One loop configuration under one observer, over the repetitions.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoopPoint {
    pub collector: Collector,
    pub config: ChatConfig,
    pub observer: Observer,
    pub ns_per_object: Vec<f64>,
    pub sampling: Vec<Sampling>,
}

/// One chat configuration under one observer, over the repetitions.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChatPoint {
    pub collector: Collector,
    pub config: ChatConfig,
    pub observer: Observer,
    pub messages_per_sec: Vec<f64>,
    pub collections: Vec<u64>,
}

/// The tables' runs, and where they ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ObservedRuns {
    pub machine: String,
    pub jvm: String,
    /// The loop: timed rounds per run, millions of objects per round.
    pub rounds: usize,
    pub objects_millions: usize,
    /// The chat: messages per connection.
    pub messages: usize,
    pub repeat: usize,
    pub loops: Vec<LoopPoint>,
    pub chats: Vec<ChatPoint>,
}

/// Where a run's observers write, and the JVMTI agent.
struct Files {
    recording: PathBuf,
    agent: PathBuf,
    /// The JVM's gc+tlab log of the run in progress.
    gc_log: PathBuf,
}

/// Builds the JVMTI sampler against the JDK's `jvmti.h` into `dir`.
fn build_agent(jdk: &Path, dir: &Path) -> Result<PathBuf, String> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../jvm/hotspot/test/sampler.c");
    let agent = dir.join("libhabsampler.so");
    let output = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{}", jdk.join("include").display()))
        .arg(format!("-I{}", jdk.join("include/linux").display()))
        .arg(&source)
        .args(["-lpthread", "-o"])
        .arg(&agent)
        .output()
        .map_err(|e| format!("cc: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cc {}: {}",
            source.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(agent)
}

/// The JVMTI sampler's line (`sampler: interval=... samples=N ... top=...`).
fn jvmti_sampling(stderr: &str, allocated_bytes: u64) -> Option<Sampling> {
    let line = stderr.lines().find(|l| l.starts_with("sampler: "))?;
    Some(Sampling {
        allocated_bytes,
        samples: value(line, "samples")?,
        weight_bytes: 0,
        top: value(line, "top")?,
    })
}

/// `JfrSamples`'s line (`jfr_samples=N weight_bytes=W top=...`).
fn jfr_sampling(stdout: &str, allocated_bytes: u64) -> Option<Sampling> {
    let line = stdout.lines().find(|l| l.starts_with("jfr_samples="))?;
    Some(Sampling {
        allocated_bytes,
        samples: value(line, "jfr_samples")?,
        weight_bytes: value(line, "weight_bytes")?,
        top: value(line, "top")?,
    })
}

/// One run of the loop: ns per object (the median round) and what the observer said.
#[allow(clippy::too_many_arguments)]
fn run_loop(
    java: &Path,
    bench_jar: &Path,
    collector: Collector,
    config: &ChatConfig,
    observer: Observer,
    files: &Files,
    rounds: usize,
    objects_millions: usize,
) -> Result<(f64, Option<Sampling>), String> {
    let _ = std::fs::remove_file(&files.recording);
    let output = JavaRun::new(java)
        .options([collector.flag().to_string(), format!("-Xmn{LOOP_YOUNG}")])
        .options(&config.flags)
        .options(observer.flags(files))
        .program(
            bench_jar,
            "hab.bench.Observed",
            [rounds.to_string(), objects_millions.to_string()],
        )
        .run(&files.gc_log)?
        .succeeded()?;
    let ns = output.stderr_value::<f64>("ns_per_object_median")?;
    let allocated = output.stderr_value::<u64>("thread_allocated_bytes")?;
    let missing = |what: &str| format!("{}: no {what} in {:?}", output.command, output.stderr);
    let sampling = match observer {
        Observer::None => None,
        Observer::Jvmti => {
            Some(jvmti_sampling(&output.stderr, allocated).ok_or_else(|| missing("sampler line"))?)
        }
        Observer::Jfr => {
            let samples = JavaRun::new(java)
                .program(
                    bench_jar,
                    "hab.bench.JfrSamples",
                    [files.recording.as_os_str(), "main".as_ref()],
                )
                .run(&files.gc_log)?
                .succeeded()?;
            Some(jfr_sampling(&samples.stdout, allocated).ok_or_else(|| missing("jfr_samples"))?)
        }
    };
    Ok((ns, sampling))
}

/// The runs of [`measure`] for `collectors`.
pub fn run_count(collectors: &[Collector], repeat: usize) -> usize {
    collectors.len() * (loop_configs().len() + chat_configs().len()) * Observer::ALL.len() * repeat
}

/// Runs the loop and the chat in every configuration under every observer, each collector of
/// `collectors`, `repeat` rounds (a round runs every configuration and observer once, back to
/// back); `step` before each run.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    jdk: &Path,
    bench_jar: &Path,
    collectors: &[Collector],
    rounds: usize,
    objects_millions: usize,
    messages: usize,
    repeat: usize,
    mut step: impl FnMut(&str),
) -> Result<ObservedRuns, String> {
    let java = jdk.join("bin/java");
    let dir = std::env::temp_dir().join(format!("hab-observed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result: Result<(Vec<LoopPoint>, Vec<ChatPoint>), String> = (|| {
        let files = Files {
            recording: dir.join("recording.jfr"),
            agent: build_agent(jdk, &dir)?,
            gc_log: dir.join("gc.log"),
        };
        let mut loops = vec![];
        let mut chats = vec![];
        for &collector in collectors {
            for observer in Observer::ALL {
                for config in loop_configs() {
                    loops.push(LoopPoint {
                        collector,
                        config,
                        observer,
                        ns_per_object: vec![],
                        sampling: vec![],
                    });
                }
                for config in chat_configs() {
                    chats.push(ChatPoint {
                        collector,
                        config,
                        observer,
                        messages_per_sec: vec![],
                        collections: vec![],
                    });
                }
            }
        }
        for round in 1..=repeat {
            for point in &mut loops {
                step(&format!(
                    "observed loop, {}, {}, {} (round {round})",
                    point.collector.name(),
                    point.config.label,
                    point.observer.name()
                ));
                let (ns, sampling) = run_loop(
                    &java,
                    bench_jar,
                    point.collector,
                    &point.config,
                    point.observer,
                    &files,
                    rounds,
                    objects_millions,
                )?;
                point.ns_per_object.push(ns);
                point.sampling.extend(sampling);
            }
            for point in &mut chats {
                step(&format!(
                    "observed chat, {}, {}, {} (round {round})",
                    point.collector.name(),
                    point.config.label,
                    point.observer.name()
                ));
                let mut config = point.config.clone();
                config.flags.extend(point.observer.flags(&files));
                let run = hotspot_chat::run_once(
                    &java,
                    bench_jar,
                    point.collector,
                    &config,
                    messages,
                    &files.gc_log,
                )?;
                point.messages_per_sec.push(run.messages_per_sec);
                point.collections.push(run.collections);
            }
        }
        Ok((loops, chats))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let (loops, chats) = result?;
    Ok(ObservedRuns {
        machine: crate::machine::describe().join("; "),
        jvm: super::hotspot_hab::version(&java)?,
        rounds,
        objects_millions,
        messages,
        repeat,
        loops,
        chats,
    })
}

/// The loop's rounds, millions of objects per round, and the chat's messages at the report's
/// scales (none at the quick one).
pub(super) fn sizes_for(scale: &super::scale::Scale) -> Option<(usize, usize, usize)> {
    match scale.name {
        "default" => Some((5, 20, 40)),
        "full" => Some((10, 100, 200)),
        _ => None,
    }
}

/// Rounds at the report's scales, and its collector (the figures the observed-JVM claims were
/// set on; `hab hotspot-hab --observed --collector g1` runs G1's).
pub(super) const REPORT_ROUNDS: usize = 2;
pub(super) const REPORT_COLLECTORS: [Collector; 1] = [Collector::Parallel];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_samplers_lines_parse() {
        let jvmti = "round=1 ns_per_object=3.1\nsampler: interval=524288 samples=2829 \
                     sampled_bytes=78272 top=[I:1272,LPair;:947 untallied=0\n";
        let sampling = jvmti_sampling(jvmti, 1 << 30).expect("parses");
        assert_eq!(sampling.samples, 2829);
        assert_eq!(sampling.top, "[I:1272,LPair;:947");
        let jfr = "jfr_samples=600 weight_bytes=25233111216 top=Pair:36.2%,[I:32.1%\n";
        let sampling = jfr_sampling(jfr, 26_421_209_936).expect("parses");
        assert_eq!(
            (sampling.samples, sampling.weight_bytes),
            (600, 25_233_111_216)
        );
        assert!(jvmti_sampling("no sampler here", 1).is_none());
        assert!(jfr_sampling("jfr_samples=x weight_bytes=1 top=", 1).is_none());
        let loop_output = "round=1 ns_per_object=4.81\nns_per_object_median=3.62 \
                           allocated_bytes=2400523616 thread_allocated_bytes=2881710072\n";
        assert_eq!(
            value::<f64>(loop_output, "ns_per_object_median"),
            Some(3.62)
        );
        assert_eq!(
            value::<u64>(loop_output, "thread_allocated_bytes"),
            Some(2_881_710_072)
        );
        assert_eq!(value::<u64>(loop_output, "allocated"), None);
    }
}
