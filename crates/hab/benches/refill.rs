//! Time per TLAB refill, single thread, by where the TLAB comes from: the global heap (`tlab`),
//! the per-core compare-and-swap buffers (`hab`, `core:1MiB`) or the per-CPU restartable
//! buffers (`hab`, `cpu:1MiB`). Every allocation is a refill: 256-byte TLABs and 128-byte
//! objects (one per TLAB, with the reserve), in memory not zeroed again when the heap
//! fills. The sources take turns in rounds of batches;
//! each prints the fastest batch's time per refill (the one least disturbed by other work on
//! the machine) and the median batch's, and the ratios to the `core` level, measured in the
//! same run.
//!
//! `cargo bench -p hab --bench refill` (pin it for steadier figures: `taskset -c 1`).
//! `HAB_BENCH_ROUNDS` sets the rounds (default 30).

use std::sync::Arc;
use std::time::Instant;

use hab::{AllocError, HeaderWordModel, Heap, HeapConfig, Mode, Mutator, TlabPolicy, ZeroMemory};

const OBJECT_BYTES: usize = 128;
const TLAB_BYTES: usize = 256;
/// Allocations per batch: few enough that a batch rarely meets a collection.
const BATCH: u64 = 20_000;

/// A heap whose TLABs come from `middle` (none: the global heap).
fn heap(middle: Option<&str>) -> Arc<Heap> {
    let builder = HeapConfig::builder()
        .capacity("256MiB")
        .tlab(TlabPolicy::Fixed(TLAB_BYTES))
        .min_tlab(TLAB_BYTES)
        // Reused memory is not zeroed: what is timed is the refill, not the memory it hands
        // out again after the heap filled.
        .zero(ZeroMemory::Never)
        .pretouch(true);
    let builder = match middle {
        Some(levels) => builder.mode(Mode::Hab).middle(levels),
        None => builder.mode(Mode::Tlab),
    };
    Heap::new(
        builder.build().expect("a valid configuration"),
        HeaderWordModel,
    )
    .expect("a heap of 256 MiB")
}

/// Nanoseconds per allocation over one batch (a collection, when the heap fills, is left
/// out of the time).
fn batch(mutator: &mut Mutator) -> f64 {
    let size = mutator.checked_size(OBJECT_BYTES).expect("a valid size");
    let mut done = 0;
    let mut elapsed = 0.0;
    while done < BATCH {
        let start = Instant::now();
        let mut failed = false;
        while done < BATCH {
            match mutator.alloc_sized(size) {
                Ok(object) => {
                    // SAFETY: `object` is 128 fresh bytes owned by this thread.
                    unsafe { HeaderWordModel::write_header(object, OBJECT_BYTES) };
                    done += 1;
                }
                Err(AllocError::OutOfMemory { .. }) => {
                    failed = true;
                    break;
                }
                Err(error) => panic!("{error}"),
            }
        }
        elapsed += start.elapsed().as_secs_f64();
        if failed {
            let heap = mutator.heap().clone();
            mutator.safe_region(|| heap.collection().reset());
        }
    }
    elapsed * 1e9 / BATCH as f64
}

fn main() {
    let rounds: usize = std::env::var("HAB_BENCH_ROUNDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(30);
    let sources = [
        ("global heap (tlab)", None),
        ("core:1MiB (compare-and-swap)", Some("core:1MiB")),
        ("cpu:1MiB (restartable)", Some("cpu:1MiB")),
    ];
    let mut mutators: Vec<Mutator> = sources
        .iter()
        .map(|(_, middle)| heap(*middle).attach())
        .collect();
    for (index, (name, _)) in sources.iter().enumerate() {
        if let Some(level) = mutators[index].heap().middle_levels().first() {
            println!("{name}: restartable {}", level.restartable);
        }
    }
    // Warm up: every source's heap touched once through.
    for mutator in &mut mutators {
        for _ in 0..20 {
            batch(mutator);
        }
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); sources.len()];
    for _ in 0..rounds {
        for (index, mutator) in mutators.iter_mut().enumerate() {
            for _ in 0..5 {
                times[index].push(batch(mutator));
            }
        }
    }
    for series in &mut times {
        series.sort_by(f64::total_cmp);
    }
    let fastest = |index: usize| times[index][0];
    let median = |index: usize| times[index][times[index].len() / 2];
    println!(
        "ns per refill ({BATCH} refills a batch, {} batches each):",
        times[0].len()
    );
    println!(
        "{:<30} {:>8} {:>8} {:>14} {:>14}",
        "source", "fastest", "median", "fastest/core", "median/core"
    );
    for (index, (name, _)) in sources.iter().enumerate() {
        println!(
            "{name:<30} {:>8.2} {:>8.2} {:>14.3} {:>14.3}",
            fastest(index),
            median(index),
            fastest(index) / fastest(1),
            median(index) / median(1)
        );
    }
}
