//! Mutators: `hab_mutator`, its out-of-line allocation and poll, parking (`hab.h`,
//! "Mutators").

use std::cell::UnsafeCell;

use crate::prelude::*;

/// What a `hab_mutator` holds.
pub(crate) enum MutatorState {
    Running(Mutator),
    Parked(ParkedMutator),
}

/// A thread's mutator: `hab_mutator` in `hab.h`, whose public fields the inline fast path
/// and poll read: the TLAB's address, and the per-CPU LAB path.
#[repr(C)]
pub struct hab_mutator {
    tlab: *mut u8,
    /// The per-CPU LAB path: the slot of the CPU (or concurrency id) the thread last ran
    /// with, the address of the thread's `rseq_cs` field, the offset of the field the LABs are
    /// indexed by, that CPU (or id), the CPU count and the slot array. While the mutator has
    /// no such path, the inactive one ([`hab_mutator::publish_inactive`]).
    cpu_lab_slot: usize,
    rseq_cs_field: usize,
    rseq_index_offset: isize,
    cpu_lab_cpu: u32,
    cpu_lab_cpus: u32,
    cpu_lab_slots: usize,
    /// Where the inactive path's section stores its descriptor: this mutator's own word,
    /// written by its thread's inline `hab_alloc`, never read.
    inactive_rseq_cs: UnsafeCell<u64>,
    pub(crate) state: Option<MutatorState>,
}

/// `hab.h`'s `HAB_CPU_LAB_INACTIVE`: the `cpu_lab_cpu` of the inactive path.
pub const CPU_LAB_INACTIVE: u32 = 0x8000_0000;

/// The inactive path's slot: `top` 1 and `end` 0, so that `top + bytes > end` for every size
/// `hab_alloc` lets through (1 to 2^63 − 1): the section misses and never stores here.
static INACTIVE_SLOT: [usize; 2] = [1, 0];

impl hab_mutator {
    /// Publishes the fast path the mutator takes now for the inline `hab_alloc`: called after
    /// everything that may stop it or change its mode, on the mutator's own thread. The CPU
    /// (or concurrency id) is read from the thread's rseq area; if it changes, the inline
    /// section's check of it misses and the slow path publishes again.
    fn publish_path(&mut self) {
        let path = match &self.state {
            Some(MutatorState::Running(mutator)) => mutator.cpu_lab_path(),
            _ => None,
        };
        let Some(path) = path.filter(|_| cfg!(target_arch = "x86_64")) else {
            self.publish_inactive();
            return;
        };
        let cpu = rseq_index_field(path.rseq_index_offset);
        let index = cpu.min(path.cpus) as usize;
        self.cpu_lab_slot = path.slots_address + index * hab::CPU_LAB_SLOT_BYTES;
        self.rseq_cs_field =
            thread_pointer().wrapping_add_signed(path.rseq_area_offset) + hab::RSEQ_CS_OFFSET;
        self.rseq_index_offset = path.rseq_index_offset;
        self.cpu_lab_cpu = cpu;
        self.cpu_lab_cpus = path.cpus;
        self.cpu_lab_slots = path.slots_address;
    }

    /// The inactive path: the section stores its descriptor in this mutator's own word, reads
    /// the thread pointer's first word (`fs:0`, always mapped; its low half is compared with
    /// `CPU_LAB_INACTIVE`, and if it ever matched, the empty slot would still miss) and misses.
    fn publish_inactive(&mut self) {
        self.cpu_lab_slot = INACTIVE_SLOT.as_ptr() as usize;
        self.rseq_cs_field = self.inactive_rseq_cs.get() as usize;
        self.rseq_index_offset = 0;
        self.cpu_lab_cpu = CPU_LAB_INACTIVE;
        self.cpu_lab_cpus = 0;
        self.cpu_lab_slots = 0;
    }
}

/// The field the LABs are indexed by (`cpu_id_start` or `mm_cid`) of the calling thread's
/// rseq area, at `index_offset` from the thread pointer.
#[cfg(target_arch = "x86_64")]
pub(crate) fn rseq_index_field(index_offset: isize) -> u32 {
    let cpu: u32;
    // SAFETY: `index_offset` comes from the running mutator's `cpu_lab_path()`: a `u32`
    // field of the calling thread's rseq area.
    unsafe {
        std::arch::asm!(
            "mov {cpu:e}, dword ptr fs:[{index}]",
            index = in(reg) index_offset,
            cpu = out(reg) cpu,
            options(nostack, readonly, preserves_flags),
        );
    }
    cpu
}

/// Never called: no per-CPU LAB path is published off x86_64.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn rseq_index_field(_index_offset: isize) -> u32 {
    0
}

/// The calling thread's thread pointer (the `fs` base), which the x86_64 TLS ABI stores in
/// the first word it points at.
#[cfg(target_arch = "x86_64")]
fn thread_pointer() -> usize {
    let pointer: usize;
    // SAFETY: `fs:0` is the thread control block's self pointer on x86_64 Linux, always mapped.
    unsafe {
        std::arch::asm!(
            "mov {pointer}, qword ptr fs:[0]",
            pointer = out(reg) pointer,
            options(nostack, readonly, preserves_flags),
        );
    }
    pointer
}

/// Never called: no per-CPU LAB path is published off x86_64.
#[cfg(not(target_arch = "x86_64"))]
fn thread_pointer() -> usize {
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
        let Ok(heap) = (unsafe { live(heap, "hab_attach", "heap") }) else {
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
            rseq_cs_field: 0,
            rseq_index_offset: 0,
            cpu_lab_cpu: CPU_LAB_INACTIVE,
            cpu_lab_cpus: 0,
            cpu_lab_slots: 0,
            inactive_rseq_cs: UnsafeCell::new(0),
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
pub(crate) unsafe fn handle<'a>(
    mutator: *mut hab_mutator,
    call: &str,
) -> Result<&'a mut hab_mutator, hab_status> {
    // SAFETY: the caller's contract.
    unsafe { live_mut(mutator, call, "mutator") }
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
pub(crate) unsafe fn park(mutator: *mut hab_mutator, call: &str) -> hab_status {
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
pub(crate) unsafe fn unpark(mutator: *mut hab_mutator, call: &str) -> hab_status {
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
