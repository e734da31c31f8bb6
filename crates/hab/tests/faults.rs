//! Fault injection at the heap's level: CPU numbers beyond the topology's per-CPU arrays,
//! collections that panic or cannot stop the world, forks while threads allocate, and heap
//! exhaustion with many threads in every mode. (Aborts at every instruction boundary of the
//! restartable sections are injected by the unit tests of `rseq.rs`.)

mod common;

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{assert_disjoint_inside, walk_objects, watchdog, write_header};
use hab::{
    CollectionError, HeaderWordModel, Heap, HeapConfig, Level, Mode, ObjectModel, SlotIndex,
    TlabPolicy, TopologySource,
};

/// A 4 MiB heap with every other setting at its default.
fn small_heap() -> Arc<Heap> {
    Heap::new(
        HeapConfig::builder().capacity("4MiB").build().unwrap(),
        HeaderWordModel,
    )
    .unwrap()
}

/// A sysfs tree that knows only CPU 0, as a container or a captured topology may show.
fn one_cpu_sysfs(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("hab-faults-{name}-{}", std::process::id()));
    let cpu = root.join("devices/system/cpu");
    std::fs::create_dir_all(cpu.join("cpu0/topology")).unwrap();
    std::fs::write(cpu.join("possible"), "0\n").unwrap();
    std::fs::write(cpu.join("online"), "0\n").unwrap();
    std::fs::write(cpu.join("cpu0/topology/physical_package_id"), "0\n").unwrap();
    std::fs::write(cpu.join("cpu0/topology/core_id"), "0\n").unwrap();
    std::fs::write(cpu.join("cpu0/topology/thread_siblings_list"), "0\n").unwrap();
    root
}

/// The highest CPU other than 0 this thread may run on, if any.
fn a_cpu_beyond_zero() -> Option<usize> {
    common::allowed_cpus()
        .into_iter()
        .rev()
        .find(|&cpu| cpu > 0)
}

/// A heap whose topology (read from a sysfs tree) has one CPU, on a thread that runs on
/// another: in the `plab` mode and with a restartable `cpu` level, indexed by CPU, every
/// section sees a CPU beyond its array, takes the compare-and-swap path and counts it
/// (indexed by concurrency id, the kernel's id for the thread decides); nothing overlaps and
/// the walk is exact. This is the container reproduction (`/sys/devices/system/cpu` masked, the
/// process on CPU 1) without needing the mount.
#[test]
fn cpus_beyond_the_topology_take_the_compare_and_swap_path() {
    let Some(cpu) = a_cpu_beyond_zero() else {
        eprintln!(
            "skipped: this process may only run on cpu 0, so no cpu is beyond a 1-cpu topology"
        );
        return;
    };
    let root = one_cpu_sysfs("beyond");
    for (mode, middle) in [(Mode::CpuLab, None), (Mode::Hab, Some("cpu:64KiB"))] {
        let mut builder = HeapConfig::builder()
            .capacity("64MiB")
            .mode(mode)
            .tlab(TlabPolicy::Fixed(4096))
            .sysfs_topology(&root);
        if let Some(middle) = middle {
            builder = builder.middle(middle);
        }
        let heap = Heap::new(builder.build().unwrap(), HeaderWordModel).unwrap();
        assert_eq!(heap.topology().source(), TopologySource::Sysfs);
        assert_eq!(heap.topology().cpu_slots(), 1);
        let (objects, stats) = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    assert!(common::pin(cpu));
                    let mut mutator = heap.attach();
                    let size = mutator.checked_size(32).unwrap();
                    let mut objects = Vec::new();
                    for _ in 0..20_000 {
                        let object = mutator.alloc_sized(size).unwrap();
                        write_header(object, 32);
                        objects.push((object.as_ptr() as usize, 32));
                    }
                    let stats = mutator.stats();
                    (objects, stats)
                })
                .join()
                .unwrap()
        });
        let restartable = match mode {
            Mode::CpuLab => heap.cpu_labs_restartable() == Some(true),
            _ => heap.middle_levels()[0].restartable,
        };
        if restartable {
            let out_of_range = match mode {
                Mode::CpuLab => stats.cpu_lab.out_of_range_cpus,
                _ => stats.levels[Level::Cpu.index()].out_of_range_cpus,
            };
            match hab::rseq_slot_index() {
                SlotIndex::Cpu => assert!(
                    out_of_range > 0,
                    "{mode:?}: out-of-range cpus counted: {stats:?}"
                ),
                // The thread's concurrency id, not its CPU, picks the slot: in range or not
                // as the kernel numbered the process's threads (the harness's count too), so
                // only the walk below is checked.
                SlotIndex::ConcurrencyId => eprintln!(
                    "{mode:?}: indexed by concurrency id: {out_of_range} objects beyond the array"
                ),
            }
        } else {
            eprintln!("{mode:?}: rseq unavailable here, the sections did not run");
        }
        let mut objects = objects;
        let collection = heap.collection();
        let (summary, mut walked) = walk_objects(&collection);
        assert_eq!(summary.total_bytes(), collection.used_bytes());
        assert_eq!(summary.objects, 20_000);
        walked.sort_unstable();
        objects.sort_unstable();
        assert_eq!(
            walked, objects,
            "{mode:?}: the walk finds exactly the objects"
        );
        assert_disjoint_inside(&mut objects, heap.reserved_range());
        drop(collection);
    }
    std::fs::remove_dir_all(root).ok();
}

/// [`HeaderWordModel`] whose `write_filler` panics the next time the armed thread calls it.
#[derive(Clone, Debug, Default)]
struct PanickingModel(Arc<Mutex<Option<std::thread::ThreadId>>>);

impl PanickingModel {
    fn arm_for_this_thread(&self) {
        *self.0.lock().unwrap() = Some(std::thread::current().id());
    }
}

// SAFETY: fillers and headers are exactly `HeaderWordModel`'s; a panic happens before anything
// is written.
unsafe impl ObjectModel for PanickingModel {
    unsafe fn write_filler(&self, address: NonNull<u8>, bytes: usize) {
        let mut armed = self.0.lock().unwrap();
        if *armed == Some(std::thread::current().id()) {
            *armed = None;
            drop(armed);
            panic!("the object model failed to write a filler");
        }
        drop(armed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { HeaderWordModel.write_filler(address, bytes) };
    }

    unsafe fn object_size(&self, address: NonNull<u8>) -> usize {
        // SAFETY: the caller's contract, forwarded.
        unsafe { HeaderWordModel.object_size(address) }
    }

    unsafe fn is_filler(&self, address: NonNull<u8>) -> bool {
        // SAFETY: the caller's contract, forwarded.
        unsafe { HeaderWordModel.is_filler(address) }
    }
}

/// An object model that panics while a collection retires the TLABs: the panic reaches the
/// collector, and the world is released: the parked mutator unparks, new ones attach, and
/// the next collection walks the heap.
#[test]
fn a_panic_inside_a_collection_releases_the_world() {
    let _watchdog = watchdog("a_panic_inside_a_collection", Duration::from_secs(60));
    let model = PanickingModel::default();
    let config = HeapConfig::builder().capacity("4MiB").build().unwrap();
    let heap = Heap::new(config, model.clone()).unwrap();
    let mut mutator = heap.attach();
    write_header(mutator.alloc(64).unwrap(), 64);
    let parked = mutator.park();
    model.arm_for_this_thread();
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| drop(heap.collection())));
    assert!(result.is_err(), "the model's panic reaches the collector");
    let mut mutator = parked.unpark();
    write_header(mutator.alloc(64).unwrap(), 64);
    let other = heap.attach();
    drop(other);
    let parked = mutator.park();
    let collection = heap
        .collection_within(Duration::from_secs(10))
        .expect("the world stops again");
    let summary = collection.verify().unwrap();
    assert_eq!(summary.objects, 2);
    assert_eq!(summary.total_bytes(), collection.used_bytes());
    drop(collection);
    drop(parked);
}

/// A thread that panics in the middle of a TLAB refill (its object model fails to cover the
/// old TLAB's tail): its mutator is dropped while unwinding, the heap stays walkable and the
/// other threads go on.
#[test]
fn a_thread_panicking_mid_refill_leaves_the_heap_walkable() {
    let _watchdog = watchdog("a_thread_panicking_mid_refill", Duration::from_secs(60));
    let model = PanickingModel::default();
    let config = HeapConfig::builder()
        .capacity("16MiB")
        .tlab(TlabPolicy::Fixed(4096))
        .build()
        .unwrap();
    let heap = Heap::new(config, model.clone()).unwrap();
    let allocated = std::thread::scope(|scope| {
        let victim = scope.spawn(|| {
            let mut mutator = heap.attach();
            let mut bytes = 0;
            for round in 0.. {
                if round == 300 {
                    model.arm_for_this_thread(); // its next refill's retire panics
                }
                write_header(mutator.alloc(24).unwrap(), 24);
                bytes += 24;
                assert!(round < 10_000, "no refill happened");
            }
            bytes
        });
        let bystander = scope.spawn(|| {
            let mut mutator = heap.attach();
            for _ in 0..10_000 {
                write_header(mutator.alloc(40).unwrap(), 40);
            }
            10_000 * 40
        });
        assert!(victim.join().is_err(), "the victim panicked");
        bystander.join().unwrap()
    });
    let collection = heap.collection_within(Duration::from_secs(10)).unwrap();
    let summary = collection.verify().unwrap();
    assert_eq!(summary.total_bytes(), collection.used_bytes());
    assert!(summary.object_bytes >= allocated);
    assert_eq!(heap.stats().live_mutators, 0);
}

/// A leaked mutator, one whose thread exited without dropping it, and the caller's own
/// running mutator: a collection with a deadline gives up in time, names each with its
/// thread, and leaves the world running (a parked mutator unparks).
#[test]
fn mutators_that_never_park_are_named_within_the_deadline() {
    let _watchdog = watchdog("mutators_that_never_park", Duration::from_secs(60));
    let config = HeapConfig::builder().capacity("4MiB").build().unwrap();
    let heap = Heap::new(config, HeaderWordModel).unwrap();
    let parked = heap.attach().park();
    std::mem::forget(heap.attach()); // leaked on this thread
    let dead = std::thread::Builder::new()
        .name("abandoned-work".into())
        .spawn({
            let heap = heap.clone();
            move || std::mem::forget(heap.attach())
        })
        .unwrap();
    dead.join().unwrap();
    let mine = heap.attach();
    let started = Instant::now();
    let error = heap
        .collection_within(Duration::from_millis(200))
        .expect_err("the world cannot stop");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "gave up in time"
    );
    let CollectionError::Timeout { running, .. } = &error else {
        panic!("{error}");
    };
    assert_eq!(running.len(), 3, "{error}");
    let abandoned = running
        .iter()
        .find(|m| m.thread_name.as_deref() == Some("abandoned-work"))
        .expect("the dead thread's mutator is named");
    assert!(!abandoned.thread_exists, "{error}");
    assert_eq!(
        running.iter().filter(|m| m.is_calling_thread).count(),
        2,
        "the leaked one and the caller's own run on this thread: {error}"
    );
    assert!(running.iter().all(|m| m.running_for > Duration::ZERO));
    let text = error.to_string();
    assert!(
        text.contains("abandoned-work") && text.contains("has exited"),
        "{text}"
    );
    // The world runs again: the parked mutator unparks, the running one allocates.
    let mut unparked = parked.unpark();
    unparked.alloc(16).unwrap();
    drop((unparked, mine));
    assert_eq!(heap.running_mutators().len(), 2, "the two leaked ones");
}

/// Stops a test's workers however its scope ends, so that a failed assertion cannot hang it.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// In a forked child: writes a panic's message straight to stderr (the test harness's capture
/// does not reach the parent) and returns the child's exit status.
fn report_child_panic(panic: &(dyn std::any::Any + Send)) -> i32 {
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(not a string)");
    let text = format!("forked child panicked: {message}\n");
    // SAFETY: writes a live buffer of `text.len()` bytes to the standard error descriptor.
    unsafe { libc::write(2, text.as_ptr().cast(), text.len()) };
    1
}

/// `fork` while other threads allocate and attach: the child forgets the mutators of the
/// threads that did not come with it, keeps the forking thread's, attaches a new thread,
/// allocates and collects, with a walk that covers every byte.
#[test]
fn a_forked_child_attaches_allocates_and_collects() {
    let _watchdog = watchdog("a_forked_child", Duration::from_secs(120));
    for mode in [Mode::Tlab, Mode::Hab, Mode::CpuLab, Mode::Flip] {
        let mut builder = HeapConfig::builder().capacity("256MiB").mode(mode);
        if mode == Mode::Hab {
            builder = builder.middle("cpu:256KiB,core:1MiB");
        }
        let heap = Heap::new(builder.build().unwrap(), HeaderWordModel).unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let _stop = StopOnDrop(&stop);
            for worker in 0..4 {
                let (heap, stop) = (&heap, &stop);
                scope.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        // Attach and detach too, so forks land inside registry updates.
                        let mut mutator = heap.attach();
                        let bytes = 16 + 8 * worker;
                        for _ in 0..2_000 {
                            match mutator.alloc(bytes) {
                                Ok(object) => write_header(object, bytes),
                                Err(_) => break, // full: the main thread collects
                            }
                        }
                    }
                });
            }
            for round in 0..20 {
                // Everything the workers made is dead: start from the bottom again.
                let mut collection = heap.collection_within(Duration::from_secs(10)).unwrap();
                collection.verify().unwrap();
                collection.reset();
                drop(collection);
                let mut mine = heap.attach();
                if let Ok(object) = mine.alloc(32) {
                    write_header(object, 32);
                }
                // SAFETY: the child runs only this test's code and leaves with `_exit`.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    let code = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        child(&heap, mine);
                    }))
                    .map_or_else(|panic| report_child_panic(&*panic), |()| 0);
                    // SAFETY: ends the child without running the parent's destructors.
                    unsafe { libc::_exit(code) };
                }
                let mut status = 0;
                // SAFETY: waits for the child just forked.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                assert!(
                    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                    "{mode:?}, round {round}: child status {status}"
                );
                drop(mine);
            }
        });
    }

    /// In the child: a collection with a deadline stops the world (the parent's threads are
    /// forgotten) and starts over (the copied heap is not walked: the parent's threads may
    /// have been between an allocation and its header at the fork); the forking thread's
    /// mutator is still usable; a new mutator attaches and allocates; a second collection
    /// walks exactly what the child made. The child starts no thread: in the child of a
    /// multi-threaded process, starting one may block on a lock of the standard library that
    /// another thread of the parent held at the fork (seen here: Rust's stack-overflow
    /// handler table), which is no lock of Hab's.
    fn child(heap: &Arc<Heap>, mine: hab::Mutator) {
        let parked = mine.park();
        let mut collection = heap
            .collection_within(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("child: {e}"));
        collection.reset();
        drop(collection);
        assert_eq!(
            heap.stats().live_mutators,
            1,
            "only the forking thread's mutator"
        );
        let mut mine = parked.unpark();
        write_header(mine.alloc(48).unwrap(), 48);
        let mut attached = heap.attach();
        for _ in 0..1_000 {
            write_header(attached.alloc(24).unwrap(), 24);
        }
        drop(attached);
        let parked = mine.park();
        let collection = heap
            .collection_within(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("child: {e}"));
        let summary = collection.verify().unwrap();
        assert_eq!(summary.total_bytes(), collection.used_bytes());
        assert_eq!(summary.objects, 1_001);
        drop(collection);
        let mut mine = parked.unpark();
        write_header(mine.alloc(16).unwrap(), 16);
    }
}

/// `fork` while a collector thread collects over and over and workers allocate: the child
/// inherits a collection whose collector does not exist in it. It attaches, allocates,
/// collects and unparks the forking thread's mutator, within a deadline (a hang used to be
/// 2 children in 8).
#[test]
fn a_child_forked_during_a_collection_attaches_allocates_and_collects() {
    let _watchdog = watchdog("forked_during_a_collection", Duration::from_secs(120));
    let (mut forks, mut failures) = (0, Vec::new());
    for mode in [Mode::Tlab, Mode::Hab, Mode::CpuLab, Mode::Flip] {
        let mut builder = HeapConfig::builder().capacity("64MiB").mode(mode);
        if mode == Mode::Hab {
            builder = builder.middle("cpu:256KiB,core:1MiB");
        }
        let heap = Heap::new(builder.build().unwrap(), HeaderWordModel).unwrap();
        let stop = AtomicBool::new(false);
        let mut mine = heap.attach();
        write_header(mine.alloc(32).unwrap(), 32);
        let mut parked = Some(mine.park());
        std::thread::scope(|scope| {
            let _stop = StopOnDrop(&stop);
            let (heap_ref, stop_ref) = (&heap, &stop);
            scope.spawn(move || {
                while !stop_ref.load(Ordering::Relaxed) {
                    let mut collection = heap_ref.collection();
                    std::thread::sleep(Duration::from_micros(200));
                    collection.reset();
                }
            });
            for worker in 0..2 {
                scope.spawn(move || {
                    let mut mutator = heap_ref.attach();
                    while !stop_ref.load(Ordering::Relaxed) {
                        let bytes = 16 + 8 * worker;
                        if let Ok(object) = mutator.alloc(bytes) {
                            write_header(object, bytes);
                        }
                        mutator.poll();
                    }
                });
            }
            for round in 0..8 {
                std::thread::sleep(Duration::from_micros(300 + 170 * round));
                // SAFETY: the child runs only this test's code and leaves with `_exit`.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    let parked = parked.take().expect("the forking thread's mutator");
                    let code = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        child(&heap, parked);
                    }))
                    .map_or_else(|panic| report_child_panic(&*panic), |()| 0);
                    // SAFETY: ends the child without running the parent's destructors.
                    unsafe { libc::_exit(code) };
                }
                forks += 1;
                if let Some(problem) = wait_for_child(pid, Duration::from_secs(20)) {
                    failures.push(format!("{mode:?}, round {round}: {problem}"));
                }
            }
        });
        drop(parked.take().map(hab::ParkedMutator::unpark));
    }
    println!(
        "fork while a collector runs: {forks} forks, {} hangs or failures",
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:?}");

    fn child(heap: &Arc<Heap>, parked: hab::ParkedMutator) {
        // First a collection that starts over: the parent's workers may have filled the heap.
        let mut collection = heap
            .collection_within(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("child: {e}"));
        collection.reset();
        drop(collection);
        let mut attached = heap.attach();
        for _ in 0..100 {
            write_header(attached.alloc(24).unwrap(), 24);
        }
        let attached = attached.park();
        let mut collection = heap
            .collection_within(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("child: {e}"));
        assert_eq!(collection.verify().unwrap().objects, 100);
        collection.reset();
        drop(collection);
        let mut mine = parked.unpark();
        write_header(mine.alloc(48).unwrap(), 48);
        let mut attached = attached.unpark();
        write_header(attached.alloc(16).unwrap(), 16);
        drop(attached);
        let _parked = mine.park();
        let collection = heap
            .collection_within(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("child: {e}"));
        assert_eq!(collection.verify().unwrap().objects, 2);
    }
}

/// Waits for child `pid` at most `deadline`; what went wrong, if anything (a child still
/// running then is killed and reported as a hang).
fn wait_for_child(pid: libc::pid_t, deadline: Duration) -> Option<String> {
    let started = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: polls the child just forked.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if done == pid {
            let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
            return (!ok).then(|| format!("child status {status}"));
        }
        if started.elapsed() > deadline {
            // SAFETY: kills and reaps the hung child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Some("hung".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Forks while another thread runs collections back to back: each child collects once,
/// within a deadline. A lock a collection's end takes outside the fork gate (the totals of the
/// last collection were) is copied held now and then, and the child's collection waits for
/// ever. That window is a few instructions wide: this stress meets it rarely (the C
/// reliability test under the sanitizers and load did, about once in 200 forks); the
/// mechanism that closes it is checked exactly by
/// `platform::process::tests::a_fork_never_copies_a_fork_safe_mutex_held`.
#[test]
fn forks_at_the_end_of_collections_leave_no_lock_held() {
    let _watchdog = watchdog("forks_at_collection_ends", Duration::from_secs(240));
    let heap = small_heap();
    let stop = AtomicBool::new(false);
    let (mut forks, mut hung) = (0, 0);
    std::thread::scope(|scope| {
        let _stop = StopOnDrop(&stop);
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                drop(heap.collection());
            }
        });
        for _ in 0..300 {
            // SAFETY: the child runs only this test's code and leaves with `_exit`.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let code = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    drop(heap.collection_within(Duration::from_secs(5)).unwrap());
                }))
                .map_or_else(|panic| report_child_panic(&*panic), |()| 0);
                // SAFETY: ends the child without running the parent's destructors.
                unsafe { libc::_exit(code) };
            }
            forks += 1;
            if wait_for_child(pid, Duration::from_secs(10)).is_some() {
                hung += 1;
            }
        }
    });
    println!("{forks} forks at the end of collections, {hung} children hung or failed");
    assert_eq!(hung, 0);
}

/// One collection at a time in a process, whatever thread holds the handle: a collection
/// begun on a thread that exits stays in progress (it used to be taken over, and two
/// collections ran at once).
#[test]
fn a_collection_outlives_the_thread_that_began_it() {
    let heap = small_heap();
    let parked = heap.attach().park();
    let collection = std::thread::scope(|scope| scope.spawn(|| heap.collection()).join().unwrap());
    assert_eq!(
        heap.collection_within(Duration::from_millis(100))
            .unwrap_err(),
        CollectionError::InProgress
    );
    assert!(matches!(
        heap.try_collection(),
        Err(CollectionError::InProgress)
    ));
    drop(collection);
    drop(heap.collection_within(Duration::from_secs(5)).unwrap());
    drop(parked.unpark());
}

/// A collection outlives the thread that began it, and that thread's kernel id goes to a
/// new thread: the new thread is not the collector (it used to be refused as one). Runs
/// where the kernel wraps its thread ids within a few tens of thousands of threads.
#[test]
fn a_new_thread_with_the_collectors_reused_kernel_id_is_not_the_collector() {
    let pid_max: usize = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(usize::MAX);
    if pid_max > 65_536 {
        eprintln!("pid_max {pid_max}: thread ids do not wrap quickly here; skipped");
        return;
    }
    let _watchdog = watchdog("reused_thread_id", Duration::from_secs(300));
    let heap = small_heap();
    let gettid = || {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) as i64 }
    };
    let (collection, collector_tid) = std::thread::scope(|scope| {
        scope
            .spawn(|| (heap.collection(), gettid()))
            .join()
            .unwrap()
    });
    let mut seen = None;
    for _ in 0..pid_max + 4096 {
        let (tid, outcome) = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let tid = gettid();
                    let outcome = (tid == collector_tid)
                        .then(|| (heap.is_collecting_thread(), heap.try_collection().err()));
                    (tid, outcome)
                })
                .join()
                .unwrap()
        });
        if let Some(outcome) = outcome {
            seen = Some((tid, outcome));
            break;
        }
    }
    let Some((_, (collecting, error))) = seen else {
        eprintln!("thread id {collector_tid} was not handed out again; skipped");
        return;
    };
    assert!(!collecting, "a new thread taken for the collector");
    assert_eq!(error, Some(CollectionError::InProgress));
    drop(collection);
    drop(heap.collection_within(Duration::from_secs(5)).unwrap());
}

/// Calls that would wait for the calling thread's own collection fail or panic at once with
/// a message naming them; dropping a parked mutator the caller's collection holds returns.
#[test]
fn calls_that_would_wait_for_the_callers_own_collection() {
    let _watchdog = watchdog("own_collection", Duration::from_secs(60));
    let heap = small_heap();
    let mut first = heap.attach();
    write_header(first.alloc(16).unwrap(), 16);
    let first = first.park();
    let second = heap.attach().park();
    let collection = heap.collection();
    assert!(heap.is_collecting_thread());
    assert_eq!(
        heap.collection_within(Duration::from_secs(1)).unwrap_err(),
        CollectionError::AlreadyCollecting
    );
    assert_eq!(
        heap.try_collection().unwrap_err(),
        CollectionError::AlreadyCollecting
    );
    for (call, panicked) in [
        (
            "Heap::attach",
            std::panic::catch_unwind(AssertUnwindSafe(|| drop(heap.attach()))),
        ),
        (
            "Heap::collection",
            std::panic::catch_unwind(AssertUnwindSafe(|| drop(heap.collection()))),
        ),
    ] {
        let message = panicked.expect_err(call);
        let message = message.downcast_ref::<String>().unwrap();
        assert!(message.starts_with(call), "{message}");
        assert!(message.contains("running a collection"), "{message}");
    }
    let message = std::panic::catch_unwind(AssertUnwindSafe(|| first.unpark()))
        .expect_err("unpark from the collecting thread");
    assert!(message
        .downcast_ref::<String>()
        .unwrap()
        .starts_with("ParkedMutator::unpark"));
    drop(second); // held by this thread's collection: detached when it ends
    assert_eq!(heap.stats().live_mutators, 2);
    drop(collection);
    assert_eq!(heap.stats().live_mutators, 0);
    let collection = heap.collection();
    assert_eq!(collection.verify().unwrap().objects, 1);
}

/// Two heaps, each with one parked mutator: a collection of one allocates for its own mutator
/// only. Ids are unique in the process, so the other heap's mutator's id is not held here
/// (it used to name this heap's first mutator too, and the object went to the wrong heap).
#[test]
fn a_collection_allocates_for_its_own_heaps_mutators_only() {
    let (heap_a, heap_b) = (small_heap(), small_heap());
    let parked_a = heap_a.attach().park();
    let parked_b = heap_b.attach().park();
    assert_ne!(parked_a.id(), parked_b.id());
    let mut collection = heap_a.collection();
    assert_eq!(
        collection.alloc_for(parked_b.id(), 16),
        Err(hab::AllocError::NotHeld {
            mutator_id: parked_b.id()
        })
    );
    let object = collection.alloc_for(parked_a.id(), 16).unwrap();
    assert!(heap_a
        .reserved_range()
        .contains(&(object.as_ptr() as usize)));
    write_header(object, 16);
    drop(collection);
    assert_eq!(parked_a.stats().slow_allocs, 1);
    assert_eq!(parked_b.stats().slow_allocs, 0);
}

/// A thread whose allocation failed gets its object from the collection it asked for, before
/// other threads resume and take the room: with 4 threads in a small heap, every failed
/// allocation is served by a collection or the heap is really full.
#[test]
fn a_collection_serves_its_requester() {
    let _watchdog = watchdog("serves_its_requester", Duration::from_secs(120));
    for mode in [
        Mode::Shared,
        Mode::Tlab,
        Mode::Hab,
        Mode::CpuLab,
        Mode::Flip,
    ] {
        let mut builder = HeapConfig::builder().capacity("1MiB").mode(mode);
        if mode == Mode::Hab {
            builder = builder.middle("core:64KiB");
        }
        let heap = Heap::new(builder.build().unwrap(), HeaderWordModel).unwrap();
        let served = std::sync::atomic::AtomicU64::new(0);
        let objects = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    let mut mutator = heap.attach();
                    let id = mutator.id();
                    for _ in 0..20_000 {
                        let object = match mutator.alloc(256) {
                            Ok(object) => object,
                            Err(hab::AllocError::OutOfMemory { bytes }) => {
                                let result = mutator.collect(|mut collection| {
                                    collection.reset(); // everything is dead
                                    collection.alloc_for(id, bytes)
                                });
                                match result {
                                    Some(served_object) => {
                                        served.fetch_add(1, Ordering::Relaxed);
                                        served_object.expect("an empty heap has room")
                                    }
                                    None => continue, // another thread collected: retry
                                }
                            }
                            Err(other) => panic!("{other}"),
                        };
                        write_header(object, 256);
                        objects.fetch_add(1, Ordering::Relaxed);
                        mutator.poll();
                    }
                });
            }
        });
        assert!(served.load(Ordering::Relaxed) > 0, "{mode:?}");
        let mut collection = heap.collection();
        collection.verify().unwrap();
        assert!(matches!(
            collection.alloc_for(u64::MAX, 16),
            Err(hab::AllocError::NotHeld {
                mutator_id: u64::MAX
            })
        ));
        collection.reset();
        let stats = heap.stats().totals;
        assert_eq!(
            stats.allocated_bytes(),
            objects.load(Ordering::Relaxed) * 256,
            "{mode:?}"
        );
    }
}

/// 64 threads fill the heap in every mode until allocation fails: out-of-memory reaches every
/// thread as an error (never a panic or a hang), and the walk afterwards meets exactly the
/// objects handed out, disjoint, with fillers exactly the counted waste and no byte lost.
#[test]
fn heap_exhaustion_with_64_threads_in_every_mode() {
    let _watchdog = watchdog("heap_exhaustion", Duration::from_secs(300));
    let configs: [(Mode, Option<&str>); 8] = [
        (Mode::Shared, None),
        (Mode::Tlab, None),
        (Mode::Hab, Some("cpu:64KiB")),
        (Mode::Hab, Some("core:256KiB")),
        (Mode::Hab, Some("cpu:64KiB,core:256KiB,package:1MiB")),
        (Mode::Hab, Some("llc:512KiB,node:2MiB")),
        (Mode::CpuLab, None),
        (Mode::Flip, None),
    ];
    for (mode, middle) in configs {
        let mut builder = HeapConfig::builder()
            .capacity("8MiB")
            .mode(mode)
            .tlab(TlabPolicy::Fixed(16 << 10));
        if let Some(middle) = middle {
            builder = builder.middle(middle);
        }
        let heap = Heap::new(builder.build().unwrap(), HeaderWordModel).unwrap();
        let name = format!("{mode:?} {}", middle.unwrap_or(""));
        let mut objects: Vec<(usize, usize)> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..64)
                .map(|index| {
                    let heap = &heap;
                    scope.spawn(move || {
                        let mut mutator = heap.attach();
                        let mut objects = Vec::new();
                        for i in 0usize.. {
                            let bytes = 16 + 8 * ((index + i) % 30);
                            let size = mutator.checked_size(bytes).unwrap();
                            let allocated = mutator.alloc_sized(size);
                            match allocated {
                                Ok(object) => {
                                    write_header(object, bytes);
                                    objects.push((object.as_ptr() as usize, bytes));
                                }
                                Err(hab::AllocError::OutOfMemory { .. }) => break,
                                Err(other) => panic!("thread {index}: {other}"),
                            }
                        }
                        objects
                    })
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|thread| thread.join().unwrap())
                .collect()
        });
        let collection = heap.collection_within(Duration::from_secs(10)).unwrap();
        let (summary, mut walked) = walk_objects(&collection);
        assert_eq!(
            summary.total_bytes(),
            collection.used_bytes(),
            "{name}: lost bytes"
        );
        let totals = heap.stats().totals;
        assert_eq!(
            summary.filler_bytes as u64,
            totals.waste_bytes(),
            "{name}: fillers are the counted waste"
        );
        assert_eq!(
            summary.object_bytes as u64,
            totals.allocated_bytes(),
            "{name}: objects are the counted allocation"
        );
        assert!(
            collection.used_bytes() + (64 << 10) >= 8 << 20,
            "{name}: the heap was nearly full when allocation failed ({} used)",
            collection.used_bytes()
        );
        objects.sort_unstable();
        walked.sort_unstable();
        assert_eq!(
            walked, objects,
            "{name}: the walk meets exactly the objects"
        );
        assert_disjoint_inside(&mut objects, heap.reserved_range());
    }
}
