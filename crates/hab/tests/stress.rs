//! Stress tests: 64 threads allocate concurrently in every mode and policy, park at safepoints
//! and in safe regions, and stop the world for collections that verify the heap; one test makes
//! them run out of memory over and over and coordinate collections with reset, as a runtime
//! does. Every object is recorded and checked against the heap walks at the end.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{assert_disjoint_inside, heap, watchdog, write_header, Rng};
use hab::{
    AllocError, AllocationStats, Collection, CollectionError, Heap, HeapConfig, HeapConfigBuilder,
    Mode, Mutator, TlabPolicy,
};

const THREADS: usize = 64;

/// An object size from 16 to 4096 bytes, a multiple of 8: three in four small (up to 256).
fn object_size(rng: &mut Rng) -> usize {
    if rng.below(4) == 0 {
        8 * (33 + rng.below(480) as usize)
    } else {
        8 * (2 + rng.below(31) as usize)
    }
}

/// The configurations every stress test runs: TLABs with each policy, and shared mode.
fn configs(capacity: &str, max_tlab: &str) -> Vec<(String, HeapConfigBuilder)> {
    let base = || {
        HeapConfig::builder()
            .capacity(capacity)
            .max_tlab(max_tlab)
            .mode(Mode::Tlab)
    };
    vec![
        (
            "tlab fixed 4KiB".into(),
            base().tlab(TlabPolicy::Fixed(4096)),
        ),
        ("tlab adaptive".into(), base().tlab(TlabPolicy::Adaptive)),
        ("tlab growing".into(), base().tlab(TlabPolicy::Growing)),
        ("shared".into(), base().mode(Mode::Shared)),
    ]
}

/// What the threads of one run share: the heap, a safepoint request count, and the number and
/// bytes of objects allocated since the last reset (each thread counts an object after writing
/// its header and before it next parks, so a collection sees exact figures).
struct World {
    heap: Arc<Heap>,
    /// Collections requested and not finished: threads park at their next poll while > 0.
    pending: AtomicUsize,
    objects: AtomicU64,
    object_bytes: AtomicU64,
    /// Collections that verified the heap while threads were running.
    verified: AtomicU64,
    /// Calls of `try_collection` that ended as expected.
    tried: AtomicU64,
    /// The most mutators a collection of the run stopped at once.
    most_stopped: AtomicUsize,
    /// Reset generation: which objects a reset killed.
    generation: AtomicU64,
    /// Heap totals at the last reset.
    base: Mutex<AllocationStats>,
    /// The objects each generation's walk met, in address order, indexed by generation.
    snapshots: Mutex<Vec<Vec<(usize, usize)>>>,
}

/// Keeps a safepoint requested for as long as it lives, even when its thread panics.
struct Request<'w>(&'w AtomicUsize);

impl<'w> Request<'w> {
    fn new(pending: &'w AtomicUsize) -> Self {
        pending.fetch_add(1, Ordering::SeqCst);
        Request(pending)
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl World {
    fn new(heap: Arc<Heap>) -> Arc<World> {
        Arc::new(World {
            heap,
            pending: AtomicUsize::new(0),
            objects: AtomicU64::new(0),
            object_bytes: AtomicU64::new(0),
            verified: AtomicU64::new(0),
            most_stopped: AtomicUsize::new(0),
            tried: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            base: Mutex::new(AllocationStats::default()),
            snapshots: Mutex::new(Vec::new()),
        })
    }

    /// The safepoint poll: while a collection is requested, wait for it in a safe region.
    fn poll(&self, mutator: &mut Mutator) {
        if self.pending.load(Ordering::SeqCst) > 0 {
            mutator.safe_region(|| {
                while self.pending.load(Ordering::SeqCst) > 0 {
                    thread::sleep(Duration::from_micros(100));
                }
            });
        }
    }

    fn count(&self, bytes: usize) {
        self.objects.fetch_add(1, Ordering::Relaxed);
        self.object_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Walks the heap of a collection and checks it against the counts: every object since
    /// the last reset, fillers exactly the waste counted since then, nothing else. Returns the
    /// objects met, in address order.
    fn check(&self, collection: &Collection<'_>) -> Vec<(usize, usize)> {
        let stats = self.heap.stats();
        self.most_stopped
            .fetch_max(stats.live_mutators, Ordering::Relaxed);
        let (summary, objects) = common::walk_objects(collection);
        assert_eq!(summary.total_bytes(), collection.used_bytes());
        assert_eq!(summary.objects, self.objects.load(Ordering::Relaxed));
        assert_eq!(
            summary.object_bytes as u64,
            self.object_bytes.load(Ordering::Relaxed)
        );
        let totals = stats.totals;
        let base = *self.base.lock().unwrap();
        assert_eq!(
            summary.filler_bytes as u64,
            totals.waste_bytes() - base.waste_bytes()
        );
        assert_eq!(
            summary.object_bytes as u64,
            totals.allocated_bytes() - base.allocated_bytes()
        );
        objects
    }

    /// Checks the heap, keeps its objects as the snapshot of the generation that ends, and
    /// resets: everything allocated so far is dead.
    fn reset(&self, collection: &mut Collection<'_>) {
        let objects = self.check(collection);
        let mut snapshots = self.snapshots.lock().unwrap();
        assert_eq!(
            snapshots.len() as u64,
            self.generation.load(Ordering::Relaxed)
        );
        snapshots.push(objects);
        collection.reset();
        *self.base.lock().unwrap() = self.heap.stats().totals;
        self.objects.store(0, Ordering::Relaxed);
        self.object_bytes.store(0, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs `body(thread index, world, mutator)` on 64 threads, each with a mutator attached before
/// any of them starts; returns what each gave.
fn on_threads<T: Send + 'static>(
    world: &Arc<World>,
    body: impl Fn(usize, &World, Mutator) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let body = Arc::new(body);
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|index| {
            let (world, body, start) = (world.clone(), body.clone(), start.clone());
            thread::Builder::new()
                .name(format!("mutator-{index}"))
                .spawn(move || {
                    // Attached and running: no collection can start before all have passed.
                    let mutator = world.heap.attach();
                    start.wait();
                    body(index, &world, mutator)
                })
                .unwrap()
        })
        .collect();
    handles
        .into_iter()
        .map(|handle| handle.join().expect("a mutator thread panicked"))
        .collect()
}

const ALLOCS: usize = 4000;

/// 64 threads, every mode: concurrent collections walk exactly the objects; all are disjoint.
#[test]
fn concurrent_allocation_with_verifying_collections() {
    // 64 threads allocate 4000 objects each in every mode and policy; every 16 objects they park
    // in a safe region, park and unpark, retire (every 128), detach and re-attach (every 512) or
    // just yield, and they poll a safepoint after every object. Four threads call
    // `try_collection` from a safe region (it never waits and sees no running world) and four
    // stop the world 8 times each to verify the heap: each walk meets exactly the objects
    // allocated so far, with fillers exactly the waste counted, and stops most of the 64 threads.
    // At the end all objects are pairwise disjoint, inside the reservation and exactly what the
    // final walk meets, and a reset empties the heap.
    let _watchdog = watchdog("verifying collections", Duration::from_secs(120));
    for (name, builder) in configs("512MiB", "16KiB") {
        let started = Instant::now();
        let world = World::new(heap(builder));
        let per_thread = on_threads(&world, |index, world, mut mutator| {
            let heap = &world.heap;
            let mut rng = Rng::new(index as u64 + 1);
            let mut mine = Vec::with_capacity(ALLOCS);
            for i in 0..ALLOCS {
                let bytes = object_size(&mut rng);
                let object = mutator
                    .alloc(bytes)
                    .unwrap_or_else(|e| panic!("thread {index}: alloc({bytes}): {e}"));
                write_header(object, bytes);
                mine.push((object.as_ptr() as usize, bytes));
                world.count(bytes);
                world.poll(&mut mutator);
                if i % 16 == 15 {
                    match index % 4 {
                        0 => mutator.safe_region(thread::yield_now),
                        1 => {
                            let parked = mutator.park();
                            thread::yield_now();
                            mutator = parked.unpark();
                        }
                        2 if i % 128 == 127 => mutator.retire(),
                        3 if i % 512 == 511 => {
                            // Detach (retiring the TLAB) and attach again, maybe while a
                            // collection is stopping the world.
                            drop(mutator);
                            mutator = heap.attach();
                        }
                        // Running threads get preempted too.
                        _ => thread::yield_now(),
                    }
                }
                if index % 16 == 8 && i % 500 == 100 {
                    // A thread that only tries: it must never wait or see a running world.
                    mutator.safe_region(|| match heap.try_collection() {
                        Ok(collection) => {
                            world.check(&collection);
                            world.tried.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(CollectionError::MutatorsRunning { running }) => {
                            assert!((1..THREADS).contains(&running), "{running} running");
                            world.tried.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(CollectionError::InProgress) => {
                            world.tried.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) => panic!("try_collection: {error}"),
                    });
                }
                if index % 16 == 0 && i % 500 == 250 {
                    // A collector: park its own mutator first, then stop the world.
                    let parked = mutator.park();
                    let request = Request::new(&world.pending);
                    let collection = heap.collection();
                    world.check(&collection);
                    collection.finish();
                    drop(request);
                    world.verified.fetch_add(1, Ordering::Relaxed);
                    mutator = parked.unpark();
                }
            }
            mine
        });
        assert_eq!(
            world.verified.load(Ordering::Relaxed) as usize,
            THREADS / 16 * ALLOCS / 500,
            "{name}"
        );
        assert_eq!(
            world.tried.load(Ordering::Relaxed) as usize,
            THREADS / 16 * ALLOCS / 500,
            "{name}"
        );
        let most_stopped = world.most_stopped.load(Ordering::Relaxed);
        assert!(
            most_stopped >= THREADS / 2,
            "{name}: collections stopped at most {most_stopped} mutators"
        );

        // Every thread detached (its TLAB retired): the final walk meets every object.
        let mut all: Vec<(usize, usize)> = per_thread.into_iter().flatten().collect();
        assert_eq!(all.len(), THREADS * ALLOCS);
        let heap = world.heap.clone();
        assert_eq!(heap.stats().live_mutators, 0);
        let mut collection = heap.collection();
        let walked = world.check(&collection);
        assert_disjoint_inside(&mut all, heap.reserved_range());
        assert_eq!(
            walked, all,
            "{name}: the walk meets exactly the objects allocated"
        );
        assert_eq!(
            world.objects.load(Ordering::Relaxed) as usize,
            THREADS * ALLOCS
        );
        world.reset(&mut collection);
        collection.finish();
        assert_eq!(heap.stats().used_bytes, 0);
        assert_eq!(heap.allocation_range(), heap.reserved_range());
        let mut mutator = heap.attach();
        let object = mutator.alloc(16).unwrap();
        assert_eq!(object.as_ptr() as usize, heap.reserved_range().start);
        eprintln!(
            "{name}: {} collections stopped up to {most_stopped} mutators, {:?}",
            heap.collections(),
            started.elapsed()
        );
    }
}

const OOM_ALLOCS: usize = 6000;

/// 64 threads that keep running out of memory coordinate resets; every generation walks exactly.
#[test]
fn out_of_memory_collections_with_reset() {
    // 64 threads allocate about 240 MiB per run in a 512 KiB heap, in every mode and policy. On
    // `OutOfMemory` a thread collects with reset unless a collection finished since it failed
    // (half park and check `collections()` by hand, half call `collection_if_none_since` in a
    // safe region), then unparks and retries. Each reset's walk meets exactly the objects of its
    // generation, with fillers exactly the waste counted; no thread starves; and within each
    // generation all objects are disjoint and inside the reservation.
    // Also in the `hab` mode over per-CPU buffers: at each cycle's end a refill takes the
    // other CPUs' buffer tails (a foreign carve) before the heap runs out.
    let _watchdog = watchdog("out-of-memory collections", Duration::from_secs(120));
    let mut configs = configs("512KiB", "8KiB");
    configs.push((
        "hab cpu:64KiB".into(),
        HeapConfig::builder()
            .capacity("512KiB")
            .max_tlab("8KiB")
            .mode(Mode::Hab)
            .middle("cpu:64KiB")
            .tlab(TlabPolicy::Adaptive),
    ));
    for (name, builder) in configs {
        let started = Instant::now();
        let world = World::new(heap(builder));
        let per_thread = on_threads(&world, |index, world, mut mutator| {
            let heap = &world.heap;
            let mut rng = Rng::new(1000 + index as u64);
            let mut mine = Vec::with_capacity(OOM_ALLOCS);
            let mut most_attempts = 0;
            for i in 0..OOM_ALLOCS {
                let bytes = object_size(&mut rng);
                let mut attempts = 0;
                let object = loop {
                    match mutator.alloc(bytes) {
                        Ok(object) => break object,
                        Err(AllocError::OutOfMemory { bytes: asked }) => {
                            assert_eq!(asked, bytes);
                            attempts += 1;
                            assert!(attempts < 10_000, "thread {index} starves");
                            // Running: no collection can finish before we park.
                            let seen = heap.collections();
                            if index % 2 == 0 {
                                let parked = mutator.park();
                                if heap.collections() == seen {
                                    let _request = Request::new(&world.pending);
                                    let mut collection = heap.collection();
                                    if heap.collections() == seen {
                                        world.reset(&mut collection);
                                    }
                                    collection.finish();
                                }
                                mutator = parked.unpark();
                            } else {
                                mutator.safe_region(|| {
                                    let _request = Request::new(&world.pending);
                                    if let Some(mut collection) =
                                        heap.collection_if_none_since(seen)
                                    {
                                        world.reset(&mut collection);
                                        collection.finish();
                                    }
                                });
                            }
                        }
                        Err(error) => panic!("thread {index}: alloc({bytes}): {error}"),
                    }
                };
                most_attempts = most_attempts.max(attempts);
                write_header(object, bytes);
                // The generation changes only while this thread is parked.
                let generation = world.generation.load(Ordering::Relaxed);
                mine.push((generation, object.as_ptr() as usize, bytes));
                world.count(bytes);
                world.poll(&mut mutator);
                if i % 64 == 63 {
                    thread::yield_now();
                }
            }
            (mine, most_attempts)
        });

        let heap = world.heap.clone();
        let mut collection = heap.collection();
        world.reset(&mut collection);
        collection.finish();
        let snapshots = world.snapshots.lock().unwrap();
        let generations = snapshots.len();
        assert!(
            generations >= 8,
            "{name}: only {generations} generations: the heap never filled up"
        );
        let most_attempts = per_thread.iter().map(|(_, most)| *most).max().unwrap();
        let mut by_generation = vec![Vec::new(); generations];
        for (generation, address, bytes) in per_thread.into_iter().flat_map(|(mine, _)| mine) {
            by_generation[generation as usize].push((address, bytes));
        }
        let mut total = 0;
        for (generation, mut objects) in by_generation.into_iter().enumerate() {
            total += objects.len();
            assert_disjoint_inside(&mut objects, heap.reserved_range());
            assert_eq!(
                objects, snapshots[generation],
                "{name}: generation {generation}: the walk meets exactly its objects"
            );
        }
        assert_eq!(total, THREADS * OOM_ALLOCS);
        assert_eq!(heap.stats().used_bytes, 0);
        eprintln!(
            "{name}: {generations} generations, {} collections stopped up to {} mutators, \
             at most {most_attempts} retries for one object, {:?}",
            heap.collections(),
            world.most_stopped.load(Ordering::Relaxed),
            started.elapsed()
        );
        if name.starts_with("hab") && hab::per_cpu_support().restartable() {
            let cpu = heap.stats().totals.levels[hab::Level::Cpu.index()];
            eprintln!(
                "{name}: {} of {} carves foreign (other CPUs' tails at cycle ends)",
                cpu.foreign_allocs, cpu.allocs
            );
            if thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
                assert!(
                    cpu.foreign_allocs > 0,
                    "{name}: no tail taken at any cycle's end"
                );
            }
        }
    }
}
