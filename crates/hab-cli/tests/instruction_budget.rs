//! Instruction budgets of the allocation paths, counted with `valgrind --tool=callgrind` on the
//! release `hab` (instructions are deterministic where time is not): the fast paths per
//! object, a TLAB refill from the global heap, what a middle level adds to a refill, and the
//! `shared` mode's per-object path. The test fails when a count exceeds its budget, so no
//! change can make these paths longer unnoticed; it prints every count beside its budget.
//!
//! Instructions per object = (count for 400 000 objects − count for 200 000) / 200 000, as in
//! docs/performance.md; per refill = (per object with 256-byte TLABs − per object with 256 KiB TLABs)
//! × 16 (a 256-byte TLAB holds 16 objects of 16 bytes). The zeroing-ahead row runs where the
//! heap's 2 MiB are reused after the first collection, so its TLABs are zeroed a step ahead. `cpu-lab` and the restartable `cpu`
//! level run with `HAB_RSEQ=unregistered` (valgrind does not implement rseq).
//!
//! It needs valgrind and a release build:
//! `cargo test --release -p hab-cli --test instruction_budget -- --ignored --nocapture`
//! (CI runs it so).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Instructions in one callgrind run of `program args`, with `HAB_RSEQ=unregistered`.
fn instructions(program: &Path, args: &[&str]) -> u64 {
    let output = Command::new("valgrind")
        .env("HAB_RSEQ", "unregistered")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(program)
        .args(args)
        .output()
        .expect("valgrind runs (install it: apt-get install valgrind)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{program:?} {args:?}: {stderr}");
    stderr
        .lines()
        .find_map(|line| line.split("Collected :").nth(1))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in callgrind's output: {stderr}"))
}

/// Per-object counts of `hab run --workload alloc-object --object-size 16 <args>`.
fn per_object(args: &[&str]) -> f64 {
    let count = |objects: u64| -> u64 {
        let objects = objects.to_string();
        let mut run = vec!["run", "--workload", "alloc-object", "--object-size", "16"];
        run.extend_from_slice(&["--objects", &objects, "--repeat", "1", "--warmup", "0"]);
        run.push("--no-compute");
        run.extend_from_slice(args);
        instructions(Path::new(env!("CARGO_BIN_EXE_hab")), &run)
    };
    (count(400_000) as f64 - count(200_000) as f64) / 200_000.0
}

/// `alloc_loop.c` built against a `libhab_capi.a` that counts the restartable sections without
/// a registration, as the Rust rows do.
fn c_alloc_loop() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = workspace.join("target/instruction-counting");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let built = Command::new(cargo)
        .current_dir(&workspace)
        .args(["build", "--release", "-p", "hab-capi", "--features"])
        .arg("instruction-counting")
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("cargo runs");
    assert!(built.success(), "cargo build -p hab-capi failed");
    let program = target.join("alloc_loop");
    let compiled = Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(workspace.join("crates/hab-capi/include"))
        .arg(workspace.join("crates/hab-capi/bench/alloc_loop.c"))
        .arg(target.join("release/libhab_capi.a"))
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&program)
        .status()
        .expect("cc runs");
    assert!(compiled.success(), "cc alloc_loop.c failed");
    program
}

/// Per-object counts of the C loop: `alloc_loop N <args>`.
fn c_per_object(program: &Path, args: &[&str]) -> f64 {
    let count = |objects: &str| {
        let mut run = vec![objects];
        run.extend_from_slice(args);
        instructions(program, &run)
    };
    (count("400000") as f64 - count("200000") as f64) / 200_000.0
}

/// A figure, what it may be at most now, and the goal it is on its way to (none: hold it).
struct Budget {
    what: &'static str,
    count: f64,
    budget: f64,
    goal: Option<f64>,
}

#[test]
#[ignore = "counts a release build under callgrind: cargo test --release -p hab-cli --test \
            instruction_budget -- --ignored --nocapture"]
fn the_allocation_paths_stay_within_their_budgets() {
    if cfg!(debug_assertions) {
        panic!("instruction budgets hold for a release build: run with --release");
    }
    const REFILL: [&str; 4] = ["--zero", "never", "--heap", "64MiB"];
    let refill = |tlab: &str, extra: &[&str]| {
        let mut args = vec!["--tlab-size", tlab];
        args.extend_from_slice(&REFILL);
        args.extend_from_slice(extra);
        per_object(&args)
    };
    let per_refill = |small: f64, large: f64| (small - large) * 16.0;
    let tlab_large = refill("256KiB", &["--mode", "tlab"]);
    let tlab_small = refill("256", &["--mode", "tlab"]);
    let global_refill = per_refill(tlab_small, tlab_large);
    let level = |middle: &str| {
        let large = refill("256KiB", &["--mode", "hab", "--middle", middle]);
        let small = refill("256", &["--mode", "hab", "--middle", middle]);
        per_refill(small, large)
    };
    let cpu_level = level("cpu:256KiB");
    let core_level = level("core:1MiB");
    let c_loop = c_alloc_loop();
    let budgets = [
        Budget {
            what: "tlab fast path, per object (256 KiB TLABs, docs/performance.md's run)",
            count: per_object(&["--mode", "tlab", "--tlab-size", "256KiB"]),
            budget: 11.1,
            goal: Some(11.0),
        },
        Budget {
            what: "a TLAB refill from the global heap (tlab, 256-byte TLABs)",
            count: global_refill,
            budget: 61.0,
            goal: Some(60.0),
        },
        Budget {
            what: "a TLAB refill through cpu:256KiB (restartable)",
            count: cpu_level,
            budget: 79.0,
            goal: Some(85.0),
        },
        Budget {
            what: "a TLAB refill through core:1MiB (compare-and-swap)",
            count: core_level,
            budget: 90.0,
            goal: Some(95.0),
        },
        Budget {
            what: "cpu-lab, per object (--heap 16MiB)",
            count: per_object(&["--mode", "cpu-lab", "--heap", "16MiB"]),
            // The section reads the offset of its index field from the slot (one load; a
            // fourth register instead made the loop spill three).
            budget: 18.2,
            goal: Some(15.0),
        },
        Budget {
            what: "C: hab_alloc in tlab mode, per object (alloc_loop.c)",
            count: c_per_object(&c_loop, &["tlab"]),
            budget: 11.1,
            goal: Some(11.0),
        },
        Budget {
            what: "C: hab_alloc_cpu_lab_first in cpu-lab mode, per object",
            count: c_per_object(&c_loop, &["cpu-lab", "cpu-lab-first"]),
            // At most 7.5 over the C tlab row.
            budget: 17.2,
            goal: Some(17.0),
        },
        Budget {
            what: "C: hab_alloc in cpu-lab mode (the TLAB's compare first)",
            count: c_per_object(&c_loop, &["cpu-lab"]),
            budget: 23.2,
            goal: None,
        },
        Budget {
            what: "shared, per object (--heap 16MiB)",
            count: per_object(&["--mode", "shared", "--heap", "16MiB"]),
            budget: 48.0,
            goal: Some(30.0),
        },
        Budget {
            what: "tlab, zeroed ahead in reused memory, per object (--heap 2MiB)",
            count: per_object(&["--mode", "tlab", "--heap", "2MiB"]),
            budget: 13.6,
            goal: None,
        },
    ];
    println!(
        "{:<62} {:>9} {:>8} {:>6}",
        "instructions", "count", "budget", "goal"
    );
    for budget in &budgets {
        let goal = budget
            .goal
            .map_or("—".to_string(), |goal| format!("{goal:.1}"));
        println!(
            "{:<62} {:>9.2} {:>8.1} {:>6}",
            budget.what, budget.count, budget.budget, goal
        );
    }
    let over: Vec<_> = budgets
        .iter()
        .filter(|budget| budget.count > budget.budget)
        .map(|budget| format!("{}: {:.2} > {}", budget.what, budget.count, budget.budget))
        .collect();
    assert!(over.is_empty(), "over budget: {over:#?}");
}
