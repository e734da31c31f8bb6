//! Which thread and process a mutator belongs to, and what `fork` leaves behind.
//!
//! A collection that cannot stop the world names the mutators it waits for: the thread that
//! runs each (name, kernel thread id), since when, and whether that thread still exists. After
//! `fork` only the forking thread exists in the child; the heap forgets the mutators of the
//! others (their threads will never park) and keeps the forking thread's.
//!
//! `fork` also copies locks as they were. The heap's registry and collector locks are held
//! only for short critical sections, each taken through a [`ForkGate`] read guard; a fork
//! waits (in its `pthread_atfork` prepare handler) until none is inside one, so the child
//! never inherits them locked. Cost: an uncontended read lock per registry access, none on the
//! allocation paths.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Once, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::Instant;

/// The thread a mutator last ran on.
#[derive(Clone, Debug)]
pub(crate) struct ThreadIdentity {
    /// The process the thread belonged to then.
    pub(crate) pid: i32,
    /// The kernel's thread id.
    pub(crate) tid: i32,
    /// `pthread_self()`: the one value a thread keeps across `fork`.
    pub(crate) pthread: usize,
    /// The thread's name as the kernel knows it (at most 15 bytes: Rust's thread names, cut
    /// there, or what a C runtime set with `pthread_setname_np`), if it has one.
    pub(crate) name: Option<String>,
    /// When the mutator last started running on it.
    pub(crate) since: Instant,
}

impl ThreadIdentity {
    /// The calling thread, running from now.
    pub(crate) fn current() -> ThreadIdentity {
        ThreadIdentity {
            pid: current_pid(),
            tid: current_tid(),
            pthread: current_pthread(),
            name: current_thread_name(),
            since: Instant::now(),
        }
    }

    /// Whether this is the calling thread.
    pub(crate) fn is_current(&self) -> bool {
        self.pid == current_pid() && self.tid == current_tid()
    }

    /// Whether the thread exists in this process: it is one of its threads now, or the
    /// thread that forked this process (which keeps its `pthread_self` but not its ids).
    pub(crate) fn exists_here(&self) -> bool {
        if self.pid == current_pid() {
            return thread_is_alive(self.tid);
        }
        self.pthread == FORKED_BY.load(Ordering::Acquire)
    }

    /// Whether the thread was in another process (this one's parent, before a `fork`).
    pub(crate) fn belongs_to_another_process(&self) -> bool {
        self.pid != current_pid()
    }

    /// Takes this process's ids for the thread (the forking thread, in a child: it keeps its
    /// `pthread_self` and gets a new kernel id).
    pub(crate) fn adopt_in_this_process(&mut self) {
        self.pid = current_pid();
        self.tid = current_tid();
    }
}

/// This process's id (not cached: it changes at `fork`).
pub(crate) fn current_pid() -> i32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

thread_local! {
    /// The kernel's id of this thread, read once (a forked child's thread gets a new one:
    /// see `current_tid`).
    static TID: std::cell::Cell<(i32, i32)> = const { std::cell::Cell::new((0, 0)) };
}

/// The kernel's id of the calling thread.
pub(crate) fn current_tid() -> i32 {
    let pid = current_pid();
    TID.with(|cached| {
        let (cached_pid, tid) = cached.get();
        if cached_pid == pid && tid != 0 {
            return tid;
        }
        let tid = read_tid();
        cached.set((pid, tid));
        tid
    })
}

#[cfg(target_os = "linux")]
fn read_tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

#[cfg(not(target_os = "linux"))]
fn read_tid() -> i32 {
    0
}

/// The calling thread's name from the kernel. Not `std::thread::current()`, which panics in a
/// `pthread_key_create` destructor (a thread detaching as it exits): it runs after Rust's
/// thread-locals are torn down.
fn current_thread_name() -> Option<String> {
    let mut name = [0u8; 16];
    // SAFETY: the buffer is 16 bytes, the size Linux names take with their NUL.
    let read = unsafe {
        libc::pthread_getname_np(libc::pthread_self(), name.as_mut_ptr().cast(), name.len())
    };
    if read != 0 {
        return None;
    }
    let name = std::ffi::CStr::from_bytes_until_nul(&name).ok()?;
    Some(name.to_string_lossy().into_owned()).filter(|name| !name.is_empty())
}

fn current_pthread() -> usize {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as usize }
}

/// Whether thread `tid` of this process still exists.
#[cfg(target_os = "linux")]
fn thread_is_alive(tid: i32) -> bool {
    std::path::Path::new(&format!("/proc/self/task/{tid}")).exists()
}

#[cfg(not(target_os = "linux"))]
fn thread_is_alive(_: i32) -> bool {
    true
}

/// `pthread_self()` of the thread that forked this process, set in the child; 0 in a process
/// that was not forked since it first built a heap.
static FORKED_BY: AtomicUsize = AtomicUsize::new(0);

/// Taken for reading around every short critical section on a heap's shared state, and for
/// writing by a `fork` while it copies the process.
static FORK_GATE: RwLock<()> = RwLock::new(());

thread_local! {
    /// The forking thread's write guard, between the prepare handler and the parent's or
    /// child's handler (all three run on the forking thread).
    static FORK_GUARD: RefCell<Option<RwLockWriteGuard<'static, ()>>> = const { RefCell::new(None) };
}

/// A read guard on the fork gate: no `fork` copies the process while it is held.
pub(crate) struct ForkGate(#[allow(dead_code)] RwLockReadGuard<'static, ()>);

impl ForkGate {
    pub(crate) fn enter() -> ForkGate {
        ForkGate(FORK_GATE.read().unwrap_or_else(|e| e.into_inner()))
    }
}

extern "C" fn before_fork() {
    let guard = FORK_GATE.write().unwrap_or_else(|e| e.into_inner());
    FORK_GUARD.with(|slot| *slot.borrow_mut() = Some(guard));
}

extern "C" fn after_fork_in_parent() {
    FORK_GUARD.with(|slot| drop(slot.borrow_mut().take()));
}

extern "C" fn after_fork_in_child() {
    FORKED_BY.store(current_pthread(), Ordering::Release);
    FORK_GUARD.with(|slot| drop(slot.borrow_mut().take()));
    let watchers: Vec<_> = FORK_WATCHERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    for watcher in watchers {
        watcher.after_fork_in_child();
    }
}

/// Shared state that must be mended in a child just forked (a heap: a collection another
/// thread of the parent was running never ends in the child).
pub(crate) trait ForkWatcher: Send + Sync {
    /// Runs on the child's only thread, right after the fork, with no Hab lock held.
    fn after_fork_in_child(&self);
}

/// What [`after_fork_in_child`] mends. Locked only through the fork gate (never copied
/// locked); entries of dropped heaps are pruned as new ones arrive.
static FORK_WATCHERS: std::sync::Mutex<Vec<Weak<dyn ForkWatcher>>> =
    std::sync::Mutex::new(Vec::new());

/// Has `watcher` mended in every child forked from now on, while it lives.
pub(crate) fn watch_forks_for(watcher: Weak<dyn ForkWatcher>) {
    watch_forks();
    let _fork = ForkGate::enter();
    let mut watchers = FORK_WATCHERS.lock().unwrap_or_else(|e| e.into_inner());
    watchers.retain(|watcher| watcher.strong_count() > 0);
    watchers.push(watcher);
}

/// Installs the `fork` handlers, once per process (before the first heap exists).
pub(crate) fn watch_forks() {
    static WATCH: Once = Once::new();
    WATCH.call_once(|| {
        // SAFETY: the handlers are `extern "C"` functions that live for the whole program;
        // they only take and release the gate and store a word.
        unsafe {
            libc::pthread_atfork(
                Some(before_fork),
                Some(after_fork_in_parent),
                Some(after_fork_in_child),
            )
        };
    });
}

/// A word threads sleep on until it changes: a condition variable that needs no lock, so a
/// `fork` can never copy it held. A waiter reads [`current`](Epoch::current) while the state
/// it waits on is checked (under the registry lock), then sleeps in
/// [`wait_while`](Epoch::wait_while); whoever changes that state calls
/// [`advance`](Epoch::advance) afterwards, waking every sleeper. A change between the read and
/// the sleep makes the sleep return at once, so no wake-up is lost.
#[derive(Debug, Default)]
pub(crate) struct Epoch(std::sync::atomic::AtomicU32);

impl Epoch {
    pub(crate) fn current(&self) -> u32 {
        self.0.load(Ordering::Acquire)
    }

    /// Sleeps while the epoch is still `seen`, at most `timeout`; may return early.
    pub(crate) fn wait_while(&self, seen: u32, timeout: std::time::Duration) {
        #[cfg(target_os = "linux")]
        {
            let timeout = libc::timespec {
                tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
                tv_nsec: timeout.subsec_nanos() as libc::c_long,
            };
            // SAFETY: the futex word is a live, aligned `AtomicU32`; FUTEX_WAIT only reads it
            // and sleeps while it equals `seen` (or until the timeout or a signal).
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.0.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    seen,
                    &timeout,
                )
            };
        }
        #[cfg(not(target_os = "linux"))]
        if self.current() == seen {
            std::thread::sleep(timeout.min(std::time::Duration::from_millis(1)));
        }
    }

    /// Moves to the next epoch and wakes every sleeper.
    pub(crate) fn advance(&self) {
        self.0.fetch_add(1, Ordering::Release);
        #[cfg(target_os = "linux")]
        // SAFETY: FUTEX_WAKE on a live, aligned `AtomicU32`; it touches no memory.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.0.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            )
        };
    }
}
