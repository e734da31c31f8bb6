//! Statistics counters: written by one thread (the owner of the mutator they belong to, or a
//! collection while it is stopped) with a relaxed load and store, no atomic read-modify-write;
//! read by any thread at any time.

use std::sync::atomic::{AtomicU64, Ordering};
/// A counter with a single writer: adding is a relaxed load and store, no atomic RMW.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub(crate) fn add(&self, amount: u64) {
        self.0
            .store(self.0.load(Ordering::Relaxed) + amount, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn set(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// `part` as a percentage of `whole` (0 when `whole` is 0).
pub(crate) fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// Declares a snapshot struct of `u64` figures and its live counters, with `since`,
/// `snapshot` and `+=` field by field.
macro_rules! figures {
    ($(#[$doc:meta])* $stats:ident, $counters:ident { $($(#[$field_doc:meta])* $field:ident,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize))]
        pub struct $stats {
            $($(#[$field_doc])* pub $field: u64,)*
        }

        /// The live counters behind
        #[doc = concat!("[`", stringify!($stats), "`].")]
        #[derive(Debug, Default)]
        pub(crate) struct $counters {
            $(pub(crate) $field: Counter,)*
        }

        impl $counters {
            pub(crate) fn snapshot(&self) -> $stats {
                $stats { $($field: self.$field.get(),)* }
            }
        }

        impl $stats {
            /// The counts accumulated since `earlier`.
            pub fn since(&self, earlier: &$stats) -> $stats {
                $stats { $($field: self.$field.saturating_sub(earlier.$field),)* }
            }

            /// Every figure divided by `n` (at least 1): a mean over `n` runs.
            pub fn divided_by(&self, n: u64) -> $stats {
                $stats { $($field: self.$field / n.max(1),)* }
            }
        }

        impl AddAssign for $stats {
            fn add_assign(&mut self, other: $stats) {
                $(self.$field += other.$field;)*
            }
        }
    };
}
pub(crate) use figures;
