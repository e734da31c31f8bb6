//! What a restartable section made of a request, as its callers read it, and when a section
//! stops retrying.

use crate::memory::packed::PackedWord;

/// Aborts in a row after which a thread gives up and takes the fallback (e.g. a debugger
/// single-stepping through the section makes it abort forever).
pub(crate) const MAX_ABORTS: u64 = 64;
/// How a critical section ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Committed on `cpu`; `before` is the slot's word before the commit.
    Done { cpu: usize, before: PackedWord },
    /// Not committed: the slot of `cpu` had too little left (bump) or no longer held the
    /// expected word (install). `seen` is the slot's word.
    Refused { cpu: usize, seen: PackedWord },
    /// Not committed: the thread runs on another CPU than the install expected.
    Moved,
    /// Not committed: the thread runs on a CPU at or beyond the slots (a topology that does
    /// not cover every CPU the kernel numbers). The caller takes its compare-and-swap path.
    OutOfRange,
    /// Aborted [`MAX_ABORTS`] times in a row.
    GaveUp,
}

/// What the short refill's one-try bump ([`CpuSlots::bump_at_home`]) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HomeBump {
    /// Committed: the words taken start at this offset from the heap's base, in bytes (the
    /// offset the slot's word held, never 0).
    Done { offset_bytes: usize },
    /// Too few words left, or an index at or beyond the slots: nothing written.
    Refused,
    /// Interrupted (a preemption, a migration, a signal): nothing written.
    Aborted,
}

impl HomeBump {
    /// The section's outputs read: the offset in bytes (0 unless committed) and the slot's
    /// address (0 after an abort).
    #[inline(always)]
    pub(super) fn read(offset_bytes: u64, slot: usize) -> HomeBump {
        match (offset_bytes, slot) {
            (0, 0) => HomeBump::Aborted,
            (0, _) => HomeBump::Refused,
            (offset_bytes, _) => HomeBump::Done {
                offset_bytes: offset_bytes as usize,
            },
        }
    }
}

/// How a `cpu-lab`-mode bump-or-claim section ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LabBump {
    /// The object fits: it starts at `address`, in the LAB of `cpu`.
    Object { cpu: usize, address: usize },
    /// It does not fit: the section emptied the LAB of `cpu`, whose state was
    /// `{top, end, limit}`; when `top <= end`, its free memory `[top, limit + reserve)` is now
    /// the thread's (ready for objects up to `end`, not yet zeroed beyond).
    Claimed {
        cpu: usize,
        top: usize,
        end: usize,
        limit: usize,
    },
    /// The thread runs on a CPU at or beyond the slots: nothing was touched.
    OutOfRange,
    /// Aborted [`MAX_ABORTS`] times in a row.
    GaveUp,
}

/// How a `cpu-lab`-mode install section ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LabInstall {
    /// The new LAB is `cpu`'s.
    Done { cpu: usize },
    /// `cpu`'s LAB still has free memory (another thread installed one first): not installed.
    Occupied { cpu: usize },
    /// The thread runs on a CPU at or beyond the slots: not installed.
    OutOfRange,
    /// Aborted [`MAX_ABORTS`] times in a row.
    GaveUp,
}
