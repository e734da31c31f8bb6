//! The C ABI from C: `tests/c/*.c` built with the system C compiler against `include/hab.h`
//! and this crate's static library — `threads.c` and `reliability.c` in every mode, `levels.c` over a fake eden —
//! again with `-fsanitize=address,undefined`; and the header compiled alone as C11 and C++17
//! with `-Wall -Wextra -Werror -pedantic`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The static library cargo built with this test: `target/<profile>/deps/libhab_capi.a`
/// (`cargo test` leaves it there; `cargo build` also copies it one level up).
fn static_library() -> PathBuf {
    let test = std::env::current_exe().expect("the test's path");
    let deps = test.parent().expect("target/<profile>/deps/<test>");
    let candidates = [
        deps.join("libhab_capi.a"),
        deps.parent()
            .map_or_else(PathBuf::new, |p| p.join("libhab_capi.a")),
    ];
    candidates
        .iter()
        .find(|library| library.exists())
        .cloned()
        .unwrap_or_else(|| panic!("no libhab_capi.a in {candidates:?}"))
}

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compiles `source` into `output` with `extra` flags; panics with the compiler's output.
fn compile(source: &str, output: &Path, extra: &[&str]) {
    compile_sources(&[manifest().join("tests/c").join(source)], output, extra);
}

/// Compiles `sources` into `output` with `extra` flags; panics with the compiler's output.
fn compile_sources(sources: &[PathBuf], output: &Path, extra: &[&str]) {
    let status = Command::new("cc")
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-O2",
            "-g",
        ])
        .args(extra)
        .arg("-I")
        .arg(manifest().join("include"))
        .args(sources)
        .arg(static_library())
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(output)
        .output()
        .expect("cc runs");
    assert!(
        status.status.success(),
        "cc {sources:?}: {}",
        String::from_utf8_lossy(&status.stderr)
    );
}

/// Runs `binary` in `mode`; in `cpu-lab` mode it also checks that every thread gets the
/// per-CPU LAB path inline where the library's own Rust mutators get it.
fn run(binary: &Path, mode: &str) {
    let mut command = Command::new(binary);
    command.arg(mode);
    if mode == "cpu-lab" && cpu_lab_path_here() {
        command.arg("inline");
    }
    let output = command.output().expect("runs");
    assert!(
        output.status.success(),
        "{} {mode}: {}{}",
        binary.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    print!("{}", String::from_utf8_lossy(&output.stdout));
}

/// Whether a Rust mutator in `cpu-lab` mode has a per-CPU LAB path to inline here (restartable
/// sequences work on this machine and are not turned off).
fn cpu_lab_path_here() -> bool {
    let config = hab::HeapConfig::builder()
        .mode(hab::Mode::CpuLab)
        .capacity("4MiB")
        .build()
        .expect("a configuration");
    let heap = hab::Heap::new(config, hab::HeaderWordModel).expect("a heap");
    let mutator = heap.attach();
    cfg!(target_arch = "x86_64") && mutator.cpu_lab_path().is_some()
}

fn out_dir() -> PathBuf {
    let test = std::env::current_exe().expect("the test's path");
    let dir = test.parent().expect("deps").join("hab-capi-tests");
    std::fs::create_dir_all(&dir).expect("a directory for the C binaries");
    dir
}

#[test]
fn c_threads_in_every_mode() {
    let binary = out_dir().join("threads");
    compile("threads.c", &binary, &[]);
    for mode in ["shared", "tlab", "hab", "cpu-lab", "flip"] {
        run(&binary, mode);
    }
}

#[test]
fn c_threads_under_the_sanitizers() {
    let binary = out_dir().join("threads-sanitized");
    compile(
        "threads.c",
        &binary,
        &["-fsanitize=address,undefined", "-fno-sanitize-recover=all"],
    );
    for mode in ["tlab", "cpu-lab"] {
        run(&binary, mode);
    }
}

/// hab.h under hostile use (`reliability.c`): zero and wrapping sizes, parked mutators,
/// collections that outlive their thread, self-deadlocks, a collection serving its requester,
/// key destructors and fork while collecting; at -O2 in every mode and under the sanitizers.
#[test]
fn c_reliability_in_every_mode_and_under_the_sanitizers() {
    let binary = out_dir().join("reliability");
    compile("reliability.c", &binary, &[]);
    for mode in ["shared", "tlab", "hab", "cpu-lab", "flip"] {
        run(&binary, mode);
    }
    let sanitized = out_dir().join("reliability-sanitized");
    compile(
        "reliability.c",
        &sanitized,
        &["-fsanitize=address,undefined", "-fno-sanitize-recover=all"],
    );
    for mode in ["tlab", "cpu-lab"] {
        run(&sanitized, mode);
    }
}

#[test]
fn c_middle_levels_over_a_fake_eden() {
    run_plain_and_sanitized("levels");
}

/// Builds `tests/c/{name}.c` at -O2 and again under the sanitizers, and runs each once.
fn run_plain_and_sanitized(name: &str) {
    let source = format!("{name}.c");
    let binary = out_dir().join(name);
    compile(&source, &binary, &[]);
    run(&binary, "");
    let sanitized = out_dir().join(format!("{name}-sanitized"));
    compile(
        &source,
        &sanitized,
        &["-fsanitize=address,undefined", "-fno-sanitize-recover=all"],
    );
    run(&sanitized, "");
}

/// Every entry point with NULL, wrong-state and foreign handles and sizes at their edges
/// (`surface.c`), at -O2 and under the sanitizers; prints the table docs/embedding.md shows.
#[test]
fn c_every_entry_point_at_its_edges() {
    run_plain_and_sanitized("surface");
}

/// The example runtime's programs (`examples/c/`), built with `runtime.c`.
fn example(program: &str, extra: &[&str]) -> PathBuf {
    let examples = manifest().join("examples/c");
    let binary = out_dir().join(format!("{program}{}", extra.len()));
    compile_sources(
        &[
            examples.join(format!("{program}.c")),
            examples.join("runtime.c"),
        ],
        &binary,
        extra,
    );
    binary
}

/// Runs an example program with its collector checking the heap around every collection;
/// its stdout lines and its stderr figures (JSON).
fn run_example(binary: &Path, args: &[&str]) -> (Vec<String>, serde_json::Value) {
    let output = Command::new(binary)
        .args(args)
        .env("RT_VERIFY", "1")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{} {args:?}: {stderr}",
        binary.display()
    );
    let figures = serde_json::from_str(stderr.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{args:?}: figures {stderr:?}: {e}"));
    let lines = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    (lines, figures)
}

/// README.md's C example (`examples/c/quickstart.c`, which `crates/hab/tests/readme.rs` keeps
/// equal to the README's block), built with the same flags and run.
#[test]
fn c_quickstart_runs_as_the_readme_shows_it() {
    let binary = out_dir().join("quickstart");
    compile_sources(&[manifest().join("examples/c/quickstart.c")], &binary, &[]);
    let output = Command::new(&binary).output().expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout == "100000 objects allocated, the heap walked clean\n",
        "quickstart: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn c_binary_trees_prints_the_reference_lines_in_every_mode() {
    for extra in [
        &[][..],
        &["-fsanitize=address,undefined", "-fno-sanitize-recover=all"],
    ] {
        let binary = example("binary_trees", extra);
        for mode in ["shared", "tlab", "hab", "cpu-lab", "flip"] {
            for (depth, threads) in [(6, 1), (10, 2), (12, 3)] {
                let (depth_text, threads_text) = (depth.to_string(), threads.to_string());
                let (lines, figures) = run_example(&binary, &[&depth_text, &threads_text, mode]);
                assert_eq!(
                    lines,
                    hab_vm::workloads::binary_trees::expected(depth),
                    "{mode}, depth {depth}, {threads} threads"
                );
                if depth >= 10 {
                    assert!(figures["collections"].as_u64().unwrap() > 0, "{figures}");
                }
            }
        }
    }
}

#[test]
fn c_gcbench_prints_what_hab_vm_prints() {
    let depth = 10;
    let vm = hab_vm::Vm::new(hab_vm::VmConfig::new(
        (3 * hab_vm::workloads::gcbench::max_live_bytes(depth)).next_multiple_of(4096),
    ))
    .expect("a VM");
    let expected = hab_vm::workloads::gcbench::run(&vm, depth)
        .expect("hab-vm's GCBench")
        .lines;
    let binary = example("gcbench", &[]);
    for mode in ["shared", "tlab", "hab", "cpu-lab", "flip"] {
        let (lines, figures) = run_example(&binary, &[&depth.to_string(), mode]);
        assert_eq!(lines, expected, "{mode}");
        assert!(figures["collections"].as_u64().unwrap() > 0, "{figures}");
    }
}

#[test]
fn the_header_compiles_as_c11_and_cpp17() {
    let header = manifest().join("include/hab.h");
    for (compiler, standard, language) in [("cc", "-std=c11", "c"), ("c++", "-std=c++17", "c++")] {
        let output = Command::new(compiler)
            .args([
                standard,
                "-Wall",
                "-Wextra",
                "-Werror",
                "-pedantic",
                "-fsyntax-only",
                "-x",
            ])
            .arg(language)
            .arg(&header)
            .output()
            .expect("the compiler runs");
        assert!(
            output.status.success(),
            "{compiler} {standard}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
