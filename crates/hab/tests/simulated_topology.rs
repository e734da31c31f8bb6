//! The middle levels on a simulated machine: a `4x10x2` topology (80 virtual CPUs, 40 cores,
//! 4 packages, 4 nodes) with buffers at four levels, and virtual CPUs that migrate at random.
//!
//! The simulated CPU-id source is deterministic: a mutator's virtual CPU starts at its id modulo
//! the CPU slots and moves only at a TLAB refill, drawn from a generator seeded with the source's
//! seed and the mutator's id. [`SimulatedCpu`] is public, so a test can replay every mutator's
//! CPU next to it, and from the per-level counters of each refill know which domain of each
//! level served it. That is how these tests see single domains, which the statistics (per
//! level, not per domain) do not show.

mod common;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use common::{assert_disjoint_inside, watchdog, write_header, GateModel, Rng};
use hab::{
    AllocationStats, CpuIdSource, Heap, HeapConfig, Level, LevelStats, Mode, Mutator, SimulatedCpu,
    TlabPolicy,
};

/// The simulated machine: 4 packages of 10 cores of 2 hardware threads.
const MACHINE: &str = "4x10x2";
/// Four middle levels, each buffer a multiple of the one below (the largest TLAB is 4 KiB).
const MIDDLE: &str = "cpu:16KiB,core:64KiB,package:512KiB,node:2MiB";
const MAX_TLAB: usize = 4 << 10;

fn sim(seed: u64, migrate_probability: f64) -> CpuIdSource {
    CpuIdSource::Simulated {
        seed,
        migrate_probability,
    }
}

/// The four-level heap on the simulated machine, with the given CPU-id source and TLAB policy.
fn four_level_heap(source: CpuIdSource, policy: TlabPolicy, capacity: &str) -> Arc<Heap> {
    common::heap(
        HeapConfig::builder()
            .capacity(capacity)
            .mode(Mode::Hab)
            .tlab(policy)
            .max_tlab(MAX_TLAB)
            .middle(MIDDLE)
            .simulated_topology(MACHINE)
            .cpu_id(source),
    )
}

/// The configured levels of a heap, lowest first.
fn levels_of(heap: &Heap) -> Vec<Level> {
    heap.middle_levels()
        .into_iter()
        .map(|info| info.level)
        .collect()
}

/// An object size: mostly 16 to 512 bytes, sometimes up to 2 KiB, rarely above the largest
/// TLAB (allocated outside TLABs, from the global heap).
fn object_size(rng: &mut Rng) -> usize {
    match rng.below(64) {
        0 => MAX_TLAB + 8 * (1 + rng.below(256) as usize),
        1..=8 => 8 * (65 + rng.below(192) as usize),
        _ => 8 * (2 + rng.below(63) as usize),
    }
}

/// Replays a mutator's virtual CPU: the heap moves it once at every TLAB refill (before it
/// reads the CPU), exactly as [`CpuIdReader::on_slow_path`](hab::CpuIdReader::on_slow_path)
/// moves this copy.
struct Replay {
    cpu: SimulatedCpu,
}

impl Replay {
    /// The copy of the virtual CPU of `mutator`, the `index`-th attached to its heap.
    fn new(mutator: &Mutator, index: usize) -> Replay {
        Replay {
            cpu: SimulatedCpu::new(mutator.heap().cpu_id(), index as u64),
        }
    }

    /// The CPU the mutator's next refill runs on.
    fn refill(&mut self, heap: &Heap) -> usize {
        heap.cpu_id().on_slow_path(&mut self.cpu);
        heap.cpu_id().current(&self.cpu)
    }
}

/// The middle levels of a single-threaded heap, modelled: one buffer `(top, end)` per domain of
/// each level and a bump global heap, following the refill protocol as one thread runs it (no
/// buffer is ever busy, no claim is ever lost) in a heap that never fills up.
struct Model {
    levels: Vec<(Level, usize)>,
    /// Per level, per domain: the buffer's free range.
    buffers: Vec<Vec<(usize, usize)>>,
    global_top: usize,
    /// What the heap's per-level counters must show.
    stats: [LevelStats; 5],
}

impl Model {
    fn new(heap: &Heap) -> Model {
        let middle = heap.middle_levels();
        Model {
            levels: middle
                .iter()
                .map(|info| (info.level, info.buffer_bytes))
                .collect(),
            buffers: middle
                .iter()
                .map(|info| vec![(0, 0); info.domains])
                .collect(),
            global_top: heap.allocation_range().start,
            // Given levels keep their buffers' size, which the heap's figures state.
            stats: std::array::from_fn(|index| LevelStats {
                buffer_bytes: middle
                    .iter()
                    .find(|info| info.level.index() == index)
                    .map_or(0, |info| info.buffer_bytes as u64),
                ..LevelStats::default()
            }),
        }
    }

    /// The chunk `(start, len)` level `index` hands out to a thread on `cpu`.
    fn carve(
        &mut self,
        heap: &Heap,
        index: usize,
        cpu: usize,
        min: usize,
        desired: usize,
    ) -> (usize, usize) {
        let Some(&(level, buffer_bytes)) = self.levels.get(index) else {
            let start = self.global_top;
            self.global_top += desired;
            return (start, desired);
        };
        let domain = heap.topology().domain_of(cpu, level);
        let stats = &mut self.stats[level.index()];
        stats.allocs += 1;
        let (top, end) = self.buffers[index][domain];
        if end - top >= min {
            let take = desired.min(end - top);
            self.buffers[index][domain] = (top + take, end);
            return (top, take);
        }
        stats.refills += 1;
        stats.waste_bytes += (end - top) as u64;
        // A whole buffer, or near the end of the range its share of what is left: a quarter
        // of it over the level's buffers, a multiple of the request's minimum.
        let whole = buffer_bytes.max(min);
        let share =
            (heap.allocation_range().end - self.global_top) / (self.buffers[index].len() * 4) / min
                * min;
        let bytes = whole.min(share).max(min);
        if bytes < whole {
            stats.short_refills += 1;
        }
        let (start, len) = self.carve(heap, index + 1, cpu, min, bytes);
        self.stats[level.index()].taken_bytes += len as u64;
        let take = desired.min(len);
        self.buffers[index][domain] = (start + take, start + len);
        (start, take)
    }

    /// A collection retires every buffer, counting their free tails as waste.
    fn collect(&mut self) {
        for (index, buffers) in self.buffers.iter_mut().enumerate() {
            let stats = &mut self.stats[self.levels[index].0.index()];
            for (top, end) in buffers.iter_mut() {
                stats.waste_bytes += (*end - *top) as u64;
                (*top, *end) = (0, 0);
            }
        }
    }
}

/// One thread, many mutators on migrating virtual CPUs: every TLAB is exactly where a model of
/// per-domain buffers on the replayed CPUs puts it.
#[test]
fn tlabs_come_from_the_buffers_of_the_cpu_the_thread_runs_on() {
    // 24 mutators of one thread allocate in turn with the growing policy (so TLABs have many
    // sizes and buffers leave tails), their virtual CPUs migrating at 30% of the refills, with a
    // collection every 2000 objects. Every TLAB's address and size, and every level's
    // allocations, refills and waste equal the model's: each TLAB comes from the buffer of the
    // domain, at every level, of the CPU the thread runs on, and a buffer is refilled from the
    // buffer of its own domain one level up. With one thread nothing is ever foreign.
    let heap = four_level_heap(sim(42, 0.3), TlabPolicy::Growing, "256MiB");
    let config = heap.config().clone();
    let mut model = Model::new(&heap);
    let mut mutators: Vec<Mutator> = (0..24).map(|_| heap.attach()).collect();
    let mut replays: Vec<Replay> = mutators
        .iter()
        .enumerate()
        .map(|(index, mutator)| Replay::new(mutator, index))
        .collect();
    let mut rng = Rng::new(7);
    let mut checked_refills = 0u64;
    let mut objects = 0u64;
    for i in 0..60_000 {
        let index = rng.below(mutators.len() as u64) as usize;
        let mutator = &mut mutators[index];
        let bytes = object_size(&mut rng);
        let before = mutator.stats();
        let object = mutator
            .alloc(bytes)
            .unwrap_or_else(|e| panic!("alloc({bytes}): {e}"));
        write_header(object, bytes);
        objects += 1;
        let after = mutator.stats();
        if after.slow_allocs > before.slow_allocs {
            // Outside any TLAB: straight from the global heap.
            assert_eq!(
                object.as_ptr() as usize,
                model.global_top,
                "object of {bytes}"
            );
            model.global_top += bytes;
        }
        if after.refills == before.refills {
            assert_eq!(
                after.levels, before.levels,
                "no refill, no middle-level work"
            );
        } else {
            let cpu = replays[index].refill(&heap);
            let desired = (before.desired_size_bytes as usize).max(bytes);
            let min = config.min_tlab_bytes().max(bytes).min(desired);
            let (start, len) = model.carve(&heap, 0, cpu, min, desired);
            assert_eq!(
                (
                    object.as_ptr() as usize,
                    after.tlab_bytes - before.tlab_bytes
                ),
                (start, len as u64),
                "refill {checked_refills} of mutator {index} on cpu {cpu}"
            );
            checked_refills += 1;
        }
        if i % 2000 == 1999 {
            let parked: Vec<_> = mutators.drain(..).map(Mutator::park).collect();
            let collection = heap.collection();
            let summary = collection.verify().unwrap();
            assert_eq!(summary.objects, objects);
            assert_eq!(summary.total_bytes(), collection.used_bytes());
            model.collect();
            let totals = heap.stats().totals;
            assert_eq!(summary.filler_bytes as u64, totals.waste_bytes());
            collection.finish();
            mutators = parked.into_iter().map(|parked| parked.unpark()).collect();
        }
    }
    // Per level: allocations, refills, the bytes they took and waste (at refills, and at
    // collections on the heap's collector) exactly as modelled; nothing foreign, nothing at unconfigured levels.
    let totals = heap.stats().totals;
    assert_eq!(totals.levels, model.stats);
    for (level, _) in &model.levels {
        let stats = totals.levels[level.index()];
        assert!(
            stats.allocs > 0 && stats.refills > 0 && stats.waste_bytes > 0,
            "{level}: {stats:?}"
        );
    }
    assert_eq!(checked_refills, totals.refills);
    assert!(checked_refills > 4000, "{checked_refills} refills");
    let migrations: u64 = replays.iter().map(|replay| replay.cpu.migrations()).sum();
    assert!(migrations > checked_refills / 5, "{migrations} migrations");
}

/// What one mutator thread saw.
struct Report {
    /// Every object it allocated: (address, bytes).
    objects: Vec<(usize, usize)>,
    /// Per level (by [`Level::index`]) and domain: chunks the domain handed to this thread while
    /// the thread ran in it.
    home_served: Vec<Vec<u64>>,
    /// The mutator's counters when it detached.
    stats: AllocationStats,
    /// Migrations of its virtual CPU.
    migrations: u64,
}

/// Runs `threads` mutator threads, attached in order (mutator `i` starts on virtual CPU `i`),
/// each allocating `allocs` objects. Every refill is attributed, through the replayed virtual
/// CPU, to the domain of each level that served it (when not foreign).
fn run_threads(heap: &Arc<Heap>, threads: usize, allocs: usize) -> Vec<Report> {
    let levels = levels_of(heap);
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|index| {
            let mutator = heap.attach();
            let (heap, levels, start) = (heap.clone(), levels.clone(), start.clone());
            thread::Builder::new()
                .name(format!("mutator-{index}"))
                .spawn(move || {
                    let mut mutator = mutator;
                    let mut replay = Replay::new(&mutator, index);
                    let mut rng = Rng::new(index as u64 + 1);
                    let mut objects = Vec::with_capacity(allocs);
                    let mut home_served: Vec<Vec<u64>> = Level::ALL
                        .iter()
                        .map(|&level| vec![0; heap.topology().domains(level)])
                        .collect();
                    start.wait();
                    let mut before = mutator.stats();
                    for _ in 0..allocs {
                        let bytes = object_size(&mut rng);
                        let object = mutator
                            .alloc(bytes)
                            .unwrap_or_else(|e| panic!("thread {index}: alloc({bytes}): {e}"));
                        write_header(object, bytes);
                        objects.push((object.as_ptr() as usize, bytes));
                        let after = mutator.stats();
                        if after.refills == before.refills {
                            assert_eq!(after.levels, before.levels, "no refill, no level work");
                        } else {
                            assert_eq!(after.refills, before.refills + 1);
                            let cpu = replay.refill(&heap);
                            let delta = after.since(&before);
                            for &level in &levels {
                                let served = delta.levels[level.index()];
                                assert!(served.allocs <= 1, "{level} served twice: {served:?}");
                                if served.allocs == 1 && served.foreign_allocs == 0 {
                                    let domain = heap.topology().domain_of(cpu, level);
                                    home_served[level.index()][domain] += 1;
                                }
                            }
                        }
                        before = after;
                        if rng.below(16) == 0 {
                            thread::yield_now();
                        }
                    }
                    let stats = mutator.stats();
                    drop(mutator);
                    Report {
                        objects,
                        home_served,
                        stats,
                        migrations: replay.cpu.migrations(),
                    }
                })
                .unwrap()
        })
        .collect();
    handles
        .into_iter()
        .map(|handle| handle.join().expect("a mutator thread panicked"))
        .collect()
}

/// After every thread detached: the walk meets exactly the reported objects, all disjoint and
/// inside the reservation, with fillers exactly the TLAB and middle-level waste counted; the
/// threads' counters add up to the heap's (the collector only adds waste). Returns the totals.
fn check_final_heap(heap: &Heap, reports: &[Report]) -> AllocationStats {
    assert_eq!(heap.stats().live_mutators, 0);
    let collection = heap.collection();
    let (summary, walked) = common::walk_objects(&collection);
    assert_eq!(summary.total_bytes(), collection.used_bytes());
    let mut all: Vec<(usize, usize)> = reports
        .iter()
        .flat_map(|report| report.objects.iter().copied())
        .collect();
    assert_disjoint_inside(&mut all, heap.reserved_range());
    assert_eq!(walked, all, "the walk meets exactly the objects allocated");
    let totals = heap.stats().totals;
    assert_eq!(summary.filler_bytes as u64, totals.waste_bytes());
    let mut summed = AllocationStats::default();
    for report in reports {
        summed += report.stats;
    }
    for level in Level::ALL {
        let (threads, heap_wide) = (summed.levels[level.index()], totals.levels[level.index()]);
        assert_eq!(
            (threads.allocs, threads.foreign_allocs, threads.refills),
            (
                heap_wide.allocs,
                heap_wide.foreign_allocs,
                heap_wide.refills
            ),
            "{level}"
        );
        assert!(threads.waste_bytes <= heap_wide.waste_bytes, "{level}");
    }
    assert_eq!(summed.refills, totals.refills);
    collection.finish();
    totals
}

/// 160 migrating threads on 80 virtual CPUs: every domain of every level serves its own threads.
#[test]
fn every_domain_of_every_level_serves_allocations() {
    // 160 threads (two per virtual CPU to start with) allocate 1000 objects each while their
    // virtual CPUs migrate at 30% of the refills, then at every refill. Replaying each thread's
    // CPU shows which domain served each refill at each level: every one of the 80 CPU, 40 core,
    // 4 package and 4 node buffers handed out chunks to threads running in its domain. Every
    // level counted allocations and refills; with probability 1 every refill migrated; the
    // final walk is exact.
    let _watchdog = watchdog("every domain", Duration::from_secs(120));
    for (seed, probability) in [(3, 0.3), (5, 1.0)] {
        let started = Instant::now();
        let heap = four_level_heap(sim(seed, probability), TlabPolicy::Adaptive, "256MiB");
        assert_eq!(
            [Level::Cpu, Level::Core, Level::Package, Level::Node]
                .map(|level| heap.topology().domains(level)),
            [80, 40, 4, 4]
        );
        let reports = run_threads(&heap, 160, 1000);
        let totals = check_final_heap(&heap, &reports);
        for hab::MiddleLevelInfo { level, domains, .. } in heap.middle_levels() {
            assert_eq!(domains, heap.topology().domains(level));
            let unserved: Vec<usize> = (0..domains)
                .filter(|&domain| {
                    reports
                        .iter()
                        .all(|report| report.home_served[level.index()][domain] == 0)
                })
                .collect();
            assert!(
                unserved.is_empty(),
                "p={probability}: {level} domains {unserved:?} never served their own threads"
            );
            let stats = totals.levels[level.index()];
            assert!(stats.allocs > 0 && stats.refills > 0, "{level}: {stats:?}");
        }
        let migrations: u64 = reports.iter().map(|report| report.migrations).sum();
        assert!(migrations > totals.refills / 5, "{migrations} migrations");
        if probability == 1.0 {
            for report in &reports {
                assert_eq!(report.migrations, report.stats.refills);
            }
        }
        let (middle_allocs, foreign) = totals.middle_allocs();
        eprintln!(
            "p={probability}: {middle_allocs} middle-level allocations, {foreign} foreign, \
             {migrations} migrations, {:?}\n  {totals}",
            started.elapsed()
        );
    }
}

/// Without migration and one thread per virtual CPU, no TLAB ever comes from another CPU's buffer.
#[test]
fn without_migration_the_lowest_level_is_never_foreign() {
    // 80 threads, mutator i on virtual CPU i for good (probability 0), allocate 1500 objects
    // each. A CPU buffer is then only ever used by its one thread: never busy when the thread
    // comes, never claimed by another, and the levels above never run dry, so every TLAB of every
    // thread comes from its own CPU's buffer: per thread, CPU-level allocations equal TLAB
    // refills, with exactly zero foreign ones. (Core buffers are shared by two threads, so the
    // levels above may be foreign.)
    let _watchdog = watchdog("no migration", Duration::from_secs(120));
    let heap = four_level_heap(sim(11, 0.0), TlabPolicy::Adaptive, "256MiB");
    let reports = run_threads(&heap, 80, 1500);
    let totals = check_final_heap(&heap, &reports);
    for (index, report) in reports.iter().enumerate() {
        let cpu = report.stats.levels[Level::Cpu.index()];
        assert_eq!(report.migrations, 0);
        assert_eq!(cpu.foreign_allocs, 0, "thread {index}: {}", report.stats);
        assert_eq!(
            cpu.allocs, report.stats.refills,
            "thread {index}: {}",
            report.stats
        );
        assert!(report.stats.refills > 0);
        // Only its own CPU's buffer served it.
        let served = &report.home_served[Level::Cpu.index()];
        assert_eq!(served[index], cpu.allocs, "thread {index}");
        assert_eq!(served.iter().sum::<u64>(), cpu.allocs, "thread {index}");
    }
    assert_eq!(totals.levels[Level::Cpu.index()].foreign_allocs, 0);
    eprintln!("{totals}");
}

/// A thread stopped mid-refill sends another thread of its CPU to a foreign buffer, counted so.
#[test]
fn a_thread_stopped_in_a_refill_sends_the_others_to_a_foreign_domain() {
    // On a 1x2x1 machine with 16 KiB CPU buffers, for migration probabilities 0, 0.3 and 1
    // (each mutator's next CPU predicted by replaying it): CPU X's buffer is left with a 4 KiB
    // tail and CPU Y's with 12 KiB free. Thread A, on X, needs 8 KiB: it claims X's buffer and
    // is stopped while writing the filler over the tail. Thread B, on X too, then takes a TLAB:
    // X's buffer is busy, so B's TLAB is carved from Y's buffer, right after Y's first TLAB,
    // and counted as one foreign CPU-level allocation; nothing blocks. Released, A completes its
    // refill (4 KiB of waste, not foreign) and the final walk is exact.
    let _watchdog = watchdog("stopped refill", Duration::from_secs(60));
    for (seed, probability) in [(1, 0.0), (2, 0.3), (3, 1.0)] {
        let gate = GateModel::default();
        let config = HeapConfig::builder()
            .capacity("1MiB")
            .mode(Mode::Hab)
            .tlab(TlabPolicy::Growing)
            .max_tlab("16KiB")
            .middle("cpu:16KiB")
            .simulated_topology("1x2x1")
            .cpu_id(sim(seed, probability))
            .build()
            .unwrap();
        let heap = Heap::new(config, gate.clone()).unwrap();
        let mut mutators: Vec<Option<Mutator>> = (0..16).map(|_| Some(heap.attach())).collect();
        // The CPU of each mutator's first refill.
        let first_cpu: Vec<usize> = mutators
            .iter()
            .enumerate()
            .map(|(index, mutator)| Replay::new(mutator.as_ref().unwrap(), index).refill(&heap))
            .collect();
        let x = first_cpu[0];
        let on_x: Vec<usize> = (1..16).filter(|&i| first_cpu[i] == x).collect();
        let y_filler = (1..16)
            .find(|&i| first_cpu[i] != x)
            .expect("a mutator on the other CPU");
        let (a, b) = (on_x[0], on_x[1]);
        let level_stats = |stats: AllocationStats| stats.levels[Level::Cpu.index()];

        let mut filler = mutators[0].take().unwrap();
        let object = filler.alloc(12 << 10).unwrap();
        write_header(object, 12 << 10);
        let mut y_mutator = mutators[y_filler].take().unwrap();
        let y_first = y_mutator.alloc(4 << 10).unwrap();
        write_header(y_first, 4 << 10);

        let mut thread_a = mutators[a].take().unwrap();
        let a_gate = gate.clone();
        let a_handle = thread::spawn(move || {
            a_gate.arm_for_this_thread();
            let object = thread_a.alloc(8 << 10).unwrap();
            write_header(object, 8 << 10);
            thread_a
        });
        assert_eq!(
            gate.wait_until_stopped(),
            4 << 10,
            "A stopped over X's 4 KiB tail"
        );

        let mut thread_b = mutators[b].take().unwrap();
        let object = thread_b.alloc(1024).unwrap();
        write_header(object, 1024);
        assert_eq!(
            object.as_ptr() as usize,
            y_first.as_ptr() as usize + (4 << 10),
            "p={probability}: B's TLAB comes from Y's buffer"
        );
        let b_stats = thread_b.stats();
        assert_eq!(b_stats.refills, 1);
        assert_eq!(
            level_stats(b_stats),
            LevelStats {
                allocs: 1,
                foreign_allocs: 1,
                refills: 0,
                waste_bytes: 0,
                ..LevelStats::default()
            },
            "p={probability}"
        );

        gate.release();
        let thread_a = a_handle.join().unwrap();
        assert_eq!(
            level_stats(thread_a.stats()),
            LevelStats {
                allocs: 1,
                foreign_allocs: 0,
                refills: 1,
                taken_bytes: 16 << 10,
                waste_bytes: 4 << 10,
                ..LevelStats::default()
            },
            "p={probability}"
        );
        drop((filler, y_mutator, thread_a, thread_b, mutators));
        let collection = heap.collection();
        let summary = collection.verify().unwrap();
        assert_eq!(summary.objects, 4);
        assert_eq!(summary.object_bytes, (12 + 4 + 8 + 1) << 10);
        let totals = heap.stats().totals;
        assert_eq!(summary.filler_bytes as u64, totals.waste_bytes());
        assert_eq!(level_stats(totals).foreign_allocs, 1);
    }
}

/// A middle-level tail shorter than the object model's smallest filler must not break the walk.
#[test]
fn middle_level_tails_shorter_than_the_smallest_filler_keep_the_heap_walkable() {
    // An object model whose smallest filler (16 bytes) exceeds the alignment (8). A 64 KiB CPU
    // buffer hands out one TLAB of 65528 bytes (an object of 65512 bytes plus the 16-byte
    // reserve TLABs keep for their own tail), which would leave 8 bytes in the buffer: a tail no
    // filler fits, so the walk would meet an unwritten header there. The carve must hand the
    // whole buffer to the TLAB instead.
    let model = common::CheckedFillerModel::new(16, 8);
    let config = HeapConfig::builder()
        .capacity("1MiB")
        .mode(Mode::Hab)
        .tlab(TlabPolicy::Growing)
        .max_tlab("64KiB")
        .middle("cpu:64KiB")
        .simulated_topology("1x1x1")
        .cpu_id(sim(1, 0.0))
        .build()
        .unwrap();
    let heap = Heap::new(config, model.clone()).unwrap();
    let mut mutator = heap.attach();
    let bytes = (64 << 10) - 24;
    let object = mutator.alloc(bytes).unwrap();
    write_header(object, bytes);
    let parked = mutator.park();
    let collection = heap.collection();
    let walk = collection.verify();
    let totals = heap.stats().totals;
    assert_eq!(model.violations(), 0);
    let summary = walk.unwrap_or_else(|e| panic!("walk: {e}; {totals}"));
    assert_eq!(summary.objects, 1);
    assert_eq!(summary.filler_bytes as u64, totals.waste_bytes());
    drop(collection);
    drop(parked);
}
