//! The process's per-CPU support (`hab.h`'s "Per-CPU support" section): which rseq
//! registration its threads use and which CPU-id source levels and heaps pick, from
//! [`hab::per_cpu_support`]; a thread's registration; an area a runtime provides.

use std::ffi::CString;
use std::sync::OnceLock;

use crate::prelude::*;
use hab::RseqMechanism;

/// No rseq: per-CPU buffers take compare-and-swap, the CPU comes from `getcpu`.
pub const HAB_RSEQ_UNAVAILABLE: c_int = 0;
/// glibc registered an area for every thread.
pub const HAB_RSEQ_GLIBC: c_int = 1;
/// Hab registers an area per thread at one offset from every thread pointer.
pub const HAB_RSEQ_OWN: c_int = 2;
/// Hab registers a thread-local area per thread (no offset common to all threads).
pub const HAB_RSEQ_OWN_THREAD_LOCAL: c_int = 3;
/// glibc's area used without a registration (instruction counting under valgrind only).
pub const HAB_RSEQ_UNREGISTERED: c_int = 4;

/// `hab_per_cpu_support` in `hab.h`, filled by [`hab_per_cpu_support_get`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct hab_per_cpu_support {
    /// One of the `HAB_RSEQ_*` values.
    pub registration: c_int,
    /// Every thread's area from its thread pointer (`HAB_RSEQ_GLIBC`, `HAB_RSEQ_OWN`); else 0.
    pub area_offset: isize,
    /// The CPU-id source a NULL `cpu_id` picks: "rseq" or "getcpu" (static).
    pub cpu_id: *const c_char,
    /// All of it in one line, with why rseq is unavailable where it is (static).
    pub description: *const c_char,
}

/// The support as `hab.h` gives it: registration, area offset, and its two strings, made once
/// for the life of the process.
struct Support {
    registration: c_int,
    area_offset: isize,
    cpu_id: CString,
    description: CString,
}

fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let support = hab::per_cpu_support();
        let (registration, area_offset) = match support.registration {
            RseqMechanism::Unavailable(_) => (HAB_RSEQ_UNAVAILABLE, 0),
            RseqMechanism::Glibc { offset } => (HAB_RSEQ_GLIBC, offset),
            RseqMechanism::Own {
                offset: Some(offset),
                ..
            } => (HAB_RSEQ_OWN, offset),
            RseqMechanism::Own { offset: None, .. } => (HAB_RSEQ_OWN_THREAD_LOCAL, 0),
            RseqMechanism::Unregistered { offset } => (HAB_RSEQ_UNREGISTERED, offset),
        };
        let text = |text: String| CString::new(text.replace('\0', " ")).unwrap_or_default();
        Support {
            registration,
            area_offset,
            cpu_id: text(support.cpu_id.to_string()),
            description: text(support.to_string()),
        }
    })
}

/// Fills `*out` with the process's per-CPU support (deciding the registration, in the calling
/// thread, if nothing of Hab's did before).
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn hab_per_cpu_support_get(out: *mut hab_per_cpu_support) -> hab_status {
    guarded(|| {
        if out.is_null() {
            return fail(HAB_INVALID_ARGUMENT, "hab_per_cpu_support_get: NULL out");
        }
        let support = support();
        // SAFETY: `out` is writable (the caller's contract) and not NULL.
        unsafe {
            out.write(hab_per_cpu_support {
                registration: support.registration,
                area_offset: support.area_offset,
                cpu_id: support.cpu_id.as_ptr(),
                description: support.description.as_ptr(),
            })
        };
        HAB_OK
    })
}

/// Registers the calling thread's rseq area where Hab registers them: 1 when the thread has a
/// registered area (glibc's or Hab's), 0 where rseq is unavailable or the kernel refused it.
#[no_mangle]
pub extern "C" fn hab_rseq_register_thread() -> c_int {
    match catch_unwind(hab::rseq_register_current_thread) {
        Ok(true) => 1,
        _ => 0,
    }
}

/// Offers the area at `offset` from every thread's pointer for Hab's own registration
/// (`hab::rseq_provide_area`); HAB_CONFIG_ERROR when it comes after the registration was
/// decided, or a second time.
///
/// # Safety
/// As `hab::rseq_provide_area`: every thread has 32 bytes, 32-byte aligned, at that offset,
/// alive as long as the thread, used by nothing else.
#[no_mangle]
pub unsafe extern "C" fn hab_rseq_provide_area(offset: isize) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        match unsafe { hab::rseq_provide_area(offset) } {
            Ok(()) => HAB_OK,
            Err(why) => fail(HAB_CONFIG_ERROR, format!("hab_rseq_provide_area: {why}")),
        }
    })
}
