//! Why a configuration was rejected: the field and the problem.

use std::fmt;

/// A configuration that was rejected, naming the field and the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    problem: String,
}

impl ConfigError {
    /// The configuration field that is wrong (`capacity`, `min_tlab`, `alignment`, …).
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// What is wrong with it, without the field's name.
    pub fn problem(&self) -> &str {
        &self.problem
    }

    pub(crate) fn new(field: &'static str, problem: impl Into<String>) -> Self {
        ConfigError {
            field,
            problem: problem.into(),
        }
    }

    pub(crate) fn invalid(field: &'static str, text: &str, expected: &str) -> Self {
        ConfigError::new(field, format!("{text:?} is not valid; expected {expected}"))
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid heap configuration: {}: {}",
            self.field, self.problem
        )
    }
}

impl std::error::Error for ConfigError {}
