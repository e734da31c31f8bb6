//! Bad input to the `hab` command: every case exits 2 (a usage error) within a time limit,
//! with a message that names the user's own flag, and never panics, aborts or hangs. The
//! table in docs/reliability.md ("The `hab` command") lists the same cases.
//!
//! Also the container reproduction of per-CPU LABs: `/sys/devices/system/cpu` masked and the
//! process on CPU 1, where the machine allows `unshare`.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Runs `hab` with `args`, failing the test if it is still running after `limit`.
fn hab(args: &[&str], limit: Duration) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_hab"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hab starts");
    let pid = child.id();
    let (done, output) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    match output.recv_timeout(limit) {
        Ok(output) => output.expect("output"),
        Err(_) => {
            // SAFETY: kill has no memory-safety preconditions; `pid` is the child's.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("hab {}: still running after {limit:?}", args.join(" "));
        }
    }
}

/// (arguments, a piece of the message it must print)
const CASES: &[(&str, &str)] = &[
    (
        "run --objects 4611686018427387904 --object-size 8",
        "--objects 4611686018427387904 × --object-size 8 overflows",
    ),
    (
        "run --objects 1152921504606846976 --object-size 16",
        "--object-size 16 overflows",
    ),
    (
        "run --object-size 99999999999 --objects 10",
        "of memory this process may use",
    ),
    ("run --threads 0", "--threads 0: must be at least 1"),
    ("run --threads 5000", "--threads 5000: at most 4096"),
    ("run --objects 0", "--objects 0: must be at least 1"),
    ("run --repeat 0", "--repeat 0: must be at least 1"),
    (
        "run --warmup 18446744073709551615",
        "--warmup 18446744073709551615: at most 10000",
    ),
    (
        "run --repeat 18446744073709551615",
        "--repeat 18446744073709551615: at most 10000",
    ),
    (
        "run --repeat 1000000000000",
        "--repeat 1000000000000: at most 10000",
    ),
    (
        "run --warmup 1000000000000 --workload binary-trees",
        "--warmup 1000000000000: at most 10000",
    ),
    (
        "run --heap 8",
        "--heap 8B: smaller than one object (--object-size 16)",
    ),
    (
        "run --mode hab --middle cpu:0",
        "--middle: cpu:0B is not a positive",
    ),
    (
        "run --mode hab --middle core:1K,core:2K",
        "--middle core:1KiB,core:2KiB: the lowest level's buffer (core:1KiB) is smaller",
    ),
    (
        "run --mode hab --middle core:8",
        "--middle core:8B: the lowest level's buffer (core:8B) is smaller",
    ),
    (
        "run --mode hab --middle package:16TiB",
        "--middle package:16TiB",
    ),
    (
        "run --topology 18446744073709551615x1x1",
        "--topology: topology spec",
    ),
    (
        "run --workload javac-like --objects 18446744073709551615",
        "--objects 18446744073709551615: at most 1000000000",
    ),
    (
        "hotspot-hab javac --threads 0",
        "--threads 0: must be at least 1",
    ),
    (
        "hotspot-hab javac --compiles 0",
        "--compiles 0: must be at least 1",
    ),
    (
        "hotspot-hab javac --repeat 0",
        "--repeat 0: must be at least 1",
    ),
    (
        "hotspot-hab javac --grid big",
        "--grid big: expected seed or small",
    ),
    (
        "hotspot-hab javac --out /proc/hab-cannot-write-here/runs.json",
        "--out /proc/hab-cannot-write-here/runs.json: cannot write there",
    ),
    (
        "hotspot-hab javac --collector serial",
        "\"serial\": expected parallel or g1",
    ),
    (
        "hotspot-hab javac --from /nonexistent/runs.json",
        "--from /nonexistent/runs.json: No such file",
    ),
    (
        "hotspot-hab chat --messages 0",
        "--messages 0: must be at least 1",
    ),
    ("hotspot-hab chat --loop-rounds 5", "'--loop-rounds'"),
    (
        "hotspot-hab chat --from a.json --out x.json",
        "cannot be used with",
    ),
    (
        "hotspot-hab observed --loop-objects-millions 0",
        "--loop-objects-millions 0: must be at least 1",
    ),
    (
        "hotspot-hab observed --collector zgc",
        "\"zgc\": expected parallel or g1",
    ),
    (
        "hotspot-hab apps --app nope",
        "--app nope: the applications are h2, luindex",
    ),
    ("hotspot-hab apps --young medium", "roomy or tight"),
    ("hotspot-hab apps --jfr maybe", "on or off"),
    (
        "hotspot-hab apps --iterations 0",
        "--iterations 0: must be at least 1",
    ),
    (
        "hotspot-hab apps --from /nonexistent/runs.json",
        "--from /nonexistent/runs.json: No such file",
    ),
    (
        "hotspot-hab apps --pool /nonexistent/runs.json",
        "--pool /nonexistent/runs.json: No such file",
    ),
    (
        "hotspot-hab apps --pool a.json --from b.json",
        "cannot be used with",
    ),
    ("hotspot-hab javac --young tight", "'--young'"),
    ("hotspot-hab javac --pool a.json", "'--pool'"),
    ("hotspot-hab --control", "'--control'"),
    ("hotspot-hab", "javac"),
    ("run --object-size 12", "--object-size 12"),
    ("run --object-size 0", "--object-size 0: must be at least 1"),
    ("run --tlab-size 0", "--tlab-size: 0 bytes"),
    ("run --min-tlab 1TiB", "--min-tlab"),
    (
        "run --refill-waste-fraction 0",
        "--refill-waste-fraction: must be at least 1",
    ),
    ("run --waste-target-percent nan", "--waste-target-percent"),
    (
        "run --mode nonsense",
        "expected one of: shared, tlab, hab, cpu-lab, flip",
    ),
    ("run --mode hab --middle core:abc", "--middle"),
    (
        "run --mode hab --middle core:16TiB --objects 10",
        "--middle core:16TiB",
    ),
    (
        "run --mode hab --middle core:1MiB --topology 0x0x0 --objects 10",
        "--topology",
    ),
    ("run --cpu-id sim:2", "migration probability 2"),
    (
        "run --workload binary-trees --depth 4000000000",
        "--depth 4000000000: binary-trees supports trees at most 32 deep",
    ),
    (
        "run --workload gcbench --depth 64",
        "--depth 64: gcbench supports trees at most 32 deep",
    ),
    (
        "run --workload binary-trees --depth 30",
        "binary-trees at --depth 30",
    ),
    (
        "run --workload binary-trees --heap 16TiB",
        "--heap 16TiB (twice the allocation space, for copying)",
    ),
    (
        "run --workload chat --rooms 0",
        "--rooms 0: must be at least 1",
    ),
    (
        "run --workload chat --rooms 100000000000",
        "at most 204 rooms",
    ),
    (
        "run --workload warehouses --live-orders 0",
        "--live-orders 0: must be at least 1",
    ),
    (
        "run --workload warehouses --threads 100000",
        "--threads 100000: at most 4096",
    ),
    (
        "run --workload alloc-array --vm --objects 4611686018427387904",
        "--objects 4611686018427387904: at most 1000000000",
    ),
    (
        "run --workload binary-trees --prefetch",
        "--prefetch, --zero, --sample-every and --poll",
    ),
    (
        "report --quick --out /proc/hab-cannot-write-here",
        "--out /proc",
    ),
    ("report --quick --full", "cannot be used with"),
    (
        "report --quick --cpus 0",
        "\"0\": expected a number of CPUs from 1 to 256",
    ),
    ("report --quick --cpus 257", "from 1 to 256"),
    (
        "run --mode hab --middle auto,",
        "auto picks every level, so it stands alone",
    ),
    (
        "run --mode hab --middle auto,auto",
        "auto picks every level, so it stands alone",
    ),
    ("run --mode hab --middle ,", "\",\" has an empty entry"),
    (
        "run --mode hab --middle core:1M,",
        "\"core:1M,\" has an empty entry",
    ),
    ("cpu-id --calls 0", "--calls 0: must be at least 1"),
    ("topology --topology 99999x99999x99999", "at most 4096"),
];

#[test]
fn bad_input_is_a_usage_error_naming_the_flag() {
    for (args, expected) in CASES {
        let args: Vec<&str> = args.split(' ').collect();
        let stderr = usage_error(&args, Duration::from_secs(60));
        assert!(
            stderr.contains(expected),
            "hab {}: expected {expected:?} in: {stderr}",
            args.join(" ")
        );
    }
}

/// Runs `hab` with `args` and checks that it ended with a usage error (exit 2) and no panic;
/// returns its stderr.
fn usage_error(args: &[&str], limit: Duration) -> String {
    let output = hab(args, limit);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(2),
        "hab {}: exit status {:?}, stderr: {stderr}",
        args.join(" "),
        output.status
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "hab {}: panicked: {stderr}",
        args.join(" ")
    );
    stderr
}

/// An empty `--middle` is an error, not `auto` in disguise; the plain `hab` mode runs with
/// its default largest TLAB and `auto` levels (auto picked buffers smaller than that TLAB, and
/// the run failed blaming `--middle`).
#[test]
fn the_hab_mode_runs_with_auto_levels_and_an_empty_list_is_refused() {
    let stderr = usage_error(
        &["run", "--mode", "hab", "--middle", ""],
        Duration::from_secs(60),
    );
    assert!(stderr.contains("--middle: nothing given"), "{stderr}");
    let args = [
        "run",
        "--workload",
        "alloc-object",
        "--mode",
        "hab",
        "--objects",
        "100000",
        "--repeat",
        "1",
        "--no-compute",
    ];
    let output = hab(&args, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("at first, then resized"), "{stdout}");
}

/// 4096 threads with one object each end in bounded time: the compute loop that normalises
/// scaling shares a fixed amount of work among them (it gave each thread a whole loop, and
/// the run printed nothing for minutes).
#[test]
fn four_thousand_threads_with_one_object_end_in_bounded_time() {
    let args = [
        "run",
        "--threads",
        "4096",
        "--objects",
        "1",
        "--repeat",
        "1",
        "--warmup",
        "0",
    ];
    let output = hab(&args, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("compute loop on 4096 threads"), "{stdout}");
}

/// Many threads with few objects each get a heap sized for what they hold back (a TLAB each),
/// not gigabytes.
#[test]
fn many_threads_with_few_objects_get_a_small_heap() {
    let output = hab(
        &[
            "run",
            "--threads",
            "1000",
            "--objects",
            "10",
            "--repeat",
            "1",
            "--no-compute",
            "--json",
        ],
        Duration::from_secs(120),
    );
    assert!(output.status.success(), "{output:?}");
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let heap = result["heap_bytes"].as_u64().unwrap();
    assert!(
        heap <= 256 << 20,
        "heap of {heap} bytes for 10 objects per thread"
    );
}

/// A worker that cannot start (the process may not create more threads) stops the run with
/// an error instead of leaving the others waiting at a barrier.
#[test]
fn a_thread_that_cannot_start_ends_the_run() {
    let limited = Command::new("prlimit")
        .args(["--nproc=1", "--"])
        .arg(env!("CARGO_BIN_EXE_hab"))
        .args([
            "run",
            "--threads",
            "64",
            "--objects",
            "1000",
            "--repeat",
            "1",
            "--no-compute",
        ])
        .output();
    let Ok(output) = limited else {
        eprintln!("skipped: prlimit is not available here");
        return;
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.success() {
        eprintln!("skipped: RLIMIT_NPROC does not apply here (root): {stderr}");
        return;
    }
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot start thread"), "{stderr}");
}

/// The container reproduction: with `/sys/devices/system/cpu` hidden, the topology is a guess
/// that keeps restartable sections off, and a process on CPU 1 allocates in the `plab` mode
/// without faulting. Needs `unshare -m` (root or user namespaces) and two CPUs.
#[test]
fn plab_mode_in_a_container_without_cpu_sysfs_on_cpu_1() {
    let script = format!(
        "mount -t tmpfs none /sys/devices/system/cpu && exec taskset -c 1 {} run \
         --workload alloc-object --mode plab --objects 1000000 --repeat 1 --warmup 0 \
         --no-compute --json",
        env!("CARGO_BIN_EXE_hab")
    );
    let probe = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            "mount -t tmpfs none /sys/devices/system/cpu && taskset -c 1 true",
        ])
        .output();
    match probe {
        Ok(output) if output.status.success() => {}
        Ok(output) => {
            eprintln!(
                "skipped: cannot mask sysfs on cpu 1 here: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
            return;
        }
        Err(error) => {
            eprintln!("skipped: unshare is not available: {error}");
            return;
        }
    }
    let output = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "status {:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["objects"].as_u64(), Some(1_000_000));
}

/// Every flag that takes a value, of every command, given an empty value, garbage, a negative
/// number and one past `u64::MAX`: a usage error (exit 2) naming nothing but what is wrong,
/// never a panic, a hang or a run. The flags are read from each command's `--help`, so a new
/// flag is swept too. (`--out` is left out: any text is a path.)
#[test]
fn every_flag_with_empty_garbage_negative_and_huge_values() {
    let mut tried = 0;
    for command in [
        "run",
        "report",
        "topology",
        "cpu-id",
        "hotspot-hab javac",
        "hotspot-hab chat",
        "hotspot-hab observed",
        "hotspot-hab apps",
    ] {
        let command: Vec<&str> = command.split(' ').collect();
        let help = hab(
            &[&command[..], &["--help"]].concat(),
            Duration::from_secs(30),
        );
        let help = String::from_utf8_lossy(&help.stdout).into_owned();
        let flags: Vec<&str> = help
            .lines()
            .filter_map(|line| {
                let line = line.trim_start();
                let (flag, rest) = line.split_once(' ')?;
                (flag.starts_with("--") && rest.trim_start().starts_with('<')).then_some(flag)
            })
            .filter(|flag| *flag != "--out")
            .collect();
        for flag in flags {
            for value in ["", "garbage", "-1", "18446744073709551616"] {
                let argument = format!("{flag}={value}");
                usage_error(
                    &[&command[..], &[argument.as_str()]].concat(),
                    Duration::from_secs(30),
                );
                tried += 1;
            }
        }
    }
    assert!(
        tried > 100,
        "only {tried} invocations: is --help read right?"
    );
    println!("{tried} invocations, each a usage error");
}
