//! `libhab`: Hab's C ABI. The declarations, documented, are in `include/hab.h`; this file
//! implements the functions it declares that are not inline there.
//!
//! Conventions: every function that can fail returns a [`hab_status`] (or NULL) and leaves a
//! message for [`hab_last_error`] on the calling thread; NULL and out-of-range arguments are
//! `HAB_INVALID_ARGUMENT`; no Rust panic crosses the boundary (one is caught and reported as
//! `HAB_INTERNAL_ERROR`). Handles are boxed, so their addresses are stable.

#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hab::{
    AllocError, Collection, CollectionError, CpuIdSource, Heap, HeapConfig, HeapConfigBuilder,
    LevelsThread, MiddleLevels, Mode, Mutator, ObjectModel, ParkedMutator, TlabPolicy, Upstream,
    ZeroMemory,
};

/// The ABI version `hab.h` declares as `HAB_ABI_VERSION`.
pub const HAB_ABI_VERSION: u32 = 2;

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
const LAST_ERROR_BYTES: usize = 2048;

thread_local! {
    /// The message of the calling thread's last failed call, NUL-terminated. A buffer with no
    /// destructor, so that it is there in every call, also from a `pthread_key_create`
    /// destructor (those run after the thread-locals that have destructors are torn down).
    static LAST_ERROR: RefCell<[u8; LAST_ERROR_BYTES]> = const { RefCell::new([0; LAST_ERROR_BYTES]) };
    /// The status of the calling thread's last failed call.
    static LAST_STATUS: std::cell::Cell<hab_status> = const { std::cell::Cell::new(hab_status::HAB_OK) };
}

/// Records `status` and `message` as the calling thread's last error and returns `status`.
fn fail(status: hab_status, message: impl Into<String>) -> hab_status {
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
fn catch<R>(body: impl FnOnce() -> R) -> std::thread::Result<R> {
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
fn guarded(body: impl FnOnce() -> hab_status) -> hab_status {
    match catch(body) {
        Ok(status) => status,
        Err(panic) => fail(HAB_INTERNAL_ERROR, panic_message(&*panic)),
    }
}

/// Runs `body`, which returns a pointer (NULL on failure, with the error recorded); a panic
/// becomes NULL and `HAB_INTERNAL_ERROR`'s message.
fn guarded_ptr<T>(body: impl FnOnce() -> *mut T) -> *mut T {
    match catch(body) {
        Ok(pointer) => pointer,
        Err(panic) => {
            fail(HAB_INTERNAL_ERROR, panic_message(&*panic));
            ptr::null_mut()
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
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

/// A configuration being built: `hab_config` in `hab.h`.
pub struct hab_config {
    builder: HeapConfigBuilder,
}

/// A new configuration with every default.
#[no_mangle]
pub extern "C" fn hab_config_new() -> *mut hab_config {
    Box::into_raw(Box::new(hab_config {
        builder: HeapConfig::builder(),
    }))
}

/// Frees a configuration (NULL: nothing).
///
/// # Safety
/// `config` is NULL or from `hab_config_new`, not freed before.
#[no_mangle]
pub unsafe extern "C" fn hab_config_free(config: *mut hab_config) {
    if !config.is_null() {
        // SAFETY: the caller's contract: a box from `hab_config_new`.
        drop(unsafe { Box::from_raw(config) });
    }
}

/// Reads a C string argument; `None` for NULL or text that is not UTF-8.
///
/// # Safety
/// `text` is NULL or a NUL-terminated string.
unsafe fn text<'a>(text: *const c_char) -> Option<&'a str> {
    if text.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(text) }.to_str().ok()
}

/// Sets `key` to `value`, with the keys and values of the builder and `hab run`.
///
/// # Safety
/// `config` is NULL or a live configuration; `key` and `value` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn hab_config_set(
    config: *mut hab_config,
    key: *const c_char,
    value: *const c_char,
) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let (Some(config), Some(key), Some(value)) =
            (unsafe { config.as_mut() }, unsafe { text(key) }, unsafe {
                text(value)
            })
        else {
            return fail(
                HAB_INVALID_ARGUMENT,
                "hab_config_set: NULL configuration, key or value (or not UTF-8)",
            );
        };
        if let Err(problem) = check(key, value) {
            return fail(HAB_CONFIG_ERROR, format!("{key} = {value:?}: {problem}"));
        }
        config.builder = apply(std::mem::take(&mut config.builder), key, value);
        HAB_OK
    })
}

/// Whether `value` is a value of `key`: what is wrong if not.
fn check(key: &str, value: &str) -> Result<(), String> {
    fn parses<T: std::str::FromStr>(value: &str) -> Result<(), String>
    where
        T::Err: std::fmt::Display,
    {
        value.parse::<T>().map(|_| ()).map_err(|e| e.to_string())
    }
    match key {
        "capacity" | "min_tlab" | "max_tlab" => parses::<hab::ByteSize>(value),
        "mode" => parses::<Mode>(value),
        "tlab" => parses::<TlabPolicy>(value),
        "zero" => parses::<ZeroMemory>(value),
        "middle" => hab::MiddleLevelSpec::parse_list(value)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        "alignment" | "refill_waste_fraction" => parses::<usize>(value),
        "waste_target_percent" => parses::<f64>(value),
        "pretouch" => parses::<bool>(value),
        "cpu_id" => parses::<CpuIdSource>(value),
        _ => Err(
            "unknown key (capacity, mode, middle, tlab, min_tlab, max_tlab, zero, \
                  alignment, refill_waste_fraction, waste_target_percent, pretouch, cpu_id)"
                .into(),
        ),
    }
}

/// The builder with `key` set to `value`, which [`check`] accepted.
fn apply(builder: HeapConfigBuilder, key: &str, value: &str) -> HeapConfigBuilder {
    let parsed = "checked by `check`";
    match key {
        "capacity" => builder.capacity(value),
        "min_tlab" => builder.min_tlab(value),
        "max_tlab" => builder.max_tlab(value),
        "mode" => builder.mode(value.parse().expect(parsed)),
        "tlab" => builder.tlab(value.parse().expect(parsed)),
        "zero" => builder.zero(value.parse().expect(parsed)),
        "middle" => builder.middle(value),
        "alignment" => builder.alignment(value.parse().expect(parsed)),
        "refill_waste_fraction" => builder.refill_waste_fraction(value.parse().expect(parsed)),
        "waste_target_percent" => builder.waste_target_percent(value.parse().expect(parsed)),
        "pretouch" => builder.pretouch(value.parse().expect(parsed)),
        _ => builder.cpu_id(value.parse().expect(parsed)),
    }
}

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
struct CModel {
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
    heap: Arc<Heap>,
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
        let Some(heap) = (unsafe { heap.as_ref() }) else {
            return fail(HAB_INVALID_ARGUMENT, "hab_heap_range: NULL heap");
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
        let Some(heap) = (unsafe { heap.as_ref() }) else {
            return fail(HAB_INVALID_ARGUMENT, "hab_request_collection: NULL heap");
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
        let Some(heap) = (unsafe { heap.as_ref() }) else {
            return fail(
                HAB_INVALID_ARGUMENT,
                "hab_wait_for_collection_request: NULL heap",
            );
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
    let Some(heap) = (unsafe { heap.as_ref() }) else {
        fail(HAB_INVALID_ARGUMENT, "hab_stats_json: NULL heap");
        return 0;
    };
    // SAFETY: the caller's contract.
    unsafe { write_json(&heap.heap.stats(), buffer, len) }
}

/// Writes `value` as JSON, NUL-terminated, into `buffer` when its `len` bytes hold it; returns
/// the JSON's length (0 on error, recorded).
///
/// # Safety
/// `buffer` is NULL or writable for `len` bytes.
unsafe fn write_json(value: &impl serde::Serialize, buffer: *mut c_char, len: usize) -> usize {
    let mut needed = 0;
    guarded(|| {
        let json = match serde_json::to_string(value) {
            Ok(json) => json,
            Err(error) => return fail(HAB_INTERNAL_ERROR, error.to_string()),
        };
        needed = json.len();
        if !buffer.is_null() && len > json.len() {
            // SAFETY: `buffer` holds `len > json.len()` bytes (the caller's contract).
            unsafe {
                ptr::copy_nonoverlapping(json.as_ptr(), buffer.cast(), json.len());
                *buffer.add(json.len()) = 0;
            }
        }
        HAB_OK
    });
    needed
}

/// What a `hab_mutator` holds.
enum MutatorState {
    Running(Mutator),
    Parked(ParkedMutator),
}

/// A thread's mutator: `hab_mutator` in `hab.h`, whose public fields the inline fast path
/// and poll read: the TLAB's address, and the per-CPU LAB path while there is one.
#[repr(C)]
pub struct hab_mutator {
    tlab: *mut u8,
    /// The per-CPU LAB path (all 0 while the mutator allocates in its TLAB): the slot of the
    /// CPU the thread last ran on, the thread's rseq area, that CPU, and the slot array.
    cpu_lab_slot: usize,
    rseq_area_offset: isize,
    cpu_lab_cpu: u32,
    cpu_lab_cpus: u32,
    cpu_lab_slots: usize,
    state: Option<MutatorState>,
}

impl hab_mutator {
    /// Publishes the fast path the mutator takes now for the inline `hab_alloc`: called after
    /// everything that may stop it or change its mode. The CPU is read from the thread's rseq
    /// area; if the thread moves on, the inline section's check of it misses and the slow
    /// path publishes again.
    fn publish_path(&mut self) {
        let path = match &self.state {
            Some(MutatorState::Running(mutator)) => mutator.cpu_lab_path(),
            _ => None,
        };
        let Some(path) = path.filter(|_| cfg!(target_arch = "x86_64")) else {
            self.cpu_lab_slot = 0;
            self.rseq_area_offset = 0;
            self.cpu_lab_cpu = 0;
            self.cpu_lab_cpus = 0;
            self.cpu_lab_slots = 0;
            return;
        };
        let cpu = rseq_cpu_id_start(path.rseq_area_offset);
        let index = cpu.min(path.cpus) as usize;
        self.cpu_lab_slot = path.slots_address + index * hab::CPU_LAB_SLOT_BYTES;
        self.rseq_area_offset = path.rseq_area_offset;
        self.cpu_lab_cpu = cpu;
        self.cpu_lab_cpus = path.cpus;
        self.cpu_lab_slots = path.slots_address;
    }
}

/// `cpu_id_start` of the calling thread's rseq area, at `area_offset` from the thread pointer.
#[cfg(target_arch = "x86_64")]
fn rseq_cpu_id_start(area_offset: isize) -> u32 {
    let cpu: u32;
    // SAFETY: `area_offset` comes from the running mutator's `cpu_lab_path()`: the calling
    // thread's rseq area, whose first field is the `u32` `cpu_id_start`.
    unsafe {
        std::arch::asm!(
            "mov {cpu:e}, dword ptr fs:[{area}]",
            area = in(reg) area_offset,
            cpu = out(reg) cpu,
            options(nostack, readonly, preserves_flags),
        );
    }
    cpu
}

/// Never called: no per-CPU LAB path is published off x86_64.
#[cfg(not(target_arch = "x86_64"))]
fn rseq_cpu_id_start(_area_offset: isize) -> u32 {
    0
}

/// Attaches the calling thread to `heap`: a running mutator, NULL on error.
///
/// # Safety
/// `heap` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_attach(heap: *mut hab_heap) -> *mut hab_mutator {
    guarded_ptr(|| {
        // SAFETY: the caller's contract.
        let Some(heap) = (unsafe { heap.as_ref() }) else {
            fail(HAB_INVALID_ARGUMENT, "hab_attach: NULL heap");
            return ptr::null_mut();
        };
        if heap.heap.is_collecting_thread() {
            fail(
                HAB_INVALID_ARGUMENT,
                format!("hab_attach: {}", CollectionError::AlreadyCollecting),
            );
            return ptr::null_mut();
        }
        let mutator = heap.heap.attach();
        let mut handle = Box::new(hab_mutator {
            tlab: mutator.tlab_address().as_ptr(),
            cpu_lab_slot: 0,
            rseq_area_offset: 0,
            cpu_lab_cpu: 0,
            cpu_lab_cpus: 0,
            cpu_lab_slots: 0,
            state: Some(MutatorState::Running(mutator)),
        });
        handle.publish_path();
        Box::into_raw(handle)
    })
}

/// Detaches and frees a mutator (NULL: nothing).
///
/// # Safety
/// `mutator` is NULL or from `hab_attach`, not detached before, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn hab_detach(mutator: *mut hab_mutator) {
    if !mutator.is_null() {
        let _ = guarded(|| {
            // SAFETY: the caller's contract.
            drop(unsafe { Box::from_raw(mutator) });
            HAB_OK
        });
    }
}

impl hab_mutator {
    /// The running mutator, or the recorded error naming `call`.
    fn running(&mut self, call: &str) -> Result<&mut Mutator, hab_status> {
        match &mut self.state {
            Some(MutatorState::Running(running)) => Ok(running),
            _ => Err(fail(
                HAB_INVALID_ARGUMENT,
                format!("{call}: the mutator is parked (hab_unpark it first)"),
            )),
        }
    }
}

/// The handle behind `mutator`, or the recorded error naming `call`.
///
/// # Safety
/// `mutator` is NULL or live and used by the calling thread only.
unsafe fn handle<'a>(
    mutator: *mut hab_mutator,
    call: &str,
) -> Result<&'a mut hab_mutator, hab_status> {
    // SAFETY: the caller's contract.
    unsafe { mutator.as_mut() }
        .ok_or_else(|| fail(HAB_INVALID_ARGUMENT, format!("{call}: NULL mutator")))
}

/// The slow path of `hab_alloc`: allocates `bytes` (a positive multiple of the heap's
/// alignment), stopping at a requested safepoint first. NULL on failure.
///
/// # Safety
/// `mutator` is NULL or live and the calling thread's.
#[no_mangle]
pub unsafe extern "C" fn hab_alloc_slow(mutator: *mut hab_mutator, bytes: usize) -> *mut c_void {
    guarded_ptr(|| {
        // SAFETY: the caller's contract.
        let Ok(handle) = (unsafe { handle(mutator, "hab_alloc") }) else {
            return ptr::null_mut();
        };
        let Ok(running) = handle.running("hab_alloc") else {
            return ptr::null_mut();
        };
        let result = running.alloc(bytes);
        handle.publish_path();
        match result {
            Ok(object) => object.as_ptr().cast(),
            Err(error) => {
                let status = match error {
                    hab::AllocError::OutOfMemory { .. } => HAB_OUT_OF_MEMORY,
                    _ => HAB_INVALID_ARGUMENT,
                };
                fail(status, format!("hab_alloc({bytes}): {error}"));
                ptr::null_mut()
            }
        }
    })
}

/// The slow path of `hab_poll`: stops at a requested safepoint; the collections slept through.
///
/// # Safety
/// `mutator` is NULL or live and the calling thread's.
#[no_mangle]
pub unsafe extern "C" fn hab_poll_slow(mutator: *mut hab_mutator) -> u64 {
    let mut slept = 0;
    guarded(|| {
        // SAFETY: the caller's contract.
        let handle = match unsafe { handle(mutator, "hab_poll") } {
            Ok(handle) => handle,
            Err(status) => return status,
        };
        match handle.running("hab_poll") {
            Ok(running) => slept = running.poll(),
            Err(status) => return status,
        }
        handle.publish_path();
        HAB_OK
    });
    slept
}

/// Parks a running mutator (a safepoint, or a blocking region).
///
/// # Safety
/// `mutator` is NULL or live and the calling thread's.
#[no_mangle]
pub unsafe extern "C" fn hab_park(mutator: *mut hab_mutator) -> hab_status {
    // SAFETY: the caller's contract.
    unsafe { park(mutator, "hab_park") }
}

/// Unparks a parked mutator, waiting for a collection in progress to end.
///
/// # Safety
/// `mutator` is NULL or live and the calling thread's.
#[no_mangle]
pub unsafe extern "C" fn hab_unpark(mutator: *mut hab_mutator) -> hab_status {
    // SAFETY: the caller's contract.
    unsafe { unpark(mutator, "hab_unpark") }
}

/// Parks a running mutator around a blocking call (`hab_park` under the name of its use).
///
/// # Safety
/// `mutator` is NULL or live and the calling thread's.
#[no_mangle]
pub unsafe extern "C" fn hab_blocking_begin(mutator: *mut hab_mutator) -> hab_status {
    // SAFETY: the caller's contract.
    unsafe { park(mutator, "hab_blocking_begin") }
}

/// Unparks a mutator after a blocking call (`hab_unpark` under the name of its use).
///
/// # Safety
/// `mutator` is NULL or live and the calling thread's.
#[no_mangle]
pub unsafe extern "C" fn hab_blocking_end(mutator: *mut hab_mutator) -> hab_status {
    // SAFETY: the caller's contract.
    unsafe { unpark(mutator, "hab_blocking_end") }
}

/// Parks the mutator behind `mutator`; errors name `call`.
///
/// # Safety
/// `mutator` is NULL or live and the calling thread's.
unsafe fn park(mutator: *mut hab_mutator, call: &str) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let handle = match unsafe { handle(mutator, call) } {
            Ok(handle) => handle,
            Err(status) => return status,
        };
        let status = match handle.state.take() {
            Some(MutatorState::Running(running)) => {
                handle.state = Some(MutatorState::Parked(running.park()));
                HAB_OK
            }
            other => {
                handle.state = other;
                fail(
                    HAB_INVALID_ARGUMENT,
                    format!("{call}: the mutator is already parked"),
                )
            }
        };
        handle.publish_path();
        status
    })
}

/// Unparks the mutator behind `mutator`; errors name `call`.
///
/// # Safety
/// `mutator` is NULL or live and the calling thread's.
unsafe fn unpark(mutator: *mut hab_mutator, call: &str) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let handle = match unsafe { handle(mutator, call) } {
            Ok(handle) => handle,
            Err(status) => return status,
        };
        let status = match handle.state.take() {
            Some(MutatorState::Parked(parked)) if parked.heap().is_collecting_thread() => {
                handle.state = Some(MutatorState::Parked(parked));
                fail(
                    HAB_INVALID_ARGUMENT,
                    format!("{call}: {}", CollectionError::AlreadyCollecting),
                )
            }
            Some(MutatorState::Parked(parked)) => {
                handle.state = Some(MutatorState::Running(parked.unpark()));
                HAB_OK
            }
            other => {
                handle.state = other;
                fail(
                    HAB_INVALID_ARGUMENT,
                    format!("{call}: the mutator is running"),
                )
            }
        };
        handle.publish_path();
        status
    })
}

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
        let Some(heap) = (unsafe { heap.as_ref() }) else {
            return fail(HAB_INVALID_ARGUMENT, "hab_collection_begin: NULL heap");
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
unsafe fn collection<'a>(
    collection: *mut hab_collection,
    call: &str,
) -> Result<&'a mut Collection<'static>, hab_status> {
    // SAFETY: the caller's contract.
    match unsafe { collection.as_mut() }.and_then(|c| c.collection.as_mut()) {
        Some(collection) => Ok(collection),
        None => Err(fail(
            HAB_INVALID_ARGUMENT,
            format!("{call}: NULL collection"),
        )),
    }
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
/// collection left no room.
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
    /// Passed to both callbacks.
    pub user: *mut c_void,
}

/// The callbacks, checked non-NULL, as Hab's upstream.
struct CUpstream {
    carve: unsafe extern "C" fn(*mut c_void, usize, usize, *mut usize) -> usize,
    write_filler: unsafe extern "C" fn(*mut c_void, usize, usize),
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
}

/// Middle levels: `hab_levels` in `hab.h`. `broken` is set when the upstream broke its
/// contract; every later call then fails, since a refill may have stopped half-way.
pub struct hab_levels {
    levels: Arc<MiddleLevels>,
    broken: Arc<AtomicBool>,
}

/// One thread's handle: `hab_levels_thread` in `hab.h`.
pub struct hab_levels_thread {
    thread: LevelsThread,
    broken: Arc<AtomicBool>,
}

const BROKEN_UPSTREAM: &str =
    "the levels are unusable: their upstream broke its contract earlier (see that error)";

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
        let Some(levels) = (unsafe { levels.as_ref() }) else {
            fail(HAB_INVALID_ARGUMENT, "hab_levels_thread_new: NULL levels");
            return ptr::null_mut();
        };
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
        let Some(handle) = (unsafe { thread.as_mut() }) else {
            return fail(HAB_INVALID_ARGUMENT, "hab_levels_carve_tlab: NULL thread");
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

/// Empties every buffer of the levels, with fillers over their tails.
///
/// # Safety
/// `levels` is NULL or live; no thread carves meanwhile, and no other `retire_all` runs.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_retire_all(levels: *mut hab_levels) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let Some(levels) = (unsafe { levels.as_ref() }) else {
            return fail(HAB_INVALID_ARGUMENT, "hab_levels_retire_all: NULL levels");
        };
        if levels.broken.load(Ordering::Acquire) {
            return fail(HAB_INTERNAL_ERROR, BROKEN_UPSTREAM);
        }
        // SAFETY: no thread carves and no other retire runs (the caller's contract).
        unsafe { levels.levels.retire_all() };
        HAB_OK
    })
}

/// The levels' statistics as JSON, as `hab_stats_json` writes.
///
/// # Safety
/// `levels` is NULL or live; `buffer` NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_stats_json(
    levels: *mut hab_levels,
    buffer: *mut c_char,
    len: usize,
) -> usize {
    // SAFETY: the caller's contract.
    let Some(levels) = (unsafe { levels.as_ref() }) else {
        fail(HAB_INVALID_ARGUMENT, "hab_levels_stats_json: NULL levels");
        return 0;
    };
    let mut stats = Vec::new();
    if guarded(|| {
        stats = levels.levels.stats();
        HAB_OK
    }) != HAB_OK
    {
        return 0;
    }
    let stats: Vec<_> = stats
        .into_iter()
        .map(|(level, stats)| serde_json::json!({ "level": level.name(), "stats": stats }))
        .collect();
    // SAFETY: the caller's contract.
    unsafe { write_json(&serde_json::Value::from(stats), buffer, len) }
}

/// The largest TLAB the levels hand out (the `max_tlab_bytes` given, or the lowest level's
/// buffer where that was 0); 0 for NULL levels.
///
/// # Safety
/// `levels` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_max_tlab_bytes(levels: *mut hab_levels) -> usize {
    // SAFETY: the caller's contract.
    match unsafe { levels.as_ref() } {
        Some(levels) => levels.levels.max_tlab_bytes(),
        None => {
            fail(
                HAB_INVALID_ARGUMENT,
                "hab_levels_max_tlab_bytes: NULL levels",
            );
            0
        }
    }
}

/// The most memory the levels' buffers hold at once (each level's buffer times its domains,
/// summed); 0 for NULL levels.
///
/// # Safety
/// `levels` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_buffered_bytes(levels: *mut hab_levels) -> usize {
    // SAFETY: the caller's contract.
    match unsafe { levels.as_ref() } {
        Some(levels) => levels.levels.buffered_bytes(),
        None => {
            fail(
                HAB_INVALID_ARGUMENT,
                "hab_levels_buffered_bytes: NULL levels",
            );
            0
        }
    }
}

/// TLABs carved straight from the upstream, every level's buffers being busy or too small
/// (counted by no level); 0 for NULL levels.
///
/// # Safety
/// `levels` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_tlabs_past_levels(levels: *mut hab_levels) -> u64 {
    // SAFETY: the caller's contract.
    let Some(levels) = (unsafe { levels.as_ref() }) else {
        fail(
            HAB_INVALID_ARGUMENT,
            "hab_levels_tlabs_past_levels: NULL levels",
        );
        return 0;
    };
    let mut count = 0;
    guarded(|| {
        count = levels.levels.tlabs_past_levels();
        HAB_OK
    });
    count
}

/// One level's figures: `hab_level_stats` in `hab.h` (what `hab_levels_stats` fills).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct hab_level_stats {
    /// The level's name (`cpu`, `core`, `llc`, `package`, `node`): a static string.
    pub level: *const c_char,
    /// Chunks the level handed out: TLABs (lowest level) or buffers of the level below.
    pub allocs: u64,
    /// Those served by a domain other than the thread's.
    pub foreign_allocs: u64,
    /// Buffers of this level claimed for a refill.
    pub refills: u64,
    /// Free bytes of this level's buffers retired (as fillers) at refills and collections.
    pub waste_bytes: u64,
    /// Restartable sections that aborted and restarted.
    pub rseq_aborts: u64,
    /// Requests of a restartable level that took the compare-and-swap path.
    pub rseq_fallbacks: u64,
    /// Chunks a refill could not install and kept for later refills.
    pub sidelined: u64,
    /// Refills served by a sidelined chunk.
    pub sideline_reused: u64,
    /// Of `rseq_fallbacks`, requests from a CPU number beyond the per-CPU array.
    pub out_of_range_cpus: u64,
}

// Every figure of `hab::LevelStats` (all `u64`) has its field here: a statistic added there
// fails to compile until it is added here and in `hab.h` (which `tests/header.rs` checks).
const _: () = assert!(
    std::mem::size_of::<hab_level_stats>()
        == std::mem::size_of::<*const c_char>() + std::mem::size_of::<hab::LevelStats>()
);

/// Writes each level's figures, lowest first, into `out` (up to `capacity` of them); returns
/// the number of levels (0 on error, with the reason in `hab_last_error`).
///
/// # Safety
/// `levels` is NULL or live; `out` NULL or writable for `capacity` entries.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_stats(
    levels: *mut hab_levels,
    out: *mut hab_level_stats,
    capacity: usize,
) -> usize {
    // SAFETY: the caller's contract.
    let Some(levels) = (unsafe { levels.as_ref() }) else {
        fail(HAB_INVALID_ARGUMENT, "hab_levels_stats: NULL levels");
        return 0;
    };
    let mut count = 0;
    guarded(|| {
        let stats = levels.levels.stats();
        count = stats.len();
        for (i, (level, figures)) in stats.into_iter().take(capacity).enumerate() {
            if out.is_null() {
                break;
            }
            let entry = hab_level_stats {
                level: level.c_name().as_ptr(),
                allocs: figures.allocs,
                foreign_allocs: figures.foreign_allocs,
                refills: figures.refills,
                waste_bytes: figures.waste_bytes,
                rseq_aborts: figures.rseq_aborts,
                rseq_fallbacks: figures.rseq_fallbacks,
                sidelined: figures.sidelined,
                sideline_reused: figures.sideline_reused,
                out_of_range_cpus: figures.out_of_range_cpus,
            };
            // SAFETY: `i < capacity`, and `out` holds `capacity` entries (the caller's
            // contract).
            unsafe { out.add(i).write(entry) };
        }
        HAB_OK
    });
    count
}
