//! A complete small runtime on Hab: its own object model, four mutator threads, a sliding
//! (mark-compact) collector that runs when an allocation finds the heap full, and every
//! collection checked against the objects the threads hold.
//!
//! ```text
//! cargo run --release -p hab --example runtime -- --mode tlab   # or shared, hab, cpu-lab, flip
//! ```
//!
//! - **Objects**: a two-word header (a tag, the size in bytes) then payload words, each a
//!   function of the object's identity, so a collection can tell an intact object from a
//!   damaged or misplaced one. A filler is the same header with another tag.
//! - **Roots**: each thread keeps up to `KEPT` objects in a table of its own; a new object
//!   replaces an old one at a pseudo-random slot, and the old one dies.
//! - **Safepoints**: the library's. A thread whose allocation fails calls `Mutator::collect`;
//!   the others stop at their next allocation. No thread writes its table while it is
//!   stopped, so the collector owns every table during a collection.
//! - **Collector**: survivors of the last collection lie at the bottom of the reservation,
//!   and Hab's allocation range starts right above them. A collection walks the survivors,
//!   then Hab's walk of what was allocated since (which must find exactly the objects the
//!   threads allocated), checks every object's payload, slides the live ones down to the
//!   bottom, rewrites the tables, and gives Hab the space above them.

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use hab::{AllocError, Collection, Heap, HeapConfig, Mode, ObjectModel, TlabPolicy};

const THREADS: usize = 4;
const OBJECTS_PER_THREAD: u64 = 250_000;
/// Objects each thread keeps alive at a time.
const KEPT: usize = 512;
const HEAP: &str = "8MiB";
const WORD: usize = 8;

const OBJECT_TAG: u64 = 0x0B1E_C700_0000_0001;
const FILLER_TAG: u64 = 0x0B1E_C700_0000_0002;

/// The runtime's object layout: `[tag, size in bytes, payload...]`.
struct TwoWordHeader;

impl TwoWordHeader {
    /// Writes an object of `bytes` whose payload encodes `identity`.
    ///
    /// # Safety
    /// `address` is `bytes` fresh bytes, 8-aligned, owned by the caller; `bytes >= 24`.
    unsafe fn write_object(address: usize, bytes: usize, identity: u64) {
        let words = address as *mut u64;
        // SAFETY: the caller owns `bytes / 8` aligned words at `address`.
        unsafe {
            words.write(OBJECT_TAG);
            words.add(1).write(bytes as u64);
            for index in 2..bytes / WORD {
                words.add(index).write(payload(identity, index));
            }
        }
    }

    /// Checks the object at `address` (the collector's side): its tag, size and payload.
    ///
    /// # Safety
    /// `address` starts an object or filler in a stopped heap.
    unsafe fn check_object(address: usize) -> Result<(usize, u64), String> {
        let words = address as *const u64;
        // SAFETY: a header is at least two readable words (the caller's contract).
        let (tag, bytes) = unsafe { (words.read(), words.add(1).read() as usize) };
        if tag != OBJECT_TAG || bytes < 3 * WORD || bytes % WORD != 0 {
            return Err(format!(
                "{address:#x}: not an object (tag {tag:#x}, {bytes} bytes)"
            ));
        }
        // SAFETY: the object's words are readable.
        let identity = unsafe { words.add(2).read() } ^ payload(0, 2);
        for index in 2..bytes / WORD {
            // SAFETY: as above.
            if unsafe { words.add(index).read() } != payload(identity, index) {
                return Err(format!("{address:#x}: payload word {index} damaged"));
            }
        }
        Ok((bytes, identity))
    }
}

/// Payload word `index` of the object numbered `identity`.
fn payload(identity: u64, index: usize) -> u64 {
    identity ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

// SAFETY: a filler is a header with `FILLER_TAG` and its size; `object_size` reads the size
// word of either, `is_filler` tests the tag.
unsafe impl ObjectModel for TwoWordHeader {
    fn min_filler_bytes(&self) -> usize {
        2 * WORD
    }

    unsafe fn write_filler(&self, address: NonNull<u8>, bytes: usize) {
        let words = address.cast::<u64>().as_ptr();
        // SAFETY: the caller owns at least `min_filler_bytes` aligned bytes at `address`.
        unsafe {
            words.write(FILLER_TAG);
            words.add(1).write(bytes as u64);
        }
    }

    unsafe fn object_size(&self, address: NonNull<u8>) -> usize {
        // SAFETY: the caller guarantees a readable header.
        unsafe { address.cast::<u64>().as_ptr().add(1).read() as usize }
    }

    unsafe fn is_filler(&self, address: NonNull<u8>) -> bool {
        // SAFETY: as above.
        unsafe { address.cast::<u64>().read() == FILLER_TAG }
    }
}

/// What the runtime keeps beside the heap.
struct Runtime {
    heap: Arc<Heap>,
    /// Each thread's table of live objects: (address, identity); address 0 is empty.
    roots: Vec<Mutex<Vec<(usize, u64)>>>,
    /// Objects allocated since the last collection (headers written).
    allocated_since_collection: AtomicU64,
    /// End of the survivors at the bottom of the reservation.
    survivors_end: Mutex<usize>,
    collections: AtomicU64,
    /// Objects Hab's walks found, over every collection.
    walked_objects: AtomicU64,
    moved_objects: AtomicU64,
}

impl Runtime {
    /// The collector: runs inside a Hab collection, every mutator stopped.
    fn collect(&self, collection: &mut Collection<'_>) -> Result<(), String> {
        let mut tables: Vec<_> = self.roots.iter().map(|t| t.lock().unwrap()).collect();
        // Which table slots point at each address, and the identity each expects there.
        let mut rooted: HashMap<usize, Vec<(usize, usize, u64)>> = HashMap::new();
        for (thread, table) in tables.iter().enumerate() {
            for (slot, &(address, identity)) in table.iter().enumerate() {
                if address != 0 {
                    rooted
                        .entry(address)
                        .or_default()
                        .push((thread, slot, identity));
                }
            }
        }
        // Every object from the bottom: the survivors, then what Hab's walk finds.
        let bottom = self.heap.reserved_range().start;
        let mut survivors_end = self.survivors_end.lock().unwrap();
        let mut objects = Vec::new(); // (address, bytes)
        let mut address = bottom;
        while address < *survivors_end {
            // SAFETY: the survivors are objects laid end to end; the world is stopped.
            let (bytes, _) = unsafe { TwoWordHeader::check_object(address) }?;
            objects.push((address, bytes));
            address += bytes;
        }
        let range = collection.allocation_range();
        if range.start != *survivors_end {
            return Err(format!(
                "allocation started at {:#x}, not above the survivors",
                range.start
            ));
        }
        let walk = collection
            .walk(|object| {
                if !object.is_filler {
                    objects.push((object.address.as_ptr() as usize, object.bytes));
                }
            })
            .map_err(|e| e.to_string())?;
        self.walked_objects
            .fetch_add(walk.objects, Ordering::Relaxed);
        let allocated = self.allocated_since_collection.swap(0, Ordering::Relaxed);
        if walk.objects != allocated {
            return Err(format!(
                "Hab's walk found {} objects; {allocated} were allocated",
                walk.objects
            ));
        }
        // Check every object, then slide the live ones down, in address order.
        let mut to = bottom;
        let mut live = 0usize;
        for &(from, bytes) in &objects {
            // SAFETY: `from` starts an object the walks above met; the world is stopped.
            let (size, identity) = unsafe { TwoWordHeader::check_object(from) }?;
            if size != bytes {
                return Err(format!("{from:#x}: {size} bytes, the walk said {bytes}"));
            }
            let Some(slots) = rooted.get(&from) else {
                continue;
            };
            if let Some(&(thread, slot, _)) = slots.iter().find(|root| root.2 != identity) {
                return Err(format!(
                    "thread {thread} slot {slot}: another object at {from:#x}"
                ));
            }
            if from != to {
                // SAFETY: both ranges lie in the reservation; `to <= from`, and `copy`
                // allows the overlap. Nothing else runs.
                unsafe { std::ptr::copy(from as *const u8, to as *mut u8, bytes) };
                self.moved_objects.fetch_add(1, Ordering::Relaxed);
            }
            for &(thread, slot, _) in slots {
                tables[thread][slot].0 = to;
            }
            to += bytes;
            live += slots.len();
        }
        if live != rooted.values().map(Vec::len).sum::<usize>() {
            return Err("a root points at no object of the heap".into());
        }
        *survivors_end = to;
        collection
            .set_allocation_range(to..self.heap.reserved_range().end)
            .map_err(|e| e.to_string())?;
        self.collections.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// One mutator thread: allocates, keeps some objects, collects when the heap is full.
fn mutator_thread(runtime: &Runtime, index: usize) -> Result<(), String> {
    let mut mutator = runtime.heap.attach();
    let mut random = 0x2545_F491_4F6C_DD1D_u64 ^ index as u64;
    for serial in 0..OBJECTS_PER_THREAD {
        random ^= random << 13;
        random ^= random >> 7;
        random ^= random << 17;
        let bytes = WORD * (3 + (random % 30) as usize);
        // A safepoint poll: per-CPU LAB allocations reach a safepoint only when they miss.
        mutator.poll();
        let identity = (index as u64) << 48 | serial;
        let slot = (random >> 32) as usize % KEPT;
        // Makes a new object parseable, counts it and roots it: before the thread's next
        // safepoint, or before the collection that allocated it ends.
        let keep = |object: NonNull<u8>| {
            // SAFETY: `bytes` fresh bytes allocated for this thread, not yet shared.
            unsafe { TwoWordHeader::write_object(object.as_ptr() as usize, bytes, identity) };
            runtime
                .allocated_since_collection
                .fetch_add(1, Ordering::Relaxed);
            runtime.roots[index].lock().unwrap()[slot] = (object.as_ptr() as usize, identity);
        };
        let mut collected_by_others = 0;
        loop {
            match mutator.alloc(bytes) {
                Ok(object) => break keep(object),
                // The heap is full: collect, and have the collection allocate the object
                // before any other thread resumes, so that this thread is never starved. The
                // object is kept inside the collection: another thread's collection may claim
                // this one's mutator as soon as it ends, before this thread runs again.
                Err(AllocError::OutOfMemory { .. }) => {
                    let id = mutator.id();
                    let served = mutator.collect(|mut collection| {
                        runtime.collect(&mut collection)?;
                        let object = collection
                            .alloc_for(id, bytes)
                            .map_err(|e| format!("thread {index}: out of memory: {e}"))?;
                        keep(object);
                        Ok::<_, String>(())
                    });
                    match served {
                        Some(served) => break served?,
                        // Another thread's collection ran since this one failed: retry.
                        None if collected_by_others < 100 => collected_by_others += 1,
                        None => return Err(format!("thread {index}: no progress")),
                    }
                }
                Err(other) => return Err(format!("thread {index}: {other}")),
            }
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mode: Mode = match std::env::args().skip_while(|a| a != "--mode").nth(1) {
        Some(name) => name.parse()?,
        None => Mode::Tlab,
    };
    let mut config = HeapConfig::builder()
        .capacity(HEAP)
        .mode(mode)
        .tlab(TlabPolicy::Adaptive);
    if mode == Mode::Hab {
        config = config.middle("core:512KiB");
    }
    let heap = Heap::new(config.build()?, TwoWordHeader)?;
    let runtime = Arc::new(Runtime {
        survivors_end: Mutex::new(heap.reserved_range().start),
        heap,
        roots: (0..THREADS)
            .map(|_| Mutex::new(vec![(0, 0); KEPT]))
            .collect(),
        allocated_since_collection: AtomicU64::new(0),
        collections: AtomicU64::new(0),
        walked_objects: AtomicU64::new(0),
        moved_objects: AtomicU64::new(0),
    });
    let threads: Vec<_> = (0..THREADS)
        .map(|index| {
            let runtime = runtime.clone();
            thread::spawn(move || mutator_thread(&runtime, index))
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "a mutator thread panicked")??;
    }
    // A last collection from the main thread (no mutator is left running) checks the end state.
    let mut final_collection = runtime.heap.collection();
    runtime.collect(&mut final_collection)?;
    let kept: usize = runtime
        .roots
        .iter()
        .map(|table| {
            table
                .lock()
                .unwrap()
                .iter()
                .filter(|root| root.0 != 0)
                .count()
        })
        .sum();
    let allocated = THREADS as u64 * OBJECTS_PER_THREAD;
    let walked = runtime.walked_objects.load(Ordering::Relaxed);
    println!(
        "mode {mode}: {THREADS} threads allocated {allocated} objects in a {HEAP} heap; {} \
         collections (the last at exit), each walking exactly the objects allocated since the \
         one before: {walked} walked = {allocated} allocated; {} objects moved; {kept} live at \
         the end, all intact",
        runtime.collections.load(Ordering::Relaxed),
        runtime.moved_objects.load(Ordering::Relaxed),
    );
    if walked != allocated {
        return Err(format!("{walked} objects walked, {allocated} allocated").into());
    }
    Ok(())
}
