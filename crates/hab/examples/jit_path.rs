//! The fast paths a JIT would emit, built only from the documented layout — the TLAB's
//! `{top, soft end}` at `TLAB_TOP_OFFSET`/`TLAB_SOFT_END_OFFSET`, and the per-CPU LAB path's
//! `CpuLabPath`, `CPU_LAB_*` offsets and `RSEQ_SIGNATURE` (its own restartable section, on
//! x86_64) — with `alloc_slow_from_compiled_code` as the slow path, under the stress the
//! library's own path gets: more threads than CPUs, each moving itself between CPUs, a storm
//! of signals (each aborts the restartable section it lands in), the heap
//! filling up and collected many times, and every collection checking that the walk meets
//! exactly the objects allocated since the last one and that none overlap.
//!
//! ```sh
//! cargo run --release -p hab --example jit_path -- --mode cpu-lab
//! ```

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hab::{
    alloc_slow_from_compiled_code, HeaderWordModel, Heap, HeapConfig, Mode, Mutator, TlabPolicy,
    TLAB_SOFT_END_OFFSET, TLAB_TOP_OFFSET,
};

const OBJECTS_PER_THREAD: usize = 300_000;

/// The TLAB fast path: `top + size <= soft end`, then store `top`. The soft end is read with
/// an atomic load: other threads lower it to request a safepoint.
///
/// # Safety
/// `tlab` is the running mutator's `tlab_address()`, used by its own thread.
#[inline(always)]
unsafe fn tlab_bump(tlab: NonNull<u8>, bytes: usize) -> Option<NonNull<u8>> {
    // SAFETY: the layout's offsets inside the mutator's live TLAB (the caller's contract); the
    // owner alone writes `top`, and the soft end is read atomically.
    unsafe {
        let top = tlab.as_ptr().add(TLAB_TOP_OFFSET).cast::<usize>();
        let soft_end = &*tlab
            .as_ptr()
            .add(TLAB_SOFT_END_OFFSET)
            .cast::<AtomicUsize>();
        let object = top.read();
        let new_top = object + bytes;
        if new_top <= soft_end.load(Ordering::Relaxed) {
            top.write(new_top);
            return NonNull::new(object as *mut u8);
        }
    }
    None
}

/// The per-CPU LAB fast path: a restartable section over the slot of the CPU (or concurrency
/// id) the thread runs with. 0 when it missed (the thread moved, the section was aborted, or
/// no room).
///
/// # Safety
/// `path` is the running mutator's current `cpu_lab_path()`; the calling thread is its owner.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn cpu_lab_bump(path: &hab::CpuLabPath, bytes: usize) -> usize {
    use hab::{
        CPU_LAB_END_OFFSET, CPU_LAB_SLOT_BYTES, CPU_LAB_TOP_OFFSET, RSEQ_CS_OFFSET, RSEQ_SIGNATURE,
    };
    let (area, index_field) = (path.rseq_area_offset, path.rseq_index_offset);
    let cpu: u32;
    // SAFETY: `fs:[index_field]` is a `u32` of the thread's rseq area: `cpu_id_start` or
    // `mm_cid`, the LABs' index.
    unsafe {
        std::arch::asm!(
            "mov {cpu:e}, dword ptr fs:[{index}]",
            index = in(reg) index_field,
            cpu = out(reg) cpu,
            options(nostack, readonly, preserves_flags),
        );
    }
    let index = cpu.min(path.cpus) as usize;
    let slot = path.slots_address + index * CPU_LAB_SLOT_BYTES;
    let object: usize;
    // The kernel sends a section preempted, migrated or signalled inside to its abort handler.
    // SAFETY: the section writes only `top` of the slot of the index it checked the thread
    // still has, with its last instruction; descriptor and signature as the rseq ABI asks.
    unsafe {
        std::arch::asm!(
            ".pushsection __rseq_cs, \"aw\"",
            ".balign 32",
            "80:",
            ".long 0, 0",
            ".quad 81f, (82f - 81f), 83f",
            ".popsection",
            "lea {scratch}, [rip + 80b]",
            "mov qword ptr fs:[{area} + {rseq_cs}], {scratch}",
            "81:",
            "cmp dword ptr fs:[{index}], {cpu:e}",
            "jne 84f",
            "mov {object}, qword ptr [{slot} + {top}]",
            "lea {scratch}, [{object} + {bytes}]",
            "cmp {scratch}, qword ptr [{slot} + {end}]",
            "ja 84f",
            "mov qword ptr [{slot} + {top}], {scratch}",
            "82:",
            ".pushsection .text.jit_path_abort, \"ax\"",
            ".long {signature}",
            "83:",
            "84:",
            "xor {object:e}, {object:e}",
            "jmp 82b",
            ".popsection",
            area = in(reg) area,
            index = in(reg) index_field,
            slot = in(reg) slot,
            cpu = in(reg) cpu,
            bytes = in(reg) bytes,
            object = out(reg) object,
            scratch = out(reg) _,
            top = const CPU_LAB_TOP_OFFSET,
            end = const CPU_LAB_END_OFFSET,
            signature = const RSEQ_SIGNATURE,
            rseq_cs = const RSEQ_CS_OFFSET,
            options(nostack),
        );
    }
    object
}

/// One thread's objects since the last collection: (address, bytes).
type Objects = Arc<Mutex<Vec<(usize, usize)>>>;

/// Which path served an allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Served {
    Tlab,
    CpuLab,
    SlowPath,
}

/// One allocation as compiled code does it: the inlined path of the mutator's current mode,
/// the slow path on a miss. Null: the heap is full.
fn allocate(mutator: &mut Mutator, bytes: usize) -> (*mut u8, Served) {
    #[cfg(target_arch = "x86_64")]
    if let Some(path) = mutator.cpu_lab_path() {
        // SAFETY: this thread's running mutator and its current path.
        let object = unsafe { cpu_lab_bump(&path, bytes) };
        if object != 0 {
            return (object as *mut u8, Served::CpuLab);
        }
        // SAFETY: this thread's running mutator, not otherwise borrowed.
        let object = unsafe { alloc_slow_from_compiled_code(mutator, bytes) };
        return (object, Served::SlowPath);
    }
    // SAFETY: this thread's running mutator.
    match unsafe { tlab_bump(mutator.tlab_address(), bytes) } {
        Some(object) => (object.as_ptr(), Served::Tlab),
        // SAFETY: as above.
        None => (
            unsafe { alloc_slow_from_compiled_code(mutator, bytes) },
            Served::SlowPath,
        ),
    }
}

/// Moves the calling thread to CPU `cpu` of the ones it may use (a forced migration).
fn migrate(cpus: &[usize], step: usize) {
    if cpus.len() < 2 {
        return;
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus[step % cpus.len()], &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Signals delivered so far.
static SIGNALS: AtomicUsize = AtomicUsize::new(0);

/// A signal handler that only counts (an atomic add is async-signal-safe): each signal
/// delivered inside a restartable section aborts it.
extern "C" fn on_signal(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::Relaxed);
}

/// Sends the process a signal every 20 µs (a high-resolution timer; the kernel hands each
/// to a running thread): a signal storm.
fn start_signal_storm() -> Result<(), std::io::Error> {
    // SAFETY: installs a handler that only increments an atomic, with SA_RESTART; then plain
    // syscalls on zero-initialised C structs, their results checked.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGUSR2, &action, std::ptr::null_mut());
        let mut event: libc::sigevent = std::mem::zeroed();
        event.sigev_notify = libc::SIGEV_SIGNAL;
        event.sigev_signo = libc::SIGUSR2;
        let mut timer: libc::timer_t = std::mem::zeroed();
        if libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let period = libc::timespec {
            tv_sec: 0,
            tv_nsec: 20_000,
        };
        let spec = libc::itimerspec {
            it_interval: period,
            it_value: period,
        };
        if libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let mode: Mode = match args.iter().position(|a| a == "--mode") {
        Some(i) => args.get(i + 1).ok_or("--mode needs a value")?.parse()?,
        None => Mode::CpuLab,
    };
    let cpus = allowed_cpus();
    let threads = 4 * cpus.len().max(1);
    let mut builder = HeapConfig::builder()
        .capacity("16MiB")
        .mode(mode)
        .tlab(TlabPolicy::Fixed(8 << 10));
    if mode == Mode::Hab {
        builder = builder.middle("core:256KiB");
    }
    let heap = Heap::new(builder.build()?, HeaderWordModel)?;
    start_signal_storm()?;
    // Objects allocated since the last collection, per thread: (address, bytes).
    let since: Vec<Objects> = (0..threads).map(|_| Arc::default()).collect();
    let collections = AtomicUsize::new(0);
    // Objects served by the inlined TLAB path, the inlined per-CPU path, the slow path.
    let served = [0, 1, 2].map(|_| AtomicUsize::new(0));
    std::thread::scope(|scope| {
        for index in 0..threads {
            let (heap, since, collections, cpus) = (&heap, &since, &collections, &cpus);
            let served = &served;
            scope.spawn(move || {
                let mut mutator = heap.attach();
                let mine = &since[index];
                let mut done = 0;
                while done < OBJECTS_PER_THREAD {
                    if done % 5000 == 0 {
                        migrate(cpus, index + done / 5000);
                    }
                    let bytes = 16 + 8 * ((index + done) % 12);
                    let (object, by) = allocate(&mut mutator, bytes);
                    let Some(object) = NonNull::new(object) else {
                        mutator.collect(|mut collection| {
                            let mut expected: Vec<(usize, usize)> = since
                                .iter()
                                .flat_map(|objects| std::mem::take(&mut *objects.lock().unwrap()))
                                .collect();
                            expected.sort_unstable();
                            let mut walked = Vec::new();
                            let summary = collection
                                .walk(|object| {
                                    if !object.is_filler {
                                        walked
                                            .push((object.address.as_ptr() as usize, object.bytes));
                                    }
                                })
                                .expect("the heap walks");
                            assert_eq!(summary.total_bytes(), collection.used_bytes());
                            assert_eq!(walked, expected, "the walk meets exactly the objects");
                            for pair in expected.windows(2) {
                                assert!(pair[0].0 + pair[0].1 <= pair[1].0, "overlap: {pair:x?}");
                            }
                            collection.reset();
                            collections.fetch_add(1, Ordering::Relaxed);
                        });
                        continue;
                    };
                    served[by as usize].fetch_add(1, Ordering::Relaxed);
                    // SAFETY: `object` is `bytes` fresh bytes owned by this thread.
                    unsafe { HeaderWordModel::write_header(object, bytes) };
                    mine.lock().unwrap().push((object.as_ptr() as usize, bytes));
                    done += 1;
                }
            });
        }
    });
    let collections = collections.load(Ordering::Relaxed);
    println!(
        "mode {mode}: {threads} threads on {} CPUs, moving between them under a storm of {} \
         signals, allocated {} objects: \
         {} through the inlined TLAB path, {} through the inlined per-CPU path, {} through the \
         slow path; {collections} collections, each walking exactly the objects allocated \
         since the one before, none overlapping",
        cpus.len(),
        SIGNALS.load(Ordering::Relaxed),
        threads * OBJECTS_PER_THREAD,
        served[Served::Tlab as usize].load(Ordering::Relaxed),
        served[Served::CpuLab as usize].load(Ordering::Relaxed),
        served[Served::SlowPath as usize].load(Ordering::Relaxed),
    );
    if collections == 0 {
        return Err("the heap never filled: nothing was collected".into());
    }
    Ok(())
}
