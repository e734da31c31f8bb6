//! Collections: `hab_collection`, the walk, the next range (`hab.h`, "Collections").

use crate::prelude::*;

/// A collection in progress: `hab_collection` in `hab.h`. The collection borrows the heap
/// this box also holds; it is declared first, so it is dropped first.
pub struct hab_collection {
    collection: Option<Collection<'static>>,
    _heap: Arc<Heap>,
}

/// Stops the world (every mutator at a safepoint or parked), waiting at most `timeout_ms`
/// (0: without bound), and retires every LAB. The calling thread must not hold a running
/// mutator.
///
/// # Safety
/// `heap` is NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn hab_collection_begin(
    heap: *mut hab_heap,
    timeout_ms: u64,
    out: *mut *mut hab_collection,
) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let Ok(heap) = (unsafe { live(heap, "hab_collection_begin", "heap") }) else {
            return HAB_INVALID_ARGUMENT;
        };
        if out.is_null() {
            return fail(HAB_INVALID_ARGUMENT, "hab_collection_begin: NULL out");
        }
        let heap = heap.heap.clone();
        if let Some(own) = heap.running_mutators().iter().find(|m| m.is_calling_thread) {
            return fail(
                HAB_INVALID_ARGUMENT,
                format!(
                    "hab_collection_begin: the calling thread's mutator {} is running and would \
                     never stop: park it first (hab_park or hab_blocking_begin)",
                    own.id
                ),
            );
        }
        // SAFETY: the collection borrows the heap the box keeps alive, and is dropped before
        // it (field order); the box is never moved out of.
        let borrowed: &'static Heap = unsafe { &*Arc::as_ptr(&heap) };
        let collection = if heap.is_collecting_thread() {
            Err(CollectionError::AlreadyCollecting)
        } else if timeout_ms == 0 {
            Ok(borrowed.collection())
        } else {
            borrowed.collection_within(Duration::from_millis(timeout_ms))
        };
        match collection {
            Ok(collection) => {
                let boxed = Box::new(hab_collection {
                    collection: Some(collection),
                    _heap: heap,
                });
                // SAFETY: checked non-NULL; writable by the caller's contract.
                unsafe { *out = Box::into_raw(boxed) };
                HAB_OK
            }
            Err(error @ (CollectionError::Timeout { .. } | CollectionError::InProgress)) => {
                fail(HAB_TIMEOUT, format!("hab_collection_begin: {error}"))
            }
            Err(error) => fail(
                HAB_INVALID_ARGUMENT,
                format!("hab_collection_begin: {error}"),
            ),
        }
    })
}

/// The collection behind `collection`, or the recorded error.
///
/// # Safety
/// `collection` is NULL or live.
pub(crate) unsafe fn collection<'a>(
    collection: *mut hab_collection,
    call: &str,
) -> Result<&'a mut Collection<'static>, hab_status> {
    // SAFETY: the caller's contract.
    let handle = unsafe { live_mut(collection, call, "collection") }?;
    // Always `Some` in a handle `hab_collection_begin` returned.
    handle
        .collection
        .as_mut()
        .ok_or_else(|| null_argument(call, "collection"))
}

/// The callback of `hab_collection_walk`.
pub type hab_visit = Option<
    unsafe extern "C" fn(user: *mut c_void, address: *mut c_void, bytes: usize, is_filler: c_int),
>;

/// Visits every object and filler of the allocation range in address order.
///
/// # Safety
/// `collection` is NULL or live; `visit` NULL or a function taking `user`.
#[no_mangle]
pub unsafe extern "C" fn hab_collection_walk(
    collection_handle: *mut hab_collection,
    visit: hab_visit,
    user: *mut c_void,
) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let collection = match unsafe { collection(collection_handle, "hab_collection_walk") } {
            Ok(collection) => collection,
            Err(status) => return status,
        };
        let Some(visit) = visit else {
            return fail(HAB_INVALID_ARGUMENT, "hab_collection_walk: NULL visit");
        };
        let walked = collection.walk(|object| {
            // SAFETY: the runtime's callback, with its own `user`.
            unsafe {
                visit(
                    user,
                    object.address.as_ptr().cast(),
                    object.bytes,
                    c_int::from(object.is_filler),
                )
            }
        });
        match walked {
            Ok(_) => HAB_OK,
            Err(error) => fail(HAB_VERIFY_ERROR, error.to_string()),
        }
    })
}

/// Checks that the allocation range parses as objects and fillers up to its top.
///
/// # Safety
/// `collection` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_collection_verify(
    collection_handle: *mut hab_collection,
) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        match unsafe { collection(collection_handle, "hab_collection_verify") } {
            Ok(collection) => match collection.verify() {
                Ok(_) => HAB_OK,
                Err(error) => fail(HAB_VERIFY_ERROR, error.to_string()),
            },
            Err(status) => status,
        }
    })
}

/// Sets the next cycle's allocation range `[start, end)` (inside the heap's reservation).
///
/// # Safety
/// `collection` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_collection_set_range(
    collection_handle: *mut hab_collection,
    start: usize,
    end: usize,
) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        match unsafe { collection(collection_handle, "hab_collection_set_range") } {
            Ok(collection) => match collection.set_allocation_range(start..end) {
                Ok(()) => HAB_OK,
                Err(error) => fail(HAB_INVALID_ARGUMENT, error.to_string()),
            },
            Err(status) => status,
        }
    })
}

/// Everything allocated is dead: the next cycle allocates from the bottom again.
///
/// # Safety
/// `collection` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_collection_reset(
    collection_handle: *mut hab_collection,
) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        match unsafe { collection(collection_handle, "hab_collection_reset") } {
            // `reset` as a range, so that a range fixed by hab_collection_alloc is an error.
            Ok(collection) => {
                let reserved = collection.heap().reserved_range();
                match collection.set_allocation_range(reserved) {
                    Ok(()) => HAB_OK,
                    Err(error) => fail(
                        HAB_INVALID_ARGUMENT,
                        format!("hab_collection_reset: {error}"),
                    ),
                }
            }
            Err(status) => status,
        }
    })
}

/// Allocates `bytes` inside the collection for the parked `mutator` (whose allocation failed),
/// from the next range, before any mutator resumes: NULL with `HAB_OUT_OF_MEMORY` when the
/// collection left no room, with `HAB_INVALID_ARGUMENT` for a mutator of another heap.
///
/// # Safety
/// `collection` and `mutator` are NULL or live; `mutator` is not used by another thread
/// during the call.
#[no_mangle]
pub unsafe extern "C" fn hab_collection_alloc(
    collection_handle: *mut hab_collection,
    mutator: *mut hab_mutator,
    bytes: usize,
) -> *mut c_void {
    guarded_ptr(|| {
        const CALL: &str = "hab_collection_alloc";
        // SAFETY: the caller's contract.
        let Ok(collection) = (unsafe { collection(collection_handle, CALL) }) else {
            return ptr::null_mut();
        };
        // SAFETY: the caller's contract.
        let Ok(handle) = (unsafe { handle(mutator, CALL) }) else {
            return ptr::null_mut();
        };
        let Some(MutatorState::Parked(parked)) = &handle.state else {
            fail(
                HAB_INVALID_ARGUMENT,
                format!("{CALL}: the mutator is running (park it before the collection)"),
            );
            return ptr::null_mut();
        };
        if !std::ptr::eq(Arc::as_ptr(parked.heap()), collection.heap()) {
            fail(
                HAB_INVALID_ARGUMENT,
                format!("{CALL}: the mutator belongs to another heap than the collection's"),
            );
            return ptr::null_mut();
        }
        match collection.alloc_for(parked.id(), bytes) {
            Ok(object) => object.as_ptr().cast(),
            Err(error) => {
                let status = match error {
                    AllocError::OutOfMemory { .. } => HAB_OUT_OF_MEMORY,
                    _ => HAB_INVALID_ARGUMENT,
                };
                fail(status, format!("{CALL}({bytes}): {error}"));
                ptr::null_mut()
            }
        }
    })
}

/// Ends the collection (installs the next range, lets the mutators run) and frees it.
///
/// # Safety
/// `collection` is NULL or live; not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn hab_collection_finish(
    collection_handle: *mut hab_collection,
) -> hab_status {
    guarded(|| {
        if collection_handle.is_null() {
            return fail(
                HAB_INVALID_ARGUMENT,
                "hab_collection_finish: NULL collection",
            );
        }
        // SAFETY: the caller's contract: a box from `hab_collection_begin`.
        drop(unsafe { Box::from_raw(collection_handle) });
        HAB_OK
    })
}
