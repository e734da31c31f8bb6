/*
 * Part of Hab's changes to HotSpot. Like HotSpot, this file is free software under the GNU
 * General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

#ifndef SHARE_GC_PARALLEL_PSHAB_HPP
#define SHARE_GC_PARALLEL_PSHAB_HPP

#include "memory/allStatic.hpp"
#include "utilities/globalDefinitions.hpp"

// Hierarchical allocation buffers between the TLABs and eden of the Parallel GC
// (-XX:+UseHAB): TLABs are carved from per-CPU, per-core or per-package buffers
// (-XX:HABLevels) that Hab's middle levels (libhab, loaded at start-up) refill from eden.
// TLAB sizing and the compiled fast paths are HotSpot's own; only the refill changes.
class PSHab : AllStatic {
 public:
  // Loads libhab and builds the levels over eden, whose addresses lie at or above `base`.
  // False, after printing why, when it cannot (the VM then does not start). Where eden
  // (`eden_bytes` at start-up) is less than twice what the buffers can hold, they would keep
  // much of it from the TLABs: HABs are turned off (UseHAB false) with a warning.
  static bool initialize(HeapWord* base, size_t eden_bytes);

  // A new TLAB of `requested_size` words, or at least `min_size`; NULL when eden is full.
  // TLABs larger than the lowest level's buffer come straight from eden.
  static HeapWord* allocate_new_tlab(size_t min_size, size_t requested_size, size_t* actual_size);

  // At a safepoint, before a collection or a heap walk: every buffer's free tail becomes a
  // filler object and the buffers are emptied, as eden is. Logs the levels (gc+tlab).
  static void retire_all();

  // At exit: what the levels did over the run (gc+tlab).
  static void print_summary();
};

#endif // SHARE_GC_PARALLEL_PSHAB_HPP
