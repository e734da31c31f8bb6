//! # hab-vm: a small garbage-collected runtime on Hab
//!
//! Objects live in an allocation space that Hab manages; when it is full, a thread stops the
//! world and a copying collector (Cheney) moves the survivors into the other half of the
//! reservation, where Hab goes on allocating above them. Threads reach objects only through
//! handles ([`Local`]) that the collector updates, stop at safepoints (every allocation, and
//! [`VmThread::poll`]) and block in safe regions ([`VmThread::blocking`]) without holding
//! collections up.
//!
//! ```
//! use hab_vm::{Shape, Vm, VmConfig};
//! let vm = Vm::new(VmConfig::new(1 << 20))?;
//! let mut thread = vm.attach();
//! let pair = Shape::new(2, 8);
//! let list = thread.alloc_record(pair)?;
//! for i in 0..100_000 {
//!     // A new head, pointing at the old list: only the last 16 stay reachable.
//!     thread.scope(|t| -> Result<(), hab_vm::VmError> {
//!         let node = t.alloc_record(pair)?;
//!         t.write_word(node, 0, i);
//!         Ok(())
//!     })?;
//! }
//! assert!(vm.gc_records().len() > 1, "the space filled and was collected");
//! let _ = list;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Glossary
//!
//! | term | meaning | where |
//! | --- | --- | --- |
//! | allocation space | the half of the reservation Hab allocates in | `vm.rs` |
//! | handle, [`Local`] | a root stack slot holding an object's address | `thread.rs` |
//! | scope | handles made in it are dropped at its end | `thread.rs` |
//! | safepoint | where a thread stops for a collection: allocation, `poll` | `thread.rs` |
//! | safe region | code that blocks with the thread parked (`blocking`) | `thread.rs` |
//! | record, arrays | the object kinds | `object.rs` |
//! | forwarding | the header of a copied object: its new address | `object.rs`, `collector.rs` |

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod collector;
mod object;
mod thread;
mod vm;
pub mod workloads;

pub use collector::CheckSummary;
pub use object::{Kind, Shape, VmObjectModel, WORD_BYTES};
pub use thread::{Global, Local, VmThread};
pub use vm::{approximate, GcCause, GcRecord, Vm, VmConfig, VmError};
