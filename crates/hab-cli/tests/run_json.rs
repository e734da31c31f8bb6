//! `hab run --json` reports the same statistics in every mode: `allocated_bytes` (the bytes of
//! the objects, counted by the library in LABs of every kind and outside them) and
//! `waste_bytes` (the fillers). Each repetition ends with a collection that retires every LAB,
//! so `allocated_bytes` is exactly threads × objects × object size.

use std::process::Command;

use serde_json::Value;

/// Runs `hab run ... --json` with `env` set and returns its one JSON line.
fn run_json(args: &[&str], env: &[(&str, &str)]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_hab"))
        .arg("run")
        .args(args)
        .arg("--json")
        .envs(env.iter().copied())
        .output()
        .expect("hab starts");
    assert!(
        output.status.success(),
        "hab run {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
    let line = stdout
        .lines()
        .find(|line| line.starts_with('{'))
        .expect("a JSON line");
    serde_json::from_str(line).expect("valid JSON")
}

fn number(result: &Value, key: &str) -> u64 {
    result[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is a number in {result}"))
}

/// A run's own arguments and environment.
type Run<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);

#[test]
fn allocated_bytes_are_the_objects_bytes_in_every_mode() {
    let (threads, objects, size) = (2u64, 100_000u64, 24u64);
    let common = [
        "--workload",
        "alloc-object",
        "--threads",
        "2",
        "--objects",
        "100000",
        "--object-size",
        "24",
        "--repeat",
        "2",
        "--warmup",
        "0",
        "--tlab-size",
        "4KiB",
    ];
    let runs: &[Run] = &[
        (&["--mode", "shared"], &[]),
        (&["--mode", "tlab"], &[]),
        (&["--mode", "hab", "--middle", "cpu:64KiB,core:256KiB"], &[]),
        (&["--mode", "plab"], &[]),
        // Per-CPU compare-and-swap buffers instead of restartable LABs.
        (&["--mode", "plab"], &[("HAB_RSEQ", "off")]),
        (&["--mode", "flip"], &[]),
    ];
    for (mode, env) in runs {
        let args: Vec<&str> = common.iter().chain(mode.iter()).copied().collect();
        let result = run_json(&args, env);
        let context = format!("{} {env:?}", mode.join(" "));
        assert_eq!(
            number(&result, "allocated_bytes"),
            threads * objects * size,
            "{context}"
        );
        let waste = number(&result, "waste_bytes");
        if mode[1] == "shared" {
            assert_eq!(waste, 0, "{context}: nothing is wasted without LABs");
        } else {
            assert!(waste > 0, "{context}: LABs leave tails at collections");
        }
    }
}

#[test]
fn vm_workloads_report_the_same_statistics() {
    let result = run_json(
        &[
            "--workload",
            "binary-trees",
            "--depth",
            "10",
            "--mode",
            "tlab",
        ],
        &[],
    );
    let allocated = number(&result, "allocated_bytes");
    assert!(allocated > 0, "{result}");
    let totals = &result["totals"];
    assert_eq!(
        allocated,
        number(totals, "tlab_allocated_bytes") + number(totals, "slow_alloc_bytes"),
        "tlab mode: objects are in TLABs or outside them: {result}"
    );
    assert!(
        number(&result, "waste_bytes") >= number(&result, "tlab_waste_bytes"),
        "{result}"
    );
}
