//! The `flip` mode's policy (Garthwaite et al. §5.2, `FlipCycle`), step by step: it starts
//! with TLABs and keeps them after the first cycle, switches to per-CPU LABs after three cycles
//! in a row whose TLABs left more than the largest LAB × the CPUs unused (Hab's own paths set
//! no share of the cycle as a bound), and back after a cycle whose per-CPU LABs left more than
//! the largest LAB × the threads that ran unused.

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
    // The CPUs the flip policy counts: those online in the heap's topology.
    let cpus = heap(HeapConfig::builder().capacity("1MiB"))
        .topology()
        .online_cpus()
        .len()
        .max(1);
    // More threads than 1 + the CPUs, each taking a TLAB for one object: their tails are far
    // more than the largest LAB × the CPUs.
    let threads = 2 * cpus + 2;
    let capacity = (threads * LAB_BYTES * 4).next_multiple_of(1 << 20);
    let heap = heap(
        HeapConfig::builder()
            .capacity(capacity)
            .mode(Mode::Flip)
            .tlab(TlabPolicy::Fixed(LAB_BYTES)),
    );
    assert!(!heap.allocates_in_cpu_labs(), "starts with TLABs");

    let mut mutators: Vec<Mutator> = (0..threads).map(|_| heap.attach()).collect();
    // A collection before anything was allocated (an embedder's at start-up) is not the
    // first cycle: that is the first that allocates, whose TLABs were sized before it.
    let mut parked: Vec<_> = mutators.into_iter().map(Mutator::park).collect();
    heap.collection().finish();
    mutators = parked.drain(..).map(|p| p.unpark()).collect();
    for cycle in ["the first", "the second", "the third", "the fourth"] {
        for mutator in &mut mutators {
            alloc(mutator, 16);
        }
        parked = mutators.into_iter().map(Mutator::park).collect();
        let collection = heap.collection();
        collection.verify().expect("walkable");
        collection.finish();
        if cycle != "the fourth" {
            // The first cycle does not count; the next are over the bound, too few in a row.
            assert!(!heap.allocates_in_cpu_labs(), "no flip after {cycle} cycle");
            mutators = parked.drain(..).map(|p| p.unpark()).collect();
        } else {
            mutators = Vec::new();
        }
    }
    assert!(heap.allocates_in_cpu_labs(), "flipped to per-CPU LABs");
    assert_eq!(
        heap.stats().cpu_lab_collections,
        0,
        "the cycles ran in TLABs"
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
    assert_eq!(heap.stats().totals.refills, 4 * threads as u64 + 1);
}
