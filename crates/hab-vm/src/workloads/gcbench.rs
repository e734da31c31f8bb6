//! Boehm's GCBench: a long-lived tree and a long-lived array stay reachable while many
//! temporary trees of growing depth are built top-down (allocate a node, then its children)
//! and bottom-up (children first). Scaled by its largest tree depth (16 in the original).

use std::sync::Arc;

use super::Outcome;
use crate::object::Shape;
use crate::thread::{Local, VmThread};
use crate::vm::{Vm, VmError};

/// A node: left and right, and two integers (`i`, `j`) in one data word each.
const NODE: Shape = Shape::new(2, 16);
const MIN_TREE_DEPTH: u32 = 4;

fn tree_size(depth: u32) -> u64 {
    (1 << (depth + 1)) - 1
}

/// Runs GCBench with temporary trees up to `max_depth` (the stretch tree is 2 deeper, the
/// long-lived tree as deep, the long-lived array `500000 >> (16 - max_depth)` doubles).
pub fn run(vm: &Arc<Vm>, max_depth: u32) -> Result<Outcome, VmError> {
    let max_depth = max_depth.max(MIN_TREE_DEPTH);
    let stretch_depth = max_depth + 2;
    let array_len = (500_000usize >> 16u32.saturating_sub(max_depth)).max(1000);
    let mut t = vm.attach();
    let t = &mut t;
    let mut lines = vec!["Garbage Collector Test".to_string()];
    lines.push(format!(
        " Stretching memory with a binary tree of depth {stretch_depth}"
    ));
    t.scope(|t| make_tree(t, stretch_depth).map(drop))?;
    let mut nodes = tree_size(stretch_depth);

    lines.push(format!(
        " Creating a long-lived binary tree of depth {max_depth}"
    ));
    let long_lived = t.alloc_record(NODE)?;
    populate(t, max_depth, long_lived)?;
    nodes += tree_size(max_depth);

    lines.push(format!(
        " Creating a long-lived array of {array_len} doubles"
    ));
    let array = t.alloc_byte_array(array_len * 8)?;
    for i in 0..array_len / 2 {
        t.write_word(array, i, (1.0 / i as f64).to_bits());
    }

    for depth in (MIN_TREE_DEPTH..=max_depth).step_by(2) {
        let iterations = 2 * tree_size(stretch_depth) / tree_size(depth);
        lines.push(format!("Creating {iterations} trees of depth {depth}"));
        for _ in 0..iterations {
            t.scope(|t| {
                let tree = t.alloc_record(NODE)?;
                populate(t, depth, tree)
            })?;
        }
        for _ in 0..iterations {
            t.scope(|t| make_tree(t, depth).map(drop))?;
        }
        nodes += 2 * iterations * tree_size(depth);
    }

    let kept = t.get_ref(long_lived, 0).is_some()
        && f64::from_bits(t.read_word(array, 1000.min(array_len / 2 - 1))) > 0.0;
    if !kept {
        return Err(VmError::Verify("the long-lived data was lost".into()));
    }
    lines.push(format!(
        " Long-lived tree and array still reachable ({} nodes checked)",
        count(t, long_lived)
    ));
    Ok(Outcome {
        lines,
        ops: nodes,
        op: "tree nodes allocated",
    })
}

/// Builds the children of `node` down to `depth`, top-down.
fn populate(t: &mut VmThread, depth: u32, node: Local) -> Result<(), VmError> {
    if depth == 0 {
        return Ok(());
    }
    t.scope(|t| {
        let left = t.alloc_record(NODE)?;
        t.set_ref(node, 0, Some(left));
        let right = t.alloc_record(NODE)?;
        t.set_ref(node, 1, Some(right));
        populate(t, depth - 1, left)?;
        populate(t, depth - 1, right)
    })
}

/// A tree of `depth`, bottom-up.
fn make_tree(t: &mut VmThread, depth: u32) -> Result<Local, VmError> {
    t.scope_keep(|t| {
        if depth == 0 {
            return t.alloc_record(NODE);
        }
        let left = make_tree(t, depth - 1)?;
        let right = make_tree(t, depth - 1)?;
        let node = t.alloc_record(NODE)?;
        t.set_ref(node, 0, Some(left));
        t.set_ref(node, 1, Some(right));
        Ok(node)
    })
}

fn count(t: &mut VmThread, node: Local) -> u64 {
    t.scope(|t| match t.get_ref(node, 0) {
        None => 1,
        Some(left) => {
            let right = t.get_ref(node, 1).expect("full trees");
            1 + count(t, left) + count(t, right)
        }
    })
}

/// Bytes live at once at most: the stretch tree, or the long-lived data and the largest
/// temporary tree.
pub fn max_live_bytes(max_depth: u32) -> usize {
    let max_depth = max_depth.max(MIN_TREE_DEPTH);
    let tree = |depth: u32| tree_size(depth) as usize * NODE.size_words() * 8;
    let array = (500_000usize >> 16u32.saturating_sub(max_depth)).max(1000) * 8;
    tree(max_depth + 2).max(2 * tree(max_depth) + array)
}
