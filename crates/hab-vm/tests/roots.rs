//! Roots: handles survive collections inside their scope and die with it, global roots carry
//! objects between threads, and an explicit collection keeps exactly what is reachable.

use hab_vm::{GcCause, Shape, Vm, VmConfig};

const CELL: Shape = Shape::new(1, 8);

#[test]
fn a_global_root_carries_an_object_across_collections_and_threads() {
    let vm = Vm::new(VmConfig {
        verify: true,
        ..VmConfig::new(256 << 10)
    })
    .unwrap();
    let global = {
        let mut t = vm.attach();
        let global = t.scope(|t| {
            let cell = t.alloc_record(CELL).unwrap();
            t.write_word(cell, 0, 0xfeed);
            let inner = t.alloc_byte_array(100).unwrap();
            t.write_word(inner, 12, 0xbeef);
            t.set_ref(cell, 0, Some(inner));
            t.add_global(cell)
        });
        assert_eq!(t.handles(), 0, "the scope dropped its handles");
        // Garbage: many collections while only the global keeps the cell.
        for _ in 0..20_000 {
            t.scope(|t| t.alloc_record(Shape::new(0, 64)).map(drop))
                .unwrap();
        }
        assert!(vm.gc_records().len() >= 3);
        global
    };
    let vm2 = vm.clone();
    std::thread::spawn(move || {
        let mut t = vm2.attach();
        t.scope(|t| {
            let cell = t.global(global).expect("set");
            assert_eq!(t.read_word(cell, 0), 0xfeed);
            let inner = t.get_ref(cell, 0).expect("kept");
            assert_eq!(t.len(inner), 100);
            assert_eq!(t.read_word(inner, 12), 0xbeef);
        });
        t.set_global(global, None);
        t.collect(GcCause::Explicit).unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(vm.live_bytes_after_gc(), 0, "nothing is reachable any more");
    let summary = vm.verify_now().unwrap();
    assert_eq!(summary.objects, 0);
}

#[test]
fn an_explicit_collection_keeps_exactly_the_reachable_objects() {
    let vm = Vm::new(VmConfig {
        verify: true,
        ..VmConfig::new(1 << 20)
    })
    .unwrap();
    let mut t = vm.attach();
    let list = t.alloc_ref_array(10).unwrap();
    for i in 0..10 {
        t.scope(|t| {
            let cell = t.alloc_record(CELL).unwrap();
            t.write_word(cell, 0, i);
            t.set_ref(list, i as usize, Some(cell));
            // An unreachable neighbour.
            t.alloc_record(CELL).unwrap();
        });
    }
    t.collect(GcCause::Explicit).unwrap();
    let expected = (1 + 10 + 10 * CELL.size_words()) * 8;
    assert_eq!(vm.live_bytes_after_gc(), expected);
    for i in 0..10 {
        t.scope(|t| {
            let cell = t.get_ref(list, i).unwrap();
            assert_eq!(t.read_word(cell, 0), i as u64);
        });
    }
}
