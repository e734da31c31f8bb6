//! A `_213_javac`-like workload: one thread compiles "units", each a tree of small nodes of
//! many sizes; a few nodes enter a symbol table that lives for the whole run, and the result
//! of the last units is kept for a while. Throughput is objects allocated per second.

use std::collections::VecDeque;
use std::sync::Arc;

use super::{Outcome, Rng};
use crate::object::Shape;
use crate::thread::{Local, VmThread};
use crate::vm::{Vm, VmError};

/// Buckets of the symbol table (chained entries).
const BUCKETS: usize = 1024;
/// A symbol-table entry: next entry and the symbol's node; a hash.
const ENTRY: Shape = Shape::new(2, 8);
/// Units whose result stays reachable.
const KEPT_UNITS: usize = 16;
/// Entries per bucket above which the bucket is emptied (old symbols die).
const MAX_CHAIN: u64 = 8;

/// Runs `units` compilation units of about `nodes_per_unit` nodes each.
pub fn run(vm: &Arc<Vm>, units: usize, nodes_per_unit: usize) -> Result<Outcome, VmError> {
    let mut t = vm.attach();
    let t = &mut t;
    let mut rng = Rng::new(213);
    let symbols = t.alloc_ref_array(BUCKETS)?;
    let chain_lengths = t.alloc_byte_array(BUCKETS * 8)?;
    let results = t.alloc_ref_array(KEPT_UNITS)?;
    let mut allocated = 3u64;
    for unit in 0..units {
        t.scope(|t| -> Result<(), VmError> {
            let (tree, count) = build(t, &mut rng, symbols, chain_lengths, nodes_per_unit)?;
            allocated += count;
            t.set_ref(results, unit % KEPT_UNITS, Some(tree));
            Ok(())
        })?;
    }
    Ok(Outcome {
        lines: vec![format!(
            "compiled {units} units: {allocated} objects allocated"
        )],
        ops: allocated,
        op: "objects allocated",
    })
}

/// A unit's tree: nodes of 0 to 4 children and 0 to 64 bytes; about one in ten is a symbol.
/// Returns the root and the objects allocated.
fn build(
    t: &mut VmThread,
    rng: &mut Rng,
    symbols: Local,
    chain_lengths: Local,
    nodes: usize,
) -> Result<(Local, u64), VmError> {
    let mut allocated = 0u64;
    let root = t.scope_keep(|t| {
        let root = t.alloc_record(Shape::new(4, 16))?;
        allocated += 1;
        // Nodes still to fill, as handles: a breadth-first build.
        let mut open = VecDeque::from([root]);
        let mut made = 1;
        while made < nodes {
            let Some(parent) = open.pop_front() else {
                break;
            };
            let children = t.len(parent).min(4);
            for child_index in 0..children {
                let shape = Shape::new(rng.below(5) as usize, 8 * rng.below(9) as usize);
                let child = t.alloc_record(shape)?;
                allocated += 1;
                made += 1;
                t.set_ref(parent, child_index, Some(child));
                if rng.below(10) == 0 {
                    add_symbol(t, rng, symbols, chain_lengths, child)?;
                    allocated += 1;
                }
                if shape.refs > 0 {
                    open.push_back(child);
                }
            }
        }
        Ok(root)
    })?;
    Ok((root, allocated))
}

/// Links `node` into the symbol table.
fn add_symbol(
    t: &mut VmThread,
    rng: &mut Rng,
    symbols: Local,
    chain_lengths: Local,
    node: Local,
) -> Result<(), VmError> {
    let hash = rng.next();
    let bucket = (hash % BUCKETS as u64) as usize;
    t.scope(|t| {
        let entry = t.alloc_record(ENTRY)?;
        let length = t.read_word(chain_lengths, bucket);
        let next = if length >= MAX_CHAIN {
            t.write_word(chain_lengths, bucket, 1);
            None
        } else {
            t.write_word(chain_lengths, bucket, length + 1);
            t.get_ref(symbols, bucket)
        };
        t.set_ref(entry, 0, next);
        t.set_ref(entry, 1, Some(node));
        t.write_word(entry, 0, hash);
        t.set_ref(symbols, bucket, Some(entry));
        Ok(())
    })
}
