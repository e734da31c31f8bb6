//! Object model and heap: `hab_object_model`, `hab_heap` (`hab.h`, "Object model and heap").

use crate::prelude::*;

/// The runtime's object model as C callbacks: `hab_object_model` in `hab.h`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct hab_object_model {
    /// The size in bytes of the object or filler at `object`.
    pub object_size:
        Option<unsafe extern "C" fn(user: *mut c_void, object: *const c_void) -> usize>,
    /// Writes a filler covering `bytes` at `address`.
    pub write_filler:
        Option<unsafe extern "C" fn(user: *mut c_void, address: *mut c_void, bytes: usize)>,
    /// Non-zero when the object at `object` is a filler.
    pub is_filler: Option<unsafe extern "C" fn(user: *mut c_void, object: *const c_void) -> c_int>,
    /// The smallest gap a filler covers.
    pub min_filler_bytes: usize,
    /// Passed to every callback.
    pub user: *mut c_void,
}

/// The callbacks, checked non-NULL, as Hab's object model.
pub(crate) struct CModel {
    object_size: unsafe extern "C" fn(*mut c_void, *const c_void) -> usize,
    write_filler: unsafe extern "C" fn(*mut c_void, *mut c_void, usize),
    is_filler: unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int,
    min_filler_bytes: usize,
    user: *mut c_void,
}

// SAFETY: `hab.h` requires the callbacks to be callable from any thread, with `user` shared.
unsafe impl Send for CModel {}
// SAFETY: as above.
unsafe impl Sync for CModel {}

// SAFETY: the runtime's callbacks promise (in `hab.h`) what `ObjectModel` requires: fillers
// of exactly the given size that `object_size` and `is_filler` then describe.
unsafe impl ObjectModel for CModel {
    fn min_filler_bytes(&self) -> usize {
        self.min_filler_bytes
    }

    unsafe fn write_filler(&self, address: NonNull<u8>, bytes: usize) {
        // SAFETY: the trait's contract, passed on to the callback.
        unsafe { (self.write_filler)(self.user, address.as_ptr().cast(), bytes) }
    }

    unsafe fn object_size(&self, address: NonNull<u8>) -> usize {
        // SAFETY: as above.
        unsafe { (self.object_size)(self.user, address.as_ptr().cast()) }
    }

    unsafe fn is_filler(&self, address: NonNull<u8>) -> bool {
        // SAFETY: as above.
        unsafe { (self.is_filler)(self.user, address.as_ptr().cast()) != 0 }
    }
}

/// A heap: `hab_heap` in `hab.h`.
pub struct hab_heap {
    pub(crate) heap: Arc<Heap>,
}

/// Builds a heap from `config` (which stays the caller's) and `model` (copied).
///
/// # Safety
/// `config` and `model` are NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn hab_heap_new(
    config: *const hab_config,
    model: *const hab_object_model,
    out: *mut *mut hab_heap,
) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let (Some(config), Some(model)) = (unsafe { config.as_ref() }, unsafe { model.as_ref() })
        else {
            return fail(
                HAB_INVALID_ARGUMENT,
                "hab_heap_new: NULL configuration or model",
            );
        };
        if out.is_null() {
            return fail(HAB_INVALID_ARGUMENT, "hab_heap_new: NULL out");
        }
        let (Some(object_size), Some(write_filler), Some(is_filler)) =
            (model.object_size, model.write_filler, model.is_filler)
        else {
            return fail(
                HAB_INVALID_ARGUMENT,
                "hab_heap_new: the object model needs object_size, write_filler and is_filler",
            );
        };
        let config = match config.builder.clone().build() {
            Ok(config) => config,
            Err(error) => return fail(HAB_CONFIG_ERROR, error.to_string()),
        };
        let model = CModel {
            object_size,
            write_filler,
            is_filler,
            min_filler_bytes: model.min_filler_bytes,
            user: model.user,
        };
        match Heap::new(config, model) {
            Ok(heap) => {
                // SAFETY: checked non-NULL; the caller's contract makes it writable.
                unsafe { *out = Box::into_raw(Box::new(hab_heap { heap })) };
                HAB_OK
            }
            Err(hab::HeapError::Config(error)) => fail(HAB_CONFIG_ERROR, error.to_string()),
            Err(error) => fail(HAB_SYSTEM_ERROR, error.to_string()),
        }
    })
}

/// Frees the caller's reference to a heap (NULL: nothing). Mutators still attached keep it
/// alive until they detach.
///
/// # Safety
/// `heap` is NULL or from `hab_heap_new`, not freed before.
#[no_mangle]
pub unsafe extern "C" fn hab_heap_free(heap: *mut hab_heap) {
    if !heap.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(heap) });
    }
}

/// The heap's memory `[*start, *end)`.
///
/// # Safety
/// `heap` is NULL or live; `start` and `end` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn hab_heap_range(
    heap: *const hab_heap,
    start: *mut usize,
    end: *mut usize,
) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let Ok(heap) = (unsafe { live(heap, "hab_heap_range", "heap") }) else {
            return HAB_INVALID_ARGUMENT;
        };
        if start.is_null() || end.is_null() {
            return fail(HAB_INVALID_ARGUMENT, "hab_heap_range: NULL start or end");
        }
        let range = heap.heap.reserved_range();
        // SAFETY: checked non-NULL; writable by the caller's contract.
        unsafe { (*start, *end) = (range.start, range.end) };
        HAB_OK
    })
}

/// Asks every mutator to stop at its next safepoint.
///
/// # Safety
/// `heap` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_request_collection(heap: *mut hab_heap) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let Ok(heap) = (unsafe { live(heap, "hab_request_collection", "heap") }) else {
            return HAB_INVALID_ARGUMENT;
        };
        heap.heap.request_collection();
        HAB_OK
    })
}

/// Sleeps until a collection is requested, at most `timeout_ms`: `HAB_OK` when one is,
/// `HAB_TIMEOUT` when none was.
///
/// # Safety
/// `heap` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_wait_for_collection_request(
    heap: *mut hab_heap,
    timeout_ms: u64,
) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let Ok(heap) = (unsafe { live(heap, "hab_wait_for_collection_request", "heap") }) else {
            return HAB_INVALID_ARGUMENT;
        };
        if heap
            .heap
            .wait_for_collection_request(Duration::from_millis(timeout_ms))
        {
            HAB_OK
        } else {
            fail(
                HAB_TIMEOUT,
                format!("hab_wait_for_collection_request: none within {timeout_ms} ms"),
            )
        }
    })
}

/// The heap's statistics as JSON (`HeapStats`), NUL-terminated in `buffer` when it holds
/// them; returns their length without the NUL (call with `len` 0 to size the buffer), 0 on
/// error.
///
/// # Safety
/// `heap` is NULL or live; `buffer` is NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn hab_stats_json(
    heap: *mut hab_heap,
    buffer: *mut c_char,
    len: usize,
) -> usize {
    // SAFETY: the caller's contract.
    let Ok(heap) = (unsafe { live(heap, "hab_stats_json", "heap") }) else {
        return 0;
    };
    // SAFETY: the caller's contract.
    unsafe { write_json(&heap.heap.stats(), buffer, len) }
}
