//! Hundreds of threads on 2 CPUs allocate, keep a few objects alive across collections, and
//! block in safe regions (on channels and sleeps) while other threads collect: every kept
//! object survives with its contents, every collection checks the heap, and blocked threads
//! never hold a collection up.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use hab::{HeapConfig, Mode, TlabPolicy};
use hab_vm::{Local, Shape, Vm, VmConfig, VmError, VmThread};

const THREADS: usize = 300;
const ALLOCS: usize = 1500;
const KEPT: usize = 8;
const CELL: Shape = Shape::new(1, 16);

fn vm(mode: Mode) -> std::sync::Arc<Vm> {
    Vm::new(VmConfig {
        verify: true,
        heap: HeapConfig::builder()
            .mode(mode)
            .tlab(TlabPolicy::Fixed(4 << 10)),
        ..VmConfig::new(2 << 20)
    })
    .unwrap()
}

/// One thread's work: a ring of the last `KEPT` cells, each holding its sequence number and
/// the thread's id; blocks now and then.
fn work(t: &mut VmThread, id: u64, wake: &mpsc::Receiver<()>) -> Result<(), VmError> {
    let ring = t.alloc_ref_array(KEPT)?;
    for i in 0..ALLOCS {
        t.scope(|t| -> Result<(), VmError> {
            let cell = t.alloc_record(CELL)?;
            t.write_word(cell, 0, i as u64);
            t.write_word(cell, 1, id);
            // Chain to the previous cell in the ring (cutting the chain behind it), then
            // take its place.
            let previous = t.get_ref(ring, i % KEPT);
            if let Some(previous) = previous {
                t.set_ref(previous, 0, None);
            }
            t.set_ref(cell, 0, previous);
            t.set_ref(ring, i % KEPT, Some(cell));
            // Garbage.
            t.alloc_byte_array(40)?;
            Ok(())
        })?;
        if i % 250 == 0 {
            // Blocked: collections go on without this thread.
            t.blocking(|| wake.recv_timeout(Duration::from_millis(2)).ok());
        }
    }
    check_ring(t, ring, id);
    Ok(())
}

/// Every ring slot holds one of the last `KEPT` cells, with intact contents.
fn check_ring(t: &mut VmThread, ring: Local, id: u64) {
    t.scope(|t| {
        for slot in 0..KEPT {
            let cell = t.get_ref(ring, slot).expect("filled");
            let sequence = t.read_word(cell, 0) as usize;
            assert_eq!(t.read_word(cell, 1), id, "the cell belongs to this thread");
            assert_eq!(sequence % KEPT, slot);
            assert!(sequence >= ALLOCS - KEPT, "the last cells are kept");
            let previous = t.get_ref(cell, 0).expect("chained");
            assert_eq!(t.read_word(previous, 0) as usize, sequence - KEPT);
        }
    });
}

fn run(mode: Mode) {
    let vm = vm(mode);
    let (wakers, handles): (Vec<_>, Vec<_>) = (0..THREADS)
        .map(|id| {
            let (wake, wait) = mpsc::channel();
            let vm = vm.clone();
            let handle = thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    let mut t = vm.attach();
                    work(&mut t, id as u64, &wait)
                })
                .unwrap();
            (wake, handle)
        })
        .unzip();
    for handle in handles {
        handle
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
    }
    drop(wakers);
    let records = vm.gc_records();
    assert!(records.len() >= 5, "{mode}: {} collections", records.len());
    vm.verify_now().unwrap();
    eprintln!("{mode}: {} collections, {}", records.len(), vm.heap_stats());
}

#[test]
fn tlab_threads_block_and_collect() {
    run(Mode::Tlab);
}

#[test]
fn plab_threads_block_and_collect() {
    run(Mode::CpuLab);
}

#[test]
fn flip_threads_block_and_collect() {
    run(Mode::Flip);
}
