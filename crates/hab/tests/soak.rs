//! The soak test: 512 threads on the machine's CPUs allocate in every mode (`shared`, `tlab`,
//! `hab` with two middle levels, `plab`, `flip` switching to per-CPU LABs), each moving itself
//! from CPU to CPU while a timer signals the process 10 000 times a second. After every round
//! the world stops, the walk must meet exactly the objects the threads recorded — disjoint,
//! inside the heap — with fillers exactly the waste counted and no byte unaccounted for, and
//! the heap starts over.
//!
//! In CI it runs in short form (2 million allocations). On demand, the full form:
//!
//! ```text
//! HAB_SOAK_ALLOCS=100000000 cargo test --release -p hab --test soak -- --nocapture
//! ```

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{allowed_cpus, assert_disjoint_inside, heap, pin, watchdog, Rng, SignalTimer};
use hab::{Heap, HeapConfig, Mode, TlabPolicy};

const THREADS: usize = 512;
/// Allocations per thread between two collections.
const ALLOCS_PER_ROUND: usize = 1000;
/// A thread pins itself to its next CPU after this many allocations.
const PIN_EVERY: usize = 32;
/// The signal timer's period: 10 kHz.
const TIMER_PERIOD_NS: i64 = 100_000;

/// Allocations of the whole run, over every mode: `HAB_SOAK_ALLOCS`, else the short form.
fn total_allocs() -> u64 {
    std::env::var("HAB_SOAK_ALLOCS")
        .ok()
        .map(|text| text.parse().expect("HAB_SOAK_ALLOCS is a number"))
        .unwrap_or(2_000_000)
}

/// An object size from 16 to 512 bytes, a multiple of 8: seven in eight up to 128.
fn object_size(rng: &mut Rng) -> usize {
    if rng.below(8) == 0 {
        8 * (17 + rng.below(48) as usize)
    } else {
        8 * (2 + rng.below(15) as usize)
    }
}

/// What one mode's run did.
#[derive(Debug, Default)]
struct Figures {
    allocations: u64,
    collections: u64,
    migrations: u64,
    aborts: u64,
    out_of_range_cpus: u64,
    fallbacks: u64,
    overlaps: u64,
    lost_bytes: u64,
}

impl std::ops::AddAssign for Figures {
    fn add_assign(&mut self, other: Figures) {
        self.allocations += other.allocations;
        self.collections += other.collections;
        self.migrations += other.migrations;
        self.aborts += other.aborts;
        self.out_of_range_cpus += other.out_of_range_cpus;
        self.fallbacks += other.fallbacks;
        self.overlaps += other.overlaps;
        self.lost_bytes += other.lost_bytes;
    }
}

/// `rounds` rounds of every thread allocating `ALLOCS_PER_ROUND` objects, each followed by a
/// verified collection that resets the heap.
fn soak(name: &str, heap: Arc<Heap>, rounds: usize) -> Figures {
    let cpus = allowed_cpus();
    // Counters at the start of the round being checked (taken before any thread runs).
    let mut before = heap.stats().totals;
    let parked = Arc::new(Barrier::new(THREADS + 1));
    let collected = Arc::new(Barrier::new(THREADS + 1));
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let migrations = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|index| {
            let (heap, parked, collected, recorded, migrations, cpus) = (
                heap.clone(),
                parked.clone(),
                collected.clone(),
                recorded.clone(),
                migrations.clone(),
                cpus.clone(),
            );
            thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    let mut rng = Rng::new(index as u64 + 1);
                    let mut mutator = heap.attach();
                    let mut moved = 0;
                    for round in 0..rounds {
                        let mut objects = Vec::with_capacity(ALLOCS_PER_ROUND);
                        for i in 0..ALLOCS_PER_ROUND {
                            if i % PIN_EVERY == 0 && pin(cpus[(index + round + i) % cpus.len()]) {
                                moved += 1;
                            }
                            let bytes = object_size(&mut rng);
                            let size = mutator.checked_size(bytes).expect("a valid size");
                            let object = mutator.alloc_sized(size).expect("the heap holds a round");
                            common::write_header(object, bytes);
                            objects.push((object.as_ptr() as usize, bytes));
                        }
                        recorded.lock().unwrap().extend(objects);
                        let stopped = mutator.park();
                        parked.wait();
                        collected.wait();
                        mutator = stopped.unpark();
                    }
                    migrations.fetch_add(moved, Ordering::Relaxed);
                })
                .expect("spawn")
        })
        .collect();
    let mut figures = Figures::default();
    for round in 0..rounds {
        parked.wait();
        {
            let mut collection = heap
                .collection_within(Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("{name} round {round}: {e}"));
            let (summary, mut walked) = common::walk_objects(&collection);
            figures.lost_bytes += (collection.used_bytes() - summary.total_bytes()) as u64;
            let mut expected = std::mem::take(&mut *recorded.lock().unwrap());
            figures.allocations += expected.len() as u64;
            expected.sort_unstable();
            figures.overlaps += expected
                .windows(2)
                .filter(|pair| pair[0].0 + pair[0].1 > pair[1].0)
                .count() as u64;
            assert_disjoint_inside(&mut expected, heap.reserved_range());
            walked.sort_unstable();
            assert_eq!(
                walked, expected,
                "{name} round {round}: the walk meets the objects"
            );
            let now = heap.stats().totals;
            let stats = now.since(&before);
            before = now;
            assert_eq!(
                summary.filler_bytes as u64,
                stats.waste_bytes(),
                "{name} round {round}: fillers are the round's counted waste"
            );
            assert_eq!(
                summary.object_bytes as u64,
                stats.allocated_bytes(),
                "{name} round {round}: objects are the round's counted allocation"
            );
            collection.reset();
        }
        figures.collections += 1;
        collected.wait();
    }
    for handle in handles {
        handle.join().expect("mutator thread");
    }
    let totals = heap.stats().totals;
    figures.migrations = migrations.load(Ordering::Relaxed);
    figures.aborts =
        totals.cpu_lab.rseq_aborts + totals.levels.iter().map(|l| l.rseq_aborts).sum::<u64>();
    figures.out_of_range_cpus = totals.cpu_lab.out_of_range_cpus
        + totals
            .levels
            .iter()
            .map(|l| l.out_of_range_cpus)
            .sum::<u64>();
    figures.fallbacks = totals.cpu_lab.fallback_allocs
        + totals.levels.iter().map(|l| l.rseq_fallbacks).sum::<u64>();
    figures
}

#[test]
fn every_mode_under_migrations_and_signals() {
    let _watchdog = watchdog("soak", Duration::from_secs(3600));
    let modes: [(&str, Mode, Option<&str>); 5] = [
        ("shared", Mode::Shared, None),
        ("tlab", Mode::Tlab, None),
        ("hab", Mode::Hab, Some("cpu:64KiB,core:256KiB")),
        ("plab", Mode::CpuLab, None),
        ("flip", Mode::Flip, None),
    ];
    let per_round = (THREADS * ALLOCS_PER_ROUND) as u64;
    // At least five: `flip` keeps TLABs after the first cycle (its tails do not count),
    // flips after the next three (over the bound in a row), and runs the fifth in per-CPU
    // LABs.
    let rounds = total_allocs()
        .div_ceil(per_round * modes.len() as u64)
        .max(5) as usize;
    let started = Instant::now();
    let timer = SignalTimer::start(TIMER_PERIOD_NS);
    let mut total = Figures::default();
    for (name, mode, middle) in modes {
        let mut builder = HeapConfig::builder()
            .capacity("512MiB")
            .mode(mode)
            .tlab(TlabPolicy::Fixed(16 << 10));
        if let Some(middle) = middle {
            builder = builder.middle(middle);
        }
        let heap = heap(builder);
        let mode_started = Instant::now();
        let figures = soak(name, heap.clone(), rounds);
        eprintln!(
            "soak {name}: {} threads, {} allocations, {} collections ({} in per-CPU LABs), \
             {} migrations, {} aborts, {} compare-and-swap fallbacks, {} out-of-range cpus, \
             {} overlaps, {} lost bytes, {:.1?}",
            THREADS,
            figures.allocations,
            figures.collections,
            heap.stats().cpu_lab_collections,
            figures.migrations,
            figures.aborts,
            figures.fallbacks,
            figures.out_of_range_cpus,
            figures.overlaps,
            figures.lost_bytes,
            mode_started.elapsed()
        );
        if mode == Mode::Flip {
            assert!(
                heap.stats().cpu_lab_collections > 0,
                "flip switched to per-CPU LABs"
            );
        }
        total += figures;
    }
    let signals = timer.stop();
    eprintln!(
        "soak total: {THREADS} threads on {} cpus, {} allocations, {} collections, {signals} \
         signals, {} aborts, {} migrations, {} out-of-range cpus, {} overlaps, {} lost bytes, \
         {:.1?}",
        allowed_cpus().len(),
        total.allocations,
        total.collections,
        total.aborts,
        total.migrations,
        total.out_of_range_cpus,
        total.overlaps,
        total.lost_bytes,
        started.elapsed()
    );
    assert!(total.allocations >= total_allocs());
    assert_eq!((total.overlaps, total.lost_bytes), (0, 0));
    assert!(signals > 0, "the timer signalled the threads");
}
