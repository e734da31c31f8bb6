//! Registration: where a thread's rseq area is. glibc's (`__rseq_offset` from the thread
//! pointer) when it registered one for every thread; else an area Hab registers per thread with
//! the `rseq` system call: one at a fixed offset from every thread's pointer where there is
//! one (an area the runtime provided, [`super::provide_area`]; else the one glibc ≥ 2.35 keeps
//! in every thread's control block and left unregistered), so that code generated for glibc's
//! area (`fs:[offset]`) runs unchanged on it; else a thread-local of Hab's. x86_64 Linux.
//!
//! An area at a fixed offset is never unregistered: its memory is the thread's control block or
//! static TLS, which outlives the thread's last return to user space, as glibc's area does. A
//! thread-local area is unregistered when its thread's destructors run.

use std::arch::asm;
use std::cell::{Cell, UnsafeCell};

use super::layout::{RseqArea, CPU_ID_OFFSET, RSEQ_AREA_BYTES, SIGNATURE};
use super::mechanism::{glibc_offset_from, RseqMechanism};

const SYS_RSEQ: libc::c_long = 334;
const UNREGISTER: libc::c_int = 1;
/// `struct rseq` as registered by Hab: 32 bytes, 32-byte aligned.
const AREA_BYTES: u32 = RSEQ_AREA_BYTES as u32;

/// glibc's `__rseq_offset` and `__rseq_size`, when this C library exports them.
pub(super) fn glibc_symbols() -> Option<(isize, u32)> {
    let (offset, size) = (symbol(c"__rseq_offset")?, symbol(c"__rseq_size")?);
    // SAFETY: glibc defines `const ptrdiff_t __rseq_offset` and `const unsigned int
    // __rseq_size`, set before user code runs and never written again.
    Some(unsafe { (*offset.cast::<isize>(), *size.cast::<u32>()) })
}

/// glibc's registration where it has one for the calling thread; else Hab's own (at
/// `provided`, an offset the runtime vouched for, else in glibc's unused area, else, or where
/// `thread_local` asks, thread-local) where the kernel registers it for the calling thread;
/// else why neither.
pub(super) fn discover(provided: Option<isize>, thread_local: bool) -> RseqMechanism {
    let symbols = glibc_symbols();
    let glibc = glibc_offset_from(symbols).and_then(|offset| {
        // SAFETY: glibc exported `__rseq_offset` and registers areas: its area is inside the
        // control block of every thread, the calling one included.
        let cpu = unsafe { read_cpu_id(glibc_area(offset)) };
        if cpu >= 0 {
            Ok(offset)
        } else {
            Err(format!(
                "glibc's registration failed for this thread (cpu_id reads {cpu})"
            ))
        }
    });
    let why_not_glibc = match glibc {
        Ok(offset) => return RseqMechanism::Glibc { offset },
        Err(why) => why,
    };
    // Where glibc exports `__rseq_offset`, every thread has its area there, unregistered.
    let offset = provided
        .or(symbols.map(|(offset, _)| offset))
        .filter(|_| !thread_local);
    let registered = match offset {
        Some(offset) => register_at(offset).map(|_| ()),
        None => thread_local_area().map(|_| ()),
    };
    match registered {
        Ok(()) => RseqMechanism::Own {
            offset,
            why_not_glibc,
        },
        Err(error) => RseqMechanism::Unavailable(format!(
            "{why_not_glibc}, and the kernel refused Hab's own registration: {error}"
        )),
    }
}

fn symbol(name: &std::ffi::CStr) -> Option<*const libc::c_void> {
    // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the global scope.
    let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!address.is_null()).then_some(address.cast_const())
}

/// The calling thread's area at `offset` from its thread pointer.
#[inline]
pub(super) fn glibc_area(offset: isize) -> *mut u8 {
    let thread_pointer: *mut u8;
    // SAFETY: on x86_64 Linux `fs:0` holds the thread pointer itself (the TCB's self
    // pointer); reading it has no side effect.
    unsafe {
        asm!("mov {}, qword ptr fs:0", out(reg) thread_pointer, options(nostack, readonly, preserves_flags))
    };
    thread_pointer.wrapping_offset(offset)
}

/// Reads `cpu_id` of `area`, as the kernel may have written it (negative: not registered).
///
/// # Safety
/// `area` is the calling thread's rseq area, live while it runs.
#[inline(always)]
unsafe fn read_cpu_id(area: *mut u8) -> i32 {
    // SAFETY: by the caller's contract the field lies inside a live, aligned area.
    unsafe { area.add(CPU_ID_OFFSET).cast::<i32>().read_volatile() }
}

thread_local! {
    /// Whether the kernel refused the calling thread's registration at a fixed offset (so
    /// that it is asked once per thread, not at every slow path).
    static REFUSED: Cell<bool> = const { Cell::new(false) };
}

/// The calling thread's area at `offset` (Hab's own registration at a fixed offset),
/// registered first if it is not: the area, or why the kernel refused it.
#[inline]
pub(super) fn register_at(offset: isize) -> Result<*mut u8, std::io::Error> {
    let area = glibc_area(offset);
    // SAFETY: `offset` locates an area in every thread (see `discover`).
    if unsafe { read_cpu_id(area) } >= 0 {
        return Ok(area);
    }
    register_cold(area)
}

/// The `rseq` system call for the calling thread's area at a fixed offset.
#[cold]
#[inline(never)]
fn register_cold(area: *mut u8) -> Result<*mut u8, std::io::Error> {
    if REFUSED.try_with(Cell::get).unwrap_or(true) {
        return Err(std::io::Error::other(
            "the kernel refused this thread's registration before",
        ));
    }
    // SAFETY: the area is 32 bytes, 32-byte aligned, inside the calling thread's control
    // block or static TLS (live until the thread is gone), and registered for it only.
    let result = unsafe { libc::syscall(SYS_RSEQ, area, AREA_BYTES, 0, SIGNATURE) };
    if result == 0 {
        return Ok(area);
    }
    let error = std::io::Error::last_os_error();
    let _ = REFUSED.try_with(|refused| refused.set(true));
    Err(error)
}

/// A thread's own thread-local area and whether it is registered (0 not tried, 1 registered,
/// 2 failed): where no area sits at a fixed offset.
struct ThreadLocalArea {
    area: UnsafeCell<RseqArea>,
    state: Cell<u8>,
}

impl Drop for ThreadLocalArea {
    fn drop(&mut self) {
        if self.state.get() == 1 {
            // SAFETY: unregisters the area this thread registered, before its memory goes.
            unsafe { libc::syscall(SYS_RSEQ, self.area.get(), AREA_BYTES, UNREGISTER, SIGNATURE) };
        }
    }
}

thread_local! {
    static THREAD_LOCAL_AREA: ThreadLocalArea = const {
        ThreadLocalArea { area: UnsafeCell::new(RseqArea::UNREGISTERED), state: Cell::new(0) }
    };
}

/// The calling thread's thread-local area, registered on the first call.
pub(super) fn thread_local_area() -> Result<*mut u8, std::io::Error> {
    THREAD_LOCAL_AREA
        .try_with(|own| {
            if own.state.get() == 0 {
                let area = own.area.get();
                // SAFETY: the area is 32 bytes, 32-byte aligned, lives as long as the thread
                // (it is unregistered by `Drop` before it is freed), and is registered for the
                // calling thread only.
                let result = unsafe { libc::syscall(SYS_RSEQ, area, AREA_BYTES, 0, SIGNATURE) };
                if result != 0 {
                    own.state.set(2);
                    return Err(std::io::Error::last_os_error());
                }
                own.state.set(1);
            }
            match own.state.get() {
                1 => Ok(own.area.get().cast::<u8>()),
                _ => Err(std::io::Error::other(
                    "the kernel refused this thread's registration before",
                )),
            }
        })
        .unwrap_or_else(|_| Err(std::io::Error::other("the thread is exiting")))
}
