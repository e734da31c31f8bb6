//! Every workload runs to completion in every allocation mode with the heap checked before
//! and after every collection, at a small scale; the chat runs its 1000 mostly blocked
//! threads.

use std::sync::Arc;

use hab::{HeapConfig, Mode, TlabPolicy};
use hab_vm::workloads::chat::{self, Chat};
use hab_vm::workloads::warehouses::{self, Warehouses};
use hab_vm::workloads::{gcbench, javac_like};
use hab_vm::{Vm, VmConfig};

fn vm(mode: Mode, space_bytes: usize, lab_bytes: usize) -> Arc<Vm> {
    let mut heap = HeapConfig::builder()
        .mode(mode)
        .tlab(TlabPolicy::Fixed(lab_bytes));
    if mode == Mode::Hab {
        heap = heap.middle("core:256KiB");
    }
    Vm::new(VmConfig {
        verify: true,
        heap,
        ..VmConfig::new(space_bytes)
    })
    .unwrap()
}

#[test]
fn gcbench_keeps_its_long_lived_data() {
    for mode in Mode::ALL {
        let vm = vm(
            mode,
            (3 * gcbench::max_live_bytes(10)).next_multiple_of(4096),
            16 << 10,
        );
        let outcome = gcbench::run(&vm, 10).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert!(outcome.lines.last().unwrap().contains("still reachable"));
        assert!(vm.gc_records().len() >= 2, "{mode}");
    }
}

#[test]
fn warehouses_agree_in_every_mode() {
    let spec = Warehouses {
        threads: 6,
        orders_per_thread: 2000,
        live_orders: 50,
    };
    let mut outputs = Vec::new();
    for mode in Mode::ALL {
        let vm = vm(mode, 1 << 20, 16 << 10);
        let outcome = warehouses::run(&vm, spec).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert!(vm.gc_records().len() >= 2, "{mode}");
        outputs.push(outcome.lines);
    }
    // Each warehouse's work is deterministic: every mode ends with the same orders.
    assert!(
        outputs.windows(2).all(|pair| pair[0] == pair[1]),
        "{outputs:?}"
    );
}

#[test]
fn javac_like_runs_in_every_mode() {
    for mode in Mode::ALL {
        let vm = vm(mode, 3 << 20, 16 << 10);
        let outcome = javac_like::run(&vm, 200, 500).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert!(outcome.ops >= 50_000, "{mode}: {}", outcome.ops);
        let collections = vm.gc_records().len();
        assert!(collections >= 2, "{mode}: {collections} collections");
    }
}

#[test]
fn a_thousand_chat_connections_run_under_verification() {
    for mode in [Mode::Tlab, Mode::CpuLab, Mode::Flip] {
        let vm = vm(mode, 4 << 20, 64 << 10);
        let spec = Chat {
            rooms: 50,
            messages_per_connection: 3,
        };
        let outcome = chat::run(&vm, spec).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(
            outcome.ops,
            50 * 20 * 19 * 3,
            "{mode}: every message delivered"
        );
        assert!(!vm.gc_records().is_empty(), "{mode}");
    }
}

/// A room closes on its first error: in a heap too small for the chat, the connection that
/// runs out of memory tells its peers, and the run ends with that error (it hung for ever,
/// the peers blocked waiting for the failed connection's messages).
#[test]
fn a_chat_that_runs_out_of_memory_ends_with_the_error() {
    for (rooms, space_bytes, messages) in [(1, 8 << 10, 20), (5, 64 << 10, 200)] {
        let vm = Vm::new(VmConfig::new(space_bytes)).unwrap();
        let spec = Chat {
            rooms,
            messages_per_connection: messages,
        };
        let (done, result) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(chat::run(&vm, spec).map(|outcome| outcome.ops)));
        let result = result
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("{rooms} rooms in {space_bytes} bytes: still running"));
        let error = result.expect_err("the chat does not fit this heap");
        assert!(
            error.to_string().contains("out of memory"),
            "{rooms} rooms: {error}"
        );
    }
}
