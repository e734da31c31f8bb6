//! How this process gets an rseq area for its threads (decided once: `mechanism()` in
//! `mod.rs`).

use std::fmt;

/// How this process gets an rseq area for its threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RseqMechanism {
    /// glibc registered an area for every thread, at this offset from the thread pointer.
    Glibc {
        /// `__rseq_offset`.
        offset: isize,
    },
    /// Hab registers an area per thread itself, where glibc did not (an older or other C
    /// library, `GLIBC_TUNABLES=glibc.pthread.rseq=0`): at a fixed offset from every thread's
    /// pointer where there is one (an area the runtime provided with
    /// [`rseq_provide_area`](crate::rseq_provide_area), else the area glibc ≥ 2.35 keeps unused
    /// in every thread's control block), else a thread-local area per thread. A thread
    /// registers on its first restartable section, or earlier with
    /// [`rseq_register_current_thread`](crate::rseq_register_current_thread), which code that
    /// runs sections through the fixed offset itself must call first in every thread.
    Own {
        /// The areas' offset from the thread pointer, where it is the same for every thread.
        offset: Option<isize>,
        /// Why glibc's registration is not used.
        why_not_glibc: String,
    },
    /// glibc's area used *without* a registration (`HAB_RSEQ=unregistered`, honoured only
    /// when the crate is built with its `instruction-counting` feature), for tools that do
    /// not implement rseq, such as valgrind: the sections run the same instructions but the
    /// kernel never aborts them, so this is correct only while one thread allocates. Used to
    /// count instructions, never to run concurrent work.
    Unregistered {
        /// `__rseq_offset`.
        offset: isize,
    },
    /// No rseq: per-CPU buffers fall back to compare-and-swap.
    Unavailable(String),
}

impl fmt::Display for RseqMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RseqMechanism::Glibc { offset } => write!(f, "glibc's registration (offset {offset})"),
            RseqMechanism::Own {
                offset: Some(offset),
                why_not_glibc,
            } => write!(
                f,
                "Hab's own registration per thread (offset {offset}; not glibc's: {why_not_glibc})"
            ),
            RseqMechanism::Own {
                offset: None,
                why_not_glibc,
            } => write!(
                f,
                "Hab's own registration per thread (thread-local areas; not glibc's: \
                 {why_not_glibc})"
            ),
            RseqMechanism::Unregistered { offset } => write!(
                f,
                "glibc's area unregistered (offset {offset}; single-threaded instruction counting only)"
            ),
            RseqMechanism::Unavailable(why) => write!(f, "unavailable: {why}"),
        }
    }
}

/// Where glibc's registration put every thread's area, from its symbols `__rseq_offset` and
/// `__rseq_size` (`None`: not exported): the offset from the thread pointer, or why glibc
/// registered none.
pub(super) fn glibc_offset_from(symbols: Option<(isize, u32)>) -> Result<isize, String> {
    match symbols {
        None => Err(
            "__rseq_offset not found: this C library does not register rseq areas \
             (glibc >= 2.35 does)"
                .to_string(),
        ),
        Some((_, 0)) => Err(
            "glibc did not register rseq areas (__rseq_size is 0: the kernel \
             lacks rseq, or GLIBC_TUNABLES=glibc.pthread.rseq=0)"
                .to_string(),
        ),
        Some((offset, _)) => Ok(offset),
    }
}
