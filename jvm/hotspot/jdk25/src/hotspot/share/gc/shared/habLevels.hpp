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

#ifndef SHARE_GC_SHARED_HABLEVELS_HPP
#define SHARE_GC_SHARED_HABLEVELS_HPP

#include "gc/shared/tlab_globals.hpp" // UseHAB and the HAB flags
#include "memory/allocation.hpp"
#include "memory/allStatic.hpp"
#include "utilities/globalDefinitions.hpp"

class outputStream;
struct hab_cpu_buffer_path;
struct hab_flip_cycle;
struct hab_level_stats;

// Where a TLAB may run on into the memory right after its hard end when that memory is the
// next piece of one buffer (C2's refill stub extends TLABs so).
struct HabTlabExtension {
  bool allowed;        // false: never (an eden in pieces per NUMA node)
  size_t block_bytes;  // within an aligned block of this many bytes (a power of two: G1's
                       // regions, which no TLAB may cross), or anywhere (0: Parallel's eden)
};

// Where a collector's TLABs come from, as Hab's levels see it: the one thing each collector
// gives (Parallel: eden; G1: its mutator allocation regions). Called by any Java thread that
// refills a buffer, concurrently.
class HabSpace : public CHeapObj<mtGC> {
 public:
  // What the log calls it ("eden", "G1 eden regions").
  virtual const char* name() const = 0;
  // The lowest address a carve can return.
  virtual HeapWord* base() const = 0;
  // desired_words, or what is left of the piece it carves from if that is at least
  // min_words; nullptr when there is not that much. Lock-free: never blocks, never reaches a
  // safepoint (a buffer's refill must not straddle one: retire_all needs no thread carving).
  virtual HeapWord* carve(size_t min_words, size_t desired_words, size_t* actual_words) = 0;
  // The bytes left before the next collection (an estimate is fine).
  virtual size_t free_bytes() const = 0;
  // The bytes of young space the buffers share this cycle: what their sizes follow.
  virtual size_t eden_bytes() const = 0;
  // The largest buffer the space hands out in one piece (0: no bound).
  virtual size_t max_buffer_bytes() const = 0;
  // Where a TLAB may run on past its hard end (HabTlabExtension).
  virtual HabTlabExtension tlab_extension() const = 0;
};

// Hierarchical allocation buffers between a collector's TLABs and its young space
// (-XX:+UseHAB): TLABs are carved from per-CPU, per-core or per-package buffers
// (-XX:HABLevels) that Hab's middle levels (libhab, loaded at start-up) refill from the
// collector's HabSpace. TLAB sizing and the compiled fast paths are HotSpot's own; the refill
// changes. This class is the glue to libhab only: it loads it, builds the levels, carves
// through them and reads their figures; the per-CPU LAB mode and the stubs that bump the
// buffers from compiled code build on it (habCpuLabs.hpp). Collector-neutral: each collector
// gives its space at start-up, asks allocate_new_tlab first in its own allocate_new_tlab, and
// CollectedHeap::ensure_parsability retires the buffers.
class HabLevels : AllStatic {
 public:
  // Loads libhab and builds the levels over `space` (owned from now on). Sizes that do not fit
  // the space are brought down, with a warning that says so. False, after printing why, for
  // bad flags (the VM then does not start); where HABs cannot work at all (no libhab), a
  // warning and UseHAB turned off, and true.
  static bool initialize(HabSpace* space);

  // On the calling thread, before it allocates (every thread that gets a TLAB: Java threads at
  // start, JNI-attached threads at attach, the main thread once the heap is up): registers
  // its rseq area where Hab owns the registrations (glibc registered none), so that the stubs'
  // sections through the fixed area offset are protected. Nothing before initialize.
  static void attach_thread();

  // A new TLAB of `requested_size` words, or at least `min_size`, through the levels; nullptr
  // when the levels do not serve it (larger than their buffers, or the space above them has
  // no room for a buffer): the collector then carves it as it does without HABs.
  static HeapWord* allocate_new_tlab(size_t min_size, size_t requested_size, size_t* actual_size);

  // At a safepoint, whenever the heap is made parsable: every buffer's free tail becomes a
  // filler object and the buffers are emptied (`at_collection`: the TLABs are retired too, a
  // cycle ends). Logs the levels (gc+tlab=debug).
  static void retire_all(bool at_collection);

  // At a collection, after retire_all (and after the per-CPU LAB mode has read the buffers the
  // cycle had): with HABLevels=auto, the buffers are resized to follow the cycle's allocation.
  static void resize_for_next_cycle();

  // At exit: what the levels did over the run, for people.
  static void print_summary(outputStream* out);

  // At exit, HabExitLine's part from the levels: " key=value" words, exact integers.
  static void print_exit_figures(outputStream* out);

  // The layout compiled code bumps the per-CPU buffers by (hab.h): nullptr where the levels
  // publish none (their lowest level is not a restartable cpu level: another list, getcpu,
  // or a kernel that refuses rseq); initialize said why.
  static const hab_cpu_buffer_path* cpu_buffer_path();

  // Why cpu_buffer_path is nullptr (libhab's words); nullptr where it is not.
  static const char* no_cpu_buffer_path();

  // The lowest level's figures now (libhab's hab_level_stats); false where there are none.
  static bool lowest_level_stats(hab_level_stats* out);

  // The space's HabSpace::eden_bytes: the bytes of young space this cycle.
  static size_t eden_bytes();

  // libhab's flip policy (hab_flip_next_in_cpu_labs): whether the cycle after `cycle` is in
  // per-CPU LABs.
  static bool flip_next_in_cpu_labs(const hab_flip_cycle& cycle);

  // libhab's hab_flip_cycles_over_bound: the judged cycles in TLABs in a row, `cycle`
  // included, whose tails were over the flip's bound (the next one's
  // previous_cycles_over_bound).
  static uint64_t flip_cycles_over_bound(const hab_flip_cycle& cycle);

  // The largest TLAB the levels carve (words): larger ones come from the collector.
  static size_t max_tlab_words();

  // The word (words) that bounds the TLABs compiled refills take from the buffers: near the
  // end of the space, the share of what is left that the levels give the runtime's refills.
  static const volatile size_t* tlab_limit_words_address();

  // The bytes of one buffer of the lowest level this cycle (they change at collections).
  static size_t lowest_buffer_bytes();

  // The space's HabSpace::tlab_extension.
  static HabTlabExtension tlab_extension();

  // A chunk of at least `words` (its length in *chunk_words: a little more where the rest of
  // the buffer would be too short for a filler) from the calling thread's lowest buffer,
  // through the levels, which refill it from the space as for a TLAB; nullptr when the levels do
  // not serve it (more than their largest TLAB, or no room in the space for a buffer).
  static HeapWord* allocate_chunk(size_t words, size_t* chunk_words);

  // An object of `words` from such a chunk, the chunk's rest (if any) a filler; nullptr where
  // no chunk is served, or its rest would be one word, which no filler covers (the chunk is
  // then a filler).
  static HeapWord* allocate_object(size_t words);
};

#endif // SHARE_GC_SHARED_HABLEVELS_HPP
