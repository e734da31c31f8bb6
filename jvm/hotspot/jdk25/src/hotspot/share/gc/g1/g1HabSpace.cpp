/*
 * Copyright (c) 2026, the Hab authors. All rights reserved.
 * DO NOT ALTER OR REMOVE COPYRIGHT NOTICES OR THIS FILE HEADER.
 *
 * This code is free software; you can redistribute it and/or modify it
 * under the terms of the GNU General Public License version 2 only, as
 * published by the Free Software Foundation.
 *
 * This code is distributed in the hope that it will be useful, but WITHOUT
 * ANY WARRANTY; without even the implied warranty of MERCHANTABILITY or
 * FITNESS FOR A PARTICULAR PURPOSE.  See the GNU General Public License
 * version 2 for more details (a copy is included in the LICENSE file that
 * accompanied this code).
 *
 * You should have received a copy of the GNU General Public License version
 * 2 along with this work; if not, write to the Free Software Foundation,
 * Inc., 51 Franklin St, Fifth Floor, Boston, MA 02110-1301 USA.
 *
 * Please contact Oracle, 500 Oracle Parkway, Redwood Shores, CA 94065 USA
 * or visit www.oracle.com if you need additional information or have any
 * questions.
 *
 */

#include "gc/g1/g1Allocator.inline.hpp"
#include "gc/g1/g1CollectedHeap.inline.hpp"
#include "gc/g1/g1HabSpace.hpp"
#include "gc/g1/g1HeapRegion.hpp"
#include "gc/g1/g1Policy.hpp"

HeapWord* G1HabSpace::base() const {
  return G1CollectedHeap::heap()->reserved().start();
}

HeapWord* G1HabSpace::carve(size_t min_words, size_t desired_words, size_t* actual_words) {
  G1CollectedHeap* heap = G1CollectedHeap::heap();
  G1Allocator* allocator = heap->allocator();
  HeapWord* result = allocator->attempt_allocation(allocator->current_node_index(), min_words,
                                                   desired_words, actual_words);
  if (result != nullptr) {
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
  return regions_left * G1HeapRegion::GrainBytes + heap->unsafe_max_tlab_alloc(nullptr);
}

size_t G1HabSpace::eden_bytes() const {
  G1CollectedHeap* heap = G1CollectedHeap::heap();
  size_t target = heap->policy()->young_list_target_length();
  size_t survivors = heap->survivor_regions_count();
  return MAX2(target > survivors ? target - survivors : 0, (size_t)1) * G1HeapRegion::GrainBytes;
}

HabTlabExtension G1HabSpace::tlab_extension() const {
  HabTlabExtension within_region = {true, G1HeapRegion::GrainBytes};
  return within_region;
}

size_t G1HabSpace::max_buffer_bytes() const {
  return G1CollectedHeap::humongous_threshold_for(G1HeapRegion::GrainWords) * HeapWordSize;
}
