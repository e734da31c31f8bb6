//! A pure compute loop: how well this machine scales without allocation, the yardstick of
//! multi-thread figures.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::Instant;

/// Iterations of the compute loop: about 0.1 s on these machines.
const COMPUTE_ITERATIONS: u64 = 100_000_000;

/// Milliseconds the compute loop takes for `iterations` on the calling thread: a probe of how
/// much of the CPU the process gets right now.
pub fn compute_ms(iterations: u64) -> f64 {
    let start = Instant::now();
    black_box(compute_loop(iterations));
    start.elapsed().as_secs_f64() * 1e3
}

/// A pure compute loop (xorshift), touching no memory.
fn compute_loop(iterations: u64) -> u64 {
    let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
    for _ in 0..iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    black_box(x)
}

/// How much faster `threads` threads get the same per-thread compute work done than one
/// thread: `threads × t(1) / t(threads)`. On a machine that scales perfectly, `threads`.
/// Beyond four threads per CPU the speed-up has saturated (every CPU is busy), so at most that
/// many are timed and their speed-up stands for more: 4096 threads take as long as 8 on two
/// CPUs (each timing a whole loop per thread used to take minutes).
pub fn compute_speedup(threads: usize) -> f64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = threads.min(4 * cpus).max(1);
    let iterations = COMPUTE_ITERATIONS;
    let time = |threads: usize| {
        let barrier = Barrier::new(threads);
        let start = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    barrier.wait();
                    compute_loop(iterations)
                });
            }
        });
        start.elapsed().as_secs_f64()
    };
    let one = (0..3).map(|_| time(1)).fold(f64::MAX, f64::min);
    let many = (0..3).map(|_| time(threads)).fold(f64::MAX, f64::min);
    threads as f64 * one / many
}
