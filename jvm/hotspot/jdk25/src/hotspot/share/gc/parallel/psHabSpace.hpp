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

#ifndef SHARE_GC_PARALLEL_PSHABSPACE_HPP
#define SHARE_GC_PARALLEL_PSHABSPACE_HPP

#include "gc/shared/habLevels.hpp"
#include "runtime/globals.hpp"

class MutableSpace;

// The Parallel collector's side of HABs: buffers are carved from eden with the same
// compare-and-swap on its top as a TLAB, anywhere in it.
class PSHabSpace : public HabSpace {
  HeapWord* _base;

  static MutableSpace* eden();

 public:
  // Over eden, whose addresses lie at or above `base` (the reserved heap's start).
  explicit PSHabSpace(HeapWord* base) : _base(base) {}

  virtual const char* name() const { return "eden"; }
  virtual HeapWord* base() const { return _base; }
  virtual HeapWord* carve(size_t min_words, size_t desired_words, size_t* actual_words);
  virtual size_t free_bytes() const;
  virtual size_t eden_bytes() const;
  virtual size_t max_buffer_bytes() const { return 0; }
  // Eden is one range, but for a NUMA eden's pieces per node.
  virtual HabTlabExtension tlab_extension() const {
    HabTlabExtension anywhere_but_numa = {!UseNUMA, 0};
    return anywhere_but_numa;
  }
};

#endif // SHARE_GC_PARALLEL_PSHABSPACE_HPP
