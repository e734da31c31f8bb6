//! Every bad input to the public API gives a typed error that names the problem, never a panic
//! or an address outside the heap.

mod common;

use std::ops::Range;
use std::sync::Arc;

use common::{assert_disjoint_inside, heap, write_header, CheckedFillerModel};
use hab::{
    AllocError, CollectionError, HeaderWordModel, Heap, HeapConfig, HeapError, Mode, Mutator,
    TlabPolicy,
};

const CAPACITY: usize = 64 << 10;

/// Every (mode, policy) pair the heap supports, with a small fixed TLAB among them.
fn setups() -> Vec<(Mode, TlabPolicy)> {
    let mut setups = vec![(Mode::Shared, TlabPolicy::Adaptive)];
    for policy in [
        TlabPolicy::Fixed(2048),
        TlabPolicy::Fixed(4096),
        TlabPolicy::Adaptive,
        TlabPolicy::Growing,
    ] {
        setups.push((Mode::Tlab, policy));
    }
    setups
}

fn small_heap(mode: Mode, policy: TlabPolicy, alignment: usize) -> Arc<Heap> {
    heap(
        HeapConfig::builder()
            .capacity(CAPACITY)
            .mode(mode)
            .tlab(policy)
            .alignment(alignment),
    )
}

/// Allocates `bytes` and writes its header, panicking on failure.
fn alloc(mutator: &mut Mutator, bytes: usize) -> usize {
    let object = mutator
        .alloc(bytes)
        .unwrap_or_else(|e| panic!("alloc({bytes}): {e}"));
    write_header(object, bytes);
    object.as_ptr() as usize
}

/// A size of 0 is `ZeroSize` in every mode and size check, and hands nothing out.
#[test]
fn zero_size_is_rejected() {
    // A size of 0 is `ZeroSize` in every mode, through every size check, and hands nothing out.
    for (mode, policy) in setups() {
        let heap = small_heap(mode, policy, 8);
        let mut mutator = heap.attach();
        assert_eq!(
            mutator.alloc(0),
            Err(AllocError::ZeroSize),
            "{mode} {policy}"
        );
        assert_eq!(mutator.checked_size(0), Err(AllocError::ZeroSize));
        assert_eq!(heap.checked_size(0), Err(AllocError::ZeroSize));
        assert_eq!(heap.stats().used_bytes, 0, "nothing handed out");
        // With a TLAB in place the check still comes first.
        alloc(&mut mutator, 16);
        assert_eq!(mutator.alloc(0), Err(AllocError::ZeroSize));
        let message = AllocError::ZeroSize.to_string();
        assert!(message.contains("0 bytes"), "{message}");
    }
}

/// Sizes off the alignment grid (8, or 16 when configured) are `Misaligned`, handing nothing out.
#[test]
fn misaligned_sizes_are_rejected() {
    // Sizes that are not a multiple of the alignment (8, or 16 when configured) are `Misaligned`
    // with the size and the alignment, with or without a TLAB, and hand nothing out.
    for (alignment, sizes) in [
        (8, &[1usize, 4, 7, 9, 12, 20, 4097, CAPACITY - 1][..]),
        (16, &[8, 24, 40, 4104, CAPACITY - 8][..]),
    ] {
        for (mode, policy) in setups() {
            let heap = small_heap(mode, policy, alignment);
            let mut mutator = heap.attach();
            for with_tlab in [false, true] {
                if with_tlab {
                    alloc(&mut mutator, alignment);
                }
                let used = heap.stats().used_bytes;
                for &bytes in sizes {
                    let expected = AllocError::Misaligned { bytes, alignment };
                    assert_eq!(mutator.alloc(bytes), Err(expected), "{mode} {policy}");
                    assert_eq!(mutator.checked_size(bytes), Err(expected));
                    assert_eq!(heap.checked_size(bytes), Err(expected));
                    let message = expected.to_string();
                    assert!(
                        message.contains(&bytes.to_string())
                            && message.contains(&format!("alignment {alignment}")),
                        "{message}"
                    );
                }
                assert_eq!(heap.stats().used_bytes, used, "nothing handed out");
            }
        }
    }
}

/// Sizes above the capacity, up to `usize::MAX`, are `TooLarge`; exactly the capacity fits once.
#[test]
fn sizes_larger_than_the_heap_are_too_large() {
    // Sizes beyond the capacity, up to `usize::MAX`, are `TooLarge` (not `Misaligned`, not an
    // overflow); a size of exactly the capacity fits an empty heap and leaves it full.
    for alignment in [8, 16] {
        for (mode, policy) in setups() {
            let heap = small_heap(mode, policy, alignment);
            let mut mutator = heap.attach();
            for bytes in [
                CAPACITY + alignment,
                CAPACITY + 1,
                2 * CAPACITY,
                1 << 44,
                1 << 63,
                usize::MAX & !15,
                usize::MAX - 1,
                usize::MAX,
            ] {
                let expected = AllocError::TooLarge {
                    bytes,
                    capacity: CAPACITY,
                };
                assert_eq!(
                    mutator.alloc(bytes),
                    Err(expected),
                    "{mode} {policy} {bytes}"
                );
                assert_eq!(heap.checked_size(bytes), Err(expected));
                assert!(expected.to_string().contains("64KiB"), "{expected}");
            }
            assert_eq!(heap.stats().used_bytes, 0, "nothing handed out");

            // The whole heap as one object.
            let object = alloc(&mut mutator, CAPACITY);
            assert_eq!(object, heap.reserved_range().start, "{mode} {policy}");
            assert_eq!(
                mutator.alloc(alignment),
                Err(AllocError::OutOfMemory { bytes: alignment })
            );
            assert_eq!(heap.stats().used_bytes, CAPACITY);
        }
    }
}

/// A full heap is `OutOfMemory` only after (capacity - filler waste) / 16 disjoint 16-byte objects.
#[test]
fn an_exhausted_heap_is_out_of_memory_after_using_every_byte() {
    // Filling a 64 KiB heap with 16-byte objects ends in `OutOfMemory` only once less than one
    // object is left, in every mode and policy: objects plus fillers (exactly the waste counters)
    // cover the used bytes, so there are exactly (capacity - waste) / 16 successful allocations,
    // all disjoint and inside the reservation; with TLAB sizes that are multiples of 16 there is
    // no waste at all and exactly capacity / 16 objects. The heap is usable again after a reset.
    for alignment in [8, 16] {
        for (mode, policy) in setups() {
            let context = format!("{mode} {policy} alignment {alignment}");
            let heap = small_heap(mode, policy, alignment);
            let mut mutator = heap.attach();
            let mut objects = Vec::new();
            let error = loop {
                match mutator.alloc(16) {
                    Ok(object) => {
                        write_header(object, 16);
                        objects.push((object.as_ptr() as usize, 16));
                    }
                    Err(error) => break error,
                }
                assert!(
                    objects.len() <= CAPACITY / 16,
                    "{context}: too many objects"
                );
            };
            assert_eq!(error, AllocError::OutOfMemory { bytes: 16 }, "{context}");
            assert!(error.to_string().contains("16 bytes"), "{error}");
            // It stays out of memory, with the same typed error.
            for _ in 0..3 {
                assert_eq!(
                    mutator.alloc(16),
                    Err(AllocError::OutOfMemory { bytes: 16 })
                );
            }
            let used = heap.stats().used_bytes;
            assert!(
                used > CAPACITY - 16 && used <= CAPACITY,
                "{context}: {used} bytes used of {CAPACITY}"
            );
            if mode == Mode::Shared || alignment == 16 {
                assert_eq!(used, CAPACITY, "{context}: used to the last byte");
            }

            let parked = mutator.park();
            let mut collection = heap.collection();
            let summary = collection.verify().expect(&context);
            let totals = heap.stats().totals;
            assert_eq!(collection.used_bytes(), used, "{context}");
            assert_eq!(summary.total_bytes(), used, "{context}");
            assert_eq!(summary.objects as usize, objects.len(), "{context}");
            assert_eq!(summary.object_bytes, 16 * objects.len(), "{context}");
            assert_eq!(
                summary.filler_bytes as u64,
                totals.waste_bytes(),
                "{context}"
            );
            assert_eq!(summary.object_bytes as u64, totals.allocated_bytes());
            assert_eq!(
                objects.len(),
                (used - summary.filler_bytes) / 16,
                "{context}: every byte not wasted holds an object"
            );
            let tlab_sizes_multiple_of_16 = alignment == 16 || policy != TlabPolicy::Growing;
            if tlab_sizes_multiple_of_16 {
                assert_eq!(summary.filler_bytes, 0, "{context}: no waste");
                assert_eq!(objects.len(), CAPACITY / 16, "{context}");
            }
            if mode == Mode::Shared {
                assert_eq!(totals.slow_allocs as usize, objects.len());
                assert_eq!(totals.refills, 0);
            }
            assert_disjoint_inside(&mut objects, heap.reserved_range());

            collection.reset();
            collection.finish();
            let mut mutator = parked.unpark();
            assert_eq!(alloc(&mut mutator, 16), heap.reserved_range().start);
        }
    }
}

/// Objects of 48 then 16 bytes use the heap to its last byte before `OutOfMemory`.
#[test]
fn the_last_bytes_of_the_heap_are_handed_out() {
    // The last 16 bytes of a heap that 48-byte objects cannot use still take a 16-byte object;
    // then even the smallest object is `OutOfMemory` and the top is exactly the end.
    for (mode, policy) in setups() {
        let heap = small_heap(mode, policy, 16);
        let mut mutator = heap.attach();
        let mut objects = Vec::new();
        for bytes in [48, 16] {
            loop {
                match mutator.alloc(bytes) {
                    Ok(object) => {
                        write_header(object, bytes);
                        objects.push((object.as_ptr() as usize, bytes));
                    }
                    Err(error) => {
                        assert_eq!(error, AllocError::OutOfMemory { bytes }, "{mode} {policy}");
                        break;
                    }
                }
            }
        }
        if mode == Mode::Shared {
            assert!(objects.iter().any(|&(_, bytes)| bytes == 16));
            assert_eq!(objects.len(), CAPACITY / 48 + 1);
            let (last, _) = *objects.last().unwrap();
            assert_eq!(last, heap.reserved_range().end - 16);
        }
        let parked = mutator.park();
        let collection = heap.collection();
        assert_eq!(collection.used_bytes(), CAPACITY, "{mode} {policy}");
        let summary = collection.verify().unwrap();
        assert_eq!(summary.total_bytes(), CAPACITY);
        assert_eq!(summary.objects as usize, objects.len());
        assert_disjoint_inside(&mut objects, heap.reserved_range());
        collection.finish();
        drop(parked);
    }
}

fn config_field(builder: hab::HeapConfigBuilder) -> &'static str {
    match builder.clone().build() {
        Ok(config) => panic!("{builder:?} was accepted as {config:?}"),
        Err(error) => {
            let message = error.to_string();
            assert!(
                message.contains(error.field()),
                "the message names the field: {message}"
            );
            error.field()
        }
    }
}

/// Every invalid configuration is a `ConfigError` whose `field()` names the wrong setting.
#[test]
fn invalid_configurations_name_their_field() {
    // Every invalid configuration is a `ConfigError` whose `field()` names the wrong setting.
    let b = || HeapConfig::builder().capacity("64KiB");
    // min > max.
    assert_eq!(
        config_field(b().min_tlab("16KiB").max_tlab("8KiB")),
        "min_tlab"
    );
    assert_eq!(
        config_field(HeapConfig::builder().min_tlab("2MiB")),
        "min_tlab"
    );
    assert_eq!(
        config_field(b().tlab(TlabPolicy::Fixed(1024)).min_tlab(2048)),
        "min_tlab"
    );
    // Alignment not a power of two from 8 to 4096.
    for alignment in [0, 1, 4, 12, 24, 48, 100, 8192, 1 << 40, usize::MAX] {
        assert_eq!(
            config_field(b().alignment(alignment)),
            "alignment",
            "{alignment}"
        );
    }
    // TLABs larger than the heap.
    assert_eq!(config_field(b().max_tlab("128KiB")), "max_tlab");
    assert_eq!(config_field(b().min_tlab("128KiB")), "min_tlab");
    assert_eq!(config_field(b().tlab(TlabPolicy::Fixed(128 << 10))), "tlab");
    assert_eq!(config_field(b().tlab(TlabPolicy::Fixed(0))), "tlab");
    assert_eq!(config_field(b().tlab(TlabPolicy::Fixed(1004))), "tlab");
    // Zero, misaligned or impossible capacities.
    assert_eq!(config_field(HeapConfig::builder().capacity(0)), "capacity");
    assert_eq!(
        config_field(HeapConfig::builder().capacity("0KiB")),
        "capacity"
    );
    assert_eq!(
        config_field(HeapConfig::builder().capacity(1001)),
        "capacity"
    );
    assert_eq!(
        config_field(HeapConfig::builder().capacity(1032).alignment(16)),
        "capacity"
    );
    assert_eq!(
        config_field(HeapConfig::builder().capacity("32TiB")),
        "capacity"
    );
    // Sizes that are not multiples of the alignment.
    assert_eq!(config_field(b().min_tlab(12)), "min_tlab");
    assert_eq!(config_field(b().alignment(16).min_tlab(1032)), "min_tlab");
    assert_eq!(config_field(b().max_tlab(0)), "max_tlab");
    // A middle buffer that is wrong is blamed on `middle`, not on the TLAB sizes derived
    // from it.
    let hab = || HeapConfig::builder().mode(hab::Mode::Hab);
    assert_eq!(config_field(hab().middle("cpu:0")), "middle");
    assert_eq!(
        config_field(hab().middle("core:1KiB,package:2KiB")),
        "middle"
    );
    assert_eq!(config_field(hab().middle("core:8")), "middle");
    assert_eq!(config_field(hab().middle("core:12")), "middle");
    // Bad size strings, each named by its field and quoted in the message.
    for (builder, field, text) in [
        (HeapConfig::builder().capacity("lots"), "capacity", "lots"),
        (HeapConfig::builder().capacity(""), "capacity", ""),
        (
            HeapConfig::builder().capacity("1.5MiB"),
            "capacity",
            "1.5MiB",
        ),
        (HeapConfig::builder().capacity("-4k"), "capacity", "-4k"),
        (
            HeapConfig::builder().capacity("99999999999999999999999"),
            "capacity",
            "99999999999999999999999",
        ),
        (
            HeapConfig::builder().min_tlab("12 parsecs"),
            "min_tlab",
            "12 parsecs",
        ),
        (HeapConfig::builder().max_tlab("MiB"), "max_tlab", "MiB"),
        (HeapConfig::builder().max_tlab("4ib"), "max_tlab", "4ib"),
    ] {
        let error = builder.build().unwrap_err();
        assert_eq!(error.field(), field, "{text:?}");
        assert!(error.to_string().contains(&format!("{text:?}")), "{error}");
    }
    // The other knobs.
    assert_eq!(
        config_field(b().waste_target_percent(0.0)),
        "waste_target_percent"
    );
    assert_eq!(
        config_field(b().waste_target_percent(f64::INFINITY)),
        "waste_target_percent"
    );
    assert_eq!(
        config_field(b().waste_target_percent(-1.0)),
        "waste_target_percent"
    );
    assert_eq!(
        config_field(b().refill_waste_fraction(0)),
        "refill_waste_fraction"
    );
    assert_eq!(
        config_field(b().waste_increment_words(usize::MAX)),
        "waste_increment_words"
    );
    assert_eq!(
        config_field(b().allocation_weight_percent(101)),
        "allocation_weight_percent"
    );
    // Names that do not parse.
    assert_eq!("tlabs".parse::<Mode>().unwrap_err().field(), "mode");
    assert_eq!("".parse::<Mode>().unwrap_err().field(), "mode");
    assert_eq!("big".parse::<TlabPolicy>().unwrap_err().field(), "tlab");
    assert_eq!(
        "always".parse::<hab::ZeroMemory>().unwrap_err().field(),
        "zero"
    );
    // The limits themselves are accepted.
    for alignment in [8, 16, 4096] {
        let config = HeapConfig::builder()
            .capacity("64KiB")
            .alignment(alignment)
            .build()
            .unwrap();
        assert_eq!(config.alignment_bytes(), alignment);
        assert!(config.min_tlab_bytes() <= config.max_tlab_bytes());
        assert_eq!(config.min_tlab_bytes() % alignment, 0);
    }
}

/// Ranges outside the reservation, misaligned or reversed are `BadRange` and change nothing.
#[test]
fn bad_allocation_ranges_are_rejected() {
    // `set_allocation_range` rejects ranges outside the reservation, misaligned or reversed with
    // `BadRange` naming the problem; a rejected range changes nothing, and an empty range at the
    // end of the reservation is accepted and makes allocation `OutOfMemory`, not a panic.
    let heap = small_heap(Mode::Tlab, TlabPolicy::Adaptive, 16);
    let reserved = heap.reserved_range();
    let (start, end) = (reserved.start, reserved.end);
    let mut mutator = heap.attach();
    let first = alloc(&mut mutator, 32);
    let parked = mutator.park();
    let mut collection = heap.collection();
    let used = collection.used_bytes();
    let cases = [
        (start - 4096..start + 4096, "not inside"),
        (start - 16..start, "not inside"),
        (0..0, "not inside"),
        (start..end + 16, "not inside"),
        (end..end + 4096, "not inside"),
        (usize::MAX - 15..usize::MAX - 15, "not inside"),
        (start + 8..end, "not aligned"),
        (start..end - 8, "not aligned"),
        (start + 1..start + 17, "not aligned"),
        (start + 64..start, "start above end"),
        (end..start, "start above end"),
        (
            Range {
                start: usize::MAX,
                end: 0,
            },
            "start above end",
        ),
    ];
    for (range, problem) in cases {
        let error = collection
            .set_allocation_range(range.clone())
            .expect_err(&format!("{range:x?} was accepted"));
        let CollectionError::BadRange {
            start: bad_start,
            end: bad_end,
            problem: said,
        } = error.clone()
        else {
            panic!("{range:x?}: {error:?}");
        };
        assert_eq!((bad_start, bad_end), (range.start, range.end));
        assert!(said.contains(problem), "{range:x?}: {said}");
        assert!(error.to_string().contains(problem), "{error}");
    }
    collection.finish();
    // Nothing changed: same range, allocation goes on above the first object.
    assert_eq!(heap.allocation_range(), reserved);
    assert_eq!(heap.stats().used_bytes, used);
    let mut mutator = parked.unpark();
    let second = alloc(&mut mutator, 32);
    assert!(second >= first + 32, "no reuse of live memory");

    // An empty range at the very end: accepted, and allocation is out of memory.
    let parked = mutator.park();
    let mut collection = heap.collection();
    collection.set_allocation_range(end..end).unwrap();
    collection.finish();
    assert_eq!(heap.allocation_range(), end..end);
    let mut mutator = parked.unpark();
    assert_eq!(
        mutator.alloc(16),
        Err(AllocError::OutOfMemory { bytes: 16 })
    );
    let mut late = heap.attach();
    assert_eq!(late.alloc(16), Err(AllocError::OutOfMemory { bytes: 16 }));
    drop(late);
    // A valid range followed by a rejected one keeps the valid one.
    let parked = mutator.park();
    let mut collection = heap.collection();
    collection.set_allocation_range(start + 4096..end).unwrap();
    assert!(collection.set_allocation_range(start + 8..end).is_err());
    collection.finish();
    assert_eq!(heap.allocation_range(), start + 4096..end);
    let mut mutator = parked.unpark();
    assert_eq!(alloc(&mut mutator, 16), start + 4096);
}

/// `try_collection` is `MutatorsRunning { running }` / `InProgress` and leaves nothing stuck.
#[test]
fn try_collection_with_running_mutators_is_refused() {
    // `try_collection` with running mutators is `MutatorsRunning` with their number, leaves the
    // heap usable (parked mutators unpark, new ones attach) and succeeds once all are parked;
    // during a collection it is `InProgress`.
    let heap = small_heap(Mode::Tlab, TlabPolicy::Adaptive, 8);
    let mut running = heap.attach();
    let mut other = heap.attach();
    let mut parked = heap.attach();
    alloc(&mut running, 16);
    alloc(&mut other, 16);
    alloc(&mut parked, 16);
    let parked = parked.park();
    let error = heap.try_collection().expect_err("mutators are running");
    assert_eq!(error, CollectionError::MutatorsRunning { running: 2 });
    assert!(error.to_string().contains("2 mutators"), "{error}");
    assert_eq!(heap.collections(), 0);

    // Nothing is stuck: the parked one unparks, a new one attaches, all allocate.
    let mut unparked = parked.unpark();
    alloc(&mut unparked, 16);
    let fresh = heap.attach();
    alloc(&mut running, 16);
    let parked = unparked.park();
    assert_eq!(
        heap.try_collection().err(),
        Some(CollectionError::MutatorsRunning { running: 3 })
    );
    drop(fresh);
    let other = other.park();
    assert_eq!(
        heap.try_collection().err(),
        Some(CollectionError::MutatorsRunning { running: 1 })
    );
    let running = running.park();

    let collection = heap.try_collection().expect("every mutator is parked");
    assert_eq!(
        heap.try_collection().err(),
        Some(CollectionError::AlreadyCollecting)
    );
    std::thread::scope(|scope| {
        let other_thread = scope.spawn(|| heap.try_collection().err());
        assert_eq!(
            other_thread.join().unwrap(),
            Some(CollectionError::InProgress)
        );
    });
    assert_eq!(collection.verify().unwrap().objects, 5);
    collection.finish();
    assert_eq!(heap.collections(), 1);
    for parked in [parked, other, running] {
        let mut mutator = parked.unpark();
        alloc(&mut mutator, 16);
    }
}

/// A model whose smallest filler does not fit beside `min_tlab` is `HeapError::Config`.
#[test]
fn an_object_model_with_fillers_larger_than_min_tlab_is_a_config_error() {
    // An object model whose smallest filler does not fit beside the smallest TLAB is rejected by
    // `Heap::new` with `HeapError::Config` naming `min_tlab`, in every mode.
    for (mode, min_tlab, min_filler) in [
        (Mode::Tlab, 2048, 4096),
        (Mode::Tlab, 2048, 2048),
        (Mode::Tlab, 2048, 2041),
        (Mode::Shared, 256, 1 << 20),
        (Mode::Tlab, 64, usize::MAX / 2),
    ] {
        let config = HeapConfig::builder()
            .capacity(CAPACITY)
            .mode(mode)
            .min_tlab(min_tlab)
            .build()
            .unwrap();
        let model = CheckedFillerModel::new(min_filler, 8);
        match Heap::new(config, model) {
            Err(HeapError::Config(error)) => {
                assert_eq!(error.field(), "min_tlab", "{error}");
                assert!(error.to_string().contains("filler"), "{error}");
            }
            Err(other) => panic!("{min_filler}: wrong error {other}"),
            Ok(_) => panic!("a {min_filler}-byte filler beside {min_tlab}-byte TLABs"),
        }
    }
}

/// A smallest filler near `usize::MAX`, whose rounding up to the alignment overflows (it
/// wrapped to 0 in release builds, making the heap unwalkable), is refused like any filler
/// too large for the smallest TLAB.
#[test]
fn a_filler_whose_rounding_overflows_is_a_config_error() {
    for min_filler in [usize::MAX, usize::MAX - 3, usize::MAX - 8] {
        let config = HeapConfig::builder()
            .capacity(CAPACITY)
            .alignment(16)
            .build()
            .unwrap();
        match Heap::new(config, CheckedFillerModel::new(min_filler, 8)) {
            Err(HeapError::Config(error)) => assert_eq!(error.field(), "min_tlab", "{error}"),
            Err(other) => panic!("{min_filler}: wrong error {other}"),
            Ok(_) => panic!("a {min_filler}-byte filler was accepted"),
        }
    }
}

/// A smallest filler just below `min_tlab` is accepted and no filler is ever smaller.
#[test]
fn a_large_minimum_filler_is_always_honoured() {
    // A smallest filler just below the smallest TLAB is accepted, and then every TLAB keeps room
    // for it: no filler is ever smaller than the model's minimum or misaligned, and the heap
    // walks to its top.
    for (policy, min_filler) in [
        (TlabPolicy::Fixed(2048), 2040),
        (TlabPolicy::Adaptive, 24),
        (TlabPolicy::Growing, 100),
    ] {
        let config = HeapConfig::builder()
            .capacity(CAPACITY)
            .tlab(policy)
            .build()
            .unwrap();
        let model = CheckedFillerModel::new(min_filler, 8);
        let heap = Heap::new(config, model.clone()).expect("fits beside min_tlab");
        let mut mutator = heap.attach();
        let mut objects = Vec::new();
        for i in 0.. {
            let bytes = [16, 8, 256, 1024, 2048][i % 5];
            match mutator.alloc(bytes) {
                Ok(object) => {
                    write_header(object, bytes);
                    objects.push((object.as_ptr() as usize, bytes));
                }
                Err(AllocError::OutOfMemory { .. }) => break,
                Err(error) => panic!("{error}"),
            }
            if i % 97 == 0 {
                mutator.retire();
            }
        }
        let parked = mutator.park();
        let collection = heap.collection();
        let summary = collection.verify().unwrap();
        assert_eq!(summary.total_bytes(), collection.used_bytes());
        assert_eq!(summary.objects as usize, objects.len());
        assert!(summary.fillers > 0, "{policy}: some TLAB was retired");
        assert_eq!(model.violations(), 0, "{policy}");
        let smallest = model
            .smallest_filler
            .load(std::sync::atomic::Ordering::SeqCst);
        assert!(smallest >= min_filler, "{policy}: filler of {smallest}");
        assert_disjoint_inside(&mut objects, heap.reserved_range());
        collection.finish();
        drop(parked);
    }
}

/// An `AllocSize` from an 8-aligned heap used on a 16-aligned one stays inside it, no panic.
#[test]
fn an_alloc_size_from_another_heap_stays_inside_the_heap() {
    // An `AllocSize` checked against a heap with alignment 8 and a larger capacity, used on a heap
    // with alignment 16: sizes the second heap rejects are still rejected whenever the slow path
    // runs (always in shared mode), and whatever the fast path hands out is disjoint, 8-byte
    // aligned and inside the second heap; nothing panics, not even the heap walk.
    let lax = heap(HeapConfig::builder().capacity("1MiB").alignment(8));
    let size_24 = lax.checked_size(24).unwrap();
    let size_big = lax.checked_size(512 << 10).unwrap();
    for (mode, policy) in setups() {
        let strict = small_heap(mode, policy, 16);
        let mut mutator = strict.attach();
        assert_eq!(
            mutator.alloc_sized(size_big),
            Err(AllocError::TooLarge {
                bytes: 512 << 10,
                capacity: CAPACITY
            })
        );
        // Without a TLAB every allocation takes the slow path, which re-checks the size.
        assert_eq!(
            mutator.alloc_sized(size_24),
            Err(AllocError::Misaligned {
                bytes: 24,
                alignment: 16
            })
        );
        let mut objects = Vec::new();
        let mut misaligned = 0;
        for i in 0..20_000 {
            let result = if i % 3 == 1 {
                mutator.alloc_sized(size_24).map(|object| (object, 24))
            } else {
                mutator.alloc(16).map(|object| (object, 16))
            };
            match result {
                Ok((object, bytes)) => {
                    let address = object.as_ptr() as usize;
                    assert_eq!(address % 8, 0);
                    misaligned += usize::from(!address.is_multiple_of(16));
                    write_header(object, bytes);
                    objects.push((address, bytes));
                }
                Err(AllocError::Misaligned {
                    bytes: 24,
                    alignment: 16,
                }) => {}
                Err(AllocError::OutOfMemory { .. }) => break,
                Err(error) => panic!("{mode} {policy}: {error}"),
            }
            assert_eq!(
                mutator.alloc_sized(size_big),
                Err(AllocError::TooLarge {
                    bytes: 512 << 10,
                    capacity: CAPACITY
                })
            );
        }
        assert!(!objects.is_empty());
        if mode == Mode::Shared {
            assert_eq!(misaligned, 0);
            assert!(objects.iter().all(|&(_, bytes)| bytes == 16));
        }
        assert!(strict.stats().used_bytes <= CAPACITY);
        assert_disjoint_inside(&mut objects, strict.reserved_range());
        let parked = mutator.park();
        let collection = strict.collection();
        // The walk may or may not parse misaligned objects, but it must not panic, and what
        // it reports lies inside the heap.
        match collection.verify() {
            Ok(summary) => assert_eq!(summary.total_bytes(), collection.used_bytes()),
            Err(error) => assert!(strict.reserved_range().contains(&error.address)),
        }
        collection.finish();
        drop(parked);
    }
}

/// A foreign `AllocSize` never makes Hab write a filler below `min_filler_bytes`.
#[test]
fn a_foreign_alloc_size_never_breaks_the_filler_contract() {
    // Hab keeps the object model's contract for fillers even when a size checked against a heap
    // with alignment 8 is used on a heap with alignment 16: every filler is aligned to the heap's
    // alignment and at least `min_filler_bytes()` long, so a model that writes its smallest
    // filler never writes past the heap.
    //
    // The fast path of `alloc_sized` takes the foreign 24-byte size, leaving the TLAB top 8 bytes
    // off the 16-byte grid; when that TLAB (the heap's last) is retired, an 8-byte filler there
    // would break the model's contract, and a 16-byte one would end past the heap: Hab must
    // write neither.
    let lax = heap(HeapConfig::builder().capacity("1MiB").alignment(8));
    let size_24 = lax.checked_size(24).unwrap();
    let config = HeapConfig::builder()
        .capacity(CAPACITY)
        .alignment(16)
        .tlab(TlabPolicy::Fixed(4096))
        .build()
        .unwrap();
    let model = CheckedFillerModel::new(16, 16);
    let strict = Heap::new(config, model.clone()).unwrap();
    let mut mutator = strict.attach();
    // Take TLABs until the last one of the heap is in use.
    while strict.stats().used_bytes < CAPACITY {
        write_header(mutator.alloc(16).unwrap(), 16);
    }
    write_header(mutator.alloc_sized(size_24).unwrap(), 24);
    // Fill it: the 8 bytes left at its end become a filler.
    let error = loop {
        match mutator.alloc(16) {
            Ok(object) => write_header(object, 16),
            Err(error) => break error,
        }
    };
    assert_eq!(error, AllocError::OutOfMemory { bytes: 16 });
    let smallest = model
        .smallest_filler
        .load(std::sync::atomic::Ordering::SeqCst);
    let furthest = model
        .furthest_write
        .load(std::sync::atomic::Ordering::SeqCst);
    let end = strict.reserved_range().end;
    assert!(
        furthest <= end,
        "a 16-byte filler would end {} bytes past the heap",
        furthest - end
    );
    assert_eq!(
        model.violations(),
        0,
        "fillers broke the contract (smallest: {smallest} bytes, minimum 16)"
    );
}

/// The walk reports an object misaligned by a foreign `AllocSize` as a `VerifyError`.
#[test]
fn the_walk_reports_objects_misaligned_by_a_foreign_size() {
    // The same foreign size with the default object model (`HeaderWordModel`, 8-byte fillers) on
    // the 16-byte heap: the walk reports the misaligned object as a `VerifyError`, it does not
    // accept a corrupt heap.
    let lax = heap(HeapConfig::builder().capacity("1MiB").alignment(8));
    let size_24 = lax.checked_size(24).unwrap();
    let strict = small_heap(Mode::Tlab, TlabPolicy::Fixed(4096), 16);
    let mut mutator = strict.attach();
    let first = alloc(&mut mutator, 16);
    let object = mutator.alloc_sized(size_24).unwrap();
    write_header(object, 24);
    assert_eq!(object.as_ptr() as usize, first + 16);
    let parked = mutator.park();
    let collection = strict.collection();
    let error = collection.verify().unwrap_err();
    assert_eq!(error.address, first + 16);
    assert_eq!(error.size_bytes, 24);
    assert!(error.problem.contains("alignment"), "{error}");
    collection.finish();
    drop(parked);
}

/// An object whose header was never written: the walk's error says so, not `size 0 (size 0)`.
#[test]
fn the_walk_names_a_missing_header() {
    let heap = small_heap(Mode::Tlab, TlabPolicy::Fixed(4096), 16);
    let mut mutator = heap.attach();
    let first = alloc(&mut mutator, 16);
    let unwritten = mutator.alloc(32).unwrap();
    let parked = mutator.park();
    let collection = heap.collection();
    let error = collection.verify().unwrap_err();
    assert_eq!(error.address, unwritten.as_ptr() as usize);
    assert_eq!(error.address, first + 16);
    let said = error.to_string();
    assert!(said.contains("no header was written"), "{said}");
    assert!(!said.contains("(size 0)"), "{said}");
    collection.finish();
    drop(parked);
}

/// A walk meets exactly the one object allocated, at its address and with its size.
#[test]
fn header_word_model_round_trips_through_a_heap() {
    // `HeaderWordModel` is usable as a plain value too (keeps the import honest).
    let heap = Heap::new(
        HeapConfig::builder().capacity(CAPACITY).build().unwrap(),
        HeaderWordModel,
    )
    .unwrap();
    let mut mutator = heap.attach();
    let object = alloc(&mut mutator, 64);
    let parked = mutator.park();
    let collection = heap.collection();
    let mut seen = Vec::new();
    collection
        .walk(|o| {
            if !o.is_filler {
                seen.push((o.address.as_ptr() as usize, o.bytes));
            }
        })
        .unwrap();
    assert_eq!(seen, [(object, 64)]);
    collection.finish();
    drop(parked);
}

/// An invalid explicit `max_tlab` is rejected naming `max_tlab` under `Fixed` too.
#[test]
fn an_invalid_max_tlab_is_rejected_under_a_fixed_policy() {
    // An explicit `max_tlab` that is invalid on its own (not a multiple of the alignment, or larger
    // than the heap) is rejected naming `max_tlab`, whatever the sizing policy, as
    // `HeapConfigBuilder::build` promises to check every setting.
    for max_tlab in [12, 1 << 20] {
        let builder = HeapConfig::builder()
            .capacity(CAPACITY)
            .tlab(TlabPolicy::Fixed(4096))
            .max_tlab(max_tlab);
        assert_eq!(config_field(builder), "max_tlab", "max_tlab {max_tlab}");
    }
}

/// `alloc_sized_prefetching` hands out the same addresses as `alloc_sized` and errs the same
/// way, through the last bytes of the heap, whose prefetches point past the end of the mapping
/// (a prefetch must never fault).
#[test]
fn prefetching_allocations_match_plain_ones_to_the_end_of_the_heap() {
    for (mode, policy) in setups() {
        let addresses = |prefetching: bool| {
            let heap = small_heap(mode, policy, 16);
            let mut mutator = heap.attach();
            let size = mutator.checked_size(16).unwrap();
            let mut offsets = Vec::new();
            let error = loop {
                let result = if prefetching {
                    mutator.alloc_sized_prefetching(size)
                } else {
                    mutator.alloc_sized(size)
                };
                match result {
                    Ok(object) => {
                        write_header(object, 16);
                        offsets.push(object.as_ptr() as usize - heap.reserved_range().start);
                    }
                    Err(error) => break error,
                }
            };
            let parked = mutator.park();
            let collection = heap.collection();
            let summary = collection.verify().unwrap();
            assert_eq!(summary.total_bytes(), CAPACITY, "{mode} {policy}");
            collection.finish();
            drop(parked);
            (offsets, error)
        };
        let (plain, plain_error) = addresses(false);
        let (prefetched, prefetched_error) = addresses(true);
        assert_eq!(plain.len(), CAPACITY / 16, "{mode} {policy}");
        assert_eq!(plain, prefetched, "{mode} {policy}");
        assert_eq!(plain_error, AllocError::OutOfMemory { bytes: 16 });
        assert_eq!(prefetched_error, plain_error);
    }
}
