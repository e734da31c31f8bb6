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
    if (result != nullptr) {
      *actual_words = words;
      return result;
    }
    HeapWord* top = space->top();
    HeapWord* end = space->end();
    size_t left = top < end ? pointer_delta(end, top) : 0;
    if (left < min_words) {
      return nullptr;
    }
    words = MIN2(words, left);
  }
  return nullptr;
}

size_t PSHabSpace::free_bytes() const {
  return eden()->free_in_bytes();
}

size_t PSHabSpace::eden_bytes() const {
  return eden()->capacity_in_bytes();
}
