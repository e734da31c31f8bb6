//! One run of HotSpot with HABs, for every HotSpot experiment of the report: the command
//! (the JVM's options, then the program), and what the run printed for programs: the
//! program's own `key=value` words, and the JVM's exit line, `hab-exit: key=value ...`
//! (`gc+tlab=info` at exit, HABs on or off; its keys in `docs/hotspot/design.md`). Nothing here
//! reads a sentence HotSpot prints for people.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// The word that starts the JVM's exit line.
const EXIT_LINE: &str = "hab-exit:";

/// The flag of per-CPU LABs, which JDK 25 lists as experimental.
const CPU_LABS_FLAG: &str = "-XX:+UseHABCPULABs";

/// A JVM to run: its options, then a program with its arguments.
#[derive(Clone, Debug)]
pub(crate) struct JavaRun {
    java: PathBuf,
    options: Vec<OsString>,
    program: Vec<OsString>,
}

impl JavaRun {
    /// The JVM `java` (the `bin/java` of a JDK), with no option yet.
    pub(crate) fn new(java: &Path) -> JavaRun {
        JavaRun {
            java: java.to_path_buf(),
            options: Vec::new(),
            program: Vec::new(),
        }
    }

    /// Adds JVM options.
    pub(crate) fn options<S: AsRef<OsStr>>(mut self, options: impl IntoIterator<Item = S>) -> Self {
        self.options
            .extend(options.into_iter().map(|o| o.as_ref().to_os_string()));
        self
    }

    /// Sets the program: `class` from `classpath`, with `args`.
    pub(crate) fn program<S: AsRef<OsStr>>(
        mut self,
        classpath: impl AsRef<OsStr>,
        class: &str,
        args: impl IntoIterator<Item = S>,
    ) -> Self {
        self.program = [OsStr::new("-cp"), classpath.as_ref(), OsStr::new(class)]
            .iter()
            .map(|s| s.to_os_string())
            .chain(args.into_iter().map(|a| a.as_ref().to_os_string()))
            .collect();
        self
    }

    /// Runs it with the JVM's exit line written to `log_file` (replaced), and waits. Fails
    /// when the JVM does not start or prints no exit line; a program that exits with an error
    /// is returned (see [`JavaOutput::succeeded`]).
    pub(crate) fn run(&self, log_file: &Path) -> Result<JavaOutput, String> {
        let _ = std::fs::remove_file(log_file);
        let mut command = Command::new(&self.java);
        if self.options.iter().any(|o| o == CPU_LABS_FLAG) {
            // An experimental flag on JDK 25; JDK 17 accepts the unlock too.
            command.arg("-XX:+UnlockExperimentalVMOptions");
        }
        command
            .args(&self.options)
            .arg(format!("-Xlog:gc+tlab=info:file={}", log_file.display()))
            .args(&self.program);
        let described = format!("{command:?}");
        let output = command
            .output()
            .map_err(|e| format!("{}: {e}", self.java.display()))?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let log = std::fs::read_to_string(log_file).unwrap_or_default();
        let _ = std::fs::remove_file(log_file);
        let exit = ExitFigures::parse(&log).ok_or_else(|| {
            format!(
                "{described}: no '{EXIT_LINE}' line ({}; a JVM without Hab's changes?): \
                 {stderr}{stdout}",
                output.status
            )
        });
        let output = JavaOutput {
            command: described,
            status: output.status,
            stdout,
            stderr,
            exit: ExitFigures::default(),
        };
        match exit {
            Ok(exit) => Ok(JavaOutput { exit, ..output }),
            // A JVM that failed says why better than a missing line does.
            Err(_) if !output.status.success() => Err(output.failure()),
            Err(why) => Err(why),
        }
    }
}

/// What one run printed.
#[derive(Debug)]
pub(crate) struct JavaOutput {
    /// The command, for messages.
    pub(crate) command: String,
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    /// The JVM's exit line.
    pub(crate) exit: ExitFigures,
}

impl JavaOutput {
    /// The output of a run that exited with status 0, else why not.
    pub(crate) fn succeeded(self) -> Result<JavaOutput, String> {
        if self.status.success() {
            Ok(self)
        } else {
            Err(self.failure())
        }
    }

    fn failure(&self) -> String {
        format!(
            "{}: {}: {}{}",
            self.command, self.status, self.stderr, self.stdout
        )
    }

    /// The program's figure `key=value` on its standard error, else why not.
    pub(crate) fn stderr_value<T: std::str::FromStr>(&self, key: &str) -> Result<T, String> {
        value(&self.stderr, key)
            .ok_or_else(|| format!("{}: no {key} in {:?}", self.command, self.stderr))
    }
}

/// The first word `key=value` whose value parses, on any line of `text` (a line may hold
/// several such words).
pub(crate) fn value<T: std::str::FromStr>(text: &str, key: &str) -> Option<T> {
    text.lines().find_map(|line| {
        line.split_whitespace()
            .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))?
            .parse()
            .ok()
    })
}

/// The JVM's exit line: its figures in the order printed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ExitFigures {
    figures: Vec<(String, u64)>,
}

impl ExitFigures {
    /// The last exit line of a `gc+tlab` log (after the log's decorations); `None` when there
    /// is none, or a word of it is not `key=integer`.
    pub(crate) fn parse(log: &str) -> Option<ExitFigures> {
        let line = log.lines().rev().find(|line| line.contains(EXIT_LINE))?;
        let (_, words) = line.split_once(EXIT_LINE)?;
        let figures = words
            .split_whitespace()
            .map(|word| {
                let (key, value) = word.split_once('=')?;
                Some((key.to_string(), value.parse().ok()?))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(ExitFigures { figures })
    }

    /// The figure `key`, if the line has it.
    pub(crate) fn get(&self, key: &str) -> Option<u64> {
        self.figures
            .iter()
            .find_map(|(name, value)| (name == key).then_some(*value))
    }

    /// The figure `key`, 0 where the line has none (figures of a part that was off).
    fn figure(&self, key: &str) -> u64 {
        self.get(key).unwrap_or(0)
    }

    /// Collections that retired the TLABs (cycles in per-CPU LABs included).
    pub(crate) fn collections(&self) -> u64 {
        self.figure("collections")
    }

    /// The TLABs' tails over the run, at collections and at refills, in bytes.
    pub(crate) fn tlab_waste_bytes(&self) -> u64 {
        self.figure("tlab_gc_waste_bytes") + self.figure("tlab_refill_waste_bytes")
    }

    /// Each level's figures, lowest first (none without HABs), in the library's names.
    pub(crate) fn levels(&self) -> Vec<(String, hab::LevelStats)> {
        let mut levels: Vec<(String, hab::LevelStats)> = Vec::new();
        for (key, value) in &self.figures {
            let Some((level, name)) = key.split_once('.') else {
                continue;
            };
            if levels.last().is_none_or(|(last, _)| last != level) {
                levels.push((level.to_string(), hab::LevelStats::default()));
            }
            let stats = &mut levels.last_mut().expect("pushed").1;
            // A figure this library does not know (a newer JVM's) is left out.
            let _ = stats.set_figure(name, *value);
        }
        levels
    }

    /// The levels' buffer tails over the run, every level, in bytes.
    pub(crate) fn level_waste_bytes(&self) -> u64 {
        self.levels().iter().map(|(_, s)| s.waste_bytes).sum()
    }

    /// The TLABs the levels left to the collector: larger than their buffers, or asked when the
    /// space had no room for a buffer.
    pub(crate) fn tlabs_from_the_collector(&self) -> u64 {
        self.figure("larger_tlabs") + self.figure("declined_tlabs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "[0.01s][info][gc,tlab] HAB: levels cpu:1M\n\
        [2.0s][info][gc,tlab] HAB total: 7 retires (6 at collections); ...\n\
        [2.0s][info][gc,tlab] hab-exit: use_hab=1 collections=6 tlab_gc_waste_bytes=4096 \
        tlab_refill_waste_bytes=1024 retires=7 hab_collections=6 larger_tlabs=3 \
        larger_tlab_bytes=99 declined_tlabs=2 tlabs_past_levels=0 cpu.allocs=10 \
        cpu.waste_bytes=800 cpu.buffer_bytes=1048576 core.allocs=2 core.waste_bytes=200\n";

    #[test]
    fn the_exit_line_gives_every_figure() {
        let exit = ExitFigures::parse(LOG).expect("an exit line");
        assert_eq!(exit.collections(), 6);
        assert_eq!(exit.tlab_waste_bytes(), 5120);
        assert_eq!(exit.tlabs_from_the_collector(), 5);
        assert_eq!(exit.get("use_hab"), Some(1));
        assert_eq!(exit.get("flips"), None);
        let levels = exit.levels();
        let names: Vec<&str> = levels.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["cpu", "core"]);
        assert_eq!(levels[0].1.allocs, 10);
        assert_eq!(levels[0].1.buffer_bytes, 1 << 20);
        assert_eq!(exit.level_waste_bytes(), 1000);
    }

    #[test]
    fn stock_runs_have_no_levels_and_bad_lines_none() {
        let stock = "[1s][info][gc,tlab] hab-exit: use_hab=0 collections=3 \
                     tlab_gc_waste_bytes=10 tlab_refill_waste_bytes=0";
        let exit = ExitFigures::parse(stock).unwrap();
        assert!(exit.levels().is_empty());
        assert_eq!((exit.collections(), exit.level_waste_bytes()), (3, 0));
        assert_eq!(ExitFigures::parse("HAB total: 7 retires"), None);
        assert_eq!(ExitFigures::parse("hab-exit: collections=x"), None);
        assert_eq!(ExitFigures::parse("hab-exit: collections"), None);
    }

    #[test]
    fn values_are_words_of_any_line() {
        let text = "warm-up\nmedian_ms=12.5 checksum=ab12\ncollections=4\n";
        assert_eq!(value::<f64>(text, "median_ms"), Some(12.5));
        assert_eq!(value::<String>(text, "checksum").as_deref(), Some("ab12"));
        assert_eq!(value::<u64>(text, "collections"), Some(4));
        assert_eq!(value::<u64>(text, "median"), None);
    }
}
