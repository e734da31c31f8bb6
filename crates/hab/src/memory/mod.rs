//! The memory layer: the address range a heap owns and how its gaps are filled. Nothing here
//! knows about threads, CPUs or buffers.
//!
//! - `reservation`: the `mmap` reservation, and the memory a process may use;
//! - `global`: the global top, bumped with a compare-and-swap (the level every other level
//!   refills from);
//! - `object_model`: how the runtime's objects and fillers are read and written;
//! - `size`: byte sizes as people write them (`"16MiB"`); `words`: the word unit of packed
//!   offsets; `packed`: one word holding an offset in words and a count;
//! - `space`: the global heap and the filler rules together, what the layers above take;
//! - `relaxed`: relaxed atomic loads of words other threads write, folded into the compares
//!   that use them.

pub(crate) mod global;
pub(crate) mod object_model;
pub(crate) mod packed;
pub(crate) mod relaxed;
pub(crate) mod reservation;
pub(crate) mod size;
pub(crate) mod space;
pub(crate) mod words;
