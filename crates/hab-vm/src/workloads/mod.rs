//! The seeds' workloads, written against the VM's safe API (handles, scopes, safepoints).

pub mod binary_trees;
