//! Which CPU am I on: the sources of the current CPU number.
//!
//! (Being written.)
