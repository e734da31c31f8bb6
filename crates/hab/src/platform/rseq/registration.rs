//! Registration: where a thread's rseq area is. glibc's (`__rseq_offset` from the thread
//! pointer) when it registered one, else an area Hab registers per thread with the `rseq`
//! system call and unregisters when the thread exits. x86_64 Linux.

use std::arch::asm;
use std::cell::{Cell, UnsafeCell};

use super::layout::{RseqArea, RSEQ_AREA_BYTES, SIGNATURE};
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

pub(super) fn discover() -> RseqMechanism {
    if let Ok(offset) = glibc_offset_from(glibc_symbols()) {
        return RseqMechanism::Glibc { offset };
    }
    match own_area() {
        Some(_) => RseqMechanism::Own,
        None => RseqMechanism::Unavailable(format!(
            "the kernel refused to register an rseq area: {}",
            std::io::Error::last_os_error()
        )),
    }
}

fn symbol(name: &std::ffi::CStr) -> Option<*const libc::c_void> {
    // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the global scope.
    let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!address.is_null()).then_some(address.cast_const())
}

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

/// A thread's own area and whether it is registered (0 not tried, 1 registered, 2 failed).
struct Own {
    area: UnsafeCell<RseqArea>,
    state: Cell<u8>,
}

impl Drop for Own {
    fn drop(&mut self) {
        if self.state.get() == 1 {
            // SAFETY: unregisters the area this thread registered, before its memory goes.
            unsafe { libc::syscall(SYS_RSEQ, self.area.get(), AREA_BYTES, UNREGISTER, SIGNATURE) };
        }
    }
}

thread_local! {
    static OWN: Own = const { Own { area: UnsafeCell::new(RseqArea::ZEROED), state: Cell::new(0) } };
}

pub(super) fn own_area() -> Option<*mut u8> {
    OWN.try_with(|own| {
        if own.state.get() == 0 {
            // SAFETY: the area is 32 bytes, 32-byte aligned, lives as long as the thread
            // (it is unregistered by `Drop` before it is freed), and is registered for the
            // calling thread only.
            let area = own.area.get();
            // SAFETY: see above.
            let result = unsafe { libc::syscall(SYS_RSEQ, area, AREA_BYTES, 0, SIGNATURE) };
            own.state.set(if result == 0 { 1 } else { 2 });
        }
        (own.state.get() == 1).then(|| own.area.get().cast::<u8>())
    })
    .ok()
    .flatten()
}
