/*
 * Part of Hab's changes to HotSpot. Like HotSpot, this file is free software under the GNU
 * General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

#include "precompiled.hpp"
#include "jvm_io.h"
#include "gc/parallel/mutableSpace.hpp"
#include "gc/parallel/parallelScavengeHeap.hpp"
#include "gc/parallel/psHab.hpp"
#include "gc/parallel/psYoungGen.hpp"
#include "gc/shared/collectedHeap.hpp"
#include "gc/shared/threadLocalAllocBuffer.hpp"
#include "logging/log.hpp"
#include "logging/logStream.hpp"
#include "runtime/atomic.hpp"
#include "runtime/globals.hpp"
#include "runtime/globals_extension.hpp"
#include "runtime/os.hpp"
#include "runtime/safepoint.hpp"
#include "utilities/ostream.hpp"

// Only the declarations: HotSpot calls libhab through pointers resolved at start-up.
#define HAB_NO_INLINE_RSEQ
#include "gc/parallel/hab.h"

#include <pthread.h>

// The entries of libhab that HotSpot calls.
#define HAB_ENTRIES(f)           \
  f(hab_abi_version)             \
  f(hab_last_error)              \
  f(hab_levels_auto)             \
  f(hab_levels_new_with_cpu_id)  \
  f(hab_levels_max_tlab_bytes)   \
  f(hab_levels_buffered_bytes)   \
  f(hab_levels_thread_new)       \
  f(hab_levels_thread_free)      \
  f(hab_levels_carve_tlab)       \
  f(hab_levels_retire_all)       \
  f(hab_levels_resize)           \
  f(hab_levels_stats)            \
  f(hab_level_stats_line)        \
  f(hab_levels_tlabs_past_levels)

#define HAB_DECLARE_ENTRY(name) static decltype(&::name) _##name = NULL;
HAB_ENTRIES(HAB_DECLARE_ENTRY)
#undef HAB_DECLARE_ENTRY

static const size_t MAX_LEVELS = 5;

static hab_levels* _levels = NULL;
// Whether the buffers follow the allocation (HABLevels=auto): resized at each retire.
static bool _follow = false;
static size_t _max_tlab_words = 0;
// Each thread's handle on the levels; freed by the key's destructor when the thread exits.
static pthread_key_t _thread_key;
static THREAD_LOCAL hab_levels_thread* _thread = NULL;
// TLABs larger than the lowest buffer, carved straight from eden, and their words.
static volatile size_t _direct_tlabs = 0;
static volatile size_t _direct_words = 0;
// The figures at the previous retire, to log what happened since.
static hab_level_stats _previous[MAX_LEVELS];
static size_t _retires = 0;

static MutableSpace* eden() {
  return ParallelScavengeHeap::heap()->young_gen()->eden_space();
}

// Hab's upstream: eden. Carves desired bytes, or what is left when that is at least min.
static size_t carve_from_eden(void*, size_t min_bytes, size_t desired_bytes, uintptr_t* start) {
  size_t min_words = min_bytes / HeapWordSize;
  size_t words = desired_bytes / HeapWordSize;
  MutableSpace* space = eden();
  for (int attempt = 0; attempt < 8; attempt++) {
    HeapWord* result = space->cas_allocate(words);
    if (result != NULL) {
      *start = (uintptr_t)result;
      return words * HeapWordSize;
    }
    HeapWord* top = space->top();
    HeapWord* end = space->end();
    size_t left = top < end ? pointer_delta(end, top) : 0;
    if (left < min_words) {
      return 0;
    }
    words = MIN2(words, left);
  }
  return 0;
}

// What eden has left: buffers refilled near its end take a share of it, not a whole buffer,
// so that little is left in them at the young collection.
static size_t free_in_eden(void*) {
  return eden()->free_in_bytes();
}

// Hab's filler writer: HotSpot's filler objects (int arrays, or an Object for two words).
static void write_filler(void*, uintptr_t start, size_t bytes) {
  CollectedHeap::fill_with_objects((HeapWord*)start, bytes / HeapWordSize);
}

static void free_thread_handle(void* handle) {
  _hab_levels_thread_free((hab_levels_thread*)handle);
}

bool PSHab::initialize(HeapWord* base, size_t eden_bytes) {
  char path[JVM_MAXPATHLEN];
  if (HABLibrary != NULL) {
    jio_snprintf(path, sizeof(path), "%s", HABLibrary);
  } else {
    os::jvm_path(path, sizeof(path));
    char* slash = strrchr(path, '/');
    if (slash == NULL) {
      log_error(gc, init)("UseHAB: cannot tell where libjvm.so is (%s)", path);
      return false;
    }
    jio_snprintf(slash + 1, sizeof(path) - (slash + 1 - path), "libhab.so.1");
  }
  char error[1024];
  void* library = os::dll_load(path, error, sizeof(error));
  if (library == NULL) {
    log_error(gc, init)("UseHAB: cannot load %s: %s", path, error);
    return false;
  }
#define HAB_RESOLVE_ENTRY(name)                                                 \
  _##name = (decltype(&::name))os::dll_lookup(library, #name);                  \
  if (_##name == NULL) {                                                        \
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
  // HotSpot keeps an empty string flag (-XX:HABLevels=) as NULL: say so rather than use it.
  if (HABLevels == NULL || HABLevels[0] == '\0') {
    log_error(gc, init)("UseHAB: -XX:HABLevels is empty: give auto, or a list of levels, lowest "
                        "first, such as cpu:256K,core:2M");
    return false;
  }
  if (HABCpuId == NULL || HABCpuId[0] == '\0') {
    log_error(gc, init)("UseHAB: -XX:HABCpuId is empty: give rseq or getcpu");
    return false;
  }
  // HABLevels=auto (the default): the levels libhab picks for this machine and eden.
  char levels[256];
  const char* chosen = HABLevels;
  if (strcmp(HABLevels, "auto") == 0) {
    size_t min_tlab_bytes = ThreadLocalAllocBuffer::min_size() * HeapWordSize;
    size_t length = _hab_levels_auto(eden_bytes, min_tlab_bytes, levels, sizeof(levels));
    if (length == 0 || length >= sizeof(levels)) {
      log_error(gc, init)("UseHAB: -XX:HABLevels=auto for eden " SIZE_FORMAT "K: %s",
                          eden_bytes / K, length == 0 ? _hab_last_error() : "too long a list");
      return false;
    }
    chosen = levels;
    _follow = true;
  }
  hab_upstream upstream = {carve_from_eden, write_filler, NULL, free_in_eden};
  size_t min_filler_bytes = CollectedHeap::min_fill_size() * HeapWordSize;
  hab_status status = _hab_levels_new_with_cpu_id(chosen, HABCpuId, 0, min_filler_bytes,
                                                  (uintptr_t)base, &upstream, &_levels);
  if (status != HAB_OK) {
    log_error(gc, init)("UseHAB: -XX:HABLevels=%s (%s) -XX:HABCpuId=%s: %s",
                        HABLevels, chosen, HABCpuId, _hab_last_error());
    return false;
  }
  size_t buffered_bytes = _hab_levels_buffered_bytes(_levels);
  if (eden_bytes < 2 * buffered_bytes) {
    log_warning(gc, init)("UseHAB: eden (" SIZE_FORMAT "K) is less than twice what the buffers of "
                          "-XX:HABLevels=%s hold (" SIZE_FORMAT "K): HABs turned off",
                          eden_bytes / K, chosen, buffered_bytes / K);
    FLAG_SET_ERGO(UseHAB, false);
    return true;
  }
  _max_tlab_words = _hab_levels_max_tlab_bytes(_levels) / HeapWordSize;
  if (_max_tlab_words < ThreadLocalAllocBuffer::min_size()) {
    // No TLAB would ever go through the levels.
    log_error(gc, init)("UseHAB: the TLABs -XX:HABLevels=%s hands out (" SIZE_FORMAT " bytes, its "
                        "lowest buffer) are smaller than the smallest TLAB (" SIZE_FORMAT
                        " bytes, -XX:MinTLABSize): give larger buffers",
                        chosen, _max_tlab_words * HeapWordSize,
                        ThreadLocalAllocBuffer::min_size() * HeapWordSize);
    return false;
  }
  if (pthread_key_create(&_thread_key, free_thread_handle) != 0) {
    log_error(gc, init)("UseHAB: no thread-specific key left");
    return false;
  }
  log_info(gc, init)("HAB: levels %s%s, CPU id %s, TLABs up to " SIZE_FORMAT "K through them (%s)",
                     chosen, chosen == HABLevels ? "" : " (auto)", HABCpuId,
                     _max_tlab_words * HeapWordSize / K, path);
  return true;
}

// The calling thread's handle, made on its first TLAB.
static hab_levels_thread* thread_handle() {
  hab_levels_thread* handle = _thread;
  if (handle == NULL) {
    handle = _hab_levels_thread_new(_levels);
    if (handle == NULL) {
      return NULL;
    }
    pthread_setspecific(_thread_key, handle);
    _thread = handle;
  }
  return handle;
}

HeapWord* PSHab::allocate_new_tlab(size_t min_size, size_t requested_size, size_t* actual_size) {
  hab_levels_thread* handle = requested_size <= _max_tlab_words ? thread_handle() : NULL;
  if (handle == NULL) {
    // As in the stock path: straight from eden.
    HeapWord* result = eden()->cas_allocate(requested_size);
    if (result != NULL) {
      *actual_size = requested_size;
      Atomic::inc(&_direct_tlabs);
      Atomic::add(&_direct_words, requested_size);
    }
    return result;
  }
  uintptr_t start = 0;
  size_t bytes = _hab_levels_carve_tlab(handle, min_size * HeapWordSize,
                                        requested_size * HeapWordSize, &start);
  if (bytes == 0) {
    return NULL; // eden is exhausted: HotSpot allocates outside TLABs, then collects
  }
  *actual_size = bytes / HeapWordSize;
  return (HeapWord*)start;
}

// Reads every level's figures into `stats`; returns how many.
static size_t read_stats(hab_level_stats* stats) {
  size_t count = _hab_levels_stats(_levels, stats, MAX_LEVELS);
  return MIN2(count, MAX_LEVELS);
}

// One line per level: the figures since `since` (NULL for the totals) that are not zero,
// named as libhab names them ("allocs: 1427 foreign_allocs: 3 refills: 498 ..."), or
// "nothing".
static void print_levels(outputStream* out, const char* what, const hab_level_stats* now,
                         const hab_level_stats* since, size_t count) {
  for (size_t i = 0; i < count; i++) {
    char line[512] = ""; // 9 figures of at most 40 characters fit
    _hab_level_stats_line(&now[i], since == NULL ? NULL : &since[i], line, sizeof(line));
    out->print_cr("HAB %s %s: %s", what, now[i].level, line[0] != '\0' ? line : "nothing");
  }
}

void PSHab::retire_all() {
  assert(SafepointSynchronize::is_at_safepoint(), "only with every thread stopped");
  if (_hab_levels_retire_all(_levels) != HAB_OK) {
    fatal("UseHAB: retiring the buffers failed: %s", _hab_last_error());
  }
  // With auto levels, the next cycle's buffers follow this one's allocation over eden.
  if (_follow && _hab_levels_resize(_levels, eden()->capacity_in_bytes()) != HAB_OK) {
    fatal("UseHAB: resizing the buffers failed: %s", _hab_last_error());
  }
  _retires++;
  LogTarget(Debug, gc, tlab) lt;
  if (lt.is_enabled()) {
    LogStream ls(lt);
    hab_level_stats now[MAX_LEVELS];
    size_t count = read_stats(now);
    print_levels(&ls, "since the last retire", now, _previous, count);
    memcpy(_previous, now, sizeof(now));
  }
}

void PSHab::print_summary() {
  LogTarget(Info, gc, tlab) lt;
  if (!lt.is_enabled()) {
    return;
  }
  LogStream ls(lt);
  hab_level_stats now[MAX_LEVELS];
  size_t count = read_stats(now);
  print_levels(&ls, "total", now, NULL, count);
  ls.print_cr("HAB total: " SIZE_FORMAT " retires; " SIZE_FORMAT " TLABs (" SIZE_FORMAT
              "K) larger than " SIZE_FORMAT "K straight from eden; " UINT64_FORMAT
              " TLABs past every level (all buffers busy)",
              _retires, Atomic::load(&_direct_tlabs),
              Atomic::load(&_direct_words) * HeapWordSize / K, _max_tlab_words * HeapWordSize / K,
              _hab_levels_tlabs_past_levels(_levels));
}
