//! Per-allocation alignment under stress: in every mode, more threads than CPUs mix plain and
//! aligned allocations (16 bytes to a page) with an object model whose smallest filler is
//! larger than the heap's alignment; every aligned object starts at a multiple of its
//! alignment, no two objects overlap, every gap is a filler the model accepts, and the walk
//! meets exactly the objects handed out, with the statistics counting objects and fillers.

mod common;

use std::time::Duration;

use common::{assert_disjoint_inside, walk_objects, watchdog, CheckedFillerModel, Rng};
use hab::{AllocError, Heap, HeapConfig, Mode, TlabPolicy, MAX_OBJECT_ALIGNMENT_BYTES};

const THREADS: usize = 6;
const OBJECTS_PER_THREAD: usize = 20_000;
const ALIGNMENTS: [usize; 6] = [16, 32, 64, 256, 1024, 4096];

#[test]
fn aligned_objects_in_every_mode() {
    let _watchdog = watchdog("aligned_objects_in_every_mode", Duration::from_secs(120));
    for mode in Mode::ALL {
        let model = CheckedFillerModel::new(24, 8);
        let mut builder = HeapConfig::builder()
            .capacity("256MiB")
            .mode(mode)
            .tlab(TlabPolicy::Fixed(16 << 10));
        if mode == Mode::Hab {
            builder = builder.middle("core:256KiB");
        }
        let heap = Heap::new(builder.build().unwrap(), model.clone()).unwrap();
        let handed_out: Vec<Vec<(usize, usize)>> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..THREADS)
                .map(|index| {
                    let heap = &heap;
                    scope.spawn(move || {
                        let mut rng = Rng::new(index as u64 + 1);
                        let mut mutator = heap.attach();
                        let mut objects = Vec::with_capacity(OBJECTS_PER_THREAD);
                        for _ in 0..OBJECTS_PER_THREAD {
                            let bytes = 16 + 8 * rng.below(40) as usize;
                            let object = if rng.below(4) == 0 {
                                let alignment =
                                    ALIGNMENTS[rng.below(ALIGNMENTS.len() as u64) as usize];
                                let object = mutator.alloc_aligned(bytes, alignment).unwrap();
                                assert_eq!(
                                    object.as_ptr() as usize % alignment,
                                    0,
                                    "{mode}: {bytes} bytes at {alignment}"
                                );
                                object
                            } else {
                                mutator.alloc(bytes).unwrap()
                            };
                            common::write_header(object, bytes);
                            objects.push((object.as_ptr() as usize, bytes));
                        }
                        objects
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let mut expected: Vec<(usize, usize)> = handed_out.into_iter().flatten().collect();
        let collection = heap.collection();
        let (summary, mut walked) = walk_objects(&collection);
        assert_eq!(summary.total_bytes(), collection.used_bytes(), "{mode}");
        assert_disjoint_inside(&mut expected, heap.reserved_range());
        walked.sort_unstable();
        assert_eq!(
            walked, expected,
            "{mode}: the walk meets exactly the objects"
        );
        let totals = heap.stats().totals;
        assert_eq!(summary.filler_bytes as u64, totals.waste_bytes(), "{mode}");
        assert_eq!(
            summary.object_bytes as u64,
            totals.allocated_bytes(),
            "{mode}"
        );
        assert!(
            totals.alignment_gap_bytes > 0,
            "{mode}: some gaps were left"
        );
        assert_eq!(
            model.violations(),
            0,
            "{mode}: a gap broke the filler contract"
        );
        collection.finish();
    }
}

#[test]
fn bad_alignments_are_errors() {
    let heap = common::heap(HeapConfig::builder().capacity("1MiB"));
    let mut mutator = heap.attach();
    for alignment in [0, 3, 48, MAX_OBJECT_ALIGNMENT_BYTES * 2] {
        let error = mutator.alloc_aligned(16, alignment).unwrap_err();
        assert_eq!(error, AllocError::BadAlignment { alignment });
        assert!(error.to_string().contains("power of two"), "{error}");
    }
    assert_eq!(
        mutator.alloc_aligned(12, 64).unwrap_err(),
        AllocError::Misaligned {
            bytes: 12,
            alignment: 8
        }
    );
    // A full heap: out of memory, not a panic.
    let mut full = false;
    for _ in 0..100_000 {
        match mutator.alloc_aligned(512, 4096) {
            Ok(object) => common::write_header(object, 512),
            Err(error) => {
                assert_eq!(error, AllocError::OutOfMemory { bytes: 512 });
                full = true;
                break;
            }
        }
    }
    assert!(full, "a 1 MiB heap fills up");
}
