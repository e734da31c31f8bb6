//! Asymmetric fences: a handshake between a thread that acts often (a mutator raising its
//! TLAB's soft end at every refill) and one that acts rarely (a collector asking every mutator
//! to stop). Each side stores, then loads what the other stored; one of the two must see the
//! other's store. A full fence on both sides does it, but the frequent side then pays a
//! locked instruction (about 20 cycles, the largest single cost of a short refill). Here the
//! frequent side pays only a compiler fence ([`light`]) and the rare side makes every thread of
//! the process execute a full barrier ([`heavy`]): Linux's `membarrier` with
//! `MEMBARRIER_CMD_PRIVATE_EXPEDITED` (an interrupt to each CPU running one of the process's
//! threads; a thread not running went through a context switch, itself a barrier).
//!
//! Why that suffices: the rare side stores, calls [`heavy`], then stores its second word (the
//! trip). Take a frequent thread's store S and load L, in program order. If L ran before the
//! barrier the kernel made the thread execute, S also did, and the barrier made S visible before
//! `heavy` returned, so the rare side's later trip comes after S and wins. If L ran after that
//! barrier, it sees the rare side's first store, made before `heavy` began.
//!
//! Where `membarrier` is refused (a seccomp filter, a kernel before 4.14), or where
//! `HAB_PROCESS_BARRIER=protection` asks for it, [`heavy`] changes the protection of a page of
//! its own, which makes the kernel interrupt every CPU that may hold a
//! translation of it (every CPU running the process's threads): the barrier other runtimes use
//! there on x86_64 (where a TLB shootdown is an interrupt). Elsewhere [`light`] is a full fence
//! and [`heavy`] one too.
//!
//! Cost: [`light`] none at run time; [`heavy`] one system call (two or three without
//! `membarrier`), a few microseconds, once per safepoint request.

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod imp {
    use std::sync::atomic::{compiler_fence, AtomicU8, Ordering};
    use std::sync::{Mutex, OnceLock};

    /// The frequent side: orders its store before its load for the compiler; the processor's
    /// reordering of the two is what [`heavy`] undoes.
    #[inline(always)]
    pub(crate) fn light() {
        compiler_fence(Ordering::SeqCst);
    }

    /// Whether this process uses `membarrier`, decided at the first call.
    static USE_MEMBARRIER: OnceLock<bool> = OnceLock::new();
    /// The fallback's page, mapped at its first use, whose protection is changed under the
    /// lock (two changes in flight at once could each find the other's translation gone).
    static PAGE: OnceLock<Mutex<usize>> = OnceLock::new();

    fn membarrier(command: libc::c_int) -> bool {
        // SAFETY: `membarrier` takes a command and two integer arguments and touches no
        // memory of the caller.
        unsafe { libc::syscall(libc::SYS_membarrier, command, 0, 0) == 0 }
    }

    /// `membarrier` where the kernel allows it, unless `HAB_PROCESS_BARRIER=protection` asks
    /// for the fallback (so that tests run it on kernels that have `membarrier`).
    fn decide() -> bool {
        let forced = std::env::var_os("HAB_PROCESS_BARRIER").is_some_and(|v| v == "protection");
        !forced && membarrier(libc::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)
    }

    fn page_bytes() -> usize {
        // SAFETY: `sysconf` has no preconditions.
        let bytes = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(bytes).unwrap_or(4096)
    }

    /// The fallback's page (see [`PAGE`]); panics if not even one page can be mapped.
    fn map_page() -> Mutex<usize> {
        // SAFETY: an anonymous private mapping of one page, at an address of the kernel's
        // choosing: it touches no existing memory.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page_bytes(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert!(
            page != libc::MAP_FAILED,
            "no page could be mapped for the process-wide barrier"
        );
        Mutex::new(page as usize)
    }

    /// The rare side: returns once every thread of the process has executed a full barrier
    /// since the call began.
    pub(crate) fn heavy() {
        if *USE_MEMBARRIER.get_or_init(decide) {
            // The registration belongs to the process's memory: a child made by `fork`
            // registers again. Refused even then, the page below serves.
            if membarrier(libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED)
                || membarrier(libc::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)
                    && membarrier(libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED)
            {
                return;
            }
        }
        // Held to the end: the lock covers every change of the page.
        let page = PAGE
            .get_or_init(map_page)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let address = *page as *mut libc::c_void;
        // The page is made writable, written (so that a translation of it exists), then made
        // inaccessible, which the kernel can only do after removing every CPU's translation
        // of it: an interrupt to each CPU that runs the process.
        // SAFETY: the page is this module's own mapping, changed only here, under the lock.
        let writable =
            unsafe { libc::mprotect(address, page_bytes(), libc::PROT_READ | libc::PROT_WRITE) };
        assert_eq!(writable, 0, "mprotect of the barrier page");
        // SAFETY: the page is mapped, writable now, aligned, and written only here under the
        // lock, through atomics.
        unsafe { AtomicU8::from_ptr(address.cast()) }.fetch_add(1, Ordering::SeqCst);
        // SAFETY: as for the first change of protection.
        let closed = unsafe { libc::mprotect(address, page_bytes(), libc::PROT_NONE) };
        assert_eq!(closed, 0, "mprotect of the barrier page");
    }

    /// Which barrier [`heavy`] uses here, for tests and diagnostics.
    #[cfg(test)]
    pub(crate) fn uses_membarrier() -> bool {
        *USE_MEMBARRIER.get_or_init(decide)
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
mod imp {
    use std::sync::atomic::{fence, Ordering};

    /// A full fence: no process-wide barrier is relied on here.
    #[inline(always)]
    pub(crate) fn light() {
        fence(Ordering::SeqCst);
    }

    /// A full fence, the other half of [`light`]'s.
    pub(crate) fn heavy() {
        fence(Ordering::SeqCst);
    }
}

pub(crate) use imp::{heavy, light};

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    /// The barrier is available here (membarrier, or the page it falls back to) and can be
    /// called again and again.
    #[test]
    fn the_heavy_fence_returns() {
        for _ in 0..100 {
            heavy();
        }
        let forced = std::env::var_os("HAB_PROCESS_BARRIER").is_some_and(|v| v == "protection");
        assert!(
            !(forced && imp::uses_membarrier()),
            "the fallback was asked for"
        );
        println!("membarrier: {}", imp::uses_membarrier());
    }

    /// The handshake itself (the store-buffering litmus test), round after round: a frequent
    /// thread stores the round in its word and, after a light fence, loads the flag; the rare
    /// side stores the round in the flag and, after the heavy fence, loads the word. Never may
    /// both miss the other's store in one round. Both sides start each round from a spin on
    /// one word, so that their stores and loads overlap; without the fences this machine shows
    /// the forbidden outcome within a few thousand rounds (the test's fence-free twin).
    #[test]
    fn one_side_always_sees_the_other() {
        let both_missed = store_buffering_rounds(100_000, light, heavy);
        assert_eq!(
            both_missed, 0,
            "rounds in which both sides missed the other"
        );
    }

    /// The litmus test's fence-free twin: shows that the test can see what the fences
    /// prevent, where the processor reorders a store after a later load (x86_64 does).
    /// Ignored by default: it shows a processor's behaviour, not Hab's.
    #[test]
    #[ignore = "a demonstration that the litmus test detects reordering: cargo test -p hab \
                --lib fence -- --ignored"]
    fn without_the_fences_both_sides_can_miss() {
        let both_missed = store_buffering_rounds(100_000, || {}, || {});
        println!("rounds in which both sides missed the other without fences: {both_missed}");
        assert!(both_missed > 0);
    }

    /// Runs `rounds` rounds of the store-buffering test with `frequent` and `rare` as the two
    /// sides' fences; returns the rounds in which both sides missed the other's store.
    fn store_buffering_rounds(rounds: usize, frequent: fn(), rare: fn()) -> usize {
        let go = Arc::new(AtomicUsize::new(0));
        // The worker's result of a round: the round, shifted, and whether it saw the flag.
        let (flag, word, result) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
        );
        let worker = {
            let (go, flag, word, result) = (go.clone(), flag.clone(), word.clone(), result.clone());
            std::thread::spawn(move || {
                for round in 1..=rounds {
                    while go.load(Ordering::Acquire) != round {
                        std::hint::spin_loop();
                    }
                    word.store(round, Ordering::Relaxed);
                    frequent();
                    let saw = flag.load(Ordering::Relaxed) == round;
                    result.store(round << 1 | usize::from(saw), Ordering::Release);
                }
            })
        };
        let mut both_missed = 0;
        for round in 1..=rounds {
            go.store(round, Ordering::Release);
            flag.store(round, Ordering::Relaxed);
            rare();
            let stored = word.load(Ordering::Relaxed) == round;
            let saw = loop {
                let result = result.load(Ordering::Acquire);
                if result >> 1 == round {
                    break result & 1 == 1;
                }
                std::hint::spin_loop();
            };
            both_missed += usize::from(!stored && !saw);
        }
        worker.join().unwrap();
        both_missed
    }
}
