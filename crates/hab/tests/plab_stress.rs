//! Stress tests of the per-CPU LABs of the `plab` and `flip` modes on the real machine: 512
//! threads on the machine's CPUs allocate objects of mixed sizes while each keeps moving itself
//! from CPU to CPU and a timer signals the process 20 000 times a second (the kernel hands
//! each signal to a thread that is running), so restartable sections abort. Between rounds the world stops for a
//! collection that walks the heap; every object recorded by the threads must be met by the walk
//! exactly once, disjoint from every other and inside the heap.

mod common;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::{assert_disjoint_inside, heap, pin, watchdog, write_header, Rng, SignalTimer};
use hab::{Heap, HeapConfig, Mode, TlabPolicy};

const THREADS: usize = 512;
const ROUNDS: usize = 5;
const ALLOCS_PER_ROUND: usize = 400;
/// A thread pins itself to its next CPU after this many allocations.
const PIN_EVERY: usize = 16;
/// The signal timer's period: 20 kHz.
const TIMER_PERIOD_NS: i64 = 50_000;

/// An object size from 16 to 1024 bytes, a multiple of 8: seven in eight up to 128.
fn object_size(rng: &mut Rng) -> usize {
    if rng.below(8) == 0 {
        8 * (17 + rng.below(112) as usize)
    } else {
        8 * (2 + rng.below(15) as usize)
    }
}

fn online_cpus() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs the threads on `heap`; returns the signals delivered.
fn run(name: &'static str, heap: Arc<Heap>) -> u64 {
    let _watchdog = watchdog(name, Duration::from_secs(600));
    let timer = SignalTimer::start(TIMER_PERIOD_NS);
    let cpus = online_cpus();
    // Threads park, then the main thread collects, then the threads go on.
    let parked = Arc::new(Barrier::new(THREADS + 1));
    let collected = Arc::new(Barrier::new(THREADS + 1));
    let recorded = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..THREADS)
        .map(|index| {
            let (heap, parked, collected, recorded) = (
                heap.clone(),
                parked.clone(),
                collected.clone(),
                recorded.clone(),
            );
            thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    let mut rng = Rng::new(index as u64 + 1);
                    let mut mutator = heap.attach();
                    let sizes: Vec<_> = (0..=128)
                        .map(|words| mutator.checked_size(words * 8).ok())
                        .collect();
                    for round in 0..ROUNDS {
                        // Allocates a round's objects, moving between CPUs meanwhile; with the
                        // `plab` fast path when the mutator has one (its cached CPU goes stale
                        // at every move), else through the mutator.
                        let mut round_of = |allocate: &mut dyn FnMut(
                            hab::AllocSize,
                        )
                            -> Result<
                            std::ptr::NonNull<u8>,
                            hab::AllocError,
                        >| {
                            let mut objects = Vec::with_capacity(ALLOCS_PER_ROUND);
                            for i in 0..ALLOCS_PER_ROUND {
                                if i % PIN_EVERY == 0 {
                                    pin((index + round + i / PIN_EVERY) % cpus);
                                }
                                let bytes = object_size(&mut rng);
                                let size = sizes[bytes / 8].expect("checked");
                                let object = allocate(size).expect("heap large enough");
                                write_header(object, bytes);
                                objects.push((object.as_ptr() as usize, bytes));
                            }
                            objects
                        };
                        let objects = round_of(&mut |size| mutator.alloc_sized(size));
                        recorded.lock().unwrap().extend(objects);
                        let stopped = mutator.park();
                        parked.wait();
                        collected.wait();
                        mutator = stopped.unpark();
                    }
                })
                .expect("spawn")
        })
        .collect();
    for round in 0..ROUNDS {
        parked.wait();
        {
            let collection = heap.collection();
            let (summary, mut walked) = common::walk_objects(&collection);
            assert_eq!(summary.total_bytes(), collection.used_bytes(), "{name}");
            let mut expected = recorded.lock().unwrap().clone();
            assert_eq!(
                walked.len(),
                expected.len(),
                "{name} round {round}: objects walked"
            );
            assert_disjoint_inside(&mut expected, heap.reserved_range());
            walked.sort_unstable();
            assert_eq!(
                walked, expected,
                "{name} round {round}: the walk meets the objects"
            );
            let stats = heap.stats().totals;
            assert_eq!(
                summary.filler_bytes as u64,
                stats.waste_bytes(),
                "{name} round {round}: fillers are the counted waste"
            );
            assert_eq!(
                summary.object_bytes as u64,
                stats.allocated_bytes(),
                "{name} round {round}: objects are the counted allocation, in every kind of LAB"
            );
        }
        collected.wait();
    }
    for handle in handles {
        handle.join().expect("mutator thread");
    }
    timer.stop()
}

fn config(mode: Mode, lab: usize) -> hab::HeapConfigBuilder {
    HeapConfig::builder()
        .capacity("512MiB")
        .mode(mode)
        .tlab(TlabPolicy::Fixed(lab))
}

#[test]
fn plab_under_migrations_and_signal_storms() {
    let heap = heap(config(Mode::CpuLab, 4 << 10));
    let signals = run("plab", heap.clone());
    let stats = heap.stats().totals.cpu_lab;
    eprintln!(
        "plab: {signals} signals, restartable {:?}, {stats:?}",
        heap.cpu_labs_restartable()
    );
    if heap.cpu_labs_restartable() == Some(true) {
        // Aborts are counted (and printed above), but how many sections a storm interrupts
        // depends on the scheduler: the forced aborts of `rseq::tests` are the deterministic
        // check of the abort path.
        assert!(stats.labs > 0 && stats.transactions > 0);
    } else {
        assert!(stats.fallback_allocs > 0);
    }
    assert!(signals > 0);
}

#[test]
fn flip_under_migrations_and_signal_storms() {
    // 512 threads each leave most of a 64 KiB TLAB unused at every collection: far more
    // than 64 KiB × the CPUs, so the heap flips to per-CPU LABs after the fourth round (the
    // first cycle's tails do not count; the next three are over the bound in a row) and runs
    // the fifth in them.
    let heap = heap(config(Mode::Flip, 64 << 10));
    run("flip", heap.clone());
    let stats = heap.stats();
    eprintln!("flip: {stats}");
    assert!(heap.allocates_in_cpu_labs(), "flipped to per-CPU LABs");
    assert!(stats.cpu_lab_collections >= 1);
    let plab = stats.totals.cpu_lab;
    assert!(stats.totals.refills > 0 && plab.labs + plab.fallback_allocs > 0);
}
