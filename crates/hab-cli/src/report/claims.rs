//! Claims and their verdicts: what each experiment set out to show, judged on this run's
//! figures before any text is written. A figure carries its range over the repetitions
//! ([`Spread`]); a claim holds when the whole range is on the right side of its bound, fails
//! when the whole range is on the wrong side, and is *inconclusive* when the range straddles
//! the bound: the machine was too noisy in this run to say.

use std::fmt;

use crate::figures::Spread;

/// Whether a claim held in this run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Yes,
    No,
    /// The figure's range over the repetitions straddles the bound.
    Inconclusive,
}

impl Verdict {
    /// `value ≥ bound`.
    pub fn at_least(value: Spread, bound: f64) -> Verdict {
        if value.min >= bound {
            Verdict::Yes
        } else if value.max < bound {
            Verdict::No
        } else {
            Verdict::Inconclusive
        }
    }

    /// `value ≤ bound`.
    pub fn at_most(value: Spread, bound: f64) -> Verdict {
        if value.max <= bound {
            Verdict::Yes
        } else if value.min > bound {
            Verdict::No
        } else {
            Verdict::Inconclusive
        }
    }

    /// `value ≤ other`, both measured: judged on their ranges, so no division by a figure that
    /// may be 0.
    pub fn not_above(value: Spread, other: Spread) -> Verdict {
        if value.max <= other.min {
            Verdict::Yes
        } else if value.min > other.max {
            Verdict::No
        } else {
            Verdict::Inconclusive
        }
    }

    /// Both claims: no if either fails, else inconclusive if either is.
    pub fn and(self, other: Verdict) -> Verdict {
        match (self, other) {
            (Verdict::No, _) | (_, Verdict::No) => Verdict::No,
            (Verdict::Inconclusive, _) | (_, Verdict::Inconclusive) => Verdict::Inconclusive,
            _ => Verdict::Yes,
        }
    }
}

impl fmt::Display for Verdict {
    /// `yes`, a bold `no`, or `inconclusive`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Yes => "yes",
            Verdict::No => "**no**",
            Verdict::Inconclusive => "inconclusive",
        })
    }
}

/// A claim and its verdict, as the report's list of claims shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    /// Whose claim: a seed's name, or `Beside HotSpot`.
    pub source: String,
    pub statement: String,
    pub verdict: Verdict,
}

/// The claims a run's sections checked, gathered as they were judged.
#[derive(Default)]
pub struct Claims {
    list: Vec<Claim>,
}

impl Claims {
    /// Records a claim and returns its verdict, for the section's text.
    pub fn judge(&mut self, source: &str, statement: &str, verdict: Verdict) -> Verdict {
        self.list.push(Claim {
            source: source.to_string(),
            statement: statement.to_string(),
            verdict,
        });
        verdict
    }

    /// The verdicts so far, in the order judged.
    #[cfg(test)]
    pub fn verdicts(&self) -> Vec<Verdict> {
        self.list.iter().map(|claim| claim.verdict).collect()
    }

    /// The claims so far, in the order judged.
    #[cfg(test)]
    pub fn claims(&self) -> &[Claim] {
        &self.list
    }

    /// The section that lists every claim with its verdict.
    pub fn render(&self) -> String {
        let mut s = String::from("## The claims checked in this run\n\n");
        for claim in &self.list {
            s += &format!(
                "- {} ({}): {}\n",
                claim.source, claim.verdict, claim.statement
            );
        }
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_across_the_bound_is_inconclusive() {
        let spread = |min, max| Spread {
            median: (min + max) / 2.0,
            min,
            max,
        };
        assert_eq!(Verdict::at_least(spread(2.1, 2.5), 2.0), Verdict::Yes);
        assert_eq!(Verdict::at_least(spread(1.5, 1.9), 2.0), Verdict::No);
        assert_eq!(
            Verdict::at_least(spread(1.9, 2.1), 2.0),
            Verdict::Inconclusive
        );
        assert_eq!(Verdict::at_most(spread(9.0, 10.0), 10.0), Verdict::Yes);
        assert_eq!(Verdict::at_most(spread(10.5, 11.0), 10.0), Verdict::No);
        assert_eq!(
            Verdict::at_most(spread(9.5, 10.5), 10.0),
            Verdict::Inconclusive
        );
        assert_eq!(Verdict::at_most(Spread::exact(9.0), 10.0), Verdict::Yes);
        assert_eq!(
            Verdict::not_above(spread(0.0, 1.0), spread(1.0, 3.0)),
            Verdict::Yes
        );
        assert_eq!(
            Verdict::not_above(spread(4.0, 5.0), spread(1.0, 3.0)),
            Verdict::No
        );
        assert_eq!(
            Verdict::not_above(spread(2.0, 5.0), spread(1.0, 3.0)),
            Verdict::Inconclusive
        );
    }

    #[test]
    fn both_claims_fail_if_either_does() {
        use Verdict::*;
        assert_eq!(Yes.and(Yes), Yes);
        assert_eq!(Yes.and(Inconclusive), Inconclusive);
        assert_eq!(Inconclusive.and(No), No);
        assert_eq!(No.and(Yes), No);
    }

    #[test]
    fn the_list_has_each_claim_with_its_verdict() {
        let mut claims = Claims::default();
        claims.judge("First", "small is fast.", Verdict::Yes);
        claims.judge(
            "Beside HotSpot",
            "Hab is at most HotSpot.",
            Verdict::Inconclusive,
        );
        claims.judge("Second", "big is slow.", Verdict::No);
        assert_eq!(
            claims.render(),
            "## The claims checked in this run\n\n\
             - First (yes): small is fast.\n\
             - Beside HotSpot (inconclusive): Hab is at most HotSpot.\n\
             - Second (**no**): big is slow.\n\n"
        );
    }
}
