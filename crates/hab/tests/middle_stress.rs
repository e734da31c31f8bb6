//! Stress tests of the middle levels on the real machine: 256 threads allocate in `hab` mode
//! with the topology read from sysfs and each real CPU-id source (rseq, `sched_getcpu`, RDPID),
//! while every thread keeps moving itself from CPU to CPU with `sched_setaffinity`. Collections
//! that stop the world verify the heap while they run; every object is recorded and checked
//! against the final walk.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{assert_disjoint_inside, heap, watchdog, write_header, GateModel, Rng};
use hab::{
    Collection, CpuIdReader, CpuIdSource, Heap, HeapConfig, Level, LevelStats, Mode, Mutator,
    SimulatedCpu, TlabPolicy, Topology,
};

const THREADS: usize = 256;
const ALLOCS: usize = 1000;
/// A thread pins itself to its next CPU after this many allocations.
const PIN_EVERY: usize = 8;
/// Threads whose index is a multiple of this stop the world now and then.
const COLLECTOR_EVERY: usize = 64;
/// A collector thread collects when its allocation count modulo this is `COLLECT_AT`.
const COLLECT_PERIOD: usize = 250;
const COLLECT_AT: usize = 125;

/// The CPUs this process may run on that the topology knows as online, ascending.
fn usable_cpus(topology: &Topology) -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid, empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a writable cpu_set_t of the size passed; 0 is the calling thread.
    let result = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    assert_eq!(result, 0, "{}", std::io::Error::last_os_error());
    topology
        .online_cpus()
        .into_iter()
        .filter(|&cpu| cpu < libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Pins the calling thread to `cpu`: when the call returns the thread runs there.
fn pin(cpu: usize) {
    // SAFETY: an all-zero cpu_set_t is a valid, empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` comes from `usable_cpus`, below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a cpu_set_t of the size passed; 0 is the calling thread.
    let result = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    assert_eq!(
        result,
        0,
        "pin to {cpu}: {}",
        std::io::Error::last_os_error()
    );
}

/// An object size from 16 to 4096 bytes, a multiple of 8: three in four small (up to 256).
fn object_size(rng: &mut Rng) -> usize {
    if rng.below(4) == 0 {
        8 * (33 + rng.below(480) as usize)
    } else {
        8 * (2 + rng.below(31) as usize)
    }
}

/// The middle-level configurations every source runs, with a TLAB policy each. The largest TLAB
/// (16 KiB, or 8 KiB fixed) divides every lowest buffer.
fn configs() -> Vec<(&'static str, TlabPolicy)> {
    vec![
        ("core:256KiB", TlabPolicy::Adaptive),
        ("cpu:128KiB,package:1MiB", TlabPolicy::Growing),
        (
            "cpu:64KiB,core:128KiB,llc:512KiB,package:1MiB,node:2MiB",
            TlabPolicy::Fixed(8 << 10),
        ),
    ]
}

/// What the threads of one run share: the heap, a safepoint request count, and the number and
/// bytes of objects allocated (each thread counts an object after writing its header and before
/// it next parks, so a collection sees exact figures).
struct World {
    heap: Arc<Heap>,
    /// Collections requested and not finished: threads park at their next poll while > 0.
    pending: AtomicUsize,
    /// Guards decrements of `pending`, so that a waiting thread cannot miss the last one.
    requests: Mutex<()>,
    /// Signalled when `pending` drops to 0.
    no_requests: Condvar,
    objects: AtomicU64,
    object_bytes: AtomicU64,
    /// Collections that verified the heap while the threads ran.
    verified: AtomicU64,
    /// The most mutators a collection stopped at once.
    most_stopped: AtomicUsize,
}

/// Keeps a safepoint requested for as long as it lives, even when its thread panics.
struct Request<'w>(&'w World);

impl<'w> Request<'w> {
    fn new(world: &'w World) -> Self {
        world.pending.fetch_add(1, Ordering::SeqCst);
        Request(world)
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        let _guard = self.0.requests.lock().unwrap_or_else(|e| e.into_inner());
        if self.0.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.no_requests.notify_all();
        }
    }
}

impl World {
    /// The safepoint poll: while a collection is requested, wait for it in a safe region,
    /// blocked (256 threads polling with sleeps would starve the collector of the 2 CPUs).
    fn poll(&self, mutator: &mut Mutator) {
        if self.pending.load(Ordering::SeqCst) > 0 {
            mutator.safe_region(|| {
                let mut guard = self.requests.lock().unwrap_or_else(|e| e.into_inner());
                while self.pending.load(Ordering::SeqCst) > 0 {
                    guard = self
                        .no_requests
                        .wait(guard)
                        .unwrap_or_else(|e| e.into_inner());
                }
            });
        }
    }

    /// Walks the heap of a collection: exactly the objects counted, fillers exactly the TLAB and
    /// middle-level waste counted (by mutators, detached ones, and collections), every byte up
    /// to the top. Returns the objects met, in address order.
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
        assert_eq!(summary.filler_bytes as u64, totals.waste_bytes());
        assert_eq!(summary.object_bytes as u64, totals.allocated_bytes());
        objects
    }
}

/// What one thread gave back.
struct Report {
    objects: Vec<(usize, usize)>,
    /// Per level (by [`Level::index`]) and domain: refills the domain served while the thread
    /// was pinned to a CPU of it.
    home_served: Vec<Vec<u64>>,
}

/// One run: 256 threads, each pinning itself to CPU `(index + k) % n` for k = 0, 1, … every
/// `PIN_EVERY` allocations, with verifying collections. Returns the heap's level statistics.
fn run(name: &str, heap: Arc<Heap>, cpus: &[usize]) -> [LevelStats; 5] {
    let started = Instant::now();
    let world = Arc::new(World {
        heap,
        pending: AtomicUsize::new(0),
        requests: Mutex::new(()),
        no_requests: Condvar::new(),
        objects: AtomicU64::new(0),
        object_bytes: AtomicU64::new(0),
        verified: AtomicU64::new(0),
        most_stopped: AtomicUsize::new(0),
    });
    let levels: Vec<Level> = world
        .heap
        .middle_levels()
        .into_iter()
        .map(|info| info.level)
        .collect();
    let cpus: Arc<[usize]> = cpus.into();
    let start = Arc::new(Barrier::new(THREADS));
    // Threads that finish wait here parked, so that every collection of the run stops all of
    // them (running or parked), however unevenly the scheduler runs them.
    let end = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|index| {
            let (world, cpus, levels, start, end) = (
                world.clone(),
                cpus.clone(),
                levels.clone(),
                start.clone(),
                end.clone(),
            );
            thread::Builder::new()
                .name(format!("mutator-{index}"))
                .spawn(move || {
                    let heap = &world.heap;
                    let topology = heap.topology();
                    // Real sources ignore the simulated state; it is only the argument.
                    let no_simulation = SimulatedCpu::new(heap.cpu_id(), 0);
                    let mut home_served: Vec<Vec<u64>> = Level::ALL
                        .iter()
                        .map(|&level| vec![0; topology.domains(level)])
                        .collect();
                    let mut rng = Rng::new(index as u64 + 1);
                    let mut objects = Vec::with_capacity(ALLOCS);
                    let mut cpu = cpus[index % cpus.len()];
                    pin(cpu);
                    // Attached and running: no collection can start before all have passed.
                    let mut mutator = heap.attach();
                    start.wait();
                    let mut before = mutator.stats();
                    for i in 0..ALLOCS {
                        if i % PIN_EVERY == 0 {
                            cpu = cpus[(index + i / PIN_EVERY) % cpus.len()];
                            pin(cpu);
                            assert_eq!(
                                heap.cpu_id().current(&no_simulation),
                                cpu % topology.cpu_slots(),
                                "the source sees the thread where it was pinned"
                            );
                        }
                        let bytes = object_size(&mut rng);
                        let object = mutator
                            .alloc(bytes)
                            .unwrap_or_else(|e| panic!("thread {index}: alloc({bytes}): {e}"));
                        write_header(object, bytes);
                        objects.push((object.as_ptr() as usize, bytes));
                        world.objects.fetch_add(1, Ordering::Relaxed);
                        world
                            .object_bytes
                            .fetch_add(bytes as u64, Ordering::Relaxed);
                        let after = mutator.stats();
                        // A domain that served the thread's refill without it being foreign is
                        // the one of the CPU the thread is pinned to.
                        for &level in &levels {
                            let (now, then) =
                                (after.levels[level.index()], before.levels[level.index()]);
                            if now.allocs > then.allocs && now.foreign_allocs == then.foreign_allocs
                            {
                                home_served[level.index()][topology.domain_of(cpu, level)] += 1;
                            }
                        }
                        before = after;
                        world.poll(&mut mutator);
                        if index % COLLECTOR_EVERY == 0 && i % COLLECT_PERIOD == COLLECT_AT {
                            // A collector: park its own mutator first, then stop the world.
                            let parked = mutator.park();
                            let request = Request::new(&world);
                            let collection = heap.collection();
                            world.check(&collection);
                            collection.finish();
                            drop(request);
                            world.verified.fetch_add(1, Ordering::Relaxed);
                            mutator = parked.unpark();
                            before = mutator.stats();
                        }
                    }
                    let parked = mutator.park();
                    end.wait();
                    drop(parked);
                    Report {
                        objects,
                        home_served,
                    }
                })
                .unwrap()
        })
        .collect();
    let reports: Vec<Report> = handles
        .into_iter()
        .map(|handle| handle.join().expect("a mutator thread panicked"))
        .collect();
    let heap = world.heap.clone();
    assert_eq!(
        world.verified.load(Ordering::Relaxed) as usize,
        THREADS / COLLECTOR_EVERY * ALLOCS / COLLECT_PERIOD,
        "{name}"
    );
    let most_stopped = world.most_stopped.load(Ordering::Relaxed);
    assert!(
        most_stopped >= THREADS / 2,
        "{name}: collections stopped at most {most_stopped} mutators"
    );

    // Every thread detached (its TLAB retired): the final walk meets every object, and the
    // collection retires every middle-level buffer too.
    assert_eq!(heap.stats().live_mutators, 0);
    let collection = heap.collection();
    let walked = world.check(&collection);
    let mut all: Vec<(usize, usize)> = reports
        .iter()
        .flat_map(|report| report.objects.iter().copied())
        .collect();
    assert_eq!(all.len(), THREADS * ALLOCS);
    assert_disjoint_inside(&mut all, heap.reserved_range());
    assert_eq!(
        walked, all,
        "{name}: the walk meets exactly the objects allocated"
    );
    collection.finish();

    let totals = heap.stats().totals;
    for level in Level::ALL {
        let stats = totals.levels[level.index()];
        if !levels.contains(&level) {
            assert_eq!(
                stats,
                LevelStats::default(),
                "{name}: {level} is not configured"
            );
            continue;
        }
        assert!(
            stats.allocs > 0 && stats.refills > 0,
            "{name}: {level}: {stats:?}"
        );
        assert!(stats.foreign_allocs <= stats.allocs);
        let domains = heap.topology().domains(level);
        if domains == 1 {
            // No other domain to be served by.
            assert_eq!(stats.foreign_allocs, 0, "{name}: {level} has one domain");
        }
        // Every domain of the level with a CPU this process may use (under `taskset` or a
        // cgroup, not all of them) served threads pinned to one of its CPUs.
        let usable_domains = (0..domains).filter(|&domain| {
            heap.topology()
                .cpus_in(level, domain)
                .iter()
                .any(|cpu| cpus.contains(cpu))
        });
        for domain in usable_domains {
            let served: u64 = reports
                .iter()
                .map(|report| report.home_served[level.index()][domain])
                .sum();
            assert!(
                served > 0,
                "{name}: {level} domain {domain} never served its CPUs"
            );
        }
    }
    // Every TLAB is counted once: by the lowest level, by a higher one when the buffers below
    // were busy (among that level's chunks, with the buffers it hands the level below), or as
    // past every level. With one level, the first and the last are all.
    let lowest = totals.levels[levels[0].index()].allocs;
    let past = totals.tlabs_past_levels;
    let higher: u64 = levels[1..]
        .iter()
        .map(|level| totals.levels[level.index()].allocs)
        .sum();
    assert!(
        lowest + past <= totals.refills && totals.refills - lowest - past <= higher,
        "{name}: {} TLABs, {lowest} from the lowest level, {past} past every level, {higher} \
         chunks of higher levels",
        totals.refills
    );
    if levels.len() == 1 {
        assert_eq!(lowest + past, totals.refills, "{name}");
    }
    eprintln!(
        "{name}: {} collections stopped up to {most_stopped} mutators, {:?}\n  {totals}",
        heap.collections(),
        started.elapsed()
    );
    totals.levels
}

/// 256 threads migrating between all CPUs, every real CPU-id source: verified walks, no overlap.
#[test]
fn migrating_threads_with_real_cpu_ids() {
    // For each real CPU-id source this machine has (a missing one is skipped with the reason)
    // and three middle-level configurations (one to five levels), 256 threads allocate 1000
    // objects each, pinning themselves to the next CPU every 8 objects (the source must see
    // them there), while 4 of them stop the world 4 times each to verify the heap: each walk
    // meets exactly the objects allocated so far, with fillers exactly the TLAB and middle-level
    // waste counted. At the end all objects are pairwise disjoint, inside the reservation and
    // exactly what the final walk meets; every configured level and every one of its domains
    // served allocations, and unconfigured levels stayed untouched.
    let _watchdog = watchdog("middle-level stress", Duration::from_secs(300));
    let topology = Topology::discover();
    let cpus = usable_cpus(&topology);
    assert!(!cpus.is_empty());
    eprintln!(
        "{} usable cpus: {cpus:?}\n{}",
        cpus.len(),
        topology.describe()
    );
    let mut runs = 0;
    let mut foreign = [0u64; 5];
    let mut allocs = [0u64; 5];
    for source in [CpuIdSource::Rseq, CpuIdSource::GetCpu, CpuIdSource::Rdpid] {
        if let Err(why) = CpuIdReader::new(source, topology.cpu_slots()) {
            eprintln!("skipping {source}: unavailable here: {why}");
            continue;
        }
        for (middle, policy) in configs() {
            let name = format!("{source} {middle} {policy}");
            let heap = heap(
                HeapConfig::builder()
                    .capacity("512MiB")
                    .mode(Mode::Hab)
                    .tlab(policy)
                    .max_tlab("16KiB")
                    .middle(middle)
                    .cpu_id(source),
            );
            assert_eq!(heap.cpu_id().source(), source);
            let levels = run(&name, heap, &cpus);
            for level in Level::ALL {
                foreign[level.index()] += levels[level.index()].foreign_allocs;
                allocs[level.index()] += levels[level.index()].allocs;
            }
            runs += 1;
        }
    }
    // GetCpu works wherever Linux runs.
    assert!(runs >= configs().len(), "{runs} runs");
    eprintln!("foreign allocations per level over {runs} runs: {foreign:?} of {allocs:?}");
}

/// On real CPUs, a thread stopped mid-refill sends another thread of its CPU to a foreign buffer.
#[test]
fn a_refill_stopped_on_a_real_cpu_sends_its_neighbours_to_a_foreign_buffer() {
    // Foreign allocations need contention: a thread pinned to one CPU never changes CPU inside
    // a refill, so only a buffer held by a thread stopped mid-refill sends its neighbours
    // elsewhere. This makes that happen on purpose, for each real CPU-id source, at the `core`
    // level (the `cpu` level uses restartable sequences where they work: never foreign), with
    // CPUs X and Y on different cores: with 16 KiB core buffers, CPU X's buffer is left with a 4 KiB tail and CPU Y's with 12 KiB free;
    // thread A, pinned to X, needs 8 KiB, claims X's buffer and is stopped while writing the
    // filler over its tail; thread B, pinned to X too, then gets its TLAB from Y's buffer, right
    // after Y's first TLAB, counted as one foreign CPU-level allocation. Released, A completes
    // its refill, not foreign, with 4 KiB of waste; the final walk is exact.
    let _watchdog = watchdog("stopped refill on real cpus", Duration::from_secs(60));
    let topology = Topology::discover();
    let cpus = usable_cpus(&topology);
    let x = cpus[0];
    let core_of = |cpu: usize| topology.domain_of(cpu, Level::Core);
    let Some(&y) = cpus.iter().find(|&&cpu| core_of(cpu) != core_of(x)) else {
        eprintln!("skipped: needs two usable CPUs on different cores, has {cpus:?}");
        return;
    };
    let cpu_level = |mutator: &Mutator| mutator.stats().levels[Level::Core.index()];
    /// Runs `body` with `mutator` on a thread pinned to `cpu`; gives both back.
    fn on_cpu<T: Send + 'static>(
        cpu: usize,
        mut mutator: Mutator,
        body: impl FnOnce(&mut Mutator) -> T + Send + 'static,
    ) -> thread::JoinHandle<(Mutator, T)> {
        thread::spawn(move || {
            pin(cpu);
            let result = body(&mut mutator);
            (mutator, result)
        })
    }
    let alloc = |mutator: &mut Mutator, bytes: usize| {
        let object = mutator.alloc(bytes).unwrap();
        write_header(object, bytes);
        object.as_ptr() as usize
    };
    let mut runs = 0;
    for source in [CpuIdSource::Rseq, CpuIdSource::GetCpu, CpuIdSource::Rdpid] {
        if let Err(why) = CpuIdReader::new(source, topology.cpu_slots()) {
            eprintln!("skipping {source}: unavailable here: {why}");
            continue;
        }
        let gate = GateModel::default();
        let config = HeapConfig::builder()
            .capacity("1MiB")
            .mode(Mode::Hab)
            .tlab(TlabPolicy::Growing)
            .max_tlab("16KiB")
            .middle("core:16KiB")
            .cpu_id(source)
            .build()
            .unwrap();
        let heap = Heap::new(config, gate.clone()).unwrap();
        let (filler, _) = on_cpu(x, heap.attach(), move |m| alloc(m, 12 << 10))
            .join()
            .unwrap();
        let (y_mutator, y_first) = on_cpu(y, heap.attach(), move |m| alloc(m, 4 << 10))
            .join()
            .unwrap();
        let a_gate = gate.clone();
        let thread_a = on_cpu(x, heap.attach(), move |m| {
            a_gate.arm_for_this_thread();
            alloc(m, 8 << 10)
        });
        assert_eq!(
            gate.wait_until_stopped(),
            4 << 10,
            "{source}: A stopped over X's tail"
        );
        let (thread_b, b_object) = on_cpu(x, heap.attach(), move |m| alloc(m, 1024))
            .join()
            .unwrap();
        assert_eq!(
            b_object,
            y_first + (4 << 10),
            "{source}: B's TLAB comes from Y's buffer"
        );
        assert_eq!(thread_b.stats().refills, 1);
        assert_eq!(
            cpu_level(&thread_b),
            LevelStats {
                allocs: 1,
                foreign_allocs: 1,
                refills: 0,
                waste_bytes: 0,
                ..LevelStats::default()
            },
            "{source}"
        );
        gate.release();
        let (thread_a, _) = thread_a.join().unwrap();
        assert_eq!(
            cpu_level(&thread_a),
            LevelStats {
                allocs: 1,
                foreign_allocs: 0,
                refills: 1,
                taken_bytes: 16 << 10,
                waste_bytes: 4 << 10,
                ..LevelStats::default()
            },
            "{source}"
        );
        drop((filler, y_mutator, thread_a, thread_b));
        let collection = heap.collection();
        let summary = collection.verify().unwrap();
        assert_eq!(
            (summary.objects, summary.object_bytes),
            (4, (12 + 4 + 8 + 1) << 10)
        );
        let totals = heap.stats().totals;
        assert_eq!(summary.filler_bytes as u64, totals.waste_bytes());
        assert_eq!(totals.levels[Level::Core.index()].foreign_allocs, 1);
        runs += 1;
    }
    assert!(runs >= 1, "sched_getcpu works wherever Linux runs");
}
