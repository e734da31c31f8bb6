/*
 * Part of Hab's changes to HotSpot. Like HotSpot, this file is free software under the GNU
 * General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

#include "precompiled.hpp"
#include "gc/shared/habCpuLabs.hpp"
#include "gc/shared/habExitLine.hpp"
#include "gc/shared/habLevels.hpp"
#include "gc/shared/threadLocalAllocBuffer.hpp"
#include "logging/log.hpp"
#include "logging/logStream.hpp"

// Written only at safepoints (ensure_parsability), read at exit.
static uint64_t _collections = 0;          // cycles whose TLABs were retired
static uint64_t _tlab_gc_waste_bytes = 0;  // TLAB tails retired at those
static uint64_t _tlab_refill_waste_bytes = 0; // TLAB tails retired at refills

void HabExitLine::add_cycle(const ThreadLocalAllocStats& stats, bool retire_tlabs) {
  if (!retire_tlabs) {
    return; // made parsable for a verification or an inspection: nothing retired
  }
  _collections++;
  _tlab_gc_waste_bytes += (uint64_t)stats.gc_waste_words() * HeapWordSize;
  _tlab_refill_waste_bytes += (uint64_t)stats.refill_waste_words() * HeapWordSize;
}

void HabExitLine::print() {
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
    HabLevels::print_exit_figures(&ls);
    HabCpuLabs::print_exit_figures(&ls);
  }
  ls.cr();
}
