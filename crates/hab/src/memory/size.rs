//! Byte sizes as people write them: `64MiB`, `4k`, `1 GiB`, `4096`.
//!
//! Every unit is binary (`k` = 1024), as in the JVM's `-Xmx64m` and `-XX:TLABSize=4k`.

use std::fmt;
use std::str::FromStr;

/// A number of bytes, parsed from text like `64MiB`, `4k`, `512KB` or `4096`.
///
/// Units (case-insensitive, optional space before them): `B`; `k`, `KB`, `KiB`; `m`, `MB`,
/// `MiB`; `g`, `GB`, `GiB`; `t`, `TB`, `TiB`. All are powers of 1024. Displayed with the
/// largest unit that divides the value exactly.
///
/// ```
/// use hab::ByteSize;
/// assert_eq!("64MiB".parse::<ByteSize>().unwrap().bytes(), 64 << 20);
/// assert_eq!("4k".parse::<ByteSize>().unwrap().bytes(), 4096);
/// assert_eq!(ByteSize::new(1536).to_string(), "1536B");
/// assert_eq!(ByteSize::new(2 << 20).to_string(), "2MiB");
/// assert!("12 parsecs".parse::<ByteSize>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(usize);

impl ByteSize {
    /// A size of `bytes` bytes.
    pub const fn new(bytes: usize) -> Self {
        ByteSize(bytes)
    }

    /// The size in bytes.
    pub const fn bytes(self) -> usize {
        self.0
    }
}

/// Why a text is not a byte size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeParseError {
    text: String,
    problem: &'static str,
}

impl fmt::Display for SizeParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not a size: {}", self.text, self.problem)
    }
}

impl std::error::Error for SizeParseError {}

const UNITS: [(&str, u32); 5] = [("", 0), ("k", 10), ("m", 20), ("g", 30), ("t", 40)];

impl FromStr for ByteSize {
    type Err = SizeParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |problem| SizeParseError {
            text: text.to_string(),
            problem,
        };
        let trimmed = text.trim();
        let digits_end = trimmed
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(trimmed.len());
        let (digits, unit) = trimmed.split_at(digits_end);
        if digits.is_empty() {
            return Err(error(
                "expected a whole number of bytes, optionally with a unit",
            ));
        }
        let number: usize = digits.parse().map_err(|_| error("number too large"))?;
        let unit = unit.trim_start().to_ascii_lowercase();
        let prefix = unit
            .strip_suffix("ib")
            .or_else(|| unit.strip_suffix('b'))
            .unwrap_or(&unit);
        let shift = UNITS
            .iter()
            .find(|(name, _)| *name == prefix)
            .map(|(_, shift)| *shift)
            .ok_or_else(|| error("unknown unit (use B, k, KiB, MiB, GiB or TiB)"))?;
        if unit == "ib" {
            return Err(error("unknown unit (use B, k, KiB, MiB, GiB or TiB)"));
        }
        number
            .checked_mul(1usize << shift)
            .map(ByteSize)
            .ok_or_else(|| error("size too large for this machine"))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.0;
        for (name, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
            if bytes != 0 && bytes.is_multiple_of(1usize << shift) {
                return write!(f, "{}{}", bytes >> shift, name);
            }
        }
        write!(f, "{bytes}B")
    }
}

impl From<usize> for ByteSize {
    fn from(bytes: usize) -> Self {
        ByteSize(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<usize, SizeParseError> {
        text.parse::<ByteSize>().map(ByteSize::bytes)
    }

    #[test]
    fn units_are_binary_and_case_insensitive() {
        assert_eq!(parse("4096").unwrap(), 4096);
        assert_eq!(parse("12B").unwrap(), 12);
        assert_eq!(parse("4k").unwrap(), 4096);
        assert_eq!(parse("4K").unwrap(), 4096);
        assert_eq!(parse("4KB").unwrap(), 4096);
        assert_eq!(parse("4KiB").unwrap(), 4096);
        assert_eq!(parse("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse(" 64 mib ").unwrap(), 64 << 20);
        assert_eq!(parse("2g").unwrap(), 2 << 30);
        assert_eq!(parse("1TiB").unwrap(), 1 << 40);
    }

    #[test]
    fn bad_sizes_say_why() {
        assert!(parse("").unwrap_err().to_string().contains("whole number"));
        assert!(parse("MiB")
            .unwrap_err()
            .to_string()
            .contains("whole number"));
        assert!(parse("-4k").is_err());
        assert!(parse("1.5MiB").unwrap_err().to_string().contains("unit"));
        assert!(parse("4 parsecs")
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
        assert!(parse("4ib")
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
        assert!(parse("99999999999999999999999")
            .unwrap_err()
            .to_string()
            .contains("too large"));
        assert!(parse("16777216TiB")
            .unwrap_err()
            .to_string()
            .contains("too large"));
    }

    #[test]
    fn display_round_trips() {
        for bytes in [0, 1, 1000, 1024, 1536, 4 << 20, 3 << 30] {
            let shown = ByteSize::new(bytes).to_string();
            assert_eq!(parse(&shown).unwrap(), bytes, "{shown}");
        }
    }
}
