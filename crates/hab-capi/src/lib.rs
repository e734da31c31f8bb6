//! `libhab`: Hab's C ABI. The declarations, documented, are in `include/hab.h`; the files here
//! implement the functions it declares that are not inline there, one file per section of the
//! header: `status` (statuses and the last error, with what every entry point shares),
//! `config`, `heap`, `mutators`, `collections`, `levels` (and `levels_stats`), `flip`, `per_cpu`.
//!
//! Conventions: every function that can fail returns a [`hab_status`] (or NULL) and leaves a
//! message for [`hab_last_error`] on the calling thread; NULL and out-of-range arguments are
//! `HAB_INVALID_ARGUMENT` (checked by `status::live`, once per handle); no Rust panic
//! crosses the boundary (one is caught and reported as `HAB_INTERNAL_ERROR`). Handles are
//! boxed, so their addresses are stable.

#![allow(non_camel_case_types)]

mod collections;
mod config;
mod flip;
mod heap;
mod levels;
mod levels_stats;
mod mutators;
mod per_cpu;
mod status;

pub use collections::*;
pub use config::*;
pub use flip::*;
pub use heap::*;
pub use levels::*;
pub use levels_stats::*;
pub use mutators::*;
pub use per_cpu::*;
pub use status::*;

/// The ABI version `hab.h` declares as `HAB_ABI_VERSION`.
pub const HAB_ABI_VERSION: u32 = 11;

/// What the files of the entry points share: the standard and `hab` names they use, and each
/// other's items.
mod prelude {
    pub(crate) use std::cell::RefCell;
    pub(crate) use std::ffi::{c_char, c_int, c_void, CStr};
    pub(crate) use std::ops::Range;
    pub(crate) use std::panic::{catch_unwind, AssertUnwindSafe};
    pub(crate) use std::ptr::{self, NonNull};
    pub(crate) use std::sync::atomic::{AtomicBool, Ordering};
    pub(crate) use std::sync::Arc;
    pub(crate) use std::time::Duration;

    pub(crate) use hab::{
        AllocError, Collection, CollectionError, CpuIdSource, Heap, HeapConfig, HeapConfigBuilder,
        LevelsThread, MiddleLevels, Mode, Mutator, ObjectModel, ParkedMutator, TlabPolicy,
        Upstream, ZeroMemory,
    };

    pub(crate) use crate::config::*;
    pub(crate) use crate::heap::*;
    pub(crate) use crate::mutators::*;
    pub(crate) use crate::status::hab_status::*;
    pub(crate) use crate::status::*;
    pub(crate) use crate::HAB_ABI_VERSION;
}
