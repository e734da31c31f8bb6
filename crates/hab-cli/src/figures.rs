//! The arithmetic every figure of `hab run` and `hab report` goes through: one median, one
//! percentage, and [`Spread`], a figure measured over repetitions with its range, which
//! comparisons carry so that a verdict can tell a clear margin from noise.

/// The median of `values` (the upper one of an even count); NaN when there are none.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `part` in percent of `whole`; 0 when `whole` is 0.
pub fn percent(part: f64, whole: f64) -> f64 {
    if whole == 0.0 {
        0.0
    } else {
        100.0 * part / whole
    }
}

/// [`percent`] of two counts.
pub fn percent_of_counts(part: u64, whole: u64) -> f64 {
    percent(part as f64, whole as f64)
}

/// A positive figure measured over repetitions: the median and the smallest and largest.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; NaN everywhere when there are none.
    pub fn of(values: &[f64]) -> Spread {
        Spread {
            median: median(values),
            min: values.iter().copied().reduce(f64::min).unwrap_or(f64::NAN),
            max: values.iter().copied().reduce(f64::max).unwrap_or(f64::NAN),
        }
    }

    /// The spread of `values`, or `None` when there are none (a point that did not run).
    pub fn of_some(values: &[f64]) -> Option<Spread> {
        (!values.is_empty()).then(|| Spread::of(values))
    }

    /// `median (min–max)` with `digits` decimals: a table cell.
    pub fn cell(self, digits: usize) -> String {
        format!(
            "{:.digits$} ({:.digits$}–{:.digits$})",
            self.median, self.min, self.max
        )
    }

    /// One value, known exactly (a count of instructions, a figure measured once).
    pub fn exact(value: f64) -> Spread {
        Spread {
            median: value,
            min: value,
            max: value,
        }
    }

    /// `self / other`, with the widest range the two ranges allow (both positive).
    pub fn ratio(self, other: Spread) -> Spread {
        Spread {
            median: self.median / other.median,
            min: self.min / other.max,
            max: self.max / other.min,
        }
    }

    /// Every value times `factor` (positive).
    pub fn scaled(self, factor: f64) -> Spread {
        Spread {
            median: self.median * factor,
            min: self.min * factor,
            max: self.max * factor,
        }
    }

    /// How far the range reaches around the median: `(max - min) / median`, in percent.
    pub fn width_percent(self) -> f64 {
        percent(self.max - self.min, self.median)
    }
}

impl std::fmt::Display for Spread {
    /// `median (min–max)`, with two decimals.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.cell(2))
    }
}

/// The spread of `values` as a table cell with `digits` decimals, or a dash when there are
/// none.
pub fn spread_cell(values: &[f64], digits: usize) -> String {
    Spread::of_some(values).map_or("—".into(), |s| s.cell(digits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_percentages() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(&[]).is_nan());
        assert_eq!(percent(1.0, 4.0), 25.0);
        assert_eq!(percent(1.0, 0.0), 0.0);
    }

    #[test]
    fn ratios_take_the_widest_range() {
        let fast = Spread::of(&[1.0, 2.0, 1.5]);
        let slow = Spread::of(&[4.0, 6.0, 5.0]);
        let ratio = slow.ratio(fast);
        assert_eq!(ratio.median, 5.0 / 1.5);
        assert_eq!((ratio.min, ratio.max), (2.0, 6.0));
        assert_eq!(Spread::exact(3.0).scaled(2.0), Spread::exact(6.0));
        assert_eq!(Spread::of(&[9.0, 11.0, 10.0]).width_percent(), 20.0);
        assert_eq!(fast.to_string(), "1.50 (1.00–2.00)");
    }
}
