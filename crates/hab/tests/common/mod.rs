//! Helpers shared by the integration tests: building heaps, writing headers, checking that
//! allocations are disjoint and inside a range, a contract-checking object model and a tiny
//! deterministic random number generator.

#![allow(dead_code)]

use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

use hab::{Collection, HeaderWordModel, Heap, HeapConfigBuilder, ObjectModel, WalkSummary};

/// Builds a heap with [`HeaderWordModel`], panicking with the configuration on failure.
pub fn heap(builder: HeapConfigBuilder) -> Arc<Heap> {
    let config = builder
        .clone()
        .build()
        .unwrap_or_else(|e| panic!("{builder:?}: {e}"));
    Heap::new(config, HeaderWordModel).expect("heap")
}

/// Writes the [`HeaderWordModel`] header of a freshly allocated object. Only for addresses
/// `Mutator::alloc` or `alloc_sized` just returned to the calling thread for `bytes >= 8`.
pub fn write_header(object: NonNull<u8>, bytes: usize) {
    // SAFETY: every caller passes an address `Mutator::alloc` just returned for `bytes >= 8`
    // bytes, so it is 8-byte aligned, writable and owned by the calling thread.
    unsafe { HeaderWordModel::write_header(object, bytes) };
}

/// Aborts the process if the test is not done within `limit`: a deadlock fails the run instead
/// of hanging it. Dropping the returned sender disarms it.
pub fn watchdog(name: &'static str, limit: Duration) -> mpsc::Sender<()> {
    let (done, wait) = mpsc::channel::<()>();
    thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = wait.recv_timeout(limit) {
            eprintln!("{name}: no progress after {limit:?}: deadlock");
            std::process::abort();
        }
    });
    done
}

/// Sorts `objects` (address, size) by address and asserts that none overlaps the next one
/// and that all lie inside `range`.
/// Walks a collection's heap, panicking on a parse error; returns the summary and the objects
/// (not fillers) met, as (address, bytes) in address order.
pub fn walk_objects(collection: &Collection<'_>) -> (WalkSummary, Vec<(usize, usize)>) {
    let mut objects = Vec::new();
    let summary = collection
        .walk(|object| {
            if !object.is_filler {
                objects.push((object.address.as_ptr() as usize, object.bytes));
            }
        })
        .unwrap_or_else(|e| panic!("walk: {e}"));
    (summary, objects)
}

pub fn assert_disjoint_inside(objects: &mut [(usize, usize)], range: Range<usize>) {
    objects.sort_unstable();
    for pair in objects.windows(2) {
        let ((a, a_len), (b, b_len)) = (pair[0], pair[1]);
        assert!(
            a + a_len <= b,
            "objects overlap: {a:#x}+{a_len} and {b:#x}+{b_len}"
        );
    }
    for &(address, bytes) in objects.iter() {
        assert!(
            range.start <= address && address + bytes <= range.end,
            "object {address:#x}+{bytes} outside {:#x}..{:#x}",
            range.start,
            range.end
        );
    }
}

/// An object model with the header layout of [`HeaderWordModel`] and a configurable smallest
/// filler, which counts every call of `write_filler` that breaks the trait's contract (a gap
/// smaller than the smallest filler, or not aligned to `alignment`) instead of trusting it.
#[derive(Clone, Debug)]
pub struct CheckedFillerModel {
    pub min_filler: usize,
    pub alignment: usize,
    pub violations: Arc<AtomicUsize>,
    pub smallest_filler: Arc<AtomicUsize>,
    /// The highest end of a filler as big as the model's smallest one: where a model that
    /// always writes at least `min_filler` bytes would have written up to.
    pub furthest_write: Arc<AtomicUsize>,
}

impl CheckedFillerModel {
    pub fn new(min_filler: usize, alignment: usize) -> Self {
        CheckedFillerModel {
            min_filler,
            alignment,
            violations: Arc::new(AtomicUsize::new(0)),
            smallest_filler: Arc::new(AtomicUsize::new(usize::MAX)),
            furthest_write: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn violations(&self) -> usize {
        self.violations.load(Ordering::SeqCst)
    }
}

// SAFETY: fillers are written exactly as `HeaderWordModel` writes them (size with the filler
// bit), and `object_size` / `is_filler` read them the same way, so a filler over `bytes` reads
// back as `bytes` and as a filler. Gaps too small for a header word are counted and not written.
unsafe impl ObjectModel for CheckedFillerModel {
    fn min_filler_bytes(&self) -> usize {
        self.min_filler
    }

    unsafe fn write_filler(&self, address: NonNull<u8>, bytes: usize) {
        if bytes < self.min_filler || !(address.as_ptr() as usize).is_multiple_of(self.alignment) {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        self.smallest_filler.fetch_min(bytes, Ordering::SeqCst);
        let end = address.as_ptr() as usize + bytes.max(self.min_filler);
        self.furthest_write.fetch_max(end, Ordering::SeqCst);
        if bytes >= 8 {
            // SAFETY: the caller owns `bytes >= 8` bytes at the 8-byte aligned `address`.
            unsafe { HeaderWordModel.write_filler(address, bytes) };
        }
    }

    unsafe fn object_size(&self, address: NonNull<u8>) -> usize {
        // SAFETY: forwarded contract: `address` starts an object or filler with a header.
        unsafe { HeaderWordModel.object_size(address) }
    }

    unsafe fn is_filler(&self, address: NonNull<u8>) -> bool {
        // SAFETY: as for `object_size`.
        unsafe { HeaderWordModel.is_filler(address) }
    }
}

/// Where [`GateModel`] stops a thread.
#[derive(Debug, Default)]
pub struct GateState {
    /// The thread to stop at its next filler.
    armed_for: Option<ThreadId>,
    /// The size of the filler the stopped thread is writing, once it stopped.
    stopped_at: Option<usize>,
    released: bool,
}

/// The shared state of a [`GateModel`] and the condition variable its threads wait on.
#[derive(Debug, Default)]
pub struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

/// [`HeaderWordModel`] whose `write_filler` stops one chosen thread until released: a thread
/// that retires the tail of a middle-level buffer it claimed then stays in the middle of the
/// refill, holding the buffer, for as long as the test wants.
#[derive(Clone, Debug, Default)]
pub struct GateModel(Arc<Gate>);

impl GateModel {
    pub fn arm_for_this_thread(&self) {
        self.0.state.lock().unwrap().armed_for = Some(thread::current().id());
    }

    /// Waits until the armed thread stopped; returns the size of the filler it is writing.
    pub fn wait_until_stopped(&self) -> usize {
        let mut state = self.0.state.lock().unwrap();
        loop {
            if let Some(bytes) = state.stopped_at {
                return bytes;
            }
            state = self.0.changed.wait(state).unwrap();
        }
    }

    pub fn release(&self) {
        self.0.state.lock().unwrap().released = true;
        self.0.changed.notify_all();
    }
}

// SAFETY: fillers and headers are exactly `HeaderWordModel`'s; stopping a thread before
// writing changes nothing about what is written.
unsafe impl ObjectModel for GateModel {
    unsafe fn write_filler(&self, address: NonNull<u8>, bytes: usize) {
        let mut state = self.0.state.lock().unwrap();
        if state.armed_for == Some(thread::current().id()) {
            state.armed_for = None;
            state.stopped_at = Some(bytes);
            self.0.changed.notify_all();
            while !state.released {
                state = self.0.changed.wait(state).unwrap();
            }
        }
        drop(state);
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

/// xorshift64*: deterministic, dependency-free randomness for the stress tests.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Pins the calling thread to `cpu` (an online CPU below `CPU_SETSIZE`); `false` if the
/// kernel refused (a CPU outside the process's cgroup or affinity).
pub fn pin(cpu: usize) -> bool {
    // SAFETY: an all-zero cpu_set_t is a valid, empty set; `cpu` is below CPU_SETSIZE;
    // 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) == 0
    }
}

/// The CPUs the calling thread may run on, ascending.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid, empty set, filled by the kernel.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set);
        set
    };
    // SAFETY: reads bits inside the set.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

static SIGNALS: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_signal(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::Relaxed);
}

/// A timer that sends SIGUSR2 to the process every `period_ns` (the kernel hands each signal
/// to a running thread, so restartable sections abort), with a handler that counts them.
pub struct SignalTimer {
    timer: libc::timer_t,
    signals_before: u64,
}

impl SignalTimer {
    pub fn start(period_ns: i64) -> SignalTimer {
        // SAFETY: installs a handler that only increments an atomic, with SA_RESTART; then
        // plain syscalls on zero-initialised C structs.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = count_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigaction(libc::SIGUSR2, &action, std::ptr::null_mut());
            let mut event: libc::sigevent = std::mem::zeroed();
            event.sigev_notify = libc::SIGEV_SIGNAL;
            event.sigev_signo = libc::SIGUSR2;
            let mut timer: libc::timer_t = std::mem::zeroed();
            let created = libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer);
            assert_eq!(created, 0, "{}", std::io::Error::last_os_error());
            let period = libc::timespec {
                tv_sec: 0,
                tv_nsec: period_ns,
            };
            let spec = libc::itimerspec {
                it_interval: period,
                it_value: period,
            };
            assert_eq!(
                libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()),
                0
            );
            SignalTimer {
                timer,
                signals_before: SIGNALS.load(Ordering::Relaxed),
            }
        }
    }

    /// Signals handled since the timer started.
    pub fn signals(&self) -> u64 {
        SIGNALS.load(Ordering::Relaxed) - self.signals_before
    }

    /// Stops the timer; returns the signals handled.
    pub fn stop(self) -> u64 {
        self.signals()
    }
}

impl Drop for SignalTimer {
    fn drop(&mut self) {
        // SAFETY: deletes the timer `start` created.
        unsafe { libc::timer_delete(self.timer) };
    }
}
