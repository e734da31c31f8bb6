//! One collection at a time. Unlike a mutex held for the collection's duration, the lock
//! knows which thread holds it: a forked child takes over a lock its parent's collector held
//! (that thread will never finish here), and a caller can wait with a deadline.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::platform::process::{Epoch, ForkGate, ThreadIdentity};

/// Who runs a collection now. Unlike a mutex held for the collection's duration, it tells
/// a forked child that the collector was a thread of its parent (and so will never finish),
/// and lets a caller wait with a deadline.
#[derive(Default)]
pub(crate) struct CollectorLock {
    holder: Mutex<Option<ThreadIdentity>>,
    /// Advances when the holder lets go.
    released: Epoch,
}

/// The right to run a collection, released when dropped (also when unwinding).
pub(crate) struct CollectorGuard<'h>(&'h CollectorLock);

impl CollectorLock {
    /// Becomes the collector, waiting until `deadline` (forever if `None`) for the current one
    /// to finish. A holder that does not exist in this process (the parent's, after `fork`)
    /// is taken over.
    pub(crate) fn acquire(&self, deadline: Option<Instant>) -> Option<CollectorGuard<'_>> {
        loop {
            let seen = {
                let _fork = ForkGate::enter();
                let mut holder = self.holder.lock().unwrap_or_else(|e| e.into_inner());
                let stale = holder.as_ref().is_some_and(|thread| !thread.exists_here());
                if holder.is_none() || stale {
                    *holder = Some(ThreadIdentity::current());
                    return Some(CollectorGuard(self));
                }
                self.released.current()
            };
            let wait = match deadline {
                None => Duration::from_millis(100),
                Some(deadline) => deadline.checked_duration_since(Instant::now())?,
            };
            self.released
                .wait_while(seen, wait.min(Duration::from_millis(100)));
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
