/*
 * Part of Hab's changes to HotSpot. Like HotSpot, this file is free software under the GNU
 * General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

#include "precompiled.hpp"
#include "gc/g1/g1Allocator.inline.hpp"
#include "gc/g1/g1CollectedHeap.inline.hpp"
#include "gc/g1/g1HabSpace.hpp"
#include "gc/g1/g1Policy.hpp"
#include "gc/g1/heapRegion.hpp"

HeapWord* G1HabSpace::base() const {
  return G1CollectedHeap::heap()->reserved().start();
}

HeapWord* G1HabSpace::carve(size_t min_words, size_t desired_words, size_t* actual_words) {
  G1CollectedHeap* heap = G1CollectedHeap::heap();
  HeapWord* result = heap->allocator()->attempt_allocation(min_words, desired_words, actual_words);
  if (result != NULL) {
    // As for a TLAB: the post-write barrier then never queues a card of the buffer.
    heap->dirty_young_block(result, *actual_words);
  }
  return result;
}

size_t G1HabSpace::free_bytes() const {
  G1CollectedHeap* heap = G1CollectedHeap::heap();
  size_t target = heap->policy()->young_list_target_length();
  size_t young = heap->young_regions_count();
  size_t regions_left = target > young ? target - young : 0;
  return regions_left * HeapRegion::GrainBytes + heap->unsafe_max_tlab_alloc(NULL);
}

size_t G1HabSpace::eden_bytes() const {
  G1CollectedHeap* heap = G1CollectedHeap::heap();
  size_t target = heap->policy()->young_list_target_length();
  size_t survivors = heap->survivor_regions_count();
  return MAX2(target > survivors ? target - survivors : 0, (size_t)1) * HeapRegion::GrainBytes;
}

HabTlabExtension G1HabSpace::tlab_extension() const {
  HabTlabExtension within_region = {true, HeapRegion::GrainBytes};
  return within_region;
}

size_t G1HabSpace::max_buffer_bytes() const {
  return G1CollectedHeap::humongous_threshold_for(HeapRegion::GrainWords) * HeapWordSize;
}
