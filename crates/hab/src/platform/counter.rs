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

/// What a statistics snapshot (or an array of them) does figure by figure: the figures
/// accumulated since an earlier snapshot, a mean over `n` runs, a sum.
pub(crate) trait Figures: Copy {
    fn since(&self, earlier: &Self) -> Self;
    fn divided_by(&self, n: u64) -> Self;
    fn add(&mut self, other: &Self);
}

impl<T: Figures, const N: usize> Figures for [T; N] {
    fn since(&self, earlier: &Self) -> Self {
        std::array::from_fn(|i| self[i].since(&earlier[i]))
    }

    fn divided_by(&self, n: u64) -> Self {
        std::array::from_fn(|i| self[i].divided_by(n))
    }

    fn add(&mut self, other: &Self) {
        for (mine, theirs) in self.iter_mut().zip(other) {
            mine.add(theirs);
        }
    }
}

/// Live counters that read as a snapshot.
pub(crate) trait Snapshot {
    type Figures;
    fn snapshot(&self) -> Self::Figures;
}

impl<C: Snapshot, const N: usize> Snapshot for [C; N] {
    type Figures = [C::Figures; N];

    fn snapshot(&self) -> Self::Figures {
        std::array::from_fn(|i| self[i].snapshot())
    }
}

/// Declares a statistics snapshot and its live counters from one list of figures, with
/// `snapshot`, `since`, `divided_by` and `+=` figure by figure:
/// - the counts (each a `u64` of the snapshot and a [`Counter`]);
/// - optionally `gauges { … }`: `u64` values that `since` keeps as they are now (a size, not a
///   count);
/// - optionally `nested { name: Stats => Counters, … }`: figures that are themselves such a
///   snapshot (or an array of them), with their counters;
/// - attributes before the counters' name apply to the counters' struct (an alignment).
///
/// A figure is declared once here, and its name with it: [`NAMES`](crate::LevelStats::NAMES)
/// lists the counts and gauges in declaration order, which the JSON's keys, the C struct's
/// fields (checked by the C ABI's header test) and the log lines' labels follow;
/// `named_figures` and `set_figure` read and write them by name, and
/// [`write_figures`](crate::LevelStats::write_figures) writes them as `name: value` pairs.
macro_rules! figures {
    (
        $(#[$doc:meta])* $stats:ident, $(#[$counters_meta:meta])* $counters:ident {
            $($(#[$field_doc:meta])* $field:ident,)*
        }
        $(gauges {
            $($(#[$gauge_doc:meta])* $gauge:ident,)*
        })?
        $(nested {
            $($(#[$nested_doc:meta])* $nested:ident: $nested_ty:ty => $nested_counters:ty,)*
        })?
    ) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize))]
        pub struct $stats {
            $($(#[$field_doc])* pub $field: u64,)*
            $($($(#[$gauge_doc])* pub $gauge: u64,)*)?
            $($($(#[$nested_doc])* pub $nested: $nested_ty,)*)?
        }

        /// The live counters behind
        #[doc = concat!("[`", stringify!($stats), "`].")]
        #[derive(Debug, Default)]
        $(#[$counters_meta])*
        pub(crate) struct $counters {
            $(pub(crate) $field: $crate::platform::counter::Counter,)*
            $($(pub(crate) $gauge: $crate::platform::counter::Counter,)*)?
            $($(pub(crate) $nested: $nested_counters,)*)?
        }

        impl $counters {
            pub(crate) fn snapshot(&self) -> $stats {
                #[allow(unused_imports)]
                use $crate::platform::counter::Snapshot as _;
                $stats {
                    $($field: self.$field.get(),)*
                    $($($gauge: self.$gauge.get(),)*)?
                    $($($nested: self.$nested.snapshot(),)*)?
                }
            }
        }

        impl $crate::platform::counter::Snapshot for $counters {
            type Figures = $stats;

            fn snapshot(&self) -> $stats {
                $counters::snapshot(self)
            }
        }

        impl $stats {
            /// The counts accumulated since `earlier`, a snapshot of the same counters taken
            /// before (gauges as they are in this one).
            pub fn since(&self, earlier: &$stats) -> $stats {
                #[allow(unused_imports)]
                use $crate::platform::counter::Figures as _;
                let _ = earlier;
                $stats {
                    $($field: self.$field.saturating_sub(earlier.$field),)*
                    $($($gauge: self.$gauge,)*)?
                    $($($nested: self.$nested.since(&earlier.$nested),)*)?
                }
            }

            /// The names of the counts and gauges, in declaration order: the JSON's keys,
            /// the C struct's fields and the labels of the log lines.
            pub const NAMES: &'static [&'static str] =
                &[$(stringify!($field),)* $($(stringify!($gauge),)*)?];

            /// The counts and gauges with their names, in the order of
            #[doc = concat!("[`NAMES`](", stringify!($stats), "::NAMES).")]
            pub fn named_figures(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$((stringify!($field), self.$field),)* $($((stringify!($gauge), self.$gauge),)*)?]
                    .into_iter()
            }

            /// Sets the count or gauge called `name` to `value`; `false` (nothing set) when
            /// none has that name.
            pub fn set_figure(&mut self, name: &str, value: u64) -> bool {
                match name {
                    $(stringify!($field) => self.$field = value,)*
                    $($(stringify!($gauge) => self.$gauge = value,)*)?
                    _ => return false,
                }
                true
            }

            /// Writes the counts and gauges that are not zero as `name: value` pairs
            /// separated by spaces (bytes exact, as the names say), in declaration order;
            /// nothing when every one is zero. Read back with `set_figure`.
            pub fn write_figures(&self, out: &mut impl std::fmt::Write) -> std::fmt::Result {
                let mut separator = "";
                for (name, value) in self.named_figures().filter(|&(_, value)| value != 0) {
                    write!(out, "{separator}{name}: {value}")?;
                    separator = " ";
                }
                Ok(())
            }

            /// Every figure divided by `n` (at least 1): a mean over `n` runs.
            pub fn divided_by(&self, n: u64) -> $stats {
                #[allow(unused_imports)]
                use $crate::platform::counter::Figures as _;
                $stats {
                    $($field: self.$field / n.max(1),)*
                    $($($gauge: self.$gauge / n.max(1),)*)?
                    $($($nested: self.$nested.divided_by(n),)*)?
                }
            }
        }

        impl $crate::platform::counter::Figures for $stats {
            fn since(&self, earlier: &Self) -> Self {
                $stats::since(self, earlier)
            }

            fn divided_by(&self, n: u64) -> Self {
                $stats::divided_by(self, n)
            }

            fn add(&mut self, other: &Self) {
                *self += *other;
            }
        }

        impl AddAssign for $stats {
            fn add_assign(&mut self, other: $stats) {
                #[allow(unused_imports)]
                use $crate::platform::counter::Figures as _;
                $(self.$field += other.$field;)*
                $($(self.$gauge += other.$gauge;)*)?
                $($(self.$nested.add(&other.$nested);)*)?
            }
        }
    };
}
pub(crate) use figures;
