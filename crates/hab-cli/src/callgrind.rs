//! Instruction counts under `valgrind --tool=callgrind`: repeatable on a shared, noisy machine
//! where time is not.
//!
//! Instructions per unit (object, call) = (count with `large` units − count with `small` units)
//! / (`large` − `small`): set-up, thread start and exit cancel out; refills and collections are
//! amortised into the figure as they are in a real run.

use std::process::Command;

/// Where the unit count goes in a command line.
pub const COUNT: &str = "{N}";

/// Whether valgrind can be run here.
pub fn available() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Instructions per unit of `hab <args>`, where one argument is [`COUNT`].
pub fn instructions_per_unit(args: &[&str], small: u64, large: u64) -> Result<f64, String> {
    instructions_per_unit_with(&[], args, small, large)
}

/// [`instructions_per_unit`] with environment variables set for `hab`.
pub fn instructions_per_unit_with(
    env: &[(&str, &str)],
    args: &[&str],
    small: u64,
    large: u64,
) -> Result<f64, String> {
    let small_count = instructions(env, args, small)?;
    let large_count = instructions(env, args, large)?;
    Ok((large_count as f64 - small_count as f64) / (large - small) as f64)
}

/// The command line a figure comes from, for the report.
pub fn command_line(args: &[&str]) -> String {
    format!(
        "valgrind --tool=callgrind hab {}",
        args.join(" ").replace(COUNT, "N")
    )
}

fn instructions(env: &[(&str, &str)], args: &[&str], units: u64) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let units = units.to_string();
    let args = args
        .iter()
        .map(|arg| if *arg == COUNT { units.as_str() } else { arg });
    let output = Command::new("valgrind")
        .envs(env.iter().copied())
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(exe)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        // The program's own message says why (e.g. a CPU-id source valgrind does not emulate).
        let why = stderr.lines().find_map(|line| line.strip_prefix("hab: "));
        return Err(why.map_or_else(|| format!("valgrind failed: {stderr}"), str::to_string));
    }
    stderr
        .lines()
        .find_map(|line| line.split("Collected :").nth(1))
        .and_then(|count| count.trim().parse().ok())
        .ok_or_else(|| format!("no instruction count in callgrind's output: {stderr}"))
}
