//! What every HotSpot experiment shares (the javac grid, the many-threads chat, the observed
//! JVM, the real applications): one type for a JVM configuration and the flags they have in
//! common; the JVM with the files its runs write; one loop over rounds and points, which
//! counts rounds from 1 and saves after every round; how a point is found by its setting and
//! label; and the report's one path for an experiment that is skipped (the quick scale, no JVM
//! with HABs) or failed.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::experiment::Context;
use super::hotspot_run::JavaRun;

/// HotSpot's fixed 1 KiB TLABs, below its smallest by default (refilled from the per-CPU
/// buffer with HABs, from the young generation without).
pub(crate) const SMALL_TLAB_FLAGS: [&str; 3] =
    ["-XX:TLABSize=1k", "-XX:MinTLABSize=1k", "-XX:-ResizeTLAB"];

/// The flag that starts JFR's default recording (which samples allocations) into `recording`.
pub(crate) fn jfr_flag(recording: &Path) -> String {
    format!(
        "-XX:StartFlightRecording:filename={},settings=default",
        recording.display()
    )
}

/// A JVM configuration: its label in tables, and its flags beyond the collector's and the
/// heap's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ConfigRecord")]
pub struct JvmConfig {
    pub label: String,
    pub flags: Vec<String>,
}

impl JvmConfig {
    pub(crate) fn new(label: &str, flags: &[&str]) -> JvmConfig {
        JvmConfig {
            label: label.into(),
            flags: flags.iter().map(|f| f.to_string()).collect(),
        }
    }

    /// The same configuration with `flags` after its own.
    pub(crate) fn with<S: ToString>(mut self, flags: impl IntoIterator<Item = S>) -> JvmConfig {
        self.flags.extend(flags.into_iter().map(|f| f.to_string()));
        self
    }

    /// HotSpot as shipped: the build's own TLAB path, no library loaded.
    pub(crate) fn is_stock(&self) -> bool {
        self.flags.iter().any(|f| f == "-XX:-UseHAB")
    }

    /// Its `-XX:HABLevels`, if it gives them.
    pub(crate) fn levels(&self) -> Option<&str> {
        self.flags
            .iter()
            .find_map(|f| f.strip_prefix("-XX:HABLevels="))
    }
}

/// A configuration as recordings hold it: its flags, or (the javac grid's recordings before
/// one type held every configuration) its levels and CPU-id source.
#[derive(Deserialize)]
#[serde(untagged)]
enum ConfigRecord {
    Flags {
        label: String,
        flags: Vec<String>,
    },
    Levels {
        label: String,
        levels: Option<String>,
        cpu_id: String,
    },
}

impl From<ConfigRecord> for JvmConfig {
    fn from(record: ConfigRecord) -> JvmConfig {
        match record {
            ConfigRecord::Flags { label, flags } => JvmConfig { label, flags },
            ConfigRecord::Levels {
                label,
                levels: None,
                ..
            } => JvmConfig::new(&label, &["-XX:-UseHAB"]),
            ConfigRecord::Levels {
                label,
                levels: Some(levels),
                cpu_id,
            } => JvmConfig::new(&label, &["-XX:+UseHAB"]).with([
                format!("-XX:HABLevels={levels}"),
                format!("-XX:HABCpuId={cpu_id}"),
            ]),
        }
    }
}

/// A point of an experiment: one configuration in one setting (a collector, an observer, an
/// application...), over the rounds.
pub(crate) trait ConfigPoint {
    /// What tells the points of one configuration apart.
    type Setting: PartialEq;
    fn setting(&self) -> Self::Setting;
    fn config(&self) -> &JvmConfig;
}

/// The point of `points` in `setting` whose configuration is labelled `label`.
pub(crate) fn find<'a, P: ConfigPoint>(
    points: &'a [P],
    setting: P::Setting,
    label: &str,
) -> Option<&'a P> {
    points
        .iter()
        .find(|p| p.config().label == label && p.setting() == setting)
}

/// Why HotSpot with HABs does not run: the JVM is not there.
pub const NOT_BUILT: &str = "the JVM with HABs is not built (jvm/hotspot/build.sh builds it)";

/// The JVM with HABs, if `jvm/hotspot/build.sh` built it.
pub fn built_jdk() -> Option<PathBuf> {
    let jdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/hotspot-hab/jdk");
    jdk.join("bin/java").exists().then_some(jdk)
}

/// A JDK an experiment runs, with a folder of this process's for the files its runs write
/// (removed when the `Jvm` is dropped).
pub(crate) struct Jvm {
    pub java: PathBuf,
    /// `java -version`'s last line.
    pub version: String,
    /// The machine, as the report describes it.
    pub machine: String,
    dir: PathBuf,
}

impl Jvm {
    /// `jdk` for the experiment `name` (which names its folder).
    pub(crate) fn open(jdk: &Path, name: &str) -> Result<Jvm, String> {
        let java = jdk.join("bin/java");
        let version = version(&java)?;
        let dir = std::env::temp_dir().join(format!("hab-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Jvm {
            java,
            version,
            machine: crate::machine::describe().join("; "),
            dir,
        })
    }

    /// A run of this JVM, with no option yet.
    pub(crate) fn run(&self) -> JavaRun {
        JavaRun::new(&self.java)
    }

    /// The `gc+tlab` log of the run in progress, for its exit line.
    pub(crate) fn gc_log(&self) -> PathBuf {
        self.dir.join("gc.log")
    }

    /// Where a run's JFR recording goes.
    pub(crate) fn recording(&self) -> PathBuf {
        self.dir.join("recording.jfr")
    }

    /// The folder, for other files the experiment makes (an agent).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The JVM's version line.
fn version(java: &Path) -> Result<String, String> {
    let output = Command::new(java)
        .arg("-version")
        .output()
        .map_err(|e| format!("{}: {e}", java.display()))?;
    Ok(String::from_utf8_lossy(&output.stderr)
        .lines()
        .last()
        .unwrap_or("")
        .to_string())
}

/// An experiment's runs as rounds: each round runs every point once, back to back, in the
/// same order, so that a slow spell of a shared machine falls on every configuration alike.
pub(crate) trait Rounds {
    /// What a run needs besides the JVM (a jar, a classpath, an agent).
    type Inputs;
    /// The runs of one round.
    fn runs_per_round(&self) -> usize;
    /// What run `index` of a round is, for the progress line.
    fn describe(&self, index: usize) -> String;
    /// Runs run `index` once on `jvm` and keeps what it gave in its point.
    fn run(&mut self, index: usize, jvm: &Jvm, inputs: &Self::Inputs) -> Result<(), String>;
}

/// Where the runner reports: before each run (what it is), and after each round (the runs so
/// far, to keep them should the rest not finish).
pub(crate) struct Progress<'a, R> {
    step: Box<dyn FnMut(&str) + 'a>,
    saved: Box<Saved<'a, R>>,
}

/// What keeps the runs after a round.
type Saved<'a, R> = dyn FnMut(&R) -> Result<(), String> + 'a;

impl<'a, R> Progress<'a, R> {
    pub(crate) fn new(
        step: impl FnMut(&str) + 'a,
        saved: impl FnMut(&R) -> Result<(), String> + 'a,
    ) -> Progress<'a, R> {
        Progress {
            step: Box::new(step),
            saved: Box::new(saved),
        }
    }

    /// `[done/total] what` on standard error before each run, and `saved` after each round.
    pub(crate) fn counting(
        total: usize,
        saved: impl FnMut(&R) -> Result<(), String> + 'a,
    ) -> Progress<'a, R> {
        let mut done = 0;
        Progress::new(
            move |what| {
                done += 1;
                eprintln!("[{done}/{total}] {what}");
            },
            saved,
        )
    }

    /// The report's progress bar, one step per run; nothing saved.
    pub(crate) fn bar(progress: &'a indicatif::ProgressBar) -> Progress<'a, R> {
        Progress::new(
            |what| {
                progress.set_message(what.to_string());
                progress.inc(1);
            },
            |_| Ok(()),
        )
    }
}

/// Runs `rounds` rounds of `runs` on `jvm`, rounds counted from 1.
pub(crate) fn run_rounds<R: Rounds>(
    runs: &mut R,
    jvm: &Jvm,
    inputs: &R::Inputs,
    rounds: usize,
    progress: &mut Progress<'_, R>,
) -> Result<(), String> {
    for round in 1..=rounds {
        for index in 0..runs.runs_per_round() {
            (progress.step)(&format!("{} (round {round})", runs.describe(index)));
            runs.run(index, jvm, inputs)?;
        }
        (progress.saved)(runs)?;
    }
    Ok(())
}

/// The progress steps of a HotSpot experiment of the report that takes `runs` runs at this
/// scale (`None`: none at this scale): none where HotSpot does not run or is not built.
pub(super) fn report_steps(cx: &Context, runs: Option<usize>) -> usize {
    match runs {
        Some(runs) if cx.jvm_skipped.is_none() && built_jdk().is_some() => runs,
        _ => 0,
    }
}

/// A HotSpot experiment of the report measured by `measure` on the JVM with HABs and
/// `bench/jvm`'s jar, with `plan`, its plan at this scale: `None` where HotSpot does not run
/// in this report (the report says why once), else its runs or why there are none (the quick
/// scale skips it: no plan; the JVM is not built; it failed).
pub(super) fn report_runs<P, T>(
    cx: &Context,
    plan: Option<P>,
    measure: impl FnOnce(&Path, &Path, P) -> Result<T, String>,
) -> Option<Result<T, String>> {
    let bench_jar = cx.bench_jar.as_ref().filter(|_| cx.jvm_skipped.is_none())?;
    Some(match (plan, built_jdk()) {
        (None, _) => Err("the quick scale skips it".into()),
        (_, None) => Err(NOT_BUILT.into()),
        (Some(plan), Some(jdk)) => {
            measure(&jdk, bench_jar, plan).map_err(|why| format!("it failed: {why}"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_read_from_either_record() {
        let flags: JvmConfig =
            serde_json::from_str(r#"{"label":"stock, adaptive TLABs","flags":["-XX:-UseHAB"]}"#)
                .unwrap();
        assert!(flags.is_stock());
        let stock: JvmConfig =
            serde_json::from_str(r#"{"label":"stock","levels":null,"cpu_id":"rseq"}"#).unwrap();
        assert_eq!(stock, JvmConfig::new("stock", &["-XX:-UseHAB"]));
        let habs: JvmConfig = serde_json::from_str(
            r#"{"label":"cpu:256K (compare-and-swap)","levels":"cpu:256K","cpu_id":"getcpu"}"#,
        )
        .unwrap();
        assert_eq!(
            habs.flags,
            [
                "-XX:+UseHAB",
                "-XX:HABLevels=cpu:256K",
                "-XX:HABCpuId=getcpu"
            ]
        );
        assert_eq!((habs.is_stock(), habs.levels()), (false, Some("cpu:256K")));
        // Written back in the one form.
        let text = serde_json::to_string(&habs).unwrap();
        assert!(text.contains("\"flags\"") && !text.contains("cpu_id"));
    }

    struct Counted {
        points: Vec<Vec<usize>>,
    }

    impl Rounds for Counted {
        type Inputs = usize;
        fn runs_per_round(&self) -> usize {
            self.points.len()
        }
        fn describe(&self, index: usize) -> String {
            format!("point {index}")
        }
        fn run(&mut self, index: usize, _jvm: &Jvm, inputs: &usize) -> Result<(), String> {
            if self.points[index].len() == *inputs {
                return Err(format!("point {index} failed"));
            }
            let next = self.points[index].len() + 1;
            self.points[index].push(next);
            Ok(())
        }
    }

    #[test]
    fn rounds_run_every_point_in_order_and_save_after_each() {
        let jdk = std::env::temp_dir();
        let jvm = Jvm {
            java: jdk.join("no-java"),
            version: String::new(),
            machine: String::new(),
            dir: std::env::temp_dir().join(format!("hab-rounds-test-{}", std::process::id())),
        };
        let mut runs = Counted {
            points: vec![vec![], vec![]],
        };
        let mut steps = vec![];
        let mut saves = vec![];
        let mut progress = Progress::new(
            |what: &str| steps.push(what.to_string()),
            |r: &Counted| {
                saves.push(r.points.clone());
                Ok(())
            },
        );
        run_rounds(&mut runs, &jvm, &usize::MAX, 2, &mut progress).unwrap();
        drop(progress);
        assert_eq!(
            steps,
            [
                "point 0 (round 1)",
                "point 1 (round 1)",
                "point 0 (round 2)",
                "point 1 (round 2)"
            ]
        );
        assert_eq!(
            saves,
            [vec![vec![1], vec![1]], vec![vec![1, 2], vec![1, 2]]]
        );
        // A failed run stops the rounds; what the rounds before it gave was saved.
        let mut saved_rounds = 0;
        let mut progress = Progress::new(
            |_: &str| {},
            |_: &Counted| {
                saved_rounds += 1;
                Ok(())
            },
        );
        let mut runs = Counted {
            points: vec![vec![], vec![]],
        };
        let failed = run_rounds(&mut runs, &jvm, &1, 3, &mut progress);
        drop(progress);
        assert_eq!(failed, Err("point 0 failed".to_string()));
        assert_eq!(saved_rounds, 1);
    }
}
