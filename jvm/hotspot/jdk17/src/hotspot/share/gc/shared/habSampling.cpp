/*
 * Part of Hab's changes to HotSpot. Like HotSpot, this file is free software under the GNU
 * General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

#include "precompiled.hpp"
#include "gc/shared/habCpuLabs.hpp"
#include "gc/shared/habLevels.hpp"
#include "gc/shared/habSampling.hpp"
#include "gc/shared/threadLocalAllocBuffer.inline.hpp"
#include "prims/jvmtiExport.hpp"
#include "runtime/atomic.hpp"
#include "runtime/thread.inline.hpp"
#include "runtime/threadHeapSampler.hpp"

// Each thread's marks, in the static TLS block (initial-exec), so at one offset from every
// thread's pointer where the stubs read the mark through fs. Counts of the thread's
// allocated bytes, TLAB included (Thread::cooked_allocated_bytes).
struct HabSampleMarks {
  // Where the stubs send the thread to the runtime while a sampler is on; 0 (at once) until
  // the runtime set one.
  size_t next_sample_bytes;
  // The JVMTI sampler's last check (bytes_since_last_check), in the epoch below.
  size_t checked_bytes;
  uint64_t checked_epoch;
  // The runtime's last allocation in a new TLAB or outside one, where JFR tries a sample, and
  // the distance to the next try.
  size_t jfr_attempt_bytes;
  size_t jfr_interval_bytes;
  // A xorshift generator's state for those distances (0: not seeded yet).
  uint64_t random;
};

static __thread HabSampleMarks _marks __attribute__((tls_model("initial-exec"))) = {0, 0, 0, 0, 0, 0};

// The distance from one JFR try to the next: uniform between half and one and a half of a
// per-CPU buffer (the lowest level's), never under the thread's TLAB. Not a fixed distance: a
// program that allocates in a fixed pattern would be sampled at the same few places of it.
static size_t next_jfr_interval(JavaThread* thread) {
  size_t tlab_bytes = thread->tlab().desired_size() * HeapWordSize;
  size_t mean_bytes = MAX3(tlab_bytes, HabLevels::lowest_buffer_bytes(), (size_t)2);
  uint64_t x = _marks.random;
  if (x == 0) {
    x = ((uint64_t)(uintptr_t)thread * 0x9e3779b97f4a7c15ULL) | 1;
  }
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  _marks.random = x;
  // Never under the TLAB, below which JFR itself does not try.
  return MAX2(tlab_bytes, mean_bytes / 2 + (size_t)((x * 0x2545f4914f6cdd1dULL) % mean_bytes));
}

// Incremented whenever the JVMTI sampler may have been turned on: a thread's last check from
// an earlier epoch is stale (the sampler did not see the bytes since), and counts nothing.
static volatile uint64_t _jvmti_epoch = 1;

intptr_t HabSampling::mark_offset() {
#if defined(__x86_64__) && defined(__linux__)
  intptr_t thread_pointer;
  __asm__("movq %%fs:0, %0" : "=r"(thread_pointer));
  return (intptr_t)&_marks.next_sample_bytes - thread_pointer;
#else
  return 0;
#endif
}

void HabSampling::attach_thread() {
  _marks.next_sample_bytes = 0;
  _marks.checked_bytes = 0;
  _marks.checked_epoch = 0;
  _marks.jfr_attempt_bytes = 0;
  _marks.jfr_interval_bytes = 0;
}

void HabSampling::jvmti_sampler_changed() {
  Atomic::inc(&_jvmti_epoch);
}

size_t HabSampling::bytes_since_last_check(JavaThread* thread, size_t object_bytes) {
  size_t allocated_bytes = (size_t)thread->cooked_allocated_bytes();
  uint64_t epoch = Atomic::load(&_jvmti_epoch);
  size_t before_object = allocated_bytes - MIN2(object_bytes, allocated_bytes);
  size_t since = 0;
  if (_marks.checked_epoch == epoch && before_object >= _marks.checked_bytes) {
    since = before_object - _marks.checked_bytes;
  }
  _marks.checked_bytes = allocated_bytes;
  _marks.checked_epoch = epoch;
  return since;
}

bool HabSampling::jfr_sample_due(Thread* thread, size_t object_bytes) {
  if (!HabCpuLabs::in_cpu_labs() || object_bytes > (size_t)HABCPULABObjectLimit) {
    // TLAB cycles: at every new TLAB and object outside one the runtime makes, as in stock;
    // an object larger than the stubs place, which stock would place outside a TLAB or in a
    // new one.
    return true;
  }
  return (size_t)thread->cooked_allocated_bytes() >=
         _marks.jfr_attempt_bytes + _marks.jfr_interval_bytes;
}

void HabSampling::set_next_mark(JavaThread* thread, bool new_tlab_or_outside,
                                size_t object_bytes) {
  if (!HabCpuLabs::sampled()) {
    return;
  }
  if (new_tlab_or_outside && HabCpuLabs::jfr_samples() && jfr_sample_due(thread, object_bytes)) {
    _marks.jfr_attempt_bytes = (size_t)thread->cooked_allocated_bytes();
    _marks.jfr_interval_bytes = next_jfr_interval(thread);
  }
  // From the last check (an allocation the runtime made in its TLAB did not count down the
  // sampler's bytes): 0 where the thread has not checked since the sampler started.
  size_t next = SIZE_MAX;
  if (JvmtiExport::should_post_sampled_object_alloc()) {
    next = _marks.checked_epoch != Atomic::load(&_jvmti_epoch)
               ? 0 : _marks.checked_bytes + thread->heap_sampler().bytes_until_sample();
  }
  if (HabCpuLabs::jfr_samples()) {
    next = MIN2(next, _marks.jfr_attempt_bytes + _marks.jfr_interval_bytes);
  }
  _marks.next_sample_bytes = next == SIZE_MAX ? 0 : next;
}
