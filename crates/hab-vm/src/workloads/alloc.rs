//! Shipilëv's and Jaffer's allocation loops on the VM: objects of one size, written once;
//! `alloc-array` keeps every object in a reference array (all survive), `alloc-object` drops
//! each (none survive), and the VM collects when the space fills.

use std::sync::{Arc, Barrier};
use std::thread;

use super::Outcome;
use crate::object::{Shape, WORD_BYTES};
use crate::thread::VmThread;
use crate::vm::{Vm, VmError};

/// What to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alloc {
    /// Threads, each doing the same.
    pub threads: usize,
    /// Objects per thread.
    pub objects: usize,
    /// Object size in bytes, header included (a multiple of 8, at least 8).
    pub object_bytes: usize,
    /// Keep every object (alloc-array) or drop each (alloc-object).
    pub keep: bool,
}

impl Alloc {
    /// The record each object is: a header and raw data.
    fn shape(self) -> Shape {
        Shape::new(0, self.object_bytes.saturating_sub(WORD_BYTES))
    }

    /// Bytes kept alive at the end: every object and the arrays (alloc-array), else nothing.
    pub fn live_bytes(self) -> usize {
        if self.keep {
            self.threads * self.objects * (self.shape().size_words() + 1) * WORD_BYTES
        } else {
            0
        }
    }
}

/// Runs the loop on `spec.threads` threads.
pub fn run(vm: &Arc<Vm>, spec: Alloc) -> Result<Outcome, VmError> {
    if spec.object_bytes < WORD_BYTES || !spec.object_bytes.is_multiple_of(WORD_BYTES) {
        return Err(VmError::TooLarge(format!(
            "objects of {} bytes: the VM's are whole words, header included",
            spec.object_bytes
        )));
    }
    let start = Arc::new(Barrier::new(spec.threads));
    let handles: Vec<_> = (0..spec.threads)
        .map(|_| {
            let (vm, start) = (vm.clone(), start.clone());
            thread::Builder::new()
                .stack_size(1 << 20)
                .spawn(move || {
                    let mut t = vm.attach();
                    start.wait();
                    allocate(&mut t, spec)
                })
                .map_err(|e| VmError::Setup(e.to_string()))
        })
        .collect::<Result<_, _>>()?;
    for handle in handles {
        super::join(handle)?;
    }
    let objects = (spec.threads * spec.objects) as u64;
    Ok(Outcome {
        lines: vec![format!(
            "{} threads allocated {objects} objects of {} bytes{}",
            spec.threads,
            spec.object_bytes,
            if spec.keep { ", all kept" } else { "" }
        )],
        ops: objects,
        op: "objects",
    })
}

fn allocate(t: &mut VmThread, spec: Alloc) -> Result<(), VmError> {
    let shape = spec.shape();
    let array = if spec.keep {
        Some(t.alloc_ref_array(spec.objects)?)
    } else {
        None
    };
    for index in 0..spec.objects {
        t.scope(|t| -> Result<(), VmError> {
            let object = t.alloc_record(shape)?;
            if let Some(array) = array {
                t.set_ref(array, index, Some(object));
            }
            Ok(())
        })?;
    }
    Ok(())
}
