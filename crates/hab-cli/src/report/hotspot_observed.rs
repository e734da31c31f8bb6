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
//! `hab hotspot-hab observed` runs it alone; `hab report` runs it where the JVM with HABs is
//! built.
//!
//! What the runs say, and the report's section, is `hotspot_observed_section.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::hotspot_chat::{self, CPU_LABS, CPU_LABS_ALWAYS, HABS_SMALL, NO_TLABS, STOCK};
use super::hotspot_hab::Collector;
use super::hotspot_run::value;
use super::hotspot_runner::{
    jfr_flag, run_rounds, ConfigPoint, Jvm, JvmConfig, Progress, Rounds, SMALL_TLAB_FLAGS,
};

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

    /// The JVM options that start the observer: JFR recording into `jvm`'s folder, the
    /// sampler `agent`.
    fn flags(self, jvm: &Jvm, agent: &Path) -> Vec<String> {
        match self {
            Observer::None => vec![],
            Observer::Jfr => vec![jfr_flag(&jvm.recording())],
            Observer::Jvmti => vec![format!(
                "-agentpath:{}=interval={JVMTI_INTERVAL_BYTES}",
                agent.display()
            )],
        }
    }
}

/// The loop's configurations: stock with adaptive and with 1 KiB TLABs, HABs with 1 KiB
/// TLABs (refilled by C2's stub), per-CPU LABs flipping with TLABs and in every cycle.
pub fn loop_configs() -> Vec<JvmConfig> {
    vec![
        JvmConfig::new(STOCK, &["-XX:-UseHAB"]),
        JvmConfig::new(STOCK_SMALL, &["-XX:-UseHAB"]).with(SMALL_TLAB_FLAGS),
        JvmConfig::new(HABS_SMALL, &["-XX:+UseHAB"]).with(SMALL_TLAB_FLAGS),
        JvmConfig::new(CPU_LABS, &["-XX:+UseHABCPULABs"]),
        JvmConfig::new(CPU_LABS_ALWAYS, &["-XX:+UseHABCPULABs", "-XX:-HABFlip"]),
    ]
}

const STOCK_SMALL: &str = "stock, 1 KiB TLABs";

/// The chat's configurations: stock, stock without TLABs (the collections per-CPU LABs aim
/// at), per-CPU LABs flipping with TLABs.
pub fn chat_configs() -> Vec<JvmConfig> {
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
    pub config: JvmConfig,
    pub observer: Observer,
    pub ns_per_object: Vec<f64>,
    pub sampling: Vec<Sampling>,
}

/// One chat configuration under one observer, over the repetitions.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChatPoint {
    pub collector: Collector,
    pub config: JvmConfig,
    pub observer: Observer,
    pub messages_per_sec: Vec<f64>,
    pub collections: Vec<u64>,
}

impl ConfigPoint for LoopPoint {
    type Setting = (Collector, Observer);
    fn setting(&self) -> (Collector, Observer) {
        (self.collector, self.observer)
    }
    fn config(&self) -> &JvmConfig {
        &self.config
    }
}

impl ConfigPoint for ChatPoint {
    type Setting = (Collector, Observer);
    fn setting(&self) -> (Collector, Observer) {
        (self.collector, self.observer)
    }
    fn config(&self) -> &JvmConfig {
        &self.config
    }
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
fn run_loop(
    runs: &ObservedRuns,
    point: &LoopPoint,
    jvm: &Jvm,
    inputs: &ObservedInputs,
) -> Result<(f64, Option<Sampling>), String> {
    let _ = std::fs::remove_file(jvm.recording());
    let output = jvm
        .run()
        .options([
            point.collector.flag().to_string(),
            format!("-Xmn{LOOP_YOUNG}"),
        ])
        .options(&point.config.flags)
        .options(point.observer.flags(jvm, &inputs.agent))
        .program(
            &inputs.bench_jar,
            "hab.bench.Observed",
            [runs.rounds.to_string(), runs.objects_millions.to_string()],
        )
        .run(&jvm.gc_log())?
        .succeeded()?;
    let ns = output.stderr_value::<f64>("ns_per_object_median")?;
    let allocated = output.stderr_value::<u64>("thread_allocated_bytes")?;
    let missing = |what: &str| format!("{}: no {what} in {:?}", output.command, output.stderr);
    let sampling = match point.observer {
        Observer::None => None,
        Observer::Jvmti => {
            Some(jvmti_sampling(&output.stderr, allocated).ok_or_else(|| missing("sampler line"))?)
        }
        Observer::Jfr => {
            let recording = jvm.recording();
            let samples = jvm
                .run()
                .program(
                    &inputs.bench_jar,
                    "hab.bench.JfrSamples",
                    [recording.as_os_str(), "main".as_ref()],
                )
                .run(&jvm.gc_log())?
                .succeeded()?;
            Some(jfr_sampling(&samples.stdout, allocated).ok_or_else(|| missing("jfr_samples"))?)
        }
    };
    Ok((ns, sampling))
}

/// What an observed run needs besides the JVM.
pub(crate) struct ObservedInputs {
    /// `bench/jvm`'s jar.
    bench_jar: PathBuf,
    /// The JVMTI sampler, built for the JVM.
    agent: PathBuf,
}

/// A round runs every loop point, then every chat point.
impl Rounds for ObservedRuns {
    type Inputs = ObservedInputs;

    fn runs_per_round(&self) -> usize {
        self.loops.len() + self.chats.len()
    }

    fn describe(&self, index: usize) -> String {
        let (what, collector, config, observer) = match self.loops.get(index) {
            Some(p) => ("loop", p.collector, &p.config, p.observer),
            None => {
                let p = &self.chats[index - self.loops.len()];
                ("chat", p.collector, &p.config, p.observer)
            }
        };
        format!(
            "observed {what}, {}, {}, {}",
            collector.name(),
            config.label,
            observer.name()
        )
    }

    fn run(&mut self, index: usize, jvm: &Jvm, inputs: &ObservedInputs) -> Result<(), String> {
        if index < self.loops.len() {
            let (ns, sampling) = run_loop(self, &self.loops[index], jvm, inputs)?;
            let point = &mut self.loops[index];
            point.ns_per_object.push(ns);
            point.sampling.extend(sampling);
        } else {
            let point = &mut self.chats[index - self.loops.len()];
            let config = point
                .config
                .clone()
                .with(point.observer.flags(jvm, &inputs.agent));
            let run = hotspot_chat::run_once(
                jvm,
                &inputs.bench_jar,
                point.collector,
                &config,
                self.messages,
            )?;
            point.messages_per_sec.push(run.messages_per_sec);
            point.collections.push(run.collections);
        }
        Ok(())
    }
}

/// The runs of [`measure`] for `collectors`.
pub fn run_count(collectors: &[Collector], repeat: usize) -> usize {
    collectors.len() * (loop_configs().len() + chat_configs().len()) * Observer::ALL.len() * repeat
}

/// Runs the loop and the chat in every configuration under every observer, each collector of
/// `collectors`, `repeat` rounds.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    jdk: &Path,
    bench_jar: &Path,
    collectors: &[Collector],
    rounds: usize,
    objects_millions: usize,
    messages: usize,
    repeat: usize,
    progress: &mut Progress<'_, ObservedRuns>,
) -> Result<ObservedRuns, String> {
    let jvm = Jvm::open(jdk, "observed")?;
    let inputs = ObservedInputs {
        bench_jar: bench_jar.to_path_buf(),
        agent: build_agent(jdk, jvm.dir())?,
    };
    let mut runs = ObservedRuns {
        machine: jvm.machine.clone(),
        jvm: jvm.version.clone(),
        rounds,
        objects_millions,
        messages,
        repeat,
        loops: vec![],
        chats: vec![],
    };
    for &collector in collectors {
        for observer in Observer::ALL {
            for config in loop_configs() {
                runs.loops.push(LoopPoint {
                    collector,
                    config,
                    observer,
                    ns_per_object: vec![],
                    sampling: vec![],
                });
            }
            for config in chat_configs() {
                runs.chats.push(ChatPoint {
                    collector,
                    config,
                    observer,
                    messages_per_sec: vec![],
                    collections: vec![],
                });
            }
        }
    }
    run_rounds(&mut runs, &jvm, &inputs, repeat, progress)?;
    Ok(runs)
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
/// set on; `hab hotspot-hab observed --collector g1` runs G1's).
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
