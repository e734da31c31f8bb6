//! Per-CPU LABs in reused memory. A first cycle fills the heap with objects full of a pattern;
//! after a collection that frees them all, threads moving between CPUs under a signal storm
//! allocate again in `cpu-lab` mode. Every object must be zero when handed out (zeroed ahead a
//! step at a time, or whole when taken), the walk must meet the objects exactly once, the
//! fillers must be the counted waste, and the steps must be counted; also with an object model
//! whose smallest filler is larger than the alignment (a filler reserve at the end of every
//! LAB, beyond its limit), whose fillers must keep the model's contract.

mod common;

use std::ptr::NonNull;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use common::{
    allowed_cpus, assert_disjoint_inside, pin, watchdog, write_header, CheckedFillerModel, Rng,
    SignalTimer,
};
use hab::{CpuLabStats, Heap, HeapConfig, Mode, ObjectModel, TlabPolicy, ZeroMemory};

const THREADS: usize = 16;
const ALLOCS: usize = 2000;
const PATTERN: u8 = 0xab;

/// Fills the object's bytes after its header with the pattern.
fn dirty(object: NonNull<u8>, bytes: usize) {
    // SAFETY: `object` is `bytes` fresh bytes this thread was just handed; the header word
    // comes first.
    unsafe { std::ptr::write_bytes(object.as_ptr().add(8), PATTERN, bytes - 8) };
}

/// Whether every byte of the object is zero.
fn is_zero(object: NonNull<u8>, bytes: usize) -> bool {
    // SAFETY: as in `dirty`: `bytes` readable bytes this thread owns.
    unsafe { std::slice::from_raw_parts(object.as_ptr(), bytes) }
        .iter()
        .all(|&byte| byte == 0)
}

/// Runs both cycles on a heap zeroing as `zero`, with `model`; returns the heap's per-CPU LAB
/// figures and whether the LABs were restartable.
fn two_cycles(zero: ZeroMemory, model: impl ObjectModel + 'static) -> (CpuLabStats, bool) {
    let _watchdog = watchdog("cpu_lab_zeroing", Duration::from_secs(300));
    let config = HeapConfig::builder()
        .capacity("8MiB")
        .mode(Mode::CpuLab)
        .tlab(TlabPolicy::Fixed(64 << 10))
        .zero(zero)
        .build()
        .expect("config");
    let heap = Heap::new(config, model).expect("heap");
    // The first cycle: the whole range, dirty.
    let mut mutator = heap.attach();
    let mut first = 0usize;
    while let Ok(object) = mutator.alloc(64) {
        write_header(object, 64);
        dirty(object, 64);
        first += 1;
    }
    assert!(
        first > 8 << 20 >> 7,
        "the first cycle filled most of the heap: {first}"
    );
    drop(mutator);
    heap.collection().reset();
    let before = heap.stats().totals;
    // The second, in reused memory, from many threads moving between CPUs.
    let timer = SignalTimer::start(50_000);
    let cpus = allowed_cpus();
    let start = Arc::new(Barrier::new(THREADS));
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..THREADS)
        .map(|index| {
            let (heap, start, recorded, cpus) =
                (heap.clone(), start.clone(), recorded.clone(), cpus.clone());
            thread::spawn(move || {
                let mut rng = Rng::new(index as u64 + 7);
                let mut mutator = heap.attach();
                let mut objects = Vec::with_capacity(ALLOCS);
                start.wait();
                for i in 0..ALLOCS {
                    if i % 16 == 0 {
                        pin(cpus[(index + i / 16) % cpus.len()]);
                    }
                    let bytes = 8 * (2 + rng.below(30) as usize);
                    let object = mutator.alloc(bytes).expect("the heap has room");
                    assert!(
                        is_zero(object, bytes),
                        "object {object:?}+{bytes} not zeroed"
                    );
                    write_header(object, bytes);
                    dirty(object, bytes);
                    objects.push((object.as_ptr() as usize, bytes));
                }
                recorded.lock().unwrap().extend(objects);
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("allocating thread");
    }
    timer.stop();
    let collection = heap.collection();
    let (summary, mut walked) = common::walk_objects(&collection);
    let mut expected = recorded.lock().unwrap().clone();
    assert_disjoint_inside(&mut expected, heap.reserved_range());
    walked.sort_unstable();
    assert_eq!(walked, expected, "the walk meets the objects, once each");
    let stats = heap.stats().totals;
    assert_eq!(
        summary.object_bytes as u64,
        stats.allocated_bytes() - before.allocated_bytes(),
        "the objects are the counted allocation"
    );
    assert_eq!(
        summary.filler_bytes as u64,
        stats.waste_bytes() - before.waste_bytes(),
        "the fillers are the counted waste"
    );
    drop(collection);
    (stats.cpu_lab, heap.cpu_labs_restartable() == Some(true))
}

#[test]
fn labs_in_reused_memory_are_zeroed_ahead() {
    let (stats, restartable) = two_cycles(ZeroMemory::Ahead, hab::HeaderWordModel);
    eprintln!("zeroed ahead: {stats:?}");
    if restartable {
        assert!(stats.zeroing_steps > 0, "steps taken");
        assert!(stats.transactions > 0);
    }
}

#[test]
fn labs_in_reused_memory_are_zeroed_whole_at_refill() {
    let (stats, restartable) = two_cycles(ZeroMemory::AtRefill, hab::HeaderWordModel);
    eprintln!("zeroed at refill: {stats:?}");
    assert_eq!(stats.zeroing_steps, 0, "no steps without zeroing ahead");
    if restartable {
        assert!(stats.transactions > 0);
    }
}

#[test]
fn labs_with_a_filler_reserve_are_zeroed_ahead() {
    let model = CheckedFillerModel::new(24, 8);
    let violations = model.violations.clone();
    let (stats, restartable) = two_cycles(ZeroMemory::Ahead, model);
    eprintln!("with a 24-byte reserve: {stats:?}");
    assert_eq!(
        violations.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "filler contract"
    );
    if restartable {
        assert!(stats.zeroing_steps > 0, "steps taken");
        assert!(
            stats.transactions > stats.invalid_transactions,
            "LABs and their steps install: {stats:?}"
        );
    }
}
