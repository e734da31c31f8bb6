//! The LAB layer: the buffers objects are bumped in. A thread's TLAB (`tlab`) and how large
//! the next one is (`sizing`); the per-CPU LABs objects are carved from directly in the
//! `cpu-lab` mode (`cpu_labs`).

pub(crate) mod cpu_labs;
pub(crate) mod sizing;
pub(crate) mod tlab;
