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

#include "gc/shared/gcConfig.hpp"
#include "gc/shared/habCpuLabs.hpp"
#include "gc/shared/habHeap.hpp"
#include "gc/shared/habLevels.hpp"
#include "gc/shared/habSampling.hpp"
#include "gc/shared/threadLocalAllocBuffer.hpp"
#include "jvm_io.h"
#include "logging/log.hpp"
#include "logging/logStream.hpp"
#include "runtime/globals_extension.hpp"
#include "runtime/init.hpp"
#include "runtime/safepoint.hpp"
#include "utilities/defaultStream.hpp"

// Written only at safepoints, read at exit.
static uint64_t _collections = 0;
static uint64_t _tlab_gc_waste_bytes = 0;     // TLAB tails retired at collections
static uint64_t _tlab_refill_waste_bytes = 0; // TLAB tails retired at refills

// Prints why a HAB flag is refused; the VM then does not start.
static bool refuse(const char* flag, const char* why) {
  jio_fprintf(defaultStream::error_stream(), "Error: -XX:+%s: %s\n", flag, why);
  return false;
}

bool HabHeap::check_flags() {
  const char* flag = UseHABCPULABs ? "UseHABCPULABs" : "UseHAB";
  if (!UseHAB && !UseHABCPULABs) {
    return true;
  }
  if (!UseParallelGC && !UseG1GC) {
    char why[200];
    jio_snprintf(why, sizeof(why), "HABs work with the Parallel and G1 collectors "
                 "(-XX:+UseParallelGC, -XX:+UseG1GC), not %s", GCConfig::hs_err_name());
    return refuse(flag, why);
  }
  if (!UseTLAB) {
    return refuse(flag, "HABs refill TLABs, and -XX:-UseTLAB turns them off");
  }
  if (UseHABCPULABs && !UseHAB) {
    FLAG_SET_ERGO(UseHAB, true);
  }
  return true;
}

bool HabHeap::initialize(HabSpace* space) {
  if (!UseHAB) {
    delete space;
    return true;
  }
  if (!HabLevels::initialize(space)) {
    return false;
  }
  HabCpuLabs::initialize();
  return true;
}

void HabHeap::attach_thread() {
  if (UseHAB) {
    HabLevels::attach_thread();
    HabSampling::attach_thread();
  }
}

HeapWord* HabHeap::allocate_new_tlab(size_t min_size, size_t requested_size, size_t* actual_size) {
  if (!UseHAB || HabCpuLabs::in_cpu_labs()) {
    return nullptr;
  }
  return HabLevels::allocate_new_tlab(min_size, requested_size, actual_size);
}

HeapWord* HabHeap::allocate_before_collection(size_t words) {
  return UseHAB ? HabLevels::allocate_object(words) : nullptr;
}

void HabHeap::tlabs_retired(const ThreadLocalAllocStats& stats, bool at_collection) {
  // As ensure_parsability: at a safepoint, or at start-up (heap verification before init completes).
  assert(SafepointSynchronize::is_at_safepoint() || !is_init_completed(),
         "only with every thread stopped");
  if (at_collection) {
    _collections++;
    _tlab_gc_waste_bytes += (uint64_t)stats.gc_waste_words() * HeapWordSize;
    _tlab_refill_waste_bytes += (uint64_t)stats.refill_waste_words() * HeapWordSize;
  }
  if (!UseHAB) {
    return;
  }
  HabLevels::retire_all(at_collection);
  if (at_collection) {
    // The per-CPU LAB mode reads the buffers the cycle had, then they are resized.
    HabCpuLabs::end_cycle(stats.gc_waste_words() + stats.refill_waste_words(), _collections);
    HabLevels::resize_for_next_cycle();
  }
}

uint64_t HabHeap::collections() {
  return _collections;
}

void HabHeap::print_at_exit() {
  LogTarget(Info, gc, tlab) lt;
  if (!lt.is_enabled()) {
    return;
  }
  LogStream ls(lt);
  if (UseHAB) {
    HabLevels::print_summary(&ls);
    HabCpuLabs::print_summary(&ls);
  }
  ls.print("hab-exit: use_hab=%d collections=" UINT64_FORMAT " tlab_gc_waste_bytes=" UINT64_FORMAT
           " tlab_refill_waste_bytes=" UINT64_FORMAT, UseHAB ? 1 : 0, _collections,
           _tlab_gc_waste_bytes, _tlab_refill_waste_bytes);
  if (UseHAB) {
    ls.print(" hab_collections=" UINT64_FORMAT, _collections);
    HabLevels::print_exit_figures(&ls);
    HabCpuLabs::print_exit_figures(&ls);
  }
  ls.cr();
}
