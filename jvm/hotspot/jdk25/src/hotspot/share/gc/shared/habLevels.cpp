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

#include "gc/shared/collectedHeap.hpp"
#include "gc/shared/habLevels.hpp"
#include "gc/shared/habPlatform.hpp"
#include "gc/shared/threadLocalAllocBuffer.hpp"
#include "jvm_io.h"
#include "logging/log.hpp"
#include "logging/logStream.hpp"
#include "runtime/atomic.hpp"
#include "runtime/globals.hpp"
#include "runtime/globals_extension.hpp"
#include "runtime/init.hpp"
#include "runtime/os.hpp"
#include "runtime/safepoint.hpp"
#include "utilities/ostream.hpp"

// HotSpot calls libhab through pointers resolved at start-up; hab.h gives the types (its inline
// bump of a per-CPU buffer is the per-CPU LAB mode's).
#include "gc/shared/hab.h"

// The entries of libhab that HotSpot calls.
#define HAB_ENTRIES(f)           \
  f(hab_abi_version)             \
  f(hab_last_error)              \
  f(hab_levels_auto)             \
  f(hab_levels_fit)              \
  f(hab_levels_new_with_cpu_id)  \
  f(hab_levels_max_tlab_bytes)   \
  f(hab_levels_buffered_bytes)   \
  f(hab_levels_thread_new)       \
  f(hab_levels_thread_free)      \
  f(hab_levels_carve_tlab)       \
  f(hab_levels_retire_all)       \
  f(hab_levels_resize_within)    \
  f(hab_levels_stats)            \
  f(hab_level_stats_line)        \
  f(hab_levels_tlabs_past_levels)  \
  f(hab_levels_tlab_limit_bytes) \
  f(hab_levels_cpu_buffer_path)  \
  f(hab_flip_next_in_cpu_labs)   \
  f(hab_flip_cycles_over_bound)  \
  f(hab_per_cpu_support_get)     \
  f(hab_rseq_register_thread)    \
  f(hab_rseq_provide_area)

#define HAB_DECLARE_ENTRY(name) static decltype(&::name) _##name = nullptr;
HAB_ENTRIES(HAB_DECLARE_ENTRY)
#undef HAB_DECLARE_ENTRY

static const size_t MAX_LEVELS = 5;

static HabSpace* _space = nullptr;
static hab_levels* _levels = nullptr;
// Which rseq registration the process's threads use (hab.h's HAB_RSEQ_*), once libhab said.
static int _registration = HAB_RSEQ_UNAVAILABLE;
// Whether the buffers follow the allocation (HABLevels=auto): resized at each collection.
static bool _follow = false;
static size_t _max_tlab_words = 0;
// The largest TLAB a refill takes now (words): near the end of the space, the lowest buffers'
// share of what is left (hab_levels_tlab_limit_bytes), which the levels apply to the
// runtime's refills and the compiled refills read here. Written at each refill through the
// levels, back to _max_tlab_words at each retire.
static volatile size_t _tlab_limit_words = 0;
// The lowest level's buffer now (bytes): read by samplers between collections.
static volatile size_t _lowest_buffer_bytes = 0;
// The per-CPU buffers compiled code bumps, where the levels publish them.
static hab_cpu_buffer_path _path;
static bool _has_path = false;
// Why the levels publish none (libhab's words), where they do not.
static char _no_path[256] = "";
// Each thread's handle on the levels; freed when the thread exits.
static THREAD_LOCAL hab_levels_thread* _thread = nullptr;
// TLABs the levels left to the collector: larger than the lowest buffer, or asked when the
// space above had no room for a buffer; and their words.
static volatile size_t _larger_tlabs = 0;
static volatile size_t _larger_words = 0;
static volatile size_t _declined_tlabs = 0;
// The figures at the previous retire, to log what happened since.
static hab_level_stats _previous[MAX_LEVELS];
static size_t _retires = 0;


// Hab's upstream: the collector's space. Carves desired bytes, or what is left when that is at
// least min.
static size_t carve_from_space(void*, size_t min_bytes, size_t desired_bytes, uintptr_t* start) {
  size_t actual_words = 0;
  HeapWord* result = _space->carve(min_bytes / HeapWordSize, desired_bytes / HeapWordSize,
                                   &actual_words);
  if (result == nullptr) {
    return 0;
  }
  *start = (uintptr_t)result;
  return actual_words * HeapWordSize;
}

// What the space has left: buffers refilled near its end take a share of it, not a whole
// buffer, so that little is left in them at the collection.
static size_t free_in_space(void*) {
  return _space->free_bytes();
}

// Hab's filler writer: HotSpot's filler objects (int arrays, or an Object for two words).
static void write_filler(void*, uintptr_t start, size_t bytes) {
  CollectedHeap::fill_with_objects((HeapWord*)start, bytes / HeapWordSize);
}

static void free_thread_handle(void* handle) {
  _hab_levels_thread_free((hab_levels_thread*)handle);
}

// Where libhab is: -XX:HABLibrary, else beside libjvm.so. False when that cannot be told.
static bool library_path(char* path, size_t size) {
  if (HABLibrary != nullptr) {
    jio_snprintf(path, size, "%s", HABLibrary);
    return true;
  }
  os::jvm_path(path, (jint)size);
  char* slash = strrchr(path, '/');
  if (slash == nullptr) {
    return false;
  }
  jio_snprintf(slash + 1, size - (slash + 1 - path), "libhab.so.1");
  return true;
}

// Turns HABs off where they cannot work at all, saying why on the VM's warning stream
// (which -Xlog options do not hide).
static bool turn_off(const char* why) {
  warning("-XX:+UseHAB: %s; HABs turned off, TLABs come from the collector as without them", why);
  FLAG_SET_ERGO(UseHAB, false);
  FLAG_SET_ERGO(UseHABCPULABs, false);
  delete _space;
  _space = nullptr;
  return true;
}

// The levels for this space, written into `levels`: HABLevels=auto's for the space's size, or
// the list given; either brought within the space (hab_levels_fit), with a warning where a
// given list had to shrink. False after printing why.
static bool choose_levels(char* levels, size_t size) {
  size_t eden_bytes = _space->eden_bytes();
  size_t max_buffer_bytes = _space->max_buffer_bytes();
  size_t min_tlab_bytes = ThreadLocalAllocBuffer::min_size() * HeapWordSize;
  char automatic[256];
  const char* asked = HABLevels;
  if (strcmp(HABLevels, "auto") == 0) {
    size_t length = _hab_levels_auto(eden_bytes, min_tlab_bytes, automatic, sizeof(automatic));
    if (length == 0 || length >= sizeof(automatic)) {
      log_error(gc, init)("UseHAB: -XX:HABLevels=auto for %s of %zuK: %s",
                          _space->name(), eden_bytes / K,
                          length == 0 ? _hab_last_error() : "too long a list");
      return false;
    }
    asked = automatic;
    _follow = true;
  }
  size_t length = _hab_levels_fit(asked, eden_bytes, min_tlab_bytes, max_buffer_bytes, levels, size);
  if (length == 0 || length >= size) {
    log_error(gc, init)("UseHAB: -XX:HABLevels=%s for %s of %zuK: %s", HABLevels,
                        _space->name(), eden_bytes / K,
                        length == 0 ? _hab_last_error() : "too long a list");
    return false;
  }
  if (!_follow && strcmp(levels, HABLevels) != 0) {
    char each[64] = "";
    if (max_buffer_bytes != 0) {
      jio_snprintf(each, sizeof(each), ", and each buffer at most %zuK",
                   max_buffer_bytes / K);
    }
    warning("-XX:HABLevels=%s does not fit %s of %zuK (each level's buffers hold at "
            "most a quarter of it%s): using -XX:HABLevels=%s", HABLevels, _space->name(),
            eden_bytes / K, each, levels);
  }
  return true;
}

static size_t read_stats(hab_level_stats* stats);

bool HabLevels::initialize(HabSpace* space) {
  _space = space;
  char path[JVM_MAXPATHLEN];
  if (!library_path(path, sizeof(path))) {
    return turn_off("cannot tell where libjvm.so is, so where libhab.so.1 is (give -XX:HABLibrary)");
  }
  char error[1024];
  void* library = os::dll_load(path, error, sizeof(error));
  if (library == nullptr) {
    if (HABLibrary != nullptr) {
      log_error(gc, init)("UseHAB: cannot load %s (-XX:HABLibrary): %s", path, error);
      return false;
    }
    char why[JVM_MAXPATHLEN + sizeof(error) + 64];
    jio_snprintf(why, sizeof(why), "cannot load %s (-XX:HABLibrary names another): %s", path, error);
    return turn_off(why);
  }
#define HAB_RESOLVE_ENTRY(name)                                                 \
  _##name = (decltype(&::name))os::dll_lookup(library, #name);                  \
  if (_##name == nullptr) {                                                        \
    log_error(gc, init)("UseHAB: %s lacks %s (too old a libhab?)", path, #name); \
    return false;                                                               \
  }
  HAB_ENTRIES(HAB_RESOLVE_ENTRY)
#undef HAB_RESOLVE_ENTRY
  if (_hab_abi_version() != HAB_ABI_VERSION) {
    log_error(gc, init)("UseHAB: %s has ABI version %u, this JVM was built for %d",
                        path, (unsigned)_hab_abi_version(), HAB_ABI_VERSION);
    return false;
  }
  // HotSpot keeps an empty string flag (-XX:HABLevels=) as nullptr: say so rather than use it.
  if (HABLevels == nullptr || HABLevels[0] == '\0') {
    log_error(gc, init)("UseHAB: -XX:HABLevels is empty: give auto, or a list of levels, lowest "
                        "first, such as cpu:256K,core:2M");
    return false;
  }
  if (HABCpuId == nullptr || HABCpuId[0] == '\0') {
    log_error(gc, init)("UseHAB: -XX:HABCpuId is empty: give auto, rseq or getcpu");
    return false;
  }
  // Before anything of libhab's decides the registration: ours, wherever glibc has none.
  if (HAB_PLATFORM && _hab_rseq_provide_area(HabPlatform::rseq_area_offset()) != HAB_OK) {
    log_error(gc, init)("UseHAB: %s", _hab_last_error());
    return false;
  }
  hab_per_cpu_support support;
  _hab_per_cpu_support_get(&support);
  _registration = support.registration;
  // auto: libhab's choice (rseq wherever the threads have an area, else getcpu).
  const char* cpu_id = strcmp(HABCpuId, "auto") == 0 ? nullptr : HABCpuId;
  const char* cpu_id_used = cpu_id != nullptr ? cpu_id : support.cpu_id;
  if (cpu_id == nullptr && support.registration == HAB_RSEQ_UNAVAILABLE) {
    // The one warning: what the machine refuses, and what HABs use instead.
    warning("-XX:+UseHAB: %s", support.description);
  }
  char chosen[256];
  if (!choose_levels(chosen, sizeof(chosen))) {
    return false;
  }
  hab_upstream upstream = {carve_from_space, write_filler, nullptr, free_in_space};
  size_t min_filler_bytes = CollectedHeap::min_fill_size() * HeapWordSize;
  uintptr_t base = (uintptr_t)_space->base();
  hab_status status = _hab_levels_new_with_cpu_id(chosen, cpu_id, 0, min_filler_bytes, base,
                                                  &upstream, &_levels);
  if (status != HAB_OK) {
    log_error(gc, init)("UseHAB: -XX:HABLevels=%s (%s) -XX:HABCpuId=%s: %s",
                        HABLevels, chosen, HABCpuId, _hab_last_error());
    return false;
  }
  _max_tlab_words = _hab_levels_max_tlab_bytes(_levels) / HeapWordSize;
  if (_max_tlab_words < ThreadLocalAllocBuffer::min_size()) {
    // No TLAB would ever go through the levels.
    log_error(gc, init)("UseHAB: the TLABs -XX:HABLevels=%s hands out (%zu bytes, its "
                        "lowest buffer) are smaller than the smallest TLAB (%zu"
                        " bytes, -XX:MinTLABSize): give larger buffers",
                        chosen, _max_tlab_words * HeapWordSize,
                        ThreadLocalAllocBuffer::min_size() * HeapWordSize);
    return false;
  }
  Atomic::store(&_tlab_limit_words, _max_tlab_words);
  _has_path = _hab_levels_cpu_buffer_path(_levels, &_path) == HAB_OK;
  if (!_has_path) {
    jio_snprintf(_no_path, sizeof(_no_path), "%s", _hab_last_error());
  }
  {
    hab_level_stats now[MAX_LEVELS];
    _lowest_buffer_bytes = read_stats(now) > 0 ? (size_t)now[0].buffer_bytes : 0;
  }
  if (!HabPlatform::create_exit_hook(free_thread_handle)) {
    log_error(gc, init)("UseHAB: no hook at thread exit for the threads' handles");
    return false;
  }
  log_info(gc, init)("HAB: levels %s%s over %s (%zuK), CPU id %s, TLABs up to "
                     "%zuK through them (%s)",
                     chosen, _follow ? " (auto)" : "", _space->name(),
                     _space->eden_bytes() / K, cpu_id_used, _max_tlab_words * HeapWordSize / K,
                     path);
  log_info(gc, init)("HAB: per-CPU support: %s", support.description);
  if (!UseHABCPULABs && HABCompiledRefill && !_has_path) {
    log_info(gc, init)("HAB: C2 refills TLABs through the runtime: %s", _no_path);
  }
  return true;
}

void HabLevels::attach_thread() {
  // Only Hab's own registration needs a call; a refusal leaves the thread's area reading
  // indices beyond every slot, so its stubs miss and its refills take compare-and-swap.
  if (_registration == HAB_RSEQ_OWN) {
    _hab_rseq_register_thread();
  }
}

// The calling thread's handle, made on its first TLAB.
static hab_levels_thread* thread_handle() {
  hab_levels_thread* handle = _thread;
  if (handle == nullptr) {
    handle = _hab_levels_thread_new(_levels);
    if (handle == nullptr) {
      return nullptr;
    }
    HabPlatform::set_exit_value(handle);
    _thread = handle;
  }
  return handle;
}

// A chunk of `desired_words`, or at least `min_words`, through the levels for the calling
// thread: its length in bytes (0: the levels did not serve it), its start in *start.
static size_t carve(size_t min_words, size_t desired_words, uintptr_t* start) {
  hab_levels_thread* handle = thread_handle();
  return handle == nullptr ? 0 : _hab_levels_carve_tlab(handle, min_words * HeapWordSize,
                                                     desired_words * HeapWordSize, start);
}

HeapWord* HabLevels::allocate_new_tlab(size_t min_size, size_t requested_size,
                                       size_t* actual_size) {
  if (requested_size > _max_tlab_words) {
    Atomic::inc(&_larger_tlabs);
    Atomic::add(&_larger_words, requested_size);
    return nullptr;
  }
  uintptr_t start = 0;
  size_t bytes = carve(min_size, requested_size, &start);
  if (bytes == 0) {
    // The space above has no room for a buffer (eden is full, or G1's current region): the
    // collector's own path takes it from here (a new region, or a collection).
    Atomic::inc(&_declined_tlabs);
    return nullptr;
  }
  *actual_size = bytes / HeapWordSize;
  // What is left shrank: so does the TLAB the compiled refills take (never below a TLAB's
  // smallest size, which holds the alignment reserve).
  size_t limit_words = _hab_levels_tlab_limit_bytes(_levels) / HeapWordSize;
  Atomic::store(&_tlab_limit_words,
                clamp(limit_words, ThreadLocalAllocBuffer::min_size(), _max_tlab_words));
  return (HeapWord*)start;
}

const volatile size_t* HabLevels::tlab_limit_words_address() {
  return &_tlab_limit_words;
}

const hab_cpu_buffer_path* HabLevels::cpu_buffer_path() {
  return UseHAB && _has_path ? &_path : nullptr;
}

size_t HabLevels::max_tlab_words() {
  return _max_tlab_words;
}

size_t HabLevels::lowest_buffer_bytes() {
  return Atomic::load(&_lowest_buffer_bytes);
}

HabTlabExtension HabLevels::tlab_extension() {
  return _space->tlab_extension();
}

HeapWord* HabLevels::allocate_chunk(size_t words, size_t* chunk_words) {
  if (words > _max_tlab_words) {
    return nullptr;
  }
  uintptr_t start = 0;
  size_t bytes = carve(words, words, &start);
  if (bytes == 0) {
    return nullptr;
  }
  *chunk_words = bytes / HeapWordSize;
  return (HeapWord*)start;
}

HeapWord* HabLevels::allocate_object(size_t words) {
  size_t chunk_words = 0;
  HeapWord* start = allocate_chunk(words, &chunk_words);
  if (start == nullptr) {
    return nullptr;
  }
  // A carve takes a little more than asked where the buffer's rest would be too short a tail
  // for a filler. A rest that holds one becomes one; one word cannot be covered after the
  // object, so then the whole chunk becomes a filler.
  size_t rest_words = chunk_words - words;
  if (rest_words > 0 && rest_words < CollectedHeap::min_fill_size()) {
    CollectedHeap::fill_with_objects(start, chunk_words);
    return nullptr;
  }
  if (rest_words > 0) {
    CollectedHeap::fill_with_objects(start + words, rest_words);
  }
  return start;
}

const char* HabLevels::no_cpu_buffer_path() {
  return _has_path ? nullptr : _no_path;
}

size_t HabLevels::eden_bytes() {
  return _space->eden_bytes();
}

bool HabLevels::flip_next_in_cpu_labs(const hab_flip_cycle& cycle) {
  return _hab_flip_next_in_cpu_labs(&cycle) == 1;
}

uint64_t HabLevels::flip_cycles_over_bound(const hab_flip_cycle& cycle) {
  return _hab_flip_cycles_over_bound(&cycle);
}

// Reads every level's figures into `stats`; returns how many.
static size_t read_stats(hab_level_stats* stats) {
  size_t count = _hab_levels_stats(_levels, stats, MAX_LEVELS);
  return MIN2(count, MAX_LEVELS);
}

// One line per level: the figures since `since` (nullptr for the totals) that are not zero,
// named as libhab names them ("allocs: 1427 foreign_allocs: 3 refills: 498 ..."), or
// "nothing".
static void print_levels(outputStream* out, const char* what, const hab_level_stats* now,
                         const hab_level_stats* since, size_t count) {
  for (size_t i = 0; i < count; i++) {
    char line[512] = ""; // 9 figures of at most 40 characters fit
    _hab_level_stats_line(&now[i], since == nullptr ? nullptr : &since[i], line, sizeof(line));
    out->print_cr("HAB %s %s: %s", what, now[i].level, line[0] != '\0' ? line : "nothing");
  }
}

bool HabLevels::lowest_level_stats(hab_level_stats* out) {
  hab_level_stats now[MAX_LEVELS];
  if (_levels == nullptr || read_stats(now) == 0) {
    return false;
  }
  *out = now[0];
  return true;
}

void HabLevels::retire_all(bool at_collection) {
  assert(SafepointSynchronize::is_at_safepoint() || !is_init_completed(),
         "only with every thread stopped");
  if (_levels == nullptr) {
    // Before the heap made its levels (a verification early in start-up): nothing to retire.
    return;
  }
  if (_hab_levels_retire_all(_levels) != HAB_OK) {
    fatal("UseHAB: retiring the buffers failed: %s", _hab_last_error());
  }
  _retires++;
  // The buffers are empty: each CPU's next refill goes through the runtime, which sets the
  // limit again from what the space has left.
  Atomic::store(&_tlab_limit_words, _max_tlab_words);
  LogTarget(Debug, gc, tlab) lt;
  if (lt.is_enabled()) {
    LogStream ls(lt);
    hab_level_stats now[MAX_LEVELS];
    size_t count = read_stats(now);
    print_levels(&ls, at_collection ? "since the last retire" : "since the last retire (no collection)",
                 now, _previous, count);
    memcpy(_previous, now, sizeof(now));
  }
}

void HabLevels::resize_for_next_cycle() {
  assert(SafepointSynchronize::is_at_safepoint(), "only with every thread stopped");
  // With auto levels, the next cycle's buffers follow this one's allocation over the space;
  // only at collections, so that verification and heap inspection do not change the sizing.
  if (!_follow) {
    return;
  }
  if (_hab_levels_resize_within(_levels, _space->eden_bytes(), _space->max_buffer_bytes()) != HAB_OK) {
    fatal("UseHAB: resizing the buffers failed: %s", _hab_last_error());
  }
  hab_level_stats now[MAX_LEVELS];
  if (read_stats(now) > 0) {
    Atomic::store(&_lowest_buffer_bytes, (size_t)now[0].buffer_bytes);
  }
}

void HabLevels::print_summary(outputStream* out) {
  hab_level_stats now[MAX_LEVELS];
  size_t count = read_stats(now);
  print_levels(out, "total", now, nullptr, count);
  out->print_cr("HAB total: %zu retires; %zu"
              " TLABs (%zuK) larger than %zuK and %zu"
              " asked when %s had no room for a buffer, from the collector; " UINT64_FORMAT
              " TLABs past every level (all buffers busy)",
              _retires, Atomic::load(&_larger_tlabs),
              Atomic::load(&_larger_words) * HeapWordSize / K, _max_tlab_words * HeapWordSize / K,
              Atomic::load(&_declined_tlabs), _space->name(),
              _hab_levels_tlabs_past_levels(_levels));
}

// The levels' keys of the exit line: the totals above, and each level's figures as
// "<level>.<libhab's field name>".
void HabLevels::print_exit_figures(outputStream* out) {
  out->print(" retires=%zu larger_tlabs=%zu"
             " larger_tlab_bytes=%zu declined_tlabs=%zu"
             " tlabs_past_levels=" UINT64_FORMAT,
             _retires, Atomic::load(&_larger_tlabs),
             Atomic::load(&_larger_words) * HeapWordSize, Atomic::load(&_declined_tlabs),
             _hab_levels_tlabs_past_levels(_levels));
  hab_level_stats now[MAX_LEVELS];
  size_t count = read_stats(now);
  for (size_t i = 0; i < count; i++) {
    const hab_level_stats& l = now[i];
    const char* n = l.level;
    out->print(" %s.allocs=" UINT64_FORMAT " %s.foreign_allocs=" UINT64_FORMAT
               " %s.refills=" UINT64_FORMAT " %s.taken_bytes=" UINT64_FORMAT
               " %s.claims_lost=" UINT64_FORMAT " %s.waste_bytes=" UINT64_FORMAT
               " %s.rseq_aborts=" UINT64_FORMAT " %s.rseq_fallbacks=" UINT64_FORMAT
               " %s.out_of_range_cpus=" UINT64_FORMAT " %s.sidelined=" UINT64_FORMAT
               " %s.sideline_reused=" UINT64_FORMAT " %s.short_refills=" UINT64_FORMAT
               " %s.buffer_bytes=" UINT64_FORMAT,
               n, l.allocs, n, l.foreign_allocs, n, l.refills, n, l.taken_bytes, n,
               l.claims_lost, n, l.waste_bytes, n, l.rseq_aborts, n, l.rseq_fallbacks, n,
               l.out_of_range_cpus, n, l.sidelined, n, l.sideline_reused, n, l.short_refills,
               n, l.buffer_bytes);
  }
}
