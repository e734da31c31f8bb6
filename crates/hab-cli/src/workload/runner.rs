//! Runs a spec: the heap, the threads started together at a barrier, the repetitions with a
//! collection between them, and the figures gathered into a [`RunResult`].

use std::hint::black_box;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use hab::{
    AllocationStats, HeaderWordModel, Heap, LevelStats, MiddleLevelSpec, TlabPolicy, ZeroMemory,
};

use crate::figures::{self, Spread};
use crate::limits;

use super::*;

/// A barrier that a failing party can break: every waiter, now and later, then returns
/// `false`. A thread that cannot start or fails mid-run thus stops the run instead of leaving
/// the others waiting forever.
struct Rendezvous {
    parties: usize,
    /// Arrived in this round, the round, and whether the barrier is broken.
    state: Mutex<(usize, u64, bool)>,
    changed: Condvar,
}

impl Rendezvous {
    fn new(parties: usize) -> Self {
        Rendezvous {
            parties,
            state: Mutex::new((0, 0, false)),
            changed: Condvar::new(),
        }
    }

    /// Waits for every party; `false` if the barrier is (or gets) broken.
    fn wait(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.2 {
            return false;
        }
        state.0 += 1;
        if state.0 == self.parties {
            *state = (0, state.1 + 1, false);
            self.changed.notify_all();
            return true;
        }
        let round = state.1;
        while state.1 == round && !state.2 {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        !state.2 || state.1 != round
    }

    fn break_all(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).2 = true;
        self.changed.notify_all();
    }
}

/// Breaks the rendezvous when dropped before being defused: a worker that returns early or
/// panics.
struct BreakUnlessDone<'a>(&'a Rendezvous, bool);

impl Drop for BreakUnlessDone<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.break_all();
        }
    }
}

/// Runs one configuration: warm-up and measured repetitions.
pub fn run(spec: &RunSpec) -> Result<RunResult, String> {
    spec.check()?;
    let heap = Heap::new(spec.config()?, HeaderWordModel).map_err(|e| match e {
        hab::HeapError::Config(e) => limits::config_error(&e, spec.heap_bytes.is_some()),
        other => other.to_string(),
    })?;
    let samples = Arc::new(std::sync::atomic::AtomicU64::new(0));
    if let Some(bytes) = spec.sample_bytes {
        let counted = samples.clone();
        heap.sample_allocations(Some(hab::AllocationSampler::new(bytes, move |_| {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })));
    }
    let size = heap
        .checked_size(spec.object_size)
        .map_err(|e| format!("--object-size {}: {e}", spec.object_size))?;
    let references = match spec.workload {
        Workload::AllocArray => Some(References::of(&heap)?),
        Workload::AllocObject => None,
    };
    let options = LoopOptions {
        prefetch: spec.prefetch,
        initialise_body: spec.zero == ZeroMemory::Never,
    };
    let reps = spec.warmup + spec.repeat;
    let barrier = Rendezvous::new(spec.threads + 1);
    let spans = Mutex::new(vec![Vec::new(); reps]);
    let failure = Mutex::new(None::<String>);
    let fail = |error: String| {
        failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(error);
        barrier.break_all();
    };
    let mut per_rep = Vec::new();
    let mut mean_desired_bytes = 0;
    let mut thread_stats = Vec::new();

    std::thread::scope(|scope| {
        let worker = |index: usize| {
            let mut guard = BreakUnlessDone(&barrier, false);
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut array = Vec::new();
                if references.is_some() {
                    array.try_reserve_exact(spec.objects).map_err(|e| {
                        format!(
                            "cannot allocate thread {index}'s array of {} references: {e}",
                            spec.objects
                        )
                    })?;
                    array.resize(spec.objects, 1u32);
                }
                let mut parked = heap.attach().park();
                for rep in 0..reps {
                    if !barrier.wait() {
                        return Ok(());
                    }
                    let mut mutator = parked.unpark();
                    let start = Instant::now();
                    let outcome = match references {
                        Some(references) => {
                            alloc_array(&mut mutator, size, options, references, &mut array)
                        }
                        None => alloc_object(&mut mutator, size, options, spec.poll, spec.objects),
                    };
                    let end = Instant::now();
                    parked = mutator.park();
                    outcome?;
                    spans.lock().unwrap_or_else(|e| e.into_inner())[rep].push((start, end));
                    if !barrier.wait() || !barrier.wait() {
                        return Ok(());
                    }
                }
                black_box(&array);
                Ok::<(), String>(())
            }));
            match outcome {
                Ok(Ok(())) => guard.1 = true,
                Ok(Err(error)) => fail(error),
                Err(panic) => fail(format!(
                    "thread {index} failed: {}",
                    panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default()
                )),
            }
        };
        for index in 0..spec.threads {
            let spawned = std::thread::Builder::new()
                .name(format!("mutator-{index}"))
                .spawn_scoped(scope, move || worker(index));
            if let Err(error) = spawned {
                fail(format!(
                    "cannot start thread {index} of --threads {}: {error}",
                    spec.threads
                ));
                return;
            }
        }
        let mut before = heap.stats();
        for _ in 0..reps {
            if !barrier.wait() || !barrier.wait() {
                return;
            }
            let mut collection = heap.collection();
            collection.reset();
            collection.finish();
            let after = heap.stats();
            let live = heap.mutator_stats();
            thread_stats = live
                .iter()
                .map(|(id, s)| format!("TLAB: thread {id} {s}"))
                .collect();
            mean_desired_bytes = live.iter().map(|(_, s)| s.desired_size_bytes).sum::<u64>()
                / live.len().max(1) as u64;
            per_rep.push((
                after.totals.since(&before.totals),
                after.collections - before.collections,
            ));
            before = after;
            if !barrier.wait() {
                return;
            }
        }
    });
    if let Some(error) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(error);
    }

    let spans = spans.into_inner().unwrap();
    let elapsed_ms: Vec<f64> = spans[spec.warmup..]
        .iter()
        .map(|rep| {
            let first = rep.iter().map(|(start, _)| *start).min().unwrap();
            let last = rep.iter().map(|(_, end)| *end).max().unwrap();
            (last - first).as_secs_f64() * 1e3
        })
        .collect();
    let measured = &per_rep[spec.warmup..];
    let mean = |value: &dyn Fn(&(AllocationStats, u64)) -> u64| {
        measured.iter().map(value).sum::<u64>() / measured.len() as u64
    };
    let spread = Spread::of(&elapsed_ms);
    let median = spread.median;
    let total_objects = (spec.threads * spec.objects) as f64;
    let tlab_size = match spec.tlab {
        TlabPolicy::Fixed(bytes) => bytes as u64,
        _ => mean_desired_bytes,
    };
    let waste_bytes = mean(&|(s, _)| s.waste_bytes());
    let allocated_bytes = mean(&|(s, _)| s.allocated_bytes());
    let mut plab_total = hab::CpuLabStats::default();
    for (stats, _) in measured {
        plab_total += stats.cpu_lab;
    }
    let reps = measured.len() as u64;
    let cpu_lab = CpuLabResult::from(plab_total.divided_by(reps));
    let levels: Vec<LevelResult> = heap
        .middle_levels()
        .into_iter()
        .map(|info| {
            let mut stats = LevelStats::default();
            for (measured_stats, _) in measured {
                stats += measured_stats.levels[info.level.index()];
            }
            let stats = stats.divided_by(reps);
            LevelResult {
                level: info.level.name(),
                buffer_bytes: info.buffer_bytes,
                domains: info.domains,
                restartable: info.restartable,
                foreign_pct: figures::percent_of_counts(stats.foreign_allocs, stats.allocs),
                stats,
            }
        })
        .collect();
    let middle_allocs = levels.iter().map(|l| l.stats.allocs).sum();
    let foreign_allocs = levels.iter().map(|l| l.stats.foreign_allocs).sum();
    // Each repetition ends with the collection that resets the heap; count only the others.
    let collections = mean(&|(_, c)| *c).saturating_sub(1);
    Ok(RunResult {
        workload: spec.workload.name(),
        mode: spec.mode.to_string(),
        threads: spec.threads,
        object_size: spec.object_size,
        objects: spec.objects,
        tlab_policy: spec.tlab.kind(),
        tlab_size,
        heap_bytes: spec.heap_bytes(),
        zero: spec.zero.name(),
        prefetch: spec.prefetch,
        repeat: spec.repeat,
        elapsed_ms_min: spread.min,
        elapsed_ms_median: median,
        ns_per_alloc: median * 1e6 / total_objects,
        allocs_per_sec: total_objects / (median / 1e3),
        bytes_per_sec: total_objects * spec.object_size as f64 / (median / 1e3),
        elapsed_ms,
        refills: mean(&|(s, _)| s.refills),
        slow_allocs: mean(&|(s, _)| s.slow_allocs),
        allocated_bytes,
        waste_bytes,
        waste_pct: figures::percent_of_counts(waste_bytes, allocated_bytes),
        middle: MiddleLevelSpec::list_to_string(heap.config().middle()),
        buffers_follow_allocation: heap.config().buffers_follow_allocation(),
        cpu_id_source: heap.cpu_id().source().to_string(),
        slot_index: hab::rseq_slot_index().to_string(),
        topology: spec.topology.clone().unwrap_or_else(|| "sysfs".into()),
        middle_allocs,
        foreign_allocs,
        foreign_pct: figures::percent_of_counts(foreign_allocs, middle_allocs),
        levels,
        collections,
        cpu_lab,
        cpu_labs_restartable: heap.cpu_labs_restartable(),
        thread_stats,
        compute_speedup: (spec.compute && spec.threads > 1).then(|| compute_speedup(spec.threads)),
        samples: samples.load(std::sync::atomic::Ordering::Relaxed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A party that breaks the rendezvous releases every waiter, now and later, with `false`
    /// (a thread that cannot start, or fails, must not leave the others waiting).
    #[test]
    fn a_broken_rendezvous_releases_every_waiter() {
        let rendezvous = Rendezvous::new(3);
        std::thread::scope(|scope| {
            let waiters: Vec<_> = (0..2).map(|_| scope.spawn(|| rendezvous.wait())).collect();
            std::thread::sleep(std::time::Duration::from_millis(20));
            rendezvous.break_all();
            for waiter in waiters {
                assert!(!waiter.join().unwrap());
            }
        });
        assert!(!rendezvous.wait(), "a later wait returns at once");
        let whole = Rendezvous::new(2);
        std::thread::scope(|scope| {
            let other = scope.spawn(|| whole.wait());
            assert!(whole.wait());
            assert!(other.join().unwrap());
        });
    }
}
