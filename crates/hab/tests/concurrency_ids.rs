//! Per-CPU LABs indexed by concurrency ids (`mm_cid`, where the kernel has them) or by CPU
//! number (`HAB_RSEQ_INDEX=cpu`, or a kernel without them): one thread that moves between
//! CPUs uses one LAB with concurrency ids, one per CPU it visited without. Every collection
//! walks cleanly and meets every object. CI runs this file both ways.
//!
//! Without the test harness: the process's one thread runs the test, so no other thread holds
//! a concurrency id (the kernel may otherwise hand a thread another id on another CPU).

mod common;

use std::collections::BTreeSet;
use std::thread;

use common::{allowed_cpus, heap, pin, write_header};
use hab::{HeapConfig, Mode, RseqMechanism, SlotIndex, TlabPolicy};

/// Objects of 64 bytes the thread allocates on each CPU it visits, per cycle.
const OBJECTS_PER_CPU: usize = 2000;
const CYCLES: usize = 4;

fn main() {
    one_thread_uses_one_lab_with_concurrency_ids_and_one_per_cpu_without();
    println!("concurrency_ids: ok");
}

fn one_thread_uses_one_lab_with_concurrency_ids_and_one_per_cpu_without() {
    if matches!(hab::rseq_mechanism(), RseqMechanism::Unavailable(_)) {
        eprintln!("skipped: no rseq here ({})", hab::rseq_mechanism());
        return;
    }
    let cpus: Vec<usize> = allowed_cpus().into_iter().take(2).collect();
    if cpus.len() < 2 {
        eprintln!("skipped: this thread may only run on one CPU");
        return;
    }
    let heap = heap(
        HeapConfig::builder()
            .capacity("64MiB")
            .mode(Mode::CpuLab)
            .tlab(TlabPolicy::Fixed(16 << 10)),
    );
    // The process's only thread.
    let mut mutator = Some(heap.attach());
    let mut objects = 0usize;
    for _ in 0..CYCLES {
        let mut running = mutator.take().expect("attached");
        let mut visited = BTreeSet::new();
        for &cpu in &cpus {
            assert!(pin(cpu));
            thread::yield_now();
            for _ in 0..OBJECTS_PER_CPU {
                let object = running.alloc(64).expect("room");
                write_header(object, 64);
                objects += 1;
            }
            visited.insert(cpu);
        }
        let parked = running.park();
        {
            let mut collection = heap.collection();
            let walk = collection.verify().expect("the heap walks cleanly");
            assert_eq!(walk.objects as usize, objects);
            collection.reset();
            objects = 0;
        }
        mutator = Some(parked.unpark());
        assert_eq!(visited.len(), 2);
    }
    let stats = heap.stats();
    assert_eq!(stats.cpu_lab_collections, CYCLES as u64);
    let in_use = stats.totals.cpu_lab.labs_in_use_at_collections;
    let expected = match hab::rseq_slot_index() {
        SlotIndex::ConcurrencyId => CYCLES as u64,
        SlotIndex::Cpu => 2 * CYCLES as u64,
    };
    eprintln!(
        "indexed by {}: {in_use} LABs in use over {CYCLES} collections",
        hab::rseq_slot_index()
    );
    assert_eq!(in_use, expected, "indexed by {}", hab::rseq_slot_index());
}
