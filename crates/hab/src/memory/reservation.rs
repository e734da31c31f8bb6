//! The heap's address range: one anonymous `mmap` reserved at start-up, unmapped on drop; or
//! memory the runtime owns and lends the heap ([`RuntimeMemory`]), left to it on drop.
//!
//! `MAP_NORESERVE` keeps a large heap from counting against swap until it is touched; the
//! kernel hands out zero pages, so memory never handed out before needs no zeroing.

use std::io;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A readable and writable range of virtual memory: mapped by Hab (page-aligned, zero until
/// written, unmapped on drop), or lent by the runtime.
pub(crate) struct Reservation {
    base: NonNull<u8>,
    len_bytes: usize,
    /// Whether Hab mapped it (and unmaps it on drop).
    owned: bool,
    /// Whether it was pre-touched: counted in [`PRETOUCHED_BYTES`] until dropped.
    pretouched: AtomicBool,
}

/// Bytes the process's live reservations have pre-touched: a pre-touch is refused when it
/// would take the sum past the memory the process may use, so that two heaps pre-touched
/// together are checked as one (each alone used to be, and the pair got the process killed).
static PRETOUCHED_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Memory a runtime lends a heap instead of letting it reserve its own: the runtime's eden,
/// say. Give it to [`Heap::with_memory`](crate::Heap::with_memory).
///
/// ```
/// use std::ptr::NonNull;
/// use hab::{HeaderWordModel, Heap, HeapConfig, RuntimeMemory};
/// let mut eden = vec![0u64; 1 << 17]; // 1 MiB the runtime owns
/// let start = NonNull::new(eden.as_mut_ptr().cast::<u8>()).unwrap();
/// // SAFETY: `eden` is readable, writable, used by nothing else while the heap lives, and
/// // outlives it (dropped after `heap` below).
/// let memory = unsafe { RuntimeMemory::new(start, 1 << 20, true) };
/// let heap = Heap::with_memory(HeapConfig::builder().capacity("1MiB").build()?, HeaderWordModel, memory)?;
/// let mut mutator = heap.attach();
/// let object = mutator.alloc(32)?;
/// assert!(heap.reserved_range().contains(&(object.as_ptr() as usize)));
/// # drop(mutator);
/// # drop(heap);
/// # drop(eden);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RuntimeMemory {
    start: NonNull<u8>,
    len_bytes: usize,
    zeroed: bool,
}

impl RuntimeMemory {
    /// The memory `[start, start + len_bytes)`; `zeroed` when it holds only zeroes now (Hab
    /// then zeroes nothing before its first use; otherwise it zeroes what it hands out, unless
    /// the heap is built with [`ZeroMemory::Never`](crate::ZeroMemory::Never)).
    ///
    /// # Safety
    /// The range is readable and writable, nothing else reads or writes it from now until the
    /// heap built over it is dropped (and after, only once no object in it is used), and it
    /// stays valid that long. The start must be a multiple of the heap's alignment (checked
    /// by [`Heap::with_memory`](crate::Heap::with_memory)).
    pub unsafe fn new(start: NonNull<u8>, len_bytes: usize, zeroed: bool) -> Self {
        RuntimeMemory {
            start,
            len_bytes,
            zeroed,
        }
    }

    /// The first address.
    pub fn start(&self) -> usize {
        self.start.as_ptr() as usize
    }

    /// Its length.
    pub fn len_bytes(&self) -> usize {
        self.len_bytes
    }

    /// Whether it holds only zeroes.
    pub fn is_zeroed(&self) -> bool {
        self.zeroed
    }
}

// SAFETY: the memory is lent whole to one heap (the `new` contract); the value only carries
// its address.
unsafe impl Send for RuntimeMemory {}

// SAFETY: the reservation is plain memory owned by this value; who may write which part of it
// is decided by the heap's allocation protocols, not by the reservation.
unsafe impl Send for Reservation {}
// SAFETY: as above; `Reservation` itself only hands out addresses.
unsafe impl Sync for Reservation {}

impl Reservation {
    /// Reserves `len_bytes` (rounded up to whole pages).
    pub(crate) fn new(len_bytes: usize) -> io::Result<Self> {
        let len_bytes = len_bytes.next_multiple_of(page_size());
        // SAFETY: an anonymous private mapping at an address the kernel chooses touches no
        // existing memory; the result is checked against MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(base.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave 0"))?;
        // Addresses are handled as integers by the allocation paths; exposing the mapping's
        // provenance lets them turn back into pointers.
        let _ = base.as_ptr().expose_provenance();
        Ok(Reservation {
            base,
            len_bytes,
            owned: true,
            pretouched: AtomicBool::new(false),
        })
    }

    /// The runtime's memory, as a reservation Hab does not unmap.
    pub(crate) fn lent(memory: RuntimeMemory) -> Self {
        // As in `new`: the allocation paths turn addresses back into pointers.
        let _ = memory.start.as_ptr().expose_provenance();
        Reservation {
            base: memory.start,
            len_bytes: memory.len_bytes,
            owned: false,
            pretouched: AtomicBool::new(false),
        }
    }

    /// The first address.
    pub(crate) fn start(&self) -> usize {
        self.base.as_ptr() as usize
    }

    /// One past the last address.
    pub(crate) fn end(&self) -> usize {
        self.start() + self.len_bytes
    }

    /// Faults in every page now so that allocation is not timed with first touches.
    ///
    /// Refuses (touching nothing) a range that, with what the process's other live heaps
    /// pre-touched, is larger than the memory this process may use (the machine's, or its
    /// control group's limit): that would only end with the process killed. A kernel that
    /// refuses to populate the pages is an error too. Only a kernel without
    /// `MADV_POPULATE_WRITE` (before 5.14: `EINVAL`) is answered by touching page by page.
    pub(crate) fn pretouch(&self) -> io::Result<()> {
        self.pretouch_within(memory_limit_bytes())
    }

    /// [`pretouch`](Reservation::pretouch) against `limit` bytes for the whole process.
    fn pretouch_within(&self, limit: Option<usize>) -> io::Result<()> {
        if self.pretouched.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Err(error) = claim_pretouch(self.len_bytes, limit) {
            self.pretouched.store(false, Ordering::Release);
            return Err(error);
        }
        let touched = self.populate();
        if touched.is_err() {
            PRETOUCHED_BYTES.fetch_sub(self.len_bytes, Ordering::AcqRel);
            self.pretouched.store(false, Ordering::Release);
        }
        touched
    }

    /// Faults every page in.
    fn populate(&self) -> io::Result<()> {
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        // SAFETY: the range is exactly this mapping; populating pages does not change contents.
        let populated = unsafe {
            libc::madvise(
                self.base.as_ptr().cast(),
                self.len_bytes,
                MADV_POPULATE_WRITE,
            )
        };
        if populated == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINVAL) {
            return Err(error);
        }
        // Kernels before 5.14: write one byte of every page (still zero, so contents stay).
        for offset in (0..self.len_bytes).step_by(page_size()) {
            // SAFETY: `offset` is inside the mapping, which is writable; writing the zero the
            // fresh page already holds leaves its contents unchanged.
            unsafe { ptr::write_volatile(self.base.as_ptr().add(offset), 0) };
        }
        Ok(())
    }
}

/// Adds `bytes` to the process's pre-touched bytes, or refuses when the sum would pass `limit`.
fn claim_pretouch(bytes: usize, limit: Option<usize>) -> io::Result<()> {
    let gib = |bytes: usize| bytes as f64 / (1u64 << 30) as f64;
    let mut claimed = PRETOUCHED_BYTES.load(Ordering::Acquire);
    loop {
        let total = claimed.saturating_add(bytes);
        if let Some(limit) = limit.filter(|&limit| total > limit) {
            let others = if claimed > 0 {
                format!(
                    " with the {:.1}GiB the process's other heaps pre-touched",
                    gib(claimed)
                )
            } else {
                String::new()
            };
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "{:.1}GiB{others} is more than the {:.1}GiB of memory this process may use",
                    gib(bytes),
                    gib(limit)
                ),
            ));
        }
        match PRETOUCHED_BYTES.compare_exchange_weak(
            claimed,
            total,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return Ok(()),
            Err(current) => claimed = current,
        }
    }
}

/// The memory this process may use: the machine's physical memory, or less where the
/// control group (v2) of the process sets `memory.max`. `None` where neither is known. A heap
/// that is pre-touched may be at most this large.
///
/// ```
/// let limit = hab::memory_limit_bytes();
/// assert!(limit.is_none_or(|bytes| bytes > 0));
/// ```
pub fn memory_limit_bytes() -> Option<usize> {
    // SAFETY: sysconf has no preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    let physical = usize::try_from(pages)
        .ok()
        .and_then(|pages| pages.checked_mul(page_size()));
    let group = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|text| {
            let path = text.lines().find_map(|line| line.strip_prefix("0::"))?;
            let file = format!("/sys/fs/cgroup{}/memory.max", path.trim_end_matches('/'));
            std::fs::read_to_string(file)
                .ok()?
                .trim()
                .parse::<usize>()
                .ok()
        });
    match (physical, group) {
        (Some(physical), Some(group)) => Some(physical.min(group)),
        (physical, group) => physical.or(group),
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if *self.pretouched.get_mut() {
            PRETOUCHED_BYTES.fetch_sub(self.len_bytes, Ordering::AcqRel);
        }
        if !self.owned {
            return;
        }
        // SAFETY: this value owns the mapping and nothing handed out from it outlives the heap
        // (mutators and collections hold the heap alive).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len_bytes) };
    }
}

/// The size of a page, as the kernel reports it.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|s| s.is_power_of_two())
        .unwrap_or(4096)
}

/// Turns a heap address back into a pointer carrying the mapping's provenance.
#[inline(always)]
pub(crate) fn address_to_pointer(address: usize) -> *mut u8 {
    ptr::with_exposed_provenance_mut(address)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held by the tests that pre-touch, so that the accounting test sees no other meanwhile.
    static PRETOUCHING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn reserves_zeroed_writable_memory() {
        let _alone = PRETOUCHING.lock().unwrap_or_else(|e| e.into_inner());
        let reservation = Reservation::new(10_000).unwrap();
        assert_eq!(
            reservation.end() - reservation.start(),
            10_000usize.next_multiple_of(page_size())
        );
        reservation.pretouch().unwrap();
        let first = address_to_pointer(reservation.start());
        let last = address_to_pointer(reservation.end() - 1);
        // SAFETY: both addresses are inside the live mapping.
        unsafe {
            assert_eq!(*first, 0);
            assert_eq!(*last, 0);
            *last = 7;
            assert_eq!(*last, 7);
        }
    }

    /// A pre-touch beyond the machine's memory is refused before touching a page (it used
    /// to be attempted page by page, until the process was killed).
    #[test]
    fn a_pretouch_beyond_memory_is_refused() {
        let limit = memory_limit_bytes().expect("this machine reports its memory");
        let reservation = Reservation::new(limit + (1 << 30)).unwrap();
        let error = reservation
            .pretouch()
            .expect_err("more than the machine has");
        assert_eq!(error.kind(), io::ErrorKind::OutOfMemory);
        assert!(
            error.to_string().contains("of memory this process may use"),
            "{error}"
        );
    }

    /// Heaps pre-touched together are checked together against one memory figure (two 20 GiB
    /// heaps on a 24 GiB machine were each accepted, and the process killed); a dropped heap
    /// gives its share back. A figure of a few pages keeps the test from touching real memory.
    #[test]
    fn pretouches_are_accounted_across_the_process() {
        let _alone = PRETOUCHING.lock().unwrap_or_else(|e| e.into_inner());
        let page = page_size();
        let base = PRETOUCHED_BYTES.load(Ordering::Acquire);
        let limit = Some(base + 5 * page);
        let first = Reservation::new(2 * page).unwrap();
        let second = Reservation::new(2 * page).unwrap();
        let third = Reservation::new(2 * page).unwrap();
        first.pretouch_within(limit).unwrap();
        second.pretouch_within(limit).unwrap();
        let error = third
            .pretouch_within(limit)
            .expect_err("6 pages over a 5-page figure");
        assert_eq!(error.kind(), io::ErrorKind::OutOfMemory);
        assert!(
            error.to_string().contains("other heaps pre-touched"),
            "{error}"
        );
        drop(first);
        third.pretouch_within(limit).unwrap();
        second.pretouch_within(limit).unwrap(); // once is enough: not counted twice
    }

    #[test]
    fn an_impossible_reservation_is_an_error() {
        assert!(Reservation::new(usize::MAX / 2).is_err());
    }
}
