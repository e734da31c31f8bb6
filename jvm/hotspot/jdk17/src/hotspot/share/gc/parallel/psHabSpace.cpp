/*
 * Part of Hab's changes to HotSpot. Like HotSpot, this file is free software under the GNU
 * General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

#include "precompiled.hpp"
#include "gc/parallel/mutableSpace.hpp"
#include "gc/parallel/parallelScavengeHeap.hpp"
#include "gc/parallel/psHabSpace.hpp"
#include "gc/parallel/psYoungGen.hpp"

MutableSpace* PSHabSpace::eden() {
  return ParallelScavengeHeap::heap()->young_gen()->eden_space();
}

// desired_words, or what is left of eden when that is at least min_words: a few rounds of
// eden's own compare-and-swap, each asking at most what the last saw left.
HeapWord* PSHabSpace::carve(size_t min_words, size_t desired_words, size_t* actual_words) {
  MutableSpace* space = eden();
  size_t words = desired_words;
  for (int attempt = 0; attempt < 8; attempt++) {
    HeapWord* result = space->cas_allocate(words);
    if (result != NULL) {
      *actual_words = words;
      return result;
    }
    HeapWord* top = space->top();
    HeapWord* end = space->end();
    size_t left = top < end ? pointer_delta(end, top) : 0;
    if (left < min_words) {
      return NULL;
    }
    words = MIN2(words, left);
  }
  return NULL;
}

size_t PSHabSpace::free_bytes() const {
  return eden()->free_in_bytes();
}

size_t PSHabSpace::eden_bytes() const {
  return eden()->capacity_in_bytes();
}
