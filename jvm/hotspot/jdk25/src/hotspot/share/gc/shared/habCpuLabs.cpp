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

// The per-CPU LAB mode (-XX:+UseHABCPULABs): its state, its start-up checks, the flip at
// collections, each cycle's figures and the runtime's per-CPU LAB path. The buffers are the
// lowest level of Hab's levels (HabLevels, the libhab glue); the stubs that bump them from
// compiled code are a platform's (habCpuLabs_<cpu>.cpp), and a platform without them runs
// with per-CPU LABs off, saying so.

#include "gc/shared/collectedHeap.hpp"
#include "gc/shared/gcCause.hpp"
#include "gc/shared/habCpuLabs.hpp"
#include "gc/shared/habLevels.hpp"
#include "gc/shared/habPlatform.hpp"
#include "gc/shared/threadLocalAllocBuffer.inline.hpp"
#include "logging/log.hpp"
#include "memory/universe.hpp"
#include "oops/oop.inline.hpp"
#include "runtime/atomic.hpp"
#include "runtime/globals_extension.hpp"
#include "runtime/javaThread.hpp"
#include "runtime/os.hpp"
#include "runtime/safepoint.hpp"
#include "runtime/threads.hpp"
#include "utilities/ostream.hpp"

// The per-CPU buffers' layout, and their bump in a restartable sequence (hab_cpu_buffer_bump,
// on x86_64 with GCC 11 or later).
#include "gc/shared/hab.h"

volatile int HabCpuLabs::_state = 0;

// Observers change their bits from any thread (JVMTI, JFR), the flip its own at safepoints.
void HabCpuLabs::set_bit(int bit, bool on) {
  int old_value = Atomic::load(&_state);
  for (;;) {
    int new_value = on ? (old_value | bit) : (old_value & ~bit);
    int seen = Atomic::cmpxchg(&_state, old_value, new_value);
    if (seen == old_value) {
      return;
    }
    old_value = seen;
  }
}

// Objects the runtime asked of the levels that they left to the collector.
static volatile size_t _declined_objects = 0;
// The lowest level's figures at the last collection: what a cycle did is the difference.
static hab_level_stats _lowest_at_collection;
// The per-CPU LABs' figures over the cycles spent in them, to their collections.
static size_t _cycles_with_lab_figures = 0;
static uint64_t _lab_allocated_bytes = 0;
static uint64_t _lab_refills = 0;
static uint64_t _lab_filler_bytes = 0;
// The largest buffer the lowest level has had: a per-CPU LAB's size for the flip. (Auto
// levels shrink their buffers in cycles whose TLABs are too large to come from them, so the
// size now would understate what per-CPU LABs leave.)
static size_t _largest_lab_bytes = 0;
// The flip (HABFlip): the cycles spent in per-CPU LABs and in TLABs, and the flips.
static size_t _cycles_in_cpu_labs = 0;
static size_t _cycles_in_tlabs = 0;
static size_t _flips = 0;
// The judged cycles in TLABs in a row, up to the last, whose tails were over the flip's bound:
// the rule flips after HAB_FLIP_CYCLES_OVER_BOUND of them.
static uint64_t _cycles_over_bound = 0;

void HabCpuLabs::initialize() {
  if (!UseHABCPULABs) {
    return;
  }
  const char* why_not = nullptr;
  if (!HAB_PLATFORM) {
    why_not = "this platform has no per-CPU LAB stubs (x86_64 Linux has)";
  } else if (HabLevels::cpu_buffer_path() == nullptr) {
    why_not = HabLevels::no_cpu_buffer_path();
  } else if (DTraceAllocProbes) {
    why_not = "-XX:+DTraceAllocProbes needs every allocation in the runtime";
  }
  if (why_not != nullptr) {
    warning("-XX:+UseHABCPULABs: %s; per-CPU LABs turned off, TLABs through the levels", why_not);
    FLAG_SET_ERGO(UseHABCPULABs, false);
    return;
  }
  hab_level_stats lowest;
  if (HabLevels::lowest_level_stats(&lowest)) {
    _lowest_at_collection = lowest;
    _largest_lab_bytes = (size_t)lowest.buffer_bytes;
  }
  if (HABFlip) {
    // TLABs first: with few threads a cycle in them leaves too little unused to flip.
    set_in_tlabs(true);
  }
  log_info(gc, init)("HAB: objects in per-CPU LABs%s", HABFlip
                     ? ", cycles flip between them and TLABs at collections (TLABs first)"
                     : " every cycle (-XX:-HABFlip)");
  // Before the interpreter is generated, and before C1 compiles anything.
  generate_allocate_stub();
}

HeapWord* HabCpuLabs::allocate_object(size_t words) {
  // No larger object than the stubs place: one that does not fit the rest of the buffer would
  // retire that rest as a filler, as much as the object. The collector places it, as stock
  // places an object too large for its TLAB's rest.
  if (words * HeapWordSize > (size_t)HABCPULABObjectLimit) {
    Atomic::inc(&_declined_objects);
    return nullptr;
  }
#if HAB_INLINE_RSEQ
  // The stubs' bump, inline: no call into libhab unless the buffer needs a refill (the
  // buffer's word keeps a filler's reserve back, so the rest is never too short for one).
  const hab_cpu_buffer_path* path = HabLevels::cpu_buffer_path();
  if (path != nullptr) {
    uintptr_t object = hab_cpu_buffer_bump(path, words * HeapWordSize);
    if (object != 0) {
      return (HeapWord*)object;
    }
  }
#endif
  // Else a chunk through the levels (a refill); where none serves it, the collector places
  // the object.
  HeapWord* start = HabLevels::allocate_object(words);
  if (start == nullptr) {
    Atomic::inc(&_declined_objects);
  }
  return start;
}

// The flip's one bound of HotSpot's own (libhab's rule takes it as an input): a cycle in TLABs
// goes to per-CPU LABs only when its TLABs left more than a tenth of eden unused. TLABs that
// leave less cost fewer than a tenth more collections, the bound within which per-CPU LABs aim
// to match -XX:-UseTLAB, and then the stubs' per-CPU LAB path, longer per object than C2's
// TLAB bump, is not worth it.
static const uint64_t flip_min_unused_tlab_percent = 10;

// Whether the allocation ended the cycle (eden full, or a JNI critical section's delayed
// collection), so that its TLABs' tails say what the threads leave. An explicit collection
// (System.gc(), jcmd, a heap dump or inspection), a metadata threshold, or G1's humongous and
// preventive collections cut the cycle short with the threads' TLABs just refilled and mostly
// unused: judged, such a cycle sends the next to per-CPU LABs, and the rule brings it back to
// TLABs only when per-CPU LABs leave more than a LAB per thread, which they seldom do (one
// System.gc() before the first iteration kept `jackson` in per-CPU LABs for its whole run).
static bool ended_by_allocation(GCCause::Cause cause) {
  return cause == GCCause::_allocation_failure || cause == GCCause::_g1_inc_collection_pause;
}

// At a collection, with the lowest level's figures now: applies the flip policy to the cycle
// that ends, logging its inputs (gc+tlab=debug) and each flip (gc+tlab=info). A cycle the
// allocation did not end keeps its mode.
static void flip(const hab_level_stats& lowest, size_t tlab_waste_words, uint64_t collection) {
  bool in_cpu_labs = HabCpuLabs::in_cpu_labs();
  _largest_lab_bytes = MAX2(_largest_lab_bytes, (size_t)lowest.buffer_bytes);
  // libhab's flip policy, the one Hab's flip mode follows (hab_flip_next_in_cpu_labs); the
  // first cycle's TLABs were sized before any thread had allocated, so it stays in TLABs, and
  // a cycle or two with tails over the bound are not enough: threads that just started leave
  // large tails for a few collections, in TLABs sized from the fewer threads that ran before
  // (16 threads of `h2` left 1.9 MiB of 18 MiB in the cycle they started in, 2-3 % later).
  hab_flip_cycle cycle;
  cycle.in_cpu_labs = in_cpu_labs ? 1 : 0;
  cycle.first = collection == 1 ? 1 : 0;
  cycle.unused_tlab_bytes = (uint64_t)tlab_waste_words * HeapWordSize;
  cycle.unused_lab_bytes = lowest.waste_bytes - _lowest_at_collection.waste_bytes;
  cycle.lab_bytes = _largest_lab_bytes;
  cycle.cpus = (uint64_t)os::active_processor_count();
  cycle.running_threads = (uint64_t)Threads::number_of_threads();
  cycle.cycle_bytes = HabLevels::eden_bytes();
  cycle.min_unused_tlab_percent = flip_min_unused_tlab_percent;
  cycle.previous_cycles_over_bound = _cycles_over_bound;
  GCCause::Cause cause = Universe::heap()->gc_cause();
  bool judged = HABFlipEvery != 0 || ended_by_allocation(cause);
  bool next = HABFlipEvery != 0 ? (in_cpu_labs != (collection % HABFlipEvery == 0))
              : judged          ? HabLevels::flip_next_in_cpu_labs(cycle)
                                : in_cpu_labs;
  if (judged) {
    _cycles_over_bound = HabLevels::flip_cycles_over_bound(cycle);
  }
  (in_cpu_labs ? _cycles_in_cpu_labs : _cycles_in_tlabs)++;
  log_debug(gc, tlab)("HAB flip: a cycle in %s%s%s%s: TLABs left " UINT64_FORMAT "K unused ("
                      UINT64_FORMAT " of %d cycles in a row over the bound), "
                      "per-CPU LABs " UINT64_FORMAT "K (LABs of " UINT64_FORMAT "K, "
                      UINT64_FORMAT " CPUs, " UINT64_FORMAT " threads, eden " UINT64_FORMAT
                      "K); the next in %s",
                      in_cpu_labs ? "per-CPU LABs" : "TLABs", cycle.first ? " (the first)" : "",
                      judged ? "" : ", not judged: ended by ",
                      judged ? "" : GCCause::to_string(cause),
                      cycle.unused_tlab_bytes / K, _cycles_over_bound, HAB_FLIP_CYCLES_OVER_BOUND,
                      cycle.unused_lab_bytes / K, cycle.lab_bytes / K,
                      cycle.cpus, cycle.running_threads, cycle.cycle_bytes / K,
                      next ? "per-CPU LABs" : "TLABs");
  if (next != in_cpu_labs) {
    _flips++;
    log_info(gc, tlab)("HAB flip: to %s (TLABs left " UINT64_FORMAT "K unused over the cycle, "
                       "per-CPU LABs " UINT64_FORMAT "K; LABs of " UINT64_FORMAT "K, "
                       UINT64_FORMAT " CPUs, " UINT64_FORMAT " threads, eden " UINT64_FORMAT "K)",
                       next ? "per-CPU LABs" : "TLABs", cycle.unused_tlab_bytes / K,
                       cycle.unused_lab_bytes / K, cycle.lab_bytes / K, cycle.cpus,
                       cycle.running_threads, cycle.cycle_bytes / K);
    HabCpuLabs::set_in_tlabs(!next);
  }
}

// What the per-CPU LABs did over the cycle that ends (gc+tlab=debug), added to the totals
// printed at exit. Nothing is counted per object: the LABs are the lowest level's buffers,
// every buffer was empty when the cycle began and has been retired now, so what the level took
// from above less the tails it retired as fillers is what it handed out; in a cycle in per-CPU
// LABs no TLAB comes from it, and all of that is objects, the compiled paths' and the runtime's.
static void count_cycle(const hab_level_stats& lowest) {
  const hab_level_stats& then = _lowest_at_collection;
  if (!HabCpuLabs::in_cpu_labs()) {
    log_debug(gc, tlab)("HAB CPU LABs: none this cycle (in TLABs)");
    return;
  }
  uint64_t taken_bytes = lowest.taken_bytes - then.taken_bytes;
  uint64_t filler_bytes = lowest.waste_bytes - then.waste_bytes;
  uint64_t refills = lowest.refills - then.refills;
  assert(taken_bytes >= filler_bytes, "the fillers cover part of what the level took");
  uint64_t allocated_bytes = taken_bytes - MIN2(filler_bytes, taken_bytes);
  _cycles_with_lab_figures++;
  _lab_allocated_bytes += allocated_bytes;
  _lab_refills += refills;
  _lab_filler_bytes += filler_bytes;
  log_debug(gc, tlab)("HAB CPU LABs: " UINT64_FORMAT "K allocated, " UINT64_FORMAT " refills, "
                      UINT64_FORMAT "K retired as fillers", allocated_bytes / K, refills,
                      filler_bytes / K);
}

void HabCpuLabs::end_cycle(size_t tlab_waste_words, uint64_t collection) {
  assert(SafepointSynchronize::is_at_safepoint(), "only with every thread stopped");
  hab_level_stats lowest;
  if (!UseHABCPULABs || !HabLevels::lowest_level_stats(&lowest)) {
    return;
  }
  // The cycle's figures first: they are those of the mode the cycle had.
  count_cycle(lowest);
  if (HABFlip) {
    flip(lowest, tlab_waste_words, collection);
  }
  _lowest_at_collection = lowest;
}

void HabCpuLabs::print_summary(outputStream* out) {
  if (!UseHABCPULABs) {
    return;
  }
  uint64_t taken_bytes = _lab_allocated_bytes + _lab_filler_bytes;
  out->print_cr("HAB CPU LABs: %zu cycles in them to their collections: " UINT64_FORMAT
                "K allocated, " UINT64_FORMAT " refills, " UINT64_FORMAT "K retired as fillers "
                "(%.1f%% of what they took); %zu objects the runtime asked of "
                "the levels left to the collector",
                _cycles_with_lab_figures, _lab_allocated_bytes / K, _lab_refills,
                _lab_filler_bytes / K,
                taken_bytes == 0 ? 0.0 : 100.0 * (double)_lab_filler_bytes / (double)taken_bytes,
                Atomic::load(&_declined_objects));
  if (HABFlip) {
    out->print_cr("HAB flip: %zu cycles in per-CPU LABs, %zu in TLABs, "
                  "%zu flips; now in %s", _cycles_in_cpu_labs, _cycles_in_tlabs, _flips,
                  in_cpu_labs() ? "per-CPU LABs" : "TLABs");
  }
}

void HabCpuLabs::print_exit_figures(outputStream* out) {
  if (!UseHABCPULABs) {
    return;
  }
  out->print(" cpu_lab_cycles=%zu cpu_lab_allocated_bytes=" UINT64_FORMAT
             " cpu_lab_refills=" UINT64_FORMAT " cpu_lab_filler_bytes=" UINT64_FORMAT
             " declined_objects=%zu cycles_in_cpu_labs=%zu"
             " cycles_in_tlabs=%zu flips=%zu",
             _cycles_with_lab_figures, _lab_allocated_bytes, _lab_refills, _lab_filler_bytes,
             Atomic::load(&_declined_objects), _cycles_in_cpu_labs, _cycles_in_tlabs, _flips);
}

void HabCpuLabs::check_compiled_refill(JavaThread* thread, const TlabBeforeRefill* before,
                                       HeapWord* object) {
  STATIC_ASSERT(sizeof(TlabBeforeRefill) == 7 * wordSize);  // what the stub pushes
  ThreadLocalAllocBuffer& tlab = thread->tlab();
  const size_t reserve_words = ThreadLocalAllocBuffer::alignment_reserve();
  HeapWord* old_top = before->top;
  HeapWord* old_hard_end = before->hard_end;
  // fill(start, top, new_size): the object at the start, pf_top at top, the end a reserve
  // before the hard end, the allocation end at the end, a fresh refill waste limit.
  guarantee(tlab.start() == object, "compiled refill: the object " PTR_FORMAT " is not at the new "
            "TLAB's start " PTR_FORMAT, p2i(object), p2i(tlab.start()));
  guarantee(object < tlab.top() && tlab.top() <= tlab.end(), "compiled refill: top " PTR_FORMAT
            " outside (" PTR_FORMAT ", " PTR_FORMAT "]", p2i(tlab.top()), p2i(object),
            p2i(tlab.end()));
  guarantee(tlab.pf_top() == tlab.top(), "compiled refill: pf_top " PTR_FORMAT " is not top "
            PTR_FORMAT, p2i(tlab.pf_top()), p2i(tlab.top()));
  guarantee(tlab.allocation_end() == tlab.end(), "compiled refill: allocation end " PTR_FORMAT
            " is not the end " PTR_FORMAT, p2i(tlab.allocation_end()), p2i(tlab.end()));
  guarantee(tlab.hard_end() == tlab.end() + reserve_words, "compiled refill: the hard end is "
            "not the end and the alignment reserve");
  size_t tlab_words = pointer_delta(tlab.hard_end(), tlab.start());
  guarantee(tlab_words <= HabLevels::max_tlab_words() && tlab_words <= ThreadLocalAllocBuffer::max_size(),
            "compiled refill: a TLAB of %zu words, more than the levels carve",
            tlab_words);
  const size_t initial_limit = tlab.desired_size() / TLABRefillWasteFraction;
  guarantee(tlab.refill_waste_limit() == initial_limit, "compiled refill: refill waste limit "
            "%zu, fill sets %zu", tlab.refill_waste_limit(), initial_limit);
  // retire: the old TLAB's used bytes to the thread; fill: one refill more.
  guarantee(before->start <= old_top && old_top <= old_hard_end, "compiled refill: the old TLAB ["
            PTR_FORMAT ", " PTR_FORMAT ", " PTR_FORMAT ") out of order", p2i(before->start),
            p2i(old_top), p2i(old_hard_end));
  uint64_t used_bytes = pointer_delta(old_top, before->start, 1);
  guarantee((uint64_t)thread->allocated_bytes() == before->thread_allocated_bytes + used_bytes,
            "compiled refill: the thread's allocated bytes " UINT64_FORMAT ", retire makes them "
            UINT64_FORMAT, (uint64_t)thread->allocated_bytes(),
            before->thread_allocated_bytes + used_bytes);
  guarantee((unsigned)tlab.number_of_refills() == (unsigned)(before->number_of_refills + 1),
            "compiled refill: %u refills, fill makes them " UINT64_FORMAT,
            (unsigned)tlab.number_of_refills(), before->number_of_refills + 1);
  size_t tail_words = pointer_delta(old_hard_end, old_top);
  if (object == old_top) {
    // Extended: the new TLAB runs on from the old top, past the old hard end; the tail is in
    // it, so it counts once in the allocated size and not as refill waste.
    guarantee(tlab.hard_end() > old_hard_end, "compiled refill: an extension that ends at "
              PTR_FORMAT ", not past the old hard end " PTR_FORMAT, p2i(tlab.hard_end()),
              p2i(old_hard_end));
    guarantee(tlab.allocated_size() == before->allocated_size_words + tlab_words - tail_words,
              "compiled refill: allocated size %zu words after an extension, "
              UINT64_FORMAT " expected", tlab.allocated_size(),
              (uint64_t)(before->allocated_size_words + tlab_words - tail_words));
    guarantee(tlab.refill_waste() == (unsigned)before->refill_waste_words, "compiled refill: "
              "refill waste %u after an extension, " UINT64_FORMAT " before", tlab.refill_waste(),
              before->refill_waste_words);
    return;
  }
  // retire_before_allocation: the tail is refill waste; fill: the new TLAB's words allocated.
  guarantee(tlab.allocated_size() == before->allocated_size_words + tlab_words,
            "compiled refill: allocated size %zu words, fill makes it " UINT64_FORMAT,
            tlab.allocated_size(), (uint64_t)(before->allocated_size_words + tlab_words));
  guarantee(tlab.refill_waste() == (unsigned)(before->refill_waste_words + tail_words),
            "compiled refill: refill waste %u, retire_before_allocation makes it " UINT64_FORMAT,
            tlab.refill_waste(), (uint64_t)(before->refill_waste_words + tail_words));
  // insert_filler: [old top, old hard end) one filler array, as every tail is (the
  // alignment reserve holds an array's header).
  if (tail_words == 0) {
    return;
  }
  oop filler = cast_to_oop(old_top);
  bool one_filler = tail_words >= CollectedHeap::min_fill_size() &&
                    filler->klass() == Universe::fillerArrayKlass() &&
                    (size_t)filler->size() == tail_words;
  guarantee(one_filler, "compiled refill: the old tail [" PTR_FORMAT ", " PTR_FORMAT ") of "
            "%zu words is not one filler array", p2i(old_top), p2i(old_hard_end), tail_words);
}

#if !HAB_PLATFORM
// A platform without the stubs: initialize turned UseHABCPULABs off, C2's slow calls stay
// unwrapped, and no tier asks for a per-CPU LAB path; no thread-pointer-relative storage.
HabSampleMarks* HabPlatform::sample_marks() {
  static THREAD_LOCAL HabSampleMarks marks;
  return &marks;
}

intptr_t HabPlatform::sample_mark_offset() { return 0; }
intptr_t HabPlatform::rseq_area_offset() { return 0; }
bool HabPlatform::create_exit_hook(void (*)(void*)) { return false; }
void HabPlatform::set_exit_value(void*) {}

address HabCpuLabs::_allocate_stub = nullptr;
address HabCpuLabs::_c2_stub = nullptr;
address HabCpuLabs::_c2_sized_stub = nullptr;

address HabCpuLabs::wrap(address runtime_stub, bool) {
  return runtime_stub;
}

void HabCpuLabs::generate_allocate_stub() {}

void HabCpuLabs::allocate_in_cpu_lab(MacroAssembler*, Register, int, Label&) {
  ShouldNotReachHere();
}

void HabCpuLabs::c2_allocate_in_cpu_lab(MacroAssembler*, Register, int64_t) {
  ShouldNotReachHere();
}
#endif // !HAB_PLATFORM
