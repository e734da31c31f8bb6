//! The levels layer: the middle levels between TLABs and the global heap. Their shared
//! vocabulary (`chunk`: chunks, portions, a level's shape, the refilling thread's hooks) sits
//! below the level kinds, which do not import each other's protocol. The lock-free
//! protocol over one compare-and-swap buffer per domain (`middle`), the restartable per-CPU
//! buffers of the `cpu` level (`cpu_buffers`), the chunks a refill could not install (`sideline`),
//! and the refilling thread's side: where it runs, where its events are counted (`refill`);
//! the levels as a component over a runtime's own space (`component`); the policy that
//! resizes their buffers at collections (`buffer_sizing`).

pub(crate) mod buffer_end_of_cycle;
pub(crate) mod buffer_sizing;
pub(crate) mod chunk;
pub(crate) mod component;
pub(crate) mod cpu_buffers;
pub(crate) mod heap_levels;
pub(crate) mod middle;
pub(crate) mod refill;
pub(crate) mod sideline;
pub(crate) mod stats;
