//! The fixed TLAB size (`-XX:TLABSize=<n> -XX:-ResizeTLAB`): every TLAB has the configured
//! size. Only the last TLAB carved before the heap fills may be smaller (the slow path's doing).

use super::policy::{CollectionFeedback, SizingPolicy};
use crate::config::HeapConfig;

/// Always `bytes`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fixed {
    pub(crate) bytes: usize,
}

impl SizingPolicy for Fixed {
    fn bounds(&self, _: &HeapConfig) -> (usize, usize) {
        (self.bytes, self.bytes)
    }

    fn initial_bytes(&mut self, _: &HeapConfig, _: usize, _: f64) -> usize {
        self.bytes
    }

    fn after_collection(&mut self, _: &HeapConfig, _: usize, _: CollectionFeedback) -> usize {
        self.bytes
    }
}
