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

#ifndef SHARE_GC_SHARED_HABHEAP_HPP
#define SHARE_GC_SHARED_HABHEAP_HPP

#include "memory/allStatic.hpp"
#include "utilities/globalDefinitions.hpp"

class HabSpace;
class ThreadLocalAllocStats;

// The collectors' calls into HABs (-XX:+UseHAB, -XX:+UseHABCPULABs): at start-up, at each
// TLAB refill, whenever the heap is made parsable, and at exit. Parallel and G1 call them;
// every call does nothing with HABs off, but the exit line, which stock prints too.
class HabHeap : AllStatic {
 public:
  // Once the collector's arguments are set: refuses HAB flags where HABs cannot work (another
  // collector, TLABs off), printing why; -XX:+UseHABCPULABs implies -XX:+UseHAB.
  static bool check_flags();

  // At the end of the collector's initialize: builds the levels over `space` (owned from now
  // on) and the per-CPU LAB mode. False, after printing why, for bad flags.
  static bool initialize(HabSpace* space);

  // On each thread that gets a TLAB, before it allocates (ThreadLocalAllocBuffer::initialize):
  // its rseq registration where Hab owns them, its sample marks.
  static void attach_thread();

  // First in the collector's allocate_new_tlab: nullptr in a cycle in per-CPU LABs (objects
  // go there, MemAllocator::mem_allocate), or where the levels leave the TLAB to the collector.
  static HeapWord* allocate_new_tlab(size_t min_size, size_t requested_size, size_t* actual_size);

  // Where the collector would ask for a collection because its young space is full (an
  // object outside a TLAB found no room): an object of `words` from what the levels still
  // hold, the calling thread's buffer or, with nothing left above, another CPU's buffer tail
  // (a foreign carve), so that the buffers are used before the collection; nullptr otherwise.
  static HeapWord* allocate_before_collection(size_t words);

  // At a safepoint, once every TLAB was retired (`at_collection`: a cycle ends) or made
  // parsable, with what they left: the buffers are retired too, and at a collection the flip
  // decides the next cycle and the buffers are resized.
  static void tlabs_retired(const ThreadLocalAllocStats& stats, bool at_collection);

  // Collections so far (cycles whose TLABs were retired).
  static uint64_t collections();

  // At exit (the collector's print_tracing_info), where gc+tlab=info is on: the totals for
  // people, then one line for programs, "hab-exit: key=value ...", every value an exact
  // integer, the keys stable (docs/hotspot/design.md lists them), with HABs on or off.
  static void print_at_exit();
};

#endif // SHARE_GC_SHARED_HABHEAP_HPP
