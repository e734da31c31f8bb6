//! binary-trees on the VM prints exactly the reference program's lines for depths 6 to 16, in
//! every allocation mode, with the heap checked before and after every collection, in an
//! allocation space small enough that it is collected many times.

use hab::{HeapConfig, Mode, TlabPolicy};
use hab_vm::workloads::binary_trees;
use hab_vm::{Vm, VmConfig};

fn config(mode: Mode, space_bytes: usize) -> VmConfig {
    let mut heap = HeapConfig::builder().mode(mode);
    match mode {
        Mode::Hab => heap = heap.middle("core:8KiB").tlab(TlabPolicy::Adaptive),
        Mode::CpuLab | Mode::Flip => heap = heap.tlab(TlabPolicy::Fixed(16 << 10)),
        _ => {}
    }
    VmConfig {
        verify: true,
        heap,
        ..VmConfig::new(space_bytes)
    }
}

#[test]
fn binary_trees_prints_the_reference_lines_in_every_mode() {
    let depths: Vec<u32> = if cfg!(debug_assertions) {
        (6..=12).collect()
    } else {
        (6..=16).collect()
    };
    for depth in depths {
        // Three times what is live at once: many collections, never out of memory.
        let space = (3 * binary_trees::max_live_bytes(depth))
            .max(32 << 10)
            .next_multiple_of(4096);
        for mode in [
            Mode::Shared,
            Mode::Tlab,
            Mode::Hab,
            Mode::CpuLab,
            Mode::Flip,
        ] {
            let vm = Vm::new(config(mode, space)).unwrap();
            let lines = binary_trees::run(&vm, depth)
                .unwrap_or_else(|e| panic!("depth {depth}, {mode}: {e}"));
            assert_eq!(
                lines,
                binary_trees::expected(depth),
                "depth {depth}, mode {mode}"
            );
            let collections = vm.gc_records().len();
            assert!(
                collections >= 2,
                "depth {depth}, {mode}: {collections} collections"
            );
        }
    }
}

#[test]
fn a_space_too_small_for_the_live_data_is_a_clear_error() {
    let vm = Vm::new(config(Mode::Tlab, 64 << 10)).unwrap();
    let error = binary_trees::run(&vm, 12).unwrap_err();
    assert!(error.to_string().starts_with("out of memory"), "{error}");
}
