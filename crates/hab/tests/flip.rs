//! The `flip` mode's policy (Garthwaite et al. §5.2), step by step: it starts with TLABs,
//! switches to per-CPU LABs after a cycle whose TLABs left more than the largest LAB × the CPUs
//! unused, and back after a cycle whose per-CPU LABs left more than the largest LAB × the
//! threads that ran unused.

mod common;

use common::{heap, write_header};
use hab::{HeapConfig, Mode, Mutator, TlabPolicy};

const LAB_BYTES: usize = 64 << 10;

fn alloc(mutator: &mut Mutator, bytes: usize) {
    let size = mutator.checked_size(bytes).unwrap();
    let object = mutator.alloc_sized(size).expect("room");
    write_header(object, bytes);
}

#[test]
fn flip_mode_switches_to_per_cpu_labs_and_back() {
    let heap = heap(
        HeapConfig::builder()
            .capacity("64MiB")
            .mode(Mode::Flip)
            .tlab(TlabPolicy::Fixed(LAB_BYTES)),
    );
    let cpus = heap.topology().online_cpus().len().max(1);
    assert!(!heap.allocates_in_cpu_labs(), "starts with TLABs");

    // More threads than 1 + the CPUs each take a TLAB for one object: far more than the
    // largest LAB × the CPUs stays unused.
    let mut mutators: Vec<Mutator> = (0..2 * cpus + 2).map(|_| heap.attach()).collect();
    for mutator in &mut mutators {
        alloc(mutator, 16);
    }
    let mut parked: Vec<_> = mutators.into_iter().map(Mutator::park).collect();
    let collection = heap.collection();
    collection.verify().expect("walkable");
    collection.finish();
    assert!(heap.allocates_in_cpu_labs(), "flipped to per-CPU LABs");
    assert_eq!(
        heap.stats().cpu_lab_collections,
        0,
        "the cycle ran in TLABs"
    );

    // One thread runs; the others stay parked for the whole cycle. It leaves most of two LABs
    // unused: twice a small object, then one that does not fit the rest of the LAB.
    let mut runner = parked.pop().unwrap().unpark();
    for _ in 0..2 {
        alloc(&mut runner, 16);
        alloc(&mut runner, LAB_BYTES - 8);
    }
    let stats = heap.stats().totals;
    assert!(
        stats.cpu_lab.labs + stats.cpu_lab.fallback_allocs > 0,
        "allocated in per-CPU LABs: {stats}"
    );
    let runner = runner.park();
    let collection = heap.collection();
    collection.verify().expect("walkable");
    collection.finish();
    assert!(
        !heap.allocates_in_cpu_labs(),
        "flipped back: {}",
        heap.stats()
    );
    assert_eq!(
        heap.stats().cpu_lab_collections,
        1,
        "one cycle ran in per-CPU LABs"
    );

    // Back in TLABs.
    let mut runner = runner.unpark();
    alloc(&mut runner, 16);
    assert_eq!(heap.stats().totals.refills, 2 * cpus as u64 + 3);
}
