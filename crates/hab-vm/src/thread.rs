//! A thread's handle on the VM: allocation, handles (the roots the collector updates), field
//! access, safepoints and blocking regions.
//!
//! Workload code never holds an address: every object it can reach is a [`Local`], an index
//! into the thread's root stack, which the collector rewrites when it moves objects. Handles
//! made inside [`VmThread::scope`] are dropped when the scope ends.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use hab::{AllocError, Mutator};

use crate::object::{
    header_word, ref_fields, write_header_word, Header, Kind, Shape, MAX_AUX, MAX_SIZE_WORDS,
    WORD_BYTES,
};
use crate::vm::{GcCause, ThreadRoots, Vm, VmError};

/// A handle: a slot of the thread's root stack holding an object's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Local(u32);

/// A slot of the VM's global roots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Global(usize);

/// Collections in a row after which a thread that still cannot allocate gives up: other
/// threads took the whole space every time (each collection freed enough, see
/// [`MIN_FREE_FRACTION`]).
const MAX_FAILED_COLLECTIONS: u32 = 10_000;
/// A collection that leaves less than 1/this of the space free means the live data does not
/// fit: the run stops rather than collect again and again for little (like HotSpot's GC
/// overhead limit).
const MIN_FREE_FRACTION: usize = 64;

impl Vm {
    /// A thread's handle on the VM (attach once per thread).
    pub fn attach(self: &Arc<Self>) -> VmThread {
        let (mutator, roots) = self.register_thread();
        VmThread::new(self.clone(), mutator, roots)
    }
}

/// One thread's handle on a [`Vm`]. Dropping it detaches the thread.
pub struct VmThread {
    vm: Arc<Vm>,
    /// The thread's Hab mutator: one allocation call whatever the heap's mode.
    mutator: Mutator,
    roots: Arc<ThreadRoots>,
}

impl VmThread {
    pub(crate) fn new(vm: Arc<Vm>, mutator: Mutator, roots: Arc<ThreadRoots>) -> Self {
        VmThread { vm, mutator, roots }
    }

    /// The VM.
    pub fn vm(&self) -> &Arc<Vm> {
        &self.vm
    }

    fn slots(&mut self) -> &mut Vec<usize> {
        // SAFETY: this thread's mutator is running (`&mut self` outside a park), so the
        // collector does not touch the roots (see `ThreadRoots`).
        unsafe { &mut *self.roots.slots.get() }
    }

    fn slots_ref(&self) -> &Vec<usize> {
        // SAFETY: as in `slots`.
        unsafe { &*self.roots.slots.get() }
    }

    fn address(&self, local: Local) -> usize {
        let slots = self.slots_ref();
        *slots
            .get(local.0 as usize)
            .unwrap_or_else(|| panic!("handle {} used after its scope ended", local.0))
    }

    fn push(&mut self, address: usize) -> Local {
        let slots = self.slots();
        slots.push(address);
        Local(slots.len() as u32 - 1)
    }

    /// Runs `body`; handles it makes are dropped afterwards.
    pub fn scope<R>(&mut self, body: impl FnOnce(&mut Self) -> R) -> R {
        let mark = self.slots_ref().len();
        let result = body(self);
        self.slots().truncate(mark);
        result
    }

    /// Runs `body`, keeping only the handle it returns (moved to the scope's first slot).
    pub fn scope_keep<E>(
        &mut self,
        body: impl FnOnce(&mut Self) -> Result<Local, E>,
    ) -> Result<Local, E> {
        let mark = self.slots_ref().len();
        let result = body(self);
        let slots = self.slots();
        match result {
            Ok(local) => {
                let address = slots[local.0 as usize];
                slots.truncate(mark);
                slots.push(address);
                Ok(Local(mark as u32))
            }
            Err(error) => {
                slots.truncate(mark);
                Err(error)
            }
        }
    }

    /// A record of `shape`, its references null and its bytes zero.
    pub fn alloc_record(&mut self, shape: Shape) -> Result<Local, VmError> {
        if shape.refs > MAX_AUX || shape.size_words() > MAX_SIZE_WORDS {
            return Err(VmError::TooLarge(format!("record {shape:?}")));
        }
        let words = shape.size_words();
        self.alloc_object(Kind::Record, words, shape.refs)
    }

    /// An array of `len` null references.
    pub fn alloc_ref_array(&mut self, len: usize) -> Result<Local, VmError> {
        if len >= MAX_SIZE_WORDS {
            return Err(VmError::TooLarge(format!("reference array of {len}")));
        }
        self.alloc_object(Kind::RefArray, 1 + len, 0)
    }

    /// An array of `len` zero bytes.
    pub fn alloc_byte_array(&mut self, len: usize) -> Result<Local, VmError> {
        let words = 1 + len.div_ceil(WORD_BYTES);
        if len > MAX_AUX || words > MAX_SIZE_WORDS {
            return Err(VmError::TooLarge(format!("byte array of {len}")));
        }
        self.alloc_object(Kind::ByteArray, words, len)
    }

    fn alloc_object(&mut self, kind: Kind, words: usize, aux: usize) -> Result<Local, VmError> {
        let address = self.alloc_raw(words * WORD_BYTES)?;
        // SAFETY: `address` is `words` fresh words owned by this thread, 8-aligned; they are
        // made an object (header, null references, zero bytes) before the next safepoint.
        unsafe {
            std::ptr::write_bytes((address + WORD_BYTES) as *mut u64, 0, words - 1);
            write_header_word(address, Header::encode(kind, words, aux));
        }
        Ok(self.push(address))
    }

    /// `bytes` of the allocation space: through the per-CPU fast path when the thread
    /// allocates in per-CPU LABs, else the TLAB's; collects when the space is full.
    fn alloc_raw(&mut self, bytes: usize) -> Result<usize, VmError> {
        self.poll()?;
        let mut failed_collections = 0;
        loop {
            match self.mutator.alloc(bytes) {
                Ok(object) => return Ok(object.as_ptr() as usize),
                Err(AllocError::OutOfMemory { .. }) => {
                    let space = self.vm.config().space_bytes;
                    let free = self.vm.free_after_gc();
                    if failed_collections == MAX_FAILED_COLLECTIONS {
                        return Err(VmError::Starved {
                            collections: failed_collections,
                        });
                    }
                    if failed_collections > 0 && (free < bytes || free < space / MIN_FREE_FRACTION)
                    {
                        return Err(VmError::OutOfMemory {
                            live_bytes: self.vm.live_bytes_after_gc(),
                            space_bytes: self.vm.config().space_bytes,
                            request_bytes: bytes,
                        });
                    }
                    failed_collections += 1;
                    self.collect(GcCause::AllocationFailure)?;
                }
                Err(error) => return Err(VmError::TooLarge(error.to_string())),
            }
        }
    }

    /// Collects from this thread (the other threads stop at their next safepoint), unless
    /// another thread's collection ended since this one last ran; resumes after it.
    pub fn collect(&mut self, cause: GcCause) -> Result<(), VmError> {
        let vm = self.vm.clone();
        if let Some(result) = self
            .mutator
            .collect(|collection| vm.collect(collection, cause))
        {
            result?;
        }
        self.check_failure()
    }

    /// A safepoint: if a collection is requested, stops until it ends.
    #[inline]
    pub fn poll(&mut self) -> Result<(), VmError> {
        self.mutator.poll();
        self.check_failure()
    }

    fn check_failure(&self) -> Result<(), VmError> {
        if self.vm.failed.load(Ordering::Relaxed) {
            return Err(self.vm.failure().expect("failed"));
        }
        Ok(())
    }

    /// Runs `blocking` (e.g. waiting on a channel) with the thread in a safe region:
    /// collections run without waiting for it, and retire its LABs for it. Handles stay valid
    /// (the collector updates them) but no object may be touched inside.
    pub fn blocking<R>(&mut self, blocking: impl FnOnce() -> R) -> R {
        self.mutator.safe_region(blocking)
    }

    /// The object `field` of `object` refers to, as a new handle (`None` for null).
    pub fn get_ref(&mut self, object: Local, field: usize) -> Option<Local> {
        let value = self.read_field(object, field);
        (value != 0).then(|| self.push(value))
    }

    /// Whether reference `field` of `object` is null.
    pub fn is_null(&self, object: Local, field: usize) -> bool {
        self.read_field(object, field) == 0
    }

    /// Sets reference `field` of `object` to `value` (or null).
    pub fn set_ref(&mut self, object: Local, field: usize, value: Option<Local>) {
        let value = value.map_or(0, |local| self.address(local));
        let slot = self.ref_slot(object, field);
        // SAFETY: `slot` is a reference field of a live object (checked by `ref_slot`), and
        // the thread runs, so no collection moves it meanwhile.
        unsafe { (slot as *mut usize).write(value) };
    }

    /// How many reference fields (records, reference arrays) or bytes (byte arrays) `object`
    /// has.
    pub fn len(&self, object: Local) -> usize {
        let (kind, size_words, aux) = self.header(object);
        match kind {
            Kind::ByteArray => aux,
            _ => ref_fields(kind, size_words, aux).1,
        }
    }

    /// Reads word `index` of `object`'s raw data (records: after the references; byte
    /// arrays: the payload).
    pub fn read_word(&self, object: Local, index: usize) -> u64 {
        let slot = self.data_slot(object, index);
        // SAFETY: a data word of a live object (checked by `data_slot`).
        unsafe { (slot as *const u64).read() }
    }

    /// Writes word `index` of `object`'s raw data.
    pub fn write_word(&mut self, object: Local, index: usize, value: u64) {
        let slot = self.data_slot(object, index);
        // SAFETY: a data word of a live object (checked by `data_slot`).
        unsafe { (slot as *mut u64).write(value) };
    }

    /// Makes `value` a global root; returns its slot.
    pub fn add_global(&mut self, value: Local) -> Global {
        let address = self.address(value);
        let mut globals = self.vm.globals();
        globals.push(address);
        Global(globals.len() - 1)
    }

    /// The object a global root holds, as a new handle.
    pub fn global(&mut self, global: Global) -> Option<Local> {
        let address = self.vm.globals()[global.0];
        (address != 0).then(|| self.push(address))
    }

    /// Sets a global root.
    pub fn set_global(&mut self, global: Global, value: Option<Local>) {
        let address = value.map_or(0, |local| self.address(local));
        self.vm.globals()[global.0] = address;
    }

    fn header(&self, object: Local) -> (Kind, usize, usize) {
        let address = self.address(object);
        // SAFETY: handles hold addresses of live objects.
        match Header::decode(unsafe { header_word(address) }) {
            Header::Object {
                kind,
                size_words,
                aux,
            } => (kind, size_words, aux),
            other => panic!("handle {} holds no object: {other:?}", object.0),
        }
    }

    fn read_field(&self, object: Local, field: usize) -> usize {
        let slot = self.ref_slot(object, field);
        // SAFETY: a reference field of a live object (checked by `ref_slot`).
        unsafe { (slot as *const usize).read() }
    }

    fn ref_slot(&self, object: Local, field: usize) -> usize {
        let (kind, size_words, aux) = self.header(object);
        let (first, count) = ref_fields(kind, size_words, aux);
        assert!(
            field < count,
            "reference field {field} of a {kind:?} with {count}"
        );
        self.address(object) + (first + field) * WORD_BYTES
    }

    fn data_slot(&self, object: Local, index: usize) -> usize {
        let (kind, size_words, aux) = self.header(object);
        let (first, count) = ref_fields(kind, size_words, aux);
        let data_start = first + count;
        assert!(
            matches!(kind, Kind::Record | Kind::ByteArray) && data_start + index < size_words,
            "data word {index} of a {kind:?} of {size_words} words"
        );
        self.address(object) + (data_start + index) * WORD_BYTES
    }

    /// Handles held now (for tests and leak checks).
    pub fn handles(&self) -> usize {
        self.slots_ref().len()
    }
}

impl Drop for VmThread {
    fn drop(&mut self) {
        self.vm.detach(&self.roots);
    }
}

impl std::fmt::Debug for VmThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VmThread")
            .field("handles", &self.slots_ref().len())
            .finish_non_exhaustive()
    }
}
