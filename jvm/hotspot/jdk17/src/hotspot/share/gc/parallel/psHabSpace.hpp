/*
 * Part of Hab's changes to HotSpot. Like HotSpot, this file is free software under the GNU
 * General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
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
