//! Why a collection could not start, or found the heap unparseable, naming the problem and
//! the values involved.

use std::fmt;
use std::time::Duration;

use crate::heap::collector_lock::{NotAcquired, CALLER_COLLECTS};

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
    /// The calling thread began a collection that has not ended (it may have handed it to
    /// another thread): waiting for it to end, as beginning another collection, attaching a
    /// mutator or unparking one would, could wait for the caller itself.
    AlreadyCollecting,
    /// The world did not stop in time
    /// ([`Heap::collection_within`](crate::Heap::collection_within)): these mutators were
    /// still running. The collection was abandoned and the parked mutators released.
    Timeout {
        /// How long the collection waited.
        waited: Duration,
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
            CollectionError::AlreadyCollecting => f.write_str(CALLER_COLLECTS),
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

impl From<NotAcquired> for CollectionError {
    fn from(reason: NotAcquired) -> Self {
        match reason {
            NotAcquired::InProgress => CollectionError::InProgress,
            NotAcquired::CallerCollects => CollectionError::AlreadyCollecting,
        }
    }
}

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
    pub running_for: Duration,
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
            "heap not parseable at {:#x} (offset {}): {}",
            self.address, self.offset_bytes, self.problem
        )?;
        if self.size_bytes > 0 {
            write!(f, " (size {})", self.size_bytes)?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifyError {}
