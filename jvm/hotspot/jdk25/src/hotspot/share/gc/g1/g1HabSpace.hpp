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

#ifndef SHARE_GC_G1_G1HABSPACE_HPP
#define SHARE_GC_G1_G1HABSPACE_HPP

#include "gc/shared/habLevels.hpp"

// G1's side of HABs: buffers are carved from the mutator allocation region of the thread's
// node (the retained region first), with the compare-and-swap on its top a TLAB takes; so a
// buffer never straddles a region, and a region's top, used() and the eden sizing count
// buffered bytes as used eden. Never the slow path: a new region or a pause is the
// collector's own path, taken outside the levels when a carve finds no room.
class G1HabSpace : public HabSpace {
 public:
  virtual const char* name() const { return "G1 eden regions"; }
  virtual HeapWord* base() const;
  virtual HeapWord* carve(size_t min_words, size_t desired_words, size_t* actual_words);
  // The regions the young target has left, and what the current region has.
  virtual size_t free_bytes() const;
  // Eden's target: the young target less the survivors, at least one region.
  virtual size_t eden_bytes() const;
  // Half a region: G1's largest TLAB.
  virtual size_t max_buffer_bytes() const;
  // A region: a TLAB may grow on within its region, not past it.
  virtual HabTlabExtension tlab_extension() const;
};

#endif // SHARE_GC_G1_G1HABSPACE_HPP
