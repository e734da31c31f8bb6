//! One collection at a time. Unlike a mutex held for the collection's duration, the lock
//! knows which thread began the collection it guards (by its `ThreadToken`, which no other
//! thread is given, not by its kernel id, which a new thread gets once the first one exits):
//! that thread asking for a second one
//! is told so instead of waiting for itself, a caller can wait with a deadline, and a forked
//! child drops a lock whose collector was another thread of its parent (that thread does
//! not exist in the child and will never finish).
//!
//! The lock is taken over only across a `fork`
//! ([`forget_holder_lost_in_fork`](CollectorLock::forget_holder_lost_in_fork)): in the same
//! process a collection stays in progress until its handle is dropped, whatever thread holds
//! the handle and whether or not the thread that began it still exists.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::platform::process::{Epoch, ForkGate, ThreadIdentity};

/// Why a thread that began a collection may not wait for one to end: what
/// [`CollectionError::AlreadyCollecting`](crate::CollectionError::AlreadyCollecting) says, and
/// the panics of the calls that would wait.
pub(crate) const CALLER_COLLECTS: &str = "the calling thread is running a collection (begun \
    and not finished): finish it first; until then every mutator is stopped";

/// Who runs a collection now.
#[derive(Default)]
pub(crate) struct CollectorLock {
    /// The thread that began the collection in progress, if one is.
    holder: Mutex<Option<ThreadIdentity>>,
    /// Advances when the holder lets go.
    released: Epoch,
}

/// The right to run a collection, released when dropped (also when unwinding).
pub(crate) struct CollectorGuard<'h>(&'h CollectorLock);

/// Why the lock was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotAcquired {
    /// Another collection is still in progress at the deadline.
    InProgress,
    /// The calling thread began the collection in progress: waiting would wait for itself.
    CallerCollects,
}

impl CollectorLock {
    /// Becomes the collector, waiting until `deadline` (forever if `None`) for the current one
    /// to finish. Refused at once when the calling thread began the collection in progress.
    pub(crate) fn acquire(
        &self,
        deadline: Option<Instant>,
    ) -> Result<CollectorGuard<'_>, NotAcquired> {
        loop {
            let seen = {
                let _fork = ForkGate::enter();
                let mut holder = self.holder.lock().unwrap_or_else(|e| e.into_inner());
                match holder.as_ref() {
                    None => {
                        *holder = Some(ThreadIdentity::current());
                        return Ok(CollectorGuard(self));
                    }
                    Some(thread) if thread.is_current() => return Err(NotAcquired::CallerCollects),
                    Some(_) => {}
                }
                self.released.current()
            };
            let wait = match deadline {
                None => Duration::from_millis(100),
                Some(deadline) => deadline
                    .checked_duration_since(Instant::now())
                    .ok_or(NotAcquired::InProgress)?,
            };
            self.released
                .wait_while(seen, wait.min(Duration::from_millis(100)));
        }
    }

    /// Whether the calling thread began the collection in progress.
    pub(crate) fn held_by_calling_thread(&self) -> bool {
        let _fork = ForkGate::enter();
        let holder = self.holder.lock().unwrap_or_else(|e| e.into_inner());
        holder.as_ref().is_some_and(ThreadIdentity::is_current)
    }

    /// In a child just forked: drops the lock if the collection in progress was begun by a
    /// thread that does not exist here (another thread of the parent), and returns whether it
    /// did; the caller then releases the mutators that collection stopped. A collection begun
    /// by the forking thread stays in progress: that thread holds it here too.
    pub(crate) fn forget_holder_lost_in_fork(&self) -> bool {
        let mut holder = self.holder.lock().unwrap_or_else(|e| e.into_inner());
        match holder.as_mut() {
            Some(thread) if thread.exists_here() => {
                thread.adopt_in_this_process();
                false
            }
            Some(_) => {
                *holder = None;
                true
            }
            None => false,
        }
    }
}

impl Drop for CollectorGuard<'_> {
    fn drop(&mut self) {
        let _fork = ForkGate::enter();
        *self.0.holder.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.0.released.advance();
    }
}
