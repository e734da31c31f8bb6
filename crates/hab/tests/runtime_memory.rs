//! Heaps over memory the runtime owns: every object lies inside it, reused and never-zeroed
//! memory is zeroed before an object gets it, collections and resets work as over Hab's own
//! reservation, the memory is left to the runtime when the heap is dropped, and bad memory is a
//! clear error.

mod common;

use std::ptr::NonNull;

use hab::{HeaderWordModel, Heap, HeapConfig, HeapError, Mode, RuntimeMemory, TlabPolicy};

const MEMORY_BYTES: usize = 8 << 20;

/// Memory a runtime owns, filled with a pattern so that unzeroed bytes show.
fn runtime_memory() -> Vec<u64> {
    vec![0xABAB_ABAB_ABAB_ABAB; MEMORY_BYTES / 8]
}

fn lend(memory: &mut [u64], offset_bytes: usize, zeroed: bool) -> RuntimeMemory {
    let start = memory.as_mut_ptr().cast::<u8>().wrapping_add(offset_bytes);
    // SAFETY: the slice is readable and writable, only the heap built over it uses it, and
    // every test drops the heap before the slice.
    unsafe {
        RuntimeMemory::new(
            NonNull::new(start).unwrap(),
            memory.len() * 8 - offset_bytes,
            zeroed,
        )
    }
}

#[test]
fn objects_live_in_the_runtimes_memory_in_every_mode() {
    for mode in Mode::ALL {
        let mut memory = runtime_memory();
        let range = {
            let start = memory.as_ptr() as usize;
            start..start + MEMORY_BYTES
        };
        let mut builder = HeapConfig::builder()
            .capacity(MEMORY_BYTES)
            .mode(mode)
            .tlab(TlabPolicy::Fixed(16 << 10));
        if mode == Mode::Hab {
            builder = builder.middle("core:256KiB");
        }
        let heap = Heap::with_memory(
            builder.build().unwrap(),
            HeaderWordModel,
            lend(&mut memory, 0, false),
        )
        .unwrap();
        assert_eq!(heap.reserved_range(), range);
        for round in 0..3 {
            let mut objects = std::thread::scope(|scope| {
                let threads: Vec<_> = (0..3)
                    .map(|_| {
                        scope.spawn(|| {
                            let mut mutator = heap.attach();
                            let mut objects = Vec::new();
                            for index in 0..20_000usize {
                                let bytes = 16 + 8 * (index % 8);
                                let object = mutator.alloc(bytes).unwrap();
                                let address = object.as_ptr() as usize;
                                assert!(range.contains(&address) && address + bytes <= range.end);
                                // SAFETY: `bytes` fresh bytes handed to this thread.
                                let contents =
                                    unsafe { std::slice::from_raw_parts(object.as_ptr(), bytes) };
                                assert!(
                                    contents.iter().all(|&b| b == 0),
                                    "{mode} round {round}: {address:#x} not zeroed"
                                );
                                common::write_header(object, bytes);
                                objects.push((address, bytes));
                            }
                            objects
                        })
                    })
                    .collect();
                threads
                    .into_iter()
                    .flat_map(|t| t.join().unwrap())
                    .collect::<Vec<_>>()
            });
            let mut collection = heap.collection();
            let (_, mut walked) = common::walk_objects(&collection);
            common::assert_disjoint_inside(&mut objects, range.clone());
            walked.sort_unstable();
            assert_eq!(walked, objects, "{mode} round {round}");
            collection.reset();
        }
        drop(heap);
        // The memory is still the runtime's: Hab did not unmap it.
        memory.fill(7);
        assert!(memory.iter().all(|&word| word == 7));
    }
}

#[test]
fn bad_runtime_memory_is_an_error() {
    let mut memory = runtime_memory();
    let config = |capacity: usize| HeapConfig::builder().capacity(capacity).build().unwrap();
    let error = |result: Result<_, HeapError>| match result {
        Err(HeapError::Config(error)) => (error.field(), error.to_string()),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("accepted"),
    };
    let (field, said) = error(Heap::with_memory(
        config(2 * MEMORY_BYTES),
        HeaderWordModel,
        lend(&mut memory, 0, false),
    ));
    assert_eq!(field, "capacity");
    assert!(said.contains("larger than the runtime's memory"), "{said}");
    let (field, said) = error(Heap::with_memory(
        config(1 << 20),
        HeaderWordModel,
        lend(&mut memory, 4, false),
    ));
    assert_eq!(field, "memory");
    assert!(said.contains("not a multiple of the alignment 8"), "{said}");
    let pretouched = HeapConfig::builder()
        .capacity(1 << 20)
        .pretouch(true)
        .build()
        .unwrap();
    let (field, _) = error(Heap::with_memory(
        pretouched,
        HeaderWordModel,
        lend(&mut memory, 0, false),
    ));
    assert_eq!(field, "pretouch");
}
