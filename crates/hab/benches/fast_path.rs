//! Time per allocation of a 16-byte object (header written), single thread:
//! `tlab` through `alloc_sized` (the bare fast path) and `alloc` (with size checks), `cpu-lab`
//! through the same `alloc_sized` (a restartable section per object), and `shared` (a CAS on
//! the global top per object).
//!
//! `cargo bench -p hab --bench fast_path`. Times on a shared VM are noisy; compare the
//! benchmarks of one run with each other, and use the callgrind counts of `hab report` for a
//! stable per-allocation figure.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hab::{AllocError, HeaderWordModel, Heap, HeapConfig, Mode, Mutator, TlabPolicy};

const OBJECT_BYTES: usize = 16;

/// Allocates `count` objects, resetting the (pre-touched) heap whenever it fills; returns the
/// time spent, collections included.
fn allocate(mutator: &mut Mutator, count: u64, checked: bool) -> Duration {
    let size = mutator.checked_size(OBJECT_BYTES).unwrap();
    let start = Instant::now();
    let mut done = 0;
    while done < count {
        let result = if checked {
            mutator.alloc(OBJECT_BYTES)
        } else {
            mutator.alloc_sized(size)
        };
        match result {
            Ok(object) => {
                // SAFETY: `object` is 16 fresh bytes owned by this thread.
                unsafe { HeaderWordModel::write_header(object, OBJECT_BYTES) };
                done += 1;
            }
            Err(AllocError::OutOfMemory { .. }) => {
                let heap = mutator.heap().clone();
                mutator.safe_region(|| heap.collection().reset());
            }
            Err(error) => panic!("{error}"),
        }
    }
    start.elapsed()
}

fn heap(mode: Mode) -> std::sync::Arc<Heap> {
    let config = HeapConfig::builder()
        .capacity("64MiB")
        .mode(mode)
        .tlab(TlabPolicy::Fixed(256 << 10))
        .pretouch(true)
        .build()
        .unwrap();
    Heap::new(config, HeaderWordModel).unwrap()
}

fn fast_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("alloc_16B");
    group.throughput(Throughput::Elements(1));
    for (name, mode, checked) in [
        ("tlab_alloc_sized", Mode::Tlab, false),
        ("tlab_alloc", Mode::Tlab, true),
        ("shared", Mode::Shared, false),
        ("cpu_lab", Mode::CpuLab, false),
    ] {
        let heap = heap(mode);
        let mut mutator = heap.attach();
        group.bench_function(name, |b| {
            b.iter_custom(|iters| allocate(&mut mutator, iters, checked))
        });
    }
    group.finish();
}

criterion_group!(benches, fast_path);
criterion_main!(benches);
