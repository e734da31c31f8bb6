//! Instruction counts under `valgrind --tool=callgrind`: repeatable on a shared, noisy machine
//! where time is not.
//!
//! Instructions per object = (count with `large` objects − count with `small` objects) /
//! (`large` − `small`): set-up, thread start and exit cancel out; refills and collections are
//! amortised into the figure as they are in a real run.

use std::process::Command;

/// Whether valgrind can be run here.
pub fn available() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Instructions per object of `hab run <args>` (one repetition, no warm-up, no compute loop).
pub fn instructions_per_object(args: &[&str], small: usize, large: usize) -> Result<f64, String> {
    let small_count = instructions(args, small)?;
    let large_count = instructions(args, large)?;
    Ok((large_count as f64 - small_count as f64) / (large - small) as f64)
}

/// The command line the figure comes from, for the report.
pub fn command_line(args: &[&str]) -> String {
    format!(
        "valgrind --tool=callgrind hab run {} --objects N --repeat 1 --warmup 0 --no-compute",
        args.join(" ")
    )
}

fn instructions(args: &[&str], objects: usize) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let output = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(exe)
        .arg("run")
        .args(args)
        .args([
            "--objects",
            &objects.to_string(),
            "--repeat",
            "1",
            "--warmup",
            "0",
            "--no-compute",
        ])
        .output()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("valgrind failed: {stderr}"));
    }
    stderr
        .lines()
        .find_map(|line| line.split("Collected :").nth(1))
        .and_then(|count| count.trim().parse().ok())
        .ok_or_else(|| format!("no instruction count in callgrind's output: {stderr}"))
}
