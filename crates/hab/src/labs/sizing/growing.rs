//! Agesen's growing TLABs: a thread starts at 24 words, grows its TLABs by half at every
//! refill and halves them at every collection, within the smallest and largest TLAB. Its
//! refills resize, so they take the full slow path.

use super::policy::{CollectionFeedback, SizingPolicy};
use crate::config::{HeapConfig, GROWING_INITIAL_BYTES};

/// ×1.5 at every refill, ÷2 at every collection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Growing;

impl SizingPolicy for Growing {
    fn initial_bytes(&mut self, _: &HeapConfig, _: usize, _: f64) -> usize {
        GROWING_INITIAL_BYTES
    }

    fn resizes_at_refill(&self) -> bool {
        true
    }

    fn after_refill(&mut self, desired_bytes: usize) -> usize {
        desired_bytes / 2 * 3
    }

    fn after_collection(
        &mut self,
        _: &HeapConfig,
        desired_bytes: usize,
        _: CollectionFeedback,
    ) -> usize {
        desired_bytes / 2
    }
}
