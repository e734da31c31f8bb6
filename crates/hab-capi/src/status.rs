//! What every entry point shares: the statuses and the calling thread's last error (the
//! first section of `hab.h`), panics caught at the boundary, and the checks of arguments.

use crate::prelude::*;

/// Why a call failed (`hab_status` in `hab.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum hab_status {
    /// It did not.
    HAB_OK = 0,
    /// A NULL or out-of-range argument, or a handle in the wrong state.
    HAB_INVALID_ARGUMENT = 1,
    /// A configuration key or value, or a combination of values, was rejected.
    HAB_CONFIG_ERROR = 2,
    /// The heap is full: collect and retry.
    HAB_OUT_OF_MEMORY = 3,
    /// The mutators did not stop within the timeout.
    HAB_TIMEOUT = 4,
    /// The operating system refused the heap's memory.
    HAB_SYSTEM_ERROR = 5,
    /// The heap walk met something that is not an object.
    HAB_VERIFY_ERROR = 6,
    /// A bug in Hab (a caught panic); the message says where.
    HAB_INTERNAL_ERROR = 7,
}
use hab_status::*;

/// Bytes kept of the last error's message, its NUL included (a longer one is cut there).
pub(crate) const LAST_ERROR_BYTES: usize = 2048;

thread_local! {
    /// The message of the calling thread's last failed call, NUL-terminated. A buffer with no
    /// destructor, so that it is there in every call, also from a `pthread_key_create`
    /// destructor (those run after the thread-locals that have destructors are torn down).
    static LAST_ERROR: RefCell<[u8; LAST_ERROR_BYTES]> = const { RefCell::new([0; LAST_ERROR_BYTES]) };
    /// The status of the calling thread's last failed call.
    static LAST_STATUS: std::cell::Cell<hab_status> = const { std::cell::Cell::new(hab_status::HAB_OK) };
}

/// Records `status` and `message` as the calling thread's last error and returns `status`.
pub(crate) fn fail(status: hab_status, message: impl Into<String>) -> hab_status {
    let message = message.into().replace('\0', " ");
    let mut kept = message.len().min(LAST_ERROR_BYTES - 1);
    while !message.is_char_boundary(kept) {
        kept -= 1;
    }
    LAST_ERROR.with(|last| {
        let mut last = last.borrow_mut();
        last[..kept].copy_from_slice(&message.as_bytes()[..kept]);
        last[kept] = 0;
    });
    LAST_STATUS.with(|last| last.set(status));
    status
}

thread_local! {
    /// Whether the calling thread is inside a call of this ABI (whose panics become statuses).
    static IN_CALL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `body` with panics caught: they become the call's status and message, so the panic
/// hook stays quiet for them (a hook chained in front of the process's, once) and speaks for
/// every other panic as before.
pub(crate) fn catch<R>(body: impl FnOnce() -> R) -> std::thread::Result<R> {
    static QUIET_HOOK: std::sync::Once = std::sync::Once::new();
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_CALL.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
    let outer = IN_CALL.with(|in_call| in_call.replace(true));
    let result = catch_unwind(AssertUnwindSafe(body));
    IN_CALL.with(|in_call| in_call.set(outer));
    result
}

/// Runs `body`, turning a panic into `HAB_INTERNAL_ERROR`.
pub(crate) fn guarded(body: impl FnOnce() -> hab_status) -> hab_status {
    match catch(body) {
        Ok(status) => status,
        Err(panic) => fail(HAB_INTERNAL_ERROR, panic_message(&*panic)),
    }
}

/// Runs `body`, which returns a pointer (NULL on failure, with the error recorded); a panic
/// becomes NULL and `HAB_INTERNAL_ERROR`'s message.
pub(crate) fn guarded_ptr<T>(body: impl FnOnce() -> *mut T) -> *mut T {
    match catch(body) {
        Ok(pointer) => pointer,
        Err(panic) => {
            fail(HAB_INTERNAL_ERROR, panic_message(&*panic));
            ptr::null_mut()
        }
    }
}

pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    format!("internal error (a panic in Hab): {text}")
}

/// `HAB_ABI_VERSION` of the library, for a runtime to refuse a mismatched one.
#[no_mangle]
pub extern "C" fn hab_abi_version() -> u32 {
    HAB_ABI_VERSION
}

/// The status of the calling thread's last failed call (`HAB_OK` if none).
#[no_mangle]
pub extern "C" fn hab_last_status() -> hab_status {
    LAST_STATUS.with(std::cell::Cell::get)
}

/// The message of the calling thread's last failed call ("" if none). Valid until the thread's
/// next failed call.
#[no_mangle]
pub extern "C" fn hab_last_error() -> *const c_char {
    LAST_ERROR.with(|last| last.as_ptr().cast::<c_char>().cast_const())
}

/// Reads a C string argument; `None` for NULL or text that is not UTF-8.
///
/// # Safety
/// `text` is NULL or a NUL-terminated string.
pub(crate) unsafe fn text<'a>(text: *const c_char) -> Option<&'a str> {
    if text.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(text) }.to_str().ok()
}

/// Writes `value` as JSON, NUL-terminated, into `buffer` when its `len` bytes hold it; returns
/// the JSON's length (0 on error, recorded).
///
/// # Safety
/// `buffer` is NULL or writable for `len` bytes.
pub(crate) unsafe fn write_json(
    value: &impl serde::Serialize,
    buffer: *mut c_char,
    len: usize,
) -> usize {
    match serde_json::to_string(value) {
        // SAFETY: the caller's contract.
        Ok(json) => unsafe { write_text(&json, buffer, len) },
        Err(error) => {
            fail(HAB_INTERNAL_ERROR, error.to_string());
            0
        }
    }
}

/// Writes `text`, NUL-terminated, into `buffer` when its `len` bytes hold it; returns the
/// text's length either way (as `snprintf` does, less the terminator).
///
/// # Safety
/// `buffer` is NULL or writable for `len` bytes.
pub(crate) unsafe fn write_text(text: &str, buffer: *mut c_char, len: usize) -> usize {
    if !buffer.is_null() && len > text.len() {
        // SAFETY: `buffer` holds `len > text.len()` bytes (the caller's contract).
        unsafe {
            ptr::copy_nonoverlapping(text.as_ptr(), buffer.cast(), text.len());
            *buffer.add(text.len()) = 0;
        }
    }
    text.len()
}

/// A handle argument of `call`, checked: a shared reference to what it points to, or
/// `HAB_INVALID_ARGUMENT` recorded as "`call`: NULL `what`". Every entry point checks its
/// handles here.
///
/// # Safety
/// `pointer` is NULL or points to a live `T`, not written by another thread during `'a`.
pub(crate) unsafe fn live<'a, T>(
    pointer: *const T,
    call: &str,
    what: &str,
) -> Result<&'a T, hab_status> {
    // SAFETY: the caller's contract.
    unsafe { pointer.as_ref() }.ok_or_else(|| null_argument(call, what))
}

/// [`live`] for a handle the call changes.
///
/// # Safety
/// `pointer` is NULL or points to a live `T` that only the calling thread uses during `'a`.
pub(crate) unsafe fn live_mut<'a, T>(
    pointer: *mut T,
    call: &str,
    what: &str,
) -> Result<&'a mut T, hab_status> {
    // SAFETY: the caller's contract.
    unsafe { pointer.as_mut() }.ok_or_else(|| null_argument(call, what))
}

/// Records a NULL argument `what` of `call`.
#[cold]
pub(crate) fn null_argument(call: &str, what: &str) -> hab_status {
    fail(HAB_INVALID_ARGUMENT, format!("{call}: NULL {what}"))
}
