//! The middle levels on their own: `hab_upstream`, `hab_levels` (`hab.h`, "The middle levels on
//! their own").

use crate::prelude::*;
use hab::{MiddleLevelSpec, MAX_CAPACITY_BYTES};

/// The runtime's eden as C callbacks: `hab_upstream` in `hab.h`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct hab_upstream {
    /// Carves a chunk: writes its start, returns its length (0: no room).
    pub carve: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            min_bytes: usize,
            desired_bytes: usize,
            start: *mut usize,
        ) -> usize,
    >,
    /// Writes a filler over `[start, start + bytes)`.
    pub write_filler: Option<unsafe extern "C" fn(user: *mut c_void, start: usize, bytes: usize)>,
    /// Passed to the callbacks.
    pub user: *mut c_void,
    /// The bytes eden has left (NULL: the runtime does not say; buffers then never shrink at
    /// the end of a cycle).
    pub free_bytes: Option<unsafe extern "C" fn(user: *mut c_void) -> usize>,
}

/// The callbacks, checked non-NULL, as Hab's upstream.
pub(crate) struct CUpstream {
    carve: unsafe extern "C" fn(*mut c_void, usize, usize, *mut usize) -> usize,
    write_filler: unsafe extern "C" fn(*mut c_void, usize, usize),
    free_bytes: Option<unsafe extern "C" fn(*mut c_void) -> usize>,
    user: *mut c_void,
}

// SAFETY: `hab.h` requires the callbacks to be callable from any thread, with `user` shared.
unsafe impl Send for CUpstream {}
// SAFETY: as above.
unsafe impl Sync for CUpstream {}

impl Upstream for CUpstream {
    fn carve(&self, min_bytes: usize, desired_bytes: usize) -> Option<Range<usize>> {
        let mut start = 0;
        // SAFETY: the runtime's callback, with its own `user` and a writable `start`.
        let len = unsafe { (self.carve)(self.user, min_bytes, desired_bytes, &mut start) };
        // A range that overflows or breaks the contract otherwise is caught by the levels.
        (len != 0).then(|| start..start.wrapping_add(len))
    }

    fn write_filler(&self, start: usize, bytes: usize) {
        // SAFETY: the runtime's callback, over a gap of a buffer the levels own.
        unsafe { (self.write_filler)(self.user, start, bytes) }
    }

    fn free_bytes(&self) -> Option<usize> {
        // SAFETY: the runtime's callback, with its own `user`.
        self.free_bytes.map(|free| unsafe { free(self.user) })
    }
}

/// Middle levels: `hab_levels` in `hab.h`. `broken` is set when the upstream broke its
/// contract; every later call then fails, since a refill may have stopped half-way.
pub struct hab_levels {
    pub(crate) levels: Arc<MiddleLevels>,
    pub(crate) broken: Arc<AtomicBool>,
}

/// One thread's handle: `hab_levels_thread` in `hab.h`.
pub struct hab_levels_thread {
    thread: LevelsThread,
    broken: Arc<AtomicBool>,
}

pub(crate) const BROKEN_UPSTREAM: &str =
    "the levels are unusable: their upstream broke its contract earlier (see that error)";

/// Writes the levels `auto` picks on this machine for a space of `space_bytes` whose smallest
/// TLAB is `min_tlab_bytes` (`hab::MiddleLevelSpec::auto`), as a list for [`hab_levels_new`],
/// NUL-terminated, into `buffer` when its `len` bytes hold it; returns the text's length (0 on
/// error, recorded).
///
/// # Safety
/// `buffer` is NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_auto(
    space_bytes: usize,
    min_tlab_bytes: usize,
    buffer: *mut c_char,
    len: usize,
) -> usize {
    let mut written = 0;
    guarded(
        || match MiddleLevelSpec::auto(space_bytes, min_tlab_bytes) {
            Ok(levels) => {
                let list = MiddleLevelSpec::list_to_string(&levels);
                // SAFETY: the caller's contract.
                written = unsafe { write_text(&list, buffer, len) };
                HAB_OK
            }
            Err(error) => fail(HAB_CONFIG_ERROR, format!("hab_levels_auto: {error}")),
        },
    );
    written
}

/// Builds middle levels over the runtime's upstream.
///
/// # Safety
/// `levels` is NULL or NUL-terminated; `upstream` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_new(
    levels: *const c_char,
    max_tlab_bytes: usize,
    min_filler_bytes: usize,
    base: usize,
    upstream: *const hab_upstream,
    out: *mut *mut hab_levels,
) -> hab_status {
    // SAFETY: forwarded; a NULL `cpu_id` reads rseq's CPU where it can.
    unsafe {
        hab_levels_new_with_cpu_id(
            levels,
            ptr::null(),
            max_tlab_bytes,
            min_filler_bytes,
            base,
            upstream,
            out,
        )
    }
}

/// [`hab_levels_new`] with the current CPU read by `cpu_id` (`rseq`, `getcpu`, `rdpid`; NULL:
/// rseq where it works, else getcpu). Only with `rseq` are the `cpu` level's buffers
/// restartable; otherwise they are compare-and-swap buffers.
///
/// # Safety
/// As for [`hab_levels_new`]; `cpu_id` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_new_with_cpu_id(
    levels: *const c_char,
    cpu_id: *const c_char,
    max_tlab_bytes: usize,
    min_filler_bytes: usize,
    base: usize,
    upstream: *const hab_upstream,
    out: *mut *mut hab_levels,
) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let (Some(list), Some(upstream)) = (unsafe { text(levels) }, unsafe { upstream.as_ref() })
        else {
            return fail(
                HAB_INVALID_ARGUMENT,
                "hab_levels_new: NULL (or not UTF-8) levels, or NULL upstream",
            );
        };
        if out.is_null() {
            return fail(HAB_INVALID_ARGUMENT, "hab_levels_new: NULL out");
        }
        let source = if cpu_id.is_null() {
            None
        } else {
            // SAFETY: the caller's contract.
            match unsafe { text(cpu_id) }.map(str::parse::<CpuIdSource>) {
                Some(Ok(source)) => Some(source),
                _ => {
                    return fail(
                        HAB_CONFIG_ERROR,
                        format!(
                            "hab_levels_new: cpu_id must be one of {}",
                            CpuIdSource::NAMES.join(", ")
                        ),
                    )
                }
            }
        };
        let (Some(carve), Some(write_filler)) = (upstream.carve, upstream.write_filler) else {
            return fail(
                HAB_INVALID_ARGUMENT,
                "hab_levels_new: the upstream needs carve and write_filler",
            );
        };
        let upstream = CUpstream {
            carve,
            write_filler,
            free_bytes: upstream.free_bytes,
            user: upstream.user,
        };
        let built = match source {
            None => MiddleLevels::new(list, max_tlab_bytes, min_filler_bytes, base, upstream),
            Some(source) => MiddleLevels::with_cpu_id(
                list,
                source,
                max_tlab_bytes,
                min_filler_bytes,
                base,
                upstream,
            ),
        };
        match built {
            Ok(levels) => {
                let handle = hab_levels {
                    levels,
                    broken: Arc::new(AtomicBool::new(false)),
                };
                // SAFETY: checked non-NULL; writable by the caller's contract.
                unsafe { *out = Box::into_raw(Box::new(handle)) };
                HAB_OK
            }
            Err(error) => fail(HAB_CONFIG_ERROR, format!("hab_levels_new: {error}")),
        }
    })
}

/// Frees the caller's reference to the levels (NULL: nothing).
///
/// # Safety
/// `levels` is NULL or from `hab_levels_new`, not freed before.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_free(levels: *mut hab_levels) {
    if !levels.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(levels) });
    }
}

/// A handle for the calling thread to carve TLABs with; NULL on error.
///
/// # Safety
/// `levels` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_thread_new(levels: *mut hab_levels) -> *mut hab_levels_thread {
    guarded_ptr(|| {
        // SAFETY: the caller's contract.
        let Ok(levels) = (unsafe { live(levels, "hab_levels_thread_new", "levels") }) else {
            return ptr::null_mut();
        };
        // Before the thread's first section through the levels' fixed path (`hab.h`'s).
        hab::rseq_register_current_thread();
        Box::into_raw(Box::new(hab_levels_thread {
            thread: levels.levels.thread(),
            broken: levels.broken.clone(),
        }))
    })
}

/// Frees a thread handle (NULL: nothing).
///
/// # Safety
/// `thread` is NULL or from `hab_levels_thread_new`, not freed before.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_thread_free(thread: *mut hab_levels_thread) {
    if !thread.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(thread) });
    }
}

/// Carves a TLAB through the levels: its length (0 on failure), its start in `*start`.
///
/// # Safety
/// `thread` is NULL or live and used by the calling thread only; `start` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_carve_tlab(
    thread: *mut hab_levels_thread,
    min_bytes: usize,
    desired_bytes: usize,
    start: *mut usize,
) -> usize {
    let mut carved = 0;
    guarded(|| {
        // SAFETY: the caller's contract.
        let Ok(handle) = (unsafe { live_mut(thread, "hab_levels_carve_tlab", "thread") }) else {
            return HAB_INVALID_ARGUMENT;
        };
        if start.is_null() {
            return fail(HAB_INVALID_ARGUMENT, "hab_levels_carve_tlab: NULL start");
        }
        if min_bytes == 0
            || min_bytes > desired_bytes
            || !(min_bytes | desired_bytes).is_multiple_of(8)
        {
            return fail(
                HAB_INVALID_ARGUMENT,
                format!(
                    "hab_levels_carve_tlab({min_bytes}, {desired_bytes}): sizes must be \
                     positive multiples of 8 with min <= desired"
                ),
            );
        }
        if handle.broken.load(Ordering::Acquire) {
            return fail(HAB_INTERNAL_ERROR, BROKEN_UPSTREAM);
        }
        let result = catch(|| handle.thread.carve_tlab(min_bytes, desired_bytes));
        match result {
            Ok(Some(tlab)) => {
                // SAFETY: checked non-NULL; writable by the caller's contract.
                unsafe { *start = tlab.start };
                carved = tlab.len();
                HAB_OK
            }
            Ok(None) => fail(
                HAB_OUT_OF_MEMORY,
                format!("hab_levels_carve_tlab({min_bytes}, {desired_bytes}): the levels and the upstream are exhausted"),
            ),
            Err(panic) => {
                handle.broken.store(true, Ordering::Release);
                fail(HAB_INTERNAL_ERROR, panic_message(&*panic))
            }
        }
    });
    carved
}

/// Where compiled code bumps the lowest level's per-CPU buffers itself: `hab_cpu_buffer_path`
/// in `hab.h` (`hab::CpuBufferPath`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct hab_cpu_buffer_path {
    /// Offset of the thread's rseq area from the thread pointer.
    pub rseq_area_offset: isize,
    /// Offset from the thread pointer of the `u32` the buffers are indexed by.
    pub rseq_index_offset: isize,
    /// Address of index 0's buffer word; index `c`'s is `c * HAB_CPU_LAB_SLOT_BYTES` further.
    pub slots: usize,
    /// The address the buffers' tops count from, in words.
    pub base: usize,
    /// Indices below this have a buffer.
    pub slot_count: u32,
}

/// Fills `out` with the path compiled code takes to bump the lowest level's restartable
/// per-CPU buffers; `HAB_CONFIG_ERROR` where there is none (the lowest level is not a
/// restartable `cpu` level, or the threads' rseq areas are not at one offset: glibc's
/// registration is off).
///
/// # Safety
/// `levels` is NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_cpu_buffer_path(
    levels: *mut hab_levels,
    out: *mut hab_cpu_buffer_path,
) -> hab_status {
    guarded(|| {
        const CALL: &str = "hab_levels_cpu_buffer_path";
        // SAFETY: the caller's contract.
        let Ok(levels) = (unsafe { live(levels, CALL, "levels") }) else {
            return HAB_INVALID_ARGUMENT;
        };
        if out.is_null() {
            return fail(HAB_INVALID_ARGUMENT, format!("{CALL}: NULL out"));
        }
        let Some(path) = levels.levels.cpu_buffer_path() else {
            return fail(
                HAB_CONFIG_ERROR,
                format!(
                    "{CALL}: the lowest level has no per-CPU buffers compiled code can bump (it \
                     is not a restartable cpu level, or the threads' rseq areas are not at one \
                     offset from the thread pointer: {})",
                    hab::rseq_mechanism()
                ),
            );
        };
        // SAFETY: `out` is writable (the caller's contract) and not NULL.
        unsafe {
            out.write(hab_cpu_buffer_path {
                rseq_area_offset: path.rseq_area_offset,
                rseq_index_offset: path.rseq_index_offset,
                slots: path.slots_address,
                base: path.base_address,
                slot_count: path.slots,
            })
        };
        HAB_OK
    })
}

/// Empties every buffer of the levels, with fillers over their tails.
///
/// # Safety
/// `levels` is NULL or live; no thread carves meanwhile, and no other `retire_all` runs.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_retire_all(levels: *mut hab_levels) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let Ok(levels) = (unsafe { live(levels, "hab_levels_retire_all", "levels") }) else {
            return HAB_INVALID_ARGUMENT;
        };
        if levels.broken.load(Ordering::Acquire) {
            return fail(HAB_INTERNAL_ERROR, BROKEN_UPSTREAM);
        }
        // SAFETY: no thread carves and no other retire runs (the caller's contract).
        unsafe { levels.levels.retire_all() };
        HAB_OK
    })
}

/// Resizes the levels' buffers for the next cycle to follow the allocation
/// (`MiddleLevels::resize_buffers`), for an eden of `space_bytes`.
///
/// # Safety
/// `levels` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_resize(
    levels: *mut hab_levels,
    space_bytes: usize,
) -> hab_status {
    // SAFETY: the caller's contract.
    unsafe { resize(levels, space_bytes, 0, "hab_levels_resize") }
}

/// [`hab_levels_resize`] with no buffer above `max_buffer_bytes` (0: no bound), the largest
/// piece the runtime's space hands out (a G1 region).
///
/// # Safety
/// `levels` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_resize_within(
    levels: *mut hab_levels,
    space_bytes: usize,
    max_buffer_bytes: usize,
) -> hab_status {
    // SAFETY: the caller's contract.
    unsafe {
        resize(
            levels,
            space_bytes,
            max_buffer_bytes,
            "hab_levels_resize_within",
        )
    }
}

/// The two resize entries; `max_buffer_bytes` 0 is no bound.
///
/// # Safety
/// `levels` is NULL or live.
unsafe fn resize(
    levels: *mut hab_levels,
    space_bytes: usize,
    max_buffer_bytes: usize,
    entry: &str,
) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let Ok(levels) = (unsafe { live(levels, entry, "levels") }) else {
            return HAB_INVALID_ARGUMENT;
        };
        if space_bytes == 0 {
            return fail(HAB_INVALID_ARGUMENT, format!("{entry}: a space of 0 bytes"));
        }
        let max_buffer_bytes = (max_buffer_bytes != 0).then_some(max_buffer_bytes);
        levels
            .levels
            .resize_buffers_within(space_bytes, max_buffer_bytes);
        HAB_OK
    })
}

/// Fits a list of levels to a space (`MiddleLevelSpec::fit`): writes the list, fitted, into
/// `buffer` as [`hab_levels_auto`] does; 0 on error.
///
/// # Safety
/// `levels` is NULL or NUL-terminated; `buffer` NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_fit(
    levels: *const c_char,
    space_bytes: usize,
    min_tlab_bytes: usize,
    max_buffer_bytes: usize,
    buffer: *mut c_char,
    len: usize,
) -> usize {
    let mut written = 0;
    guarded(|| {
        // SAFETY: the caller's contract.
        let Some(list) = (unsafe { text(levels) }) else {
            return fail(
                HAB_INVALID_ARGUMENT,
                "hab_levels_fit: NULL (or not UTF-8) levels",
            );
        };
        let parsed = match MiddleLevelSpec::parse_list(list) {
            Ok(parsed) if !parsed.is_empty() => parsed,
            Ok(_) => {
                return fail(
                    HAB_CONFIG_ERROR,
                    "hab_levels_fit: give a list of levels (hab_levels_auto picks them)",
                )
            }
            Err(error) => return fail(HAB_CONFIG_ERROR, format!("hab_levels_fit: {error}")),
        };
        if space_bytes == 0 || space_bytes > MAX_CAPACITY_BYTES {
            return fail(
                HAB_CONFIG_ERROR,
                format!("hab_levels_fit: a space of {space_bytes} bytes (1 byte to 16TiB)"),
            );
        }
        let max_buffer_bytes = (max_buffer_bytes != 0).then_some(max_buffer_bytes);
        match MiddleLevelSpec::fit(&parsed, space_bytes, min_tlab_bytes, max_buffer_bytes) {
            Ok(fitted) => {
                // A list that fits comes back as it was given, so the caller can compare.
                let list = if fitted == parsed {
                    list.trim().to_string()
                } else {
                    MiddleLevelSpec::list_to_string(&fitted)
                };
                // SAFETY: the caller's contract.
                written = unsafe { write_text(&list, buffer, len) };
                HAB_OK
            }
            Err(error) => fail(HAB_CONFIG_ERROR, format!("hab_levels_fit: {error}")),
        }
    });
    written
}
