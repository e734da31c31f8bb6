//! Hab in each environment a process meets: glibc's rseq registration, glibc's registration
//! off (`GLIBC_TUNABLES=glibc.pthread.rseq=0`: Hab registers its own areas, in glibc's unused
//! one, or with `HAB_RSEQ=thread-local` in thread-local ones as without glibc's), and a kernel that
//! refuses rseq (a seccomp filter, `tools/without-rseq.c`, answering `ENOSYS`, then `EPERM`:
//! compare-and-swap buffers and `getcpu`). The test runs itself again in each, where the child
//! checks that [`hab::per_cpu_support`] says what the environment allows and that the `cpu`
//! level and the `cpu-lab` mode hand out disjoint memory that walks cleanly, with four times
//! as many threads as CPUs. The stress tests run in the same environments in CI.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{assert_disjoint_inside, heap, walk_objects, watchdog, write_header, Rng};
use hab::{HeapConfig, Mode, RseqMechanism, TlabPolicy};

/// The child's environment variable: what it must find.
const EXPECT: &str = "HAB_RSEQ_ENVIRONMENT_EXPECT";

/// The wrapper, built with the system's C compiler into the test's target directory; `None`
/// (with why) where no compiler builds it.
fn wrapper() -> Result<PathBuf, String> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/without-rseq.c");
    let test = std::env::current_exe().map_err(|e| e.to_string())?;
    let binary = test.parent().ok_or("no directory")?.join("without-rseq");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&compiler)
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&binary)
        .arg(&source)
        .status()
        .map_err(|e| format!("{compiler}: {e}"))?;
    if !status.success() {
        return Err(format!("{compiler} failed on {}", source.display()));
    }
    Ok(binary)
}

/// Runs this test binary's child test in an environment: `prefix` (a wrapper and its argument)
/// and `env` (one variable), expecting `expect`.
fn run_child(prefix: &[&str], env: Option<(&str, &str)>, expect: &str) {
    let test = std::env::current_exe().expect("the test binary");
    let mut command = match prefix {
        [] => Command::new(&test),
        [wrapper, rest @ ..] => {
            let mut command = Command::new(wrapper);
            command.args(rest).arg(&test);
            command
        }
    };
    command
        .args(["--exact", "child_in_this_environment", "--nocapture"])
        .env(EXPECT, expect);
    if let Some((key, value)) = env {
        command.env(key, value);
    }
    let output = command.output().expect("the child runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{prefix:?} {env:?}: {text}");
    assert!(
        text.contains("1 passed"),
        "{prefix:?} {env:?}: the child ran no test: {text}"
    );
    print!("{text}");
}

#[test]
fn in_every_environment() {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        eprintln!("skipped: rseq is x86_64 Linux only");
        return;
    }
    run_child(&[], None, "glibc");
    run_child(&[], Some(("GLIBC_TUNABLES", "glibc.pthread.rseq=0")), "own");
    let thread_local = [
        "env",
        "GLIBC_TUNABLES=glibc.pthread.rseq=0",
        "HAB_RSEQ=thread-local",
    ];
    run_child(&thread_local, None, "thread-local");
    let wrapper = wrapper().expect("a C compiler builds tools/without-rseq.c");
    let wrapper = wrapper.to_str().expect("a UTF-8 path");
    run_child(&[wrapper, "enosys"], None, "Function not implemented");
    run_child(&[wrapper, "eperm"], None, "Operation not permitted");
}

/// The child: does nothing unless the parent set [`EXPECT`].
#[test]
fn child_in_this_environment() {
    let Ok(expect) = std::env::var(EXPECT) else {
        return;
    };
    let support = hab::per_cpu_support();
    println!("per-CPU support: {support}");
    match (expect.as_str(), &support.registration) {
        ("glibc", RseqMechanism::Glibc { .. }) => {}
        // glibc's unused area, at the same offset as its registration's.
        (
            "own",
            RseqMechanism::Own {
                offset: Some(_), ..
            },
        ) => {}
        // A C library without an area of its own (HAB_RSEQ=thread-local stands for one).
        ("thread-local", RseqMechanism::Own { offset: None, .. }) => {}
        (why, RseqMechanism::Unavailable(reason)) if reason.contains(why) => {}
        (expected, found) => panic!("expected {expected}, found {found}"),
    }
    assert_eq!(
        support.restartable(),
        ["glibc", "own", "thread-local"].contains(&expect.as_str())
    );
    assert_eq!(
        hab::rseq_register_current_thread(),
        support.restartable(),
        "{support}"
    );
    for mode in [Mode::Hab, Mode::CpuLab] {
        allocate_and_walk(mode);
    }
}

/// Four threads per CPU allocate objects of 16 to 512 bytes; then a collection walks the heap,
/// which must hold exactly the objects the threads recorded, disjoint, inside the heap.
fn allocate_and_walk(mode: Mode) {
    let _watchdog = watchdog("allocate_and_walk", Duration::from_secs(120));
    let mut builder = HeapConfig::builder().capacity("256MiB").mode(mode);
    if mode == Mode::Hab {
        builder = builder.middle("cpu:64KiB").tlab(TlabPolicy::Fixed(2 << 10));
    }
    let heap = heap(builder);
    let threads = 4 * thread::available_parallelism().map_or(1, |n| n.get());
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..threads)
        .map(|index| {
            let (heap, recorded) = (heap.clone(), recorded.clone());
            thread::spawn(move || {
                let mut rng = Rng::new(index as u64 + 1);
                let mut mutator = heap.attach();
                let mut mine = Vec::with_capacity(5000);
                for _ in 0..5000 {
                    let bytes = 8 * (2 + rng.below(63) as usize);
                    let object = mutator.alloc(bytes).expect("room");
                    write_header(object, bytes);
                    mine.push((object.as_ptr() as usize, bytes));
                }
                recorded.lock().unwrap().extend(mine);
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("a thread allocated");
    }
    let mut recorded = Arc::try_unwrap(recorded).unwrap().into_inner().unwrap();
    let collection = heap.collection();
    collection.verify().expect("the heap walks");
    let (_, mut walked) = walk_objects(&collection);
    let range = heap.reserved_range();
    assert_disjoint_inside(&mut recorded, range.clone());
    walked.sort_unstable();
    assert_eq!(
        recorded, walked,
        "{mode:?}: the walk met what the threads allocated"
    );
    println!(
        "{mode:?}: {} objects of {threads} threads walked",
        recorded.len()
    );
}
