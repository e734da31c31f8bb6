//! Safepoints: collections requested by any thread stop mutators at their polls and at their
//! allocations; safe regions do not hold a collection up; mutators learn from their epoch that
//! collections happened; a collection that gives up withdraws the request. Many more threads
//! than CPUs, in every mode, with the walk checked after every collection.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::{heap, watchdog, write_header};
use hab::{AllocError, CollectionError, HeapConfig, Mode, TlabPolicy};

fn config(mode: Mode, capacity: &str) -> hab::HeapConfigBuilder {
    let builder = HeapConfig::builder()
        .capacity(capacity)
        .mode(mode)
        .tlab(TlabPolicy::Fixed(4 << 10));
    if mode == Mode::Hab {
        builder.middle("cpu:64KiB,core:256KiB")
    } else {
        builder
    }
}

/// Threads allocate until the heap is full, then collect through `Mutator::collect`; the
/// first to get there collects, the others stop at their allocation (no thread ever polls).
/// Every collection walks exactly the objects allocated since the last one.
#[test]
fn collections_on_exhaustion_stop_every_thread_through_its_allocations() {
    let _watchdog = watchdog("exhaustion", Duration::from_secs(240));
    let threads = 3 * thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    for mode in Mode::ALL {
        let heap = heap(config(mode, "1MiB"));
        let live = Arc::new(AtomicU64::new(0));
        let collections = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = (0..threads)
            .map(|index| {
                let (heap, live, collections) = (heap.clone(), live.clone(), collections.clone());
                thread::spawn(move || {
                    let mut mutator = heap.attach();
                    let mut epoch = mutator.epoch();
                    let mut woke_to_collections = 0u64;
                    for i in 0..40_000usize {
                        let bytes = 16 + 8 * ((index + i) % 7);
                        let object = loop {
                            match mutator.alloc(bytes) {
                                Ok(object) => break object,
                                Err(AllocError::OutOfMemory { .. }) => {
                                    mutator.collect(|mut collection| {
                                        let summary = collection.verify().expect("walkable");
                                        assert_eq!(
                                            summary.objects,
                                            live.swap(0, Ordering::Relaxed),
                                            "{mode:?}: the walk finds what was allocated"
                                        );
                                        collection.reset();
                                        collections.fetch_add(1, Ordering::Relaxed);
                                    });
                                }
                                Err(other) => panic!("{other}"),
                            }
                        };
                        write_header(object, bytes);
                        live.fetch_add(1, Ordering::Relaxed);
                        if mutator.epoch() != epoch {
                            woke_to_collections += mutator.epoch() - epoch;
                            epoch = mutator.epoch();
                        }
                    }
                    woke_to_collections
                })
            })
            .collect();
        let seen: Vec<u64> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        let collections = collections.load(Ordering::Relaxed);
        assert!(collections >= 2, "{mode:?}: {collections} collections");
        assert_eq!(heap.collections(), collections);
        // Every thread runs through the last collections, and its epoch says so.
        assert!(seen.iter().all(|&n| n > 0), "{mode:?}: {seen:?}");
        assert!(!heap.collection_requested());
    }
}

/// A thread that is not a mutator requests collections; threads that only poll (and never
/// allocate) stop at their polls, and a collector thread serves each request.
#[test]
fn a_collector_thread_serves_requests_and_polling_threads_stop() {
    let _watchdog = watchdog("collector thread", Duration::from_secs(120));
    for mode in Mode::ALL {
        let heap = heap(config(mode, "1MiB"));
        let stop = Arc::new(AtomicBool::new(false));
        let start = Arc::new(Barrier::new(5));
        let pollers: Vec<_> = (0..4)
            .map(|_| {
                let (heap, stop, start) = (heap.clone(), stop.clone(), start.clone());
                thread::spawn(move || {
                    let mut mutator = heap.attach();
                    start.wait();
                    let mut stopped = 0;
                    while !stop.load(Ordering::Relaxed) {
                        stopped += mutator.poll();
                    }
                    (stopped, mutator.epoch())
                })
            })
            .collect();
        start.wait();
        let collector = {
            let heap = heap.clone();
            thread::spawn(move || {
                for _ in 0..20 {
                    assert!(heap.wait_for_collection_request(Duration::from_secs(30)));
                    heap.collection().reset();
                }
            })
        };
        for _ in 0..20 {
            let before = heap.collections();
            heap.request_collection();
            while heap.collections() == before {
                thread::sleep(Duration::from_millis(1));
            }
        }
        collector.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        for poller in pollers {
            let (stopped, epoch) = poller.join().unwrap();
            assert_eq!(stopped, 20, "{mode:?}: each collection is slept through");
            assert_eq!(epoch, 20);
        }
    }
}

/// A thread blocked in a safe region does not hold collections up, and learns on leaving it
/// that collections happened.
#[test]
fn a_safe_region_lets_collections_run() {
    let _watchdog = watchdog("safe region", Duration::from_secs(60));
    let heap = heap(config(Mode::Tlab, "1MiB"));
    let mut blocked = heap.attach();
    let object = blocked.alloc(32).unwrap();
    write_header(object, 32);
    let (entered, leave) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let collector = {
        let (heap, entered, leave) = (heap.clone(), entered.clone(), leave.clone());
        thread::spawn(move || {
            entered.wait();
            for _ in 0..3 {
                let collection = heap.collection();
                assert_eq!(collection.verify().unwrap().objects, 1);
            }
            leave.wait();
        })
    };
    let epoch = blocked.epoch();
    blocked.safe_region(|| {
        entered.wait();
        leave.wait();
    });
    collector.join().unwrap();
    assert_eq!(blocked.epoch() - epoch, 3);
    blocked.alloc(32).map(|o| write_header(o, 32)).unwrap();
}

/// A collection that gives up withdraws its request: the threads stopped at their polls run
/// again, and the one that never polled is named.
#[test]
fn a_collection_that_gives_up_lets_the_stopped_threads_go() {
    let _watchdog = watchdog("give up", Duration::from_secs(60));
    let heap = heap(config(Mode::Tlab, "1MiB"));
    let stubborn = heap.attach(); // this thread never polls while it holds it
    let stop = Arc::new(AtomicBool::new(false));
    let poller = {
        let (heap, stop) = (heap.clone(), stop.clone());
        thread::spawn(move || {
            let mut mutator = heap.attach();
            while !stop.load(Ordering::Relaxed) {
                mutator.poll();
            }
            mutator.epoch()
        })
    };
    match heap.collection_within(Duration::from_millis(200)) {
        Err(CollectionError::Timeout { running, .. }) => {
            assert_eq!(running.len(), 1);
            assert_eq!(running[0].id, stubborn.id());
            assert!(running[0].is_calling_thread);
        }
        other => panic!("{other:?}"),
    }
    assert!(!heap.collection_requested(), "the request is withdrawn");
    stop.store(true, Ordering::Relaxed);
    assert_eq!(poller.join().unwrap(), 0, "no collection happened");
    drop(stubborn);
}

/// A mutator attached while a collection is requested stops at its first allocation.
#[test]
fn a_mutator_attached_during_a_request_stops_too() {
    let _watchdog = watchdog("attach during request", Duration::from_secs(60));
    let heap = heap(config(Mode::Tlab, "1MiB"));
    heap.request_collection();
    let worker = {
        let heap = heap.clone();
        thread::spawn(move || {
            let mut mutator = heap.attach();
            let object = mutator.alloc(16).unwrap(); // stops here first
            write_header(object, 16);
            mutator.epoch()
        })
    };
    while heap.running_mutators().len() == 1 {
        thread::sleep(Duration::from_millis(1));
    }
    heap.collection().reset();
    assert_eq!(worker.join().unwrap(), 1);
}
