//! Why a heap could not be created.

use std::fmt;
use std::io;

use crate::config::ConfigError;
use crate::memory::size::ByteSize;

/// Why a heap could not be created.
#[derive(Debug)]
pub enum HeapError {
    /// The configuration does not fit the object model.
    Config(ConfigError),
    /// The operating system refused to reserve the address range.
    Reserve {
        /// Bytes asked for.
        bytes: usize,
        /// What `mmap` said.
        source: io::Error,
    },
    /// The heap was to be pre-touched (`pretouch(true)`) but its pages cannot all be backed
    /// by memory: larger than the machine's (or the control group's) memory, or the kernel
    /// refused to populate them.
    Pretouch {
        /// Bytes to touch.
        bytes: usize,
        /// Why they cannot be.
        source: io::Error,
    },
}

impl fmt::Display for HeapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeapError::Config(error) => error.fmt(f),
            HeapError::Reserve { bytes, source } => {
                write!(
                    f,
                    "cannot reserve {} for the heap: {source}",
                    ByteSize::new(*bytes)
                )
            }
            HeapError::Pretouch { bytes, source } => {
                write!(
                    f,
                    "cannot pre-touch {} of heap: {source}",
                    ByteSize::new(*bytes)
                )
            }
        }
    }
}

impl std::error::Error for HeapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HeapError::Config(error) => Some(error),
            HeapError::Reserve { source, .. } | HeapError::Pretouch { source, .. } => Some(source),
        }
    }
}

impl From<ConfigError> for HeapError {
    fn from(error: ConfigError) -> Self {
        HeapError::Config(error)
    }
}
