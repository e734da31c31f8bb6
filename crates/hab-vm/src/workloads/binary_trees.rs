//! The Computer Language Benchmarks Game's binary-trees: allocate and walk perfect binary
//! trees of many depths while one long-lived tree stays reachable. Prints exactly the lines of
//! the reference program.

use std::sync::Arc;

use crate::object::Shape;
use crate::thread::{Local, VmThread};
use crate::vm::{Vm, VmError};

/// A tree node: two references (left, right) and no data.
const NODE: Shape = Shape::new(2, 0);
/// The smallest depth of the iterated trees.
const MIN_DEPTH: u32 = 4;

/// Runs the program for `depth` on one thread of `vm`; returns the lines it prints, each
/// without its newline.
pub fn run(vm: &Arc<Vm>, depth: u32) -> Result<Vec<String>, VmError> {
    let mut thread = vm.attach();
    let t = &mut thread;
    let max_depth = depth.max(MIN_DEPTH + 2);
    let stretch_depth = max_depth + 1;
    let mut lines = Vec::new();
    let check = t.scope(|t| bottom_up(t, stretch_depth).map(|tree| item_check(t, tree)))?;
    lines.push(format!(
        "stretch tree of depth {stretch_depth}\t check: {check}"
    ));
    let long_lived = bottom_up(t, max_depth)?;
    for depth in (MIN_DEPTH..=max_depth).step_by(2) {
        let iterations = 1u64 << (max_depth - depth + MIN_DEPTH);
        let mut check = 0;
        for _ in 0..iterations {
            check += t.scope(|t| bottom_up(t, depth).map(|tree| item_check(t, tree)))?;
        }
        lines.push(format!(
            "{iterations}\t trees of depth {depth}\t check: {check}"
        ));
    }
    lines.push(format!(
        "long lived tree of depth {max_depth}\t check: {}",
        item_check(t, long_lived)
    ));
    Ok(lines)
}

/// A perfect tree of `depth`, built bottom-up.
fn bottom_up(t: &mut VmThread, depth: u32) -> Result<Local, VmError> {
    t.scope_keep(|t| {
        if depth == 0 {
            return t.alloc_record(NODE);
        }
        let left = bottom_up(t, depth - 1)?;
        let right = bottom_up(t, depth - 1)?;
        let node = t.alloc_record(NODE)?;
        t.set_ref(node, 0, Some(left));
        t.set_ref(node, 1, Some(right));
        Ok(node)
    })
}

/// Counts the nodes of a tree.
fn item_check(t: &mut VmThread, node: Local) -> u64 {
    t.scope(|t| match t.get_ref(node, 0) {
        None => 1,
        Some(left) => {
            let right = t.get_ref(node, 1).expect("perfect trees");
            1 + item_check(t, left) + item_check(t, right)
        }
    })
}

/// The lines the reference program prints for `depth`, computed from the trees' sizes.
pub fn expected(depth: u32) -> Vec<String> {
    let nodes = |depth: u32| (1u64 << (depth + 1)) - 1;
    let max_depth = depth.max(MIN_DEPTH + 2);
    let mut lines = vec![format!(
        "stretch tree of depth {}\t check: {}",
        max_depth + 1,
        nodes(max_depth + 1)
    )];
    for depth in (MIN_DEPTH..=max_depth).step_by(2) {
        let iterations = 1u64 << (max_depth - depth + MIN_DEPTH);
        lines.push(format!(
            "{iterations}\t trees of depth {depth}\t check: {}",
            iterations * nodes(depth)
        ));
    }
    lines.push(format!(
        "long lived tree of depth {max_depth}\t check: {}",
        nodes(max_depth)
    ));
    lines
}

/// Tree nodes the program allocates and checks for `depth`: its operations.
pub fn checked_nodes(depth: u32) -> u64 {
    let nodes = |depth: u32| (1u64 << (depth + 1)) - 1;
    let max_depth = depth.max(MIN_DEPTH + 2);
    let iterated: u64 = (MIN_DEPTH..=max_depth)
        .step_by(2)
        .map(|depth| (1u64 << (max_depth - depth + MIN_DEPTH)) * nodes(depth))
        .sum();
    nodes(max_depth + 1) + iterated + nodes(max_depth)
}

/// Bytes that are live at once at most: the stretch tree, or the long-lived tree and the
/// largest iterated one.
pub fn max_live_bytes(depth: u32) -> usize {
    let max_depth = depth.max(MIN_DEPTH + 2);
    let tree = |depth: u32| ((1usize << (depth + 1)) - 1) * NODE.size_words() * 8;
    tree(max_depth + 1).max(2 * tree(max_depth))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published output of the reference program for depth 10.
    #[test]
    fn the_expected_lines_are_the_reference_programs() {
        let published = "stretch tree of depth 11\t check: 4095
1024\t trees of depth 4\t check: 31744
256\t trees of depth 6\t check: 32512
64\t trees of depth 8\t check: 32704
16\t trees of depth 10\t check: 32752
long lived tree of depth 10\t check: 2047";
        assert_eq!(expected(10).join("\n"), published);
    }
}
