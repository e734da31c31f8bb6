//! # Hab: hierarchical allocation buffers for garbage-collected runtimes
//!
//! A mutator thread allocates an object by bumping a pointer in its **TLAB**; TLABs are carved
//! from the **global heap** with a compare-and-swap, or in [`Mode::Hab`] from the **middle
//! levels**: per-CPU, per-core (CLAB), per-LLC, per-package (PLAB) or per-node buffers chosen
//! by the CPU the thread runs on, refilled from the level above. The fast path is inline and
//! costs what a JIT emits (load, add, compare, branch, store); everything else is out of line.
//!
//! ```
//! use hab::{HeaderWordModel, Heap, HeapConfig, Mode, TlabPolicy};
//!
//! // The runtime picks the capacity, the mode and the TLAB sizing policy.
//! let config = HeapConfig::builder()
//!     .capacity("16MiB")
//!     .mode(Mode::Tlab)
//!     .tlab(TlabPolicy::Adaptive)
//!     .build()?;
//! let heap = Heap::new(config, HeaderWordModel)?;
//!
//! // Each mutator thread attaches once and allocates through its handle.
//! let mut mutator = heap.attach();
//! for _ in 0..10_000 {
//!     let object = mutator.alloc(16)?;
//!     // SAFETY: `object` is 16 fresh bytes owned by this thread.
//!     unsafe { HeaderWordModel::write_header(object, 16) };
//! }
//!
//! // A collection from this thread: its mutator parks, the other mutators stop at their next
//! // poll or allocation, every TLAB is retired (its tail covered by a filler), the heap is
//! // walked and a new range given back; then the thread runs again.
//! let walked = mutator.collect(|mut collection| {
//!     let summary = collection.verify().expect("walkable");
//!     assert_eq!(summary.total_bytes(), collection.used_bytes());
//!     collection.reset();
//!     summary.objects
//! });
//! assert_eq!(walked, Some(10_000));
//! assert_eq!(mutator.epoch(), 1); // it slept through one collection
//! mutator.alloc(16)?;
//! println!("{}", heap.stats());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Layers
//!
//! The source tree has one folder per layer, each importing only from the layers below it
//! (`tests/layering.rs` checks it; `docs/ARCHITECTURE.md` walks through them):
//!
//! | layer | what it holds |
//! | --- | --- |
//! | `memory` | the reservation, the global heap, the object model and fillers (`Space`), words |
//! | `platform` | restartable sequences, the machine's topology, CPU-id sources, forks, counters |
//! | `config` | what the runtime asks for: [`HeapConfig`] and its builder |
//! | `levels` | the middle levels: their protocol, compare-and-swap and restartable buffers, sideline |
//! | `labs` | TLABs and their sizing, the per-CPU LABs, the flip policy |
//! | `mutator` | a mutator's state machine, the allocator the paths read, the slow path |
//! | `heap` | [`Heap`], its registry of mutators, the [`Mutator`] handles and fast paths |
//! | `collection` | stopping the world, [`Collection`]: walk, verify, next range |
//!
//! ## Glossary
//!
//! | term | meaning | where |
//! | --- | --- | --- |
//! | global heap | the allocation range inside one `mmap` reservation; CAS bump on its top | `memory/global.rs`, `memory/reservation.rs` |
//! | space | the global heap with the object model's fillers: what the layers below the heap take | `memory/space.rs` |
//! | word | 8 bytes; the unit of the offsets packed into middle-level, sideline and per-CPU states | `memory/words.rs` |
//! | packed word | an offset in words and a count in one 64-bit word, changed by one store or CAS | `memory/packed.rs` |
//! | TLAB | thread-local allocation buffer: a chunk one thread bumps through | `labs/tlab.rs` |
//! | LAB | any local allocation buffer: a TLAB, or a per-CPU LAB | |
//! | per-CPU LAB | `cpu-lab` mode ([`Mode::CpuLab`]): a `{top, end}` pair per CPU that objects are bumped in, in restartable sections (the Garthwaite seed's per-processor LABs) | `labs/cpu_labs.rs`, `platform/rseq/` |
//! | LAB cursor | the `cpu-lab` fast path's state a mutator keeps: a CPU and its LAB, inactive in TLAB modes | `mutator/cpu_lab_cursor.rs` |
//! | soft end | what the TLAB fast path compares with: the limit, or lower (0 when another thread requests a safepoint) | `labs/tlab.rs` |
//! | safepoint | where a mutator stops for a requested collection: a poll, an allocation's slow path, a safe region | `mutator/safepoint.rs` |
//! | epoch | the collections ended when a mutator last started running; it changes when the thread slept through one | `mutator/cell.rs` |
//! | rseq | Linux restartable sequences: a section the kernel restarts if the thread is preempted, migrated or signalled | `platform/rseq/` |
//! | transaction | installing a new per-CPU LAB; failed if interrupted or refused, invalid if it could not install | `labs/cpu_labs.rs` |
//! | sideline | chunks a refill could not install, kept for later refills | `levels/sideline.rs` |
//! | flip | the mode that switches between TLABs and per-CPU LABs at collections; its policy | `labs/flip.rs` |
//! | allocator | what the allocation paths read: memory, machine, and the mode's parts, built once | `mutator/allocator.rs` |
//! | mutator | a thread's handle: its TLAB, sizing state and counters | `heap/mutator_handle.rs` (the handle), `mutator/cell.rs` (its state) |
//! | slow path | what an allocation does when the object does not fit: keep or refill, outside, per-CPU LAB | `mutator/slow_path.rs` |
//! | sizing policy | how big the next TLAB (or per-CPU LAB) is: fixed, adaptive (HotSpot), growing (Agesen) | `labs/sizing/` |
//! | middle level | buffers between TLABs and the global heap, one per domain of a [`Level`] | `levels/middle.rs` |
//! | refill thread | the thread running a middle-level refill: where it runs, where its events are counted | `levels/refill.rs` |
//! | domain | the CPUs sharing a buffer: one CPU, a core, an LLC, a package, a NUMA node | `platform/topology/mod.rs` |
//! | CLAB, PLAB | the Kirsch seed's per-core and per-processor buffers: the `core` and `package` levels (never the per-CPU LAB mode, nor HotSpot's promotion LABs) | `levels/middle.rs` |
//! | foreign allocation | a chunk carved from a domain other than the thread's at commit | `levels/refill.rs` |
//! | CPU id | which CPU the thread runs on: rseq area, `sched_getcpu`, RDPID, simulated | `platform/cpu_id.rs` |
//! | allocation prefetch | a `prefetchw` of the line a little beyond the newest object, for loops that outrun memory | `platform/prefetch.rs` |
//! | filler | a dead object written over unused LAB space, so the heap stays walkable | `memory/object_model.rs`, `memory/space.rs` |
//! | where memory comes from | one idea under the name each layer gives it: a refill's place (`Place`: the global heap's top, the thread's home buffer, every level in turn), the heap's TLAB source (`TlabSource`: the global heap or the levels), a level's `Above` (the levels further up, or above them all the space), a runtime's [`Upstream`] (the levels as a component; `hab_upstream` in C), HotSpot's `HabSpace` (eden, G1's eden regions) | `mutator/refill.rs`, `mutator/allocator.rs`, `levels/chunk.rs`, `levels/component.rs` |
//! | retire | end a LAB: filler over its tail, tail counted as waste | `labs/tlab.rs` |
//! | refill waste | tail of a TLAB retired to take a new one | `mutator/stats.rs` |
//! | slow allocation | an object allocated outside a TLAB | `mutator/slow_path.rs` |
//! | park | a thread at a safepoint or in a safe region; collections may touch its TLAB | `mutator/cell.rs`, `mutator/safepoint.rs` |
//! | collection | stop the world, retire every LAB, walk, install the next range, resize | `collection/` |
//! | thread identity | the thread a mutator runs on (name, kernel id, since when), and what `fork` keeps | `platform/process.rs` |
//!
//! ## When the world cannot stop
//!
//! [`Heap::collection`] asks every mutator to stop at its next safepoint and waits, without
//! bound, until every mutator parks. A mutator that never parks — one that neither allocates
//! nor polls, held running by the collecting thread itself (use [`Mutator::collect`]), leaked
//! with `mem::forget`, or left by a thread that died without unwinding — keeps it waiting
//! forever.
//! [`Heap::collection_within`] gives up after a deadline with
//! [`CollectionError::Timeout`], naming each running mutator's thread, how long it has run
//! and whether its thread still exists; [`Heap::running_mutators`] gives the same list at
//! any time. A panic inside a collection (e.g. from the object model) releases the world.
//!
//! After `fork`, the child's heap forgets the mutators of the parent's threads, which do not
//! exist in the child, and keeps the forking thread's. The heap's own locks are never copied
//! held. Objects the lost threads were initialising at the moment of the fork may lack their
//! headers in the child: a child should collect from its roots, or reset, rather than walk
//! the parent's allocation range. As for any child of a multi-threaded process, starting
//! threads there is unsafe in general (the C library's and Rust's own locks may have been
//! copied held); the forking thread may attach, allocate and collect.
//!
//! ## Memory contents
//!
//! Memory never handed out before is zero (fresh anonymous mapping). Memory handed out again
//! after a collection installed a used range is zeroed before an object gets it: with
//! [`ZeroMemory::Ahead`] (the default) a TLAB's a step at a time just ahead of its top, an
//! outside object or a per-CPU LAB when handed out; with [`ZeroMemory::AtRefill`] a whole TLAB
//! at its refill. [`ZeroMemory::Never`] leaves it as it is.

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

// The layers, in alphabetical order; from lowest to highest they are memory, platform,
// config, levels, labs, mutator, heap, collection, and each imports only from the layers
// below it (`tests/layering.rs` checks it; docs/ARCHITECTURE.md describes them).
mod collection;
mod config;
mod heap;
mod labs;
mod levels;
mod memory;
mod mutator;
mod platform;

pub use collection::error::{CollectionError, RunningMutator, VerifyError};
pub use collection::{Collection, HeapObject, WalkSummary};
pub use config::{
    ConfigError, HeapConfig, HeapConfigBuilder, IntoByteSize, MiddleLevelSpec, Mode, TlabPolicy,
    TopologySpec, ZeroMemory, GROWING_INITIAL_BYTES, MAX_ALIGNMENT_BYTES, MAX_CAPACITY_BYTES,
    MIN_ALIGNMENT_BYTES, WORD_BYTES, ZERO_AHEAD_BYTES,
};
pub use heap::error::HeapError;
pub use heap::mutator_handle::{alloc_slow_from_compiled_code, Mutator, ParkedMutator};
pub use heap::stats::HeapStats;
pub use heap::{Heap, MiddleLevelInfo};
pub use labs::flip::{FlipCycle, CYCLES_OVER_BOUND_TO_FLIP};
pub use labs::stats::CpuLabStats;
pub use labs::tlab::{TLAB_SOFT_END_OFFSET, TLAB_TOP_OFFSET};
pub use levels::component::{
    CpuBufferPath, LevelsThread, MiddleLevels, Upstream, CPU_BUFFER_TOP_BITS,
};
pub use levels::stats::LevelStats;
pub use memory::object_model::{HeaderWordModel, ObjectModel};
pub use memory::reservation::{memory_limit_bytes, RuntimeMemory};
pub use memory::size::{ByteSize, SizeParseError};
pub use mutator::alloc_size::{AllocError, AllocSize, MAX_OBJECT_ALIGNMENT_BYTES};
pub use mutator::cell::SAFEPOINT_POLL_OFFSET;
pub use mutator::cpu_lab_cursor::{
    CpuLabPath, CPU_LAB_END_OFFSET, CPU_LAB_SLOT_BYTES, CPU_LAB_TOP_OFFSET, RSEQ_CS_OFFSET,
    RSEQ_SIGNATURE,
};
pub use mutator::sampling::{AllocationSample, AllocationSampler};
pub use mutator::stats::AllocationStats;
pub use platform::cpu_id::{CpuIdReader, CpuIdSource, SimulatedCpu};
pub use platform::per_cpu::{per_cpu_support, PerCpuSupport};
pub use platform::prefetch::ALLOCATION_PREFETCH_BYTES;
pub use platform::rseq::{
    mechanism as rseq_mechanism, provide_area as rseq_provide_area,
    register_current_thread as rseq_register_current_thread, slot_index as rseq_slot_index,
    RseqMechanism, SlotIndex,
};
pub use platform::topology::{Level, Topology, TopologySource};
