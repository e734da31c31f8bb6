//! The LAB layer: the buffers objects are bumped in. A thread's TLAB (`tlab`) and how large
//! the next one is (`sizing`); the per-CPU LABs objects are carved from directly in the
//! `cpu-lab` mode (`cpu_labs`); the `flip` mode's choice between the two at collections (`flip`);
//! how TLABs shrink as a cycle's range runs out (`end_of_cycle`).

pub(crate) mod cpu_labs;
pub(crate) mod end_of_cycle;
pub(crate) mod flip;
pub(crate) mod sizing;
pub(crate) mod stats;
pub(crate) mod tlab;
