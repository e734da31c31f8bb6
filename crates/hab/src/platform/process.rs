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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Once, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::Instant;

/// The thread a mutator last ran on, or that began a collection.
///
/// Which thread it is is told by a [`ThreadToken`], never by the kernel's thread id: the
/// kernel hands a dead thread's id to a new thread (after about 32 000 thread creations with
/// Linux's default `pid_max`), and a collection may outlive the thread that began it.
#[derive(Clone, Debug)]
pub(crate) struct ThreadIdentity {
    /// The thread, as no other thread of this process (or of a child forked from it) is.
    pub(crate) token: ThreadToken,
    /// The process the thread belonged to then.
    pub(crate) pid: i32,
    /// The kernel's thread id (for messages: it may be reused once the thread exits).
    pub(crate) tid: i32,
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
            token: ThreadToken::current(),
            pid: current_pid(),
            tid: current_tid(),
            name: current_thread_name(),
            since: Instant::now(),
        }
    }

    /// Whether this is the calling thread (in a forked child, the forking thread is the
    /// thread it was in the parent).
    pub(crate) fn is_current(&self) -> bool {
        self.token == ThreadToken::current()
    }

    /// Whether the thread exists in this process: it is one of its threads now (its kernel id
    /// names a live thread, which after the thread's exit may be another one: an answer for
    /// messages), or the thread that forked this process (which keeps its token, but not its
    /// ids; no other thread of the parent exists in the child).
    pub(crate) fn exists_here(&self) -> bool {
        if self.pid == current_pid() {
            return self.is_current() || thread_is_alive(self.tid);
        }
        self.is_current()
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

/// A number that names one thread for the life of the process: handed out once, from a
/// counter, to each thread that asks, and never again (a forked child's counter goes on from
/// the parent's, past every token the parent had handed out by then). Unlike kernel thread
/// ids, tokens are not reused when a thread exits. Cost: a thread-local load, and an atomic
/// increment on a thread's first call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ThreadToken(u64);

/// The next token to hand out (0 is never one: it marks "none yet" in `TOKEN`).
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The calling thread's token, 0 until it first asks. No destructor, so that a thread
    /// exiting (a `pthread_key_create` destructor detaching a mutator) can still read it.
    static TOKEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl ThreadToken {
    /// The calling thread's token.
    pub(crate) fn current() -> ThreadToken {
        TOKEN.with(|token| {
            if token.get() == 0 {
                token.set(NEXT_TOKEN.fetch_add(1, Ordering::Relaxed));
            }
            ThreadToken(token.get())
        })
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

/// Whether thread `tid` of this process still exists.
#[cfg(target_os = "linux")]
fn thread_is_alive(tid: i32) -> bool {
    std::path::Path::new(&format!("/proc/self/task/{tid}")).exists()
}

#[cfg(not(target_os = "linux"))]
fn thread_is_alive(_: i32) -> bool {
    true
}

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

/// A mutex that a `fork` never copies held: locking it enters the fork gate first, and the
/// guard holds both. For a heap's short critical sections outside the registry, which a forked
/// child may enter again. Not for use while the registry is locked: its guard already holds
/// the gate, and a read lock of the gate taken again while a `fork` waits for it would wait
/// for ever.
#[derive(Debug, Default)]
pub(crate) struct ForkSafeMutex<T>(std::sync::Mutex<T>);

/// The lock of a [`ForkSafeMutex`]: the mutex's guard, dropped before the gate's.
pub(crate) struct ForkSafeGuard<'a, T> {
    guard: std::sync::MutexGuard<'a, T>,
    _fork: ForkGate,
}

impl<T> ForkSafeMutex<T> {
    pub(crate) fn new(value: T) -> Self {
        ForkSafeMutex(std::sync::Mutex::new(value))
    }

    /// Locks the mutex inside the fork gate (a poisoned lock is taken as it is).
    pub(crate) fn lock(&self) -> ForkSafeGuard<'_, T> {
        let fork = ForkGate::enter();
        ForkSafeGuard {
            guard: self.0.lock().unwrap_or_else(|e| e.into_inner()),
            _fork: fork,
        }
    }
}

impl<T> std::ops::Deref for ForkSafeGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> std::ops::DerefMut for ForkSafeGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_told_by_its_token_not_by_a_reused_kernel_id() {
        let collector = std::thread::spawn(ThreadIdentity::current).join().unwrap();
        assert!(!collector.is_current());
        // The kernel hands the dead thread's id to a new thread: that thread is not it.
        let newcomer = std::thread::spawn(move || {
            let mut reused = collector.clone();
            reused.tid = current_tid();
            (reused.is_current(), reused.exists_here())
        })
        .join()
        .unwrap();
        assert_eq!(
            newcomer,
            (false, true),
            "the id names a live thread, not the collector"
        );
        let here = ThreadIdentity::current();
        assert!(here.is_current() && here.exists_here());
    }

    /// A fork while another thread holds a `ForkSafeMutex` waits until it is released, so the
    /// child finds it free (a plain mutex is copied held, and the child would wait for ever).
    #[test]
    fn a_fork_never_copies_a_fork_safe_mutex_held() {
        watch_forks();
        let mutex = std::sync::Arc::new(ForkSafeMutex::new(0u32));
        let held = std::sync::mpsc::channel();
        let holder = {
            let (mutex, held) = (mutex.clone(), held.0);
            std::thread::spawn(move || {
                let mut guard = mutex.lock();
                *guard = 1;
                held.send(()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(200));
                *guard = 2;
            })
        };
        held.1.recv().unwrap();
        let forked_at = Instant::now();
        // SAFETY: the child only tries the lock and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // The holder released before the fork: free, and its last write is there.
            let free = mutex.0.try_lock().map(|value| *value == 2).unwrap_or(false);
            // SAFETY: ends the child without running the parent's destructors.
            unsafe { libc::_exit(if free { 0 } else { 1 }) };
        }
        let waited = forked_at.elapsed();
        let mut status = 0;
        // SAFETY: reaps the child just forked.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        holder.join().unwrap();
        assert!(libc::WIFEXITED(status), "child status {status}");
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "the child found the mutex held"
        );
        assert!(
            waited >= std::time::Duration::from_millis(100),
            "forked after {waited:?}"
        );
    }

    #[test]
    fn tokens_are_never_handed_out_twice() {
        let tokens: Vec<ThreadToken> = (0..64)
            .map(|_| std::thread::spawn(ThreadToken::current).join().unwrap())
            .collect();
        for (i, token) in tokens.iter().enumerate() {
            assert!(!tokens[i + 1..].contains(token), "{token:?} twice");
        }
        assert_eq!(ThreadToken::current(), ThreadToken::current());
    }
}
