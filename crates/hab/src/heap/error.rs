//! Errors a runtime can meet, each naming the problem and the values involved.

use std::fmt;
use std::io;

use crate::config::ConfigError;
use crate::memory::size::ByteSize;

/// Why an allocation failed. Nothing was handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// A request for 0 bytes: every object has at least a header.
    ZeroSize,
    /// The size is not a multiple of the heap's object alignment.
    Misaligned {
        /// The size asked for.
        bytes: usize,
        /// The heap's alignment.
        alignment: usize,
    },
    /// The object is larger than the whole heap.
    TooLarge {
        /// The size asked for.
        bytes: usize,
        /// The heap's capacity.
        capacity: usize,
    },
    /// The allocation range is full: the runtime should collect.
    OutOfMemory {
        /// The size asked for.
        bytes: usize,
    },
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AllocError::ZeroSize => f.write_str("cannot allocate an object of 0 bytes"),
            AllocError::Misaligned { bytes, alignment } => write!(
                f,
                "object size {bytes} is not a multiple of the heap's alignment {alignment}"
            ),
            AllocError::TooLarge { bytes, capacity } => write!(
                f,
                "object size {bytes} is larger than the heap ({})",
                ByteSize::new(capacity)
            ),
            AllocError::OutOfMemory { bytes } => {
                write!(
                    f,
                    "heap exhausted: no room for {bytes} bytes until a collection"
                )
            }
        }
    }
}

impl std::error::Error for AllocError {}

/// Why a heap could not be created.
#[derive(Debug)]
pub enum HeapError {
    /// The configuration does not fit the object model.
    Config(ConfigError),
    /// The operating system refused to reserve the address range.
    Reserve {
        /// Bytes asked for.
        bytes: usize,
        /// What `mmap` said.
        source: io::Error,
    },
    /// The heap was to be pre-touched (`pretouch(true)`) but its pages cannot all be backed
    /// by memory: larger than the machine's (or the control group's) memory, or the kernel
    /// refused to populate them.
    Pretouch {
        /// Bytes to touch.
        bytes: usize,
        /// Why they cannot be.
        source: io::Error,
    },
}

impl fmt::Display for HeapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeapError::Config(error) => error.fmt(f),
            HeapError::Reserve { bytes, source } => {
                write!(
                    f,
                    "cannot reserve {} for the heap: {source}",
                    ByteSize::new(*bytes)
                )
            }
            HeapError::Pretouch { bytes, source } => {
                write!(
                    f,
                    "cannot pre-touch {} of heap: {source}",
                    ByteSize::new(*bytes)
                )
            }
        }
    }
}

impl std::error::Error for HeapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HeapError::Config(error) => Some(error),
            HeapError::Reserve { source, .. } | HeapError::Pretouch { source, .. } => Some(source),
        }
    }
}

impl From<ConfigError> for HeapError {
    fn from(error: ConfigError) -> Self {
        HeapError::Config(error)
    }
}

/// Why a collection could not start or could not install a new allocation range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CollectionError {
    /// Some mutators are still running (`try_collection` does not wait for them).
    MutatorsRunning {
        /// How many were running.
        running: usize,
    },
    /// Another collection is in progress.
    InProgress,
    /// The world did not stop in time
    /// ([`Heap::collection_within`](crate::Heap::collection_within)): these mutators were
    /// still running. The collection was abandoned and the parked mutators released.
    Timeout {
        /// How long the collection waited.
        waited: std::time::Duration,
        /// The mutators that did not park.
        running: Vec<RunningMutator>,
    },
    /// The new allocation range is empty-reversed, misaligned or not inside the heap.
    BadRange {
        /// The range's start.
        start: usize,
        /// The range's end.
        end: usize,
        /// What is wrong with it.
        problem: &'static str,
    },
}

impl fmt::Display for CollectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectionError::MutatorsRunning { running } => {
                write!(f, "{running} mutators are still running; park them first")
            }
            CollectionError::InProgress => f.write_str("another collection is in progress"),
            CollectionError::Timeout { waited, running } => {
                write!(
                    f,
                    "the world did not stop within {waited:.1?}: {} mutator{} still running",
                    running.len(),
                    if running.len() == 1 { "" } else { "s" }
                )?;
                for (index, mutator) in running.iter().enumerate() {
                    write!(f, "{}{mutator}", if index == 0 { ": " } else { "; " })?;
                }
                Ok(())
            }
            CollectionError::BadRange {
                start,
                end,
                problem,
            } => {
                write!(
                    f,
                    "allocation range {start:#x}..{end:#x} rejected: {problem}"
                )
            }
        }
    }
}

impl std::error::Error for CollectionError {}

/// A mutator that was running (not parked) when a collection needed the world stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningMutator {
    /// The mutator's id ([`Mutator::id`](crate::Mutator::id)).
    pub id: u64,
    /// The name of the thread that last attached or unparked it, if it has one.
    pub thread_name: Option<String>,
    /// That thread's kernel thread id.
    pub thread_id: i32,
    /// How long it has been running since it last attached or unparked.
    pub running_for: std::time::Duration,
    /// Whether that thread still exists. `false`: the thread ended without the mutator
    /// being dropped (leaked with `mem::forget`, or a thread killed without unwinding), so it
    /// will never park.
    pub thread_exists: bool,
    /// Whether it is the thread asking for the collection, which must park its own mutator
    /// first.
    pub is_calling_thread: bool,
}

impl fmt::Display for RunningMutator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mutator {} on thread ", self.id)?;
        match &self.thread_name {
            Some(name) => write!(f, "{name:?} ")?,
            None => f.write_str("(unnamed) ")?,
        }
        write!(
            f,
            "(tid {}), running for {:.1?}",
            self.thread_id, self.running_for
        )?;
        if self.is_calling_thread {
            f.write_str(" (the calling thread: park its mutator before collecting)")?;
        } else if !self.thread_exists {
            f.write_str(" (its thread has exited: a leaked or abandoned mutator)")?;
        }
        Ok(())
    }
}

/// A heap walk met something that is not a well-formed object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    /// Where the bad object starts.
    pub address: usize,
    /// Its offset from the start of the allocation range.
    pub offset_bytes: usize,
    /// The size its header gave.
    pub size_bytes: usize,
    /// What is wrong.
    pub problem: &'static str,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "heap not parseable at {:#x} (offset {}): {} (size {})",
            self.address, self.offset_bytes, self.problem, self.size_bytes
        )
    }
}

impl std::error::Error for VerifyError {}
