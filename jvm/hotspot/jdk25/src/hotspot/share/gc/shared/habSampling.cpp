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

#include "gc/shared/habCpuLabs.hpp"
#include "gc/shared/habLevels.hpp"
#include "gc/shared/habPlatform.hpp"
#include "gc/shared/habSampling.hpp"
#include "gc/shared/threadLocalAllocBuffer.inline.hpp"
#include "prims/jvmtiExport.hpp"
#include "runtime/javaThread.inline.hpp"
#include "runtime/threadHeapSampler.hpp"

// The distance from one JFR try to the next: uniform between half and one and a half of a
// per-CPU buffer (the lowest level's), never under the thread's TLAB, below which JFR itself
// does not try.
static size_t next_jfr_interval(JavaThread* thread, HabSampleMarks* marks) {
  size_t tlab_bytes = thread->tlab().desired_size() * HeapWordSize;
  size_t mean_bytes = MAX3(tlab_bytes, HabLevels::lowest_buffer_bytes(), (size_t)2);
  uint64_t x = marks->random;
  if (x == 0) {
    x = ((uint64_t)(uintptr_t)thread * 0x9e3779b97f4a7c15ULL) | 1;
  }
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  marks->random = x;
  return MAX2(tlab_bytes, mean_bytes / 2 + (size_t)((x * 0x2545f4914f6cdd1dULL) % mean_bytes));
}

intptr_t HabSampling::mark_offset() {
  return HabPlatform::sample_mark_offset();
}

void HabSampling::attach_thread() {
  HabSampleMarks* marks = HabPlatform::sample_marks();
  marks->next_sample_bytes = 0;
  marks->jfr_attempt_bytes = 0;
  marks->jfr_interval_bytes = 0;
}

bool HabSampling::jfr_sample_due(Thread* thread, size_t object_bytes) {
  if (!HabCpuLabs::in_cpu_labs() || object_bytes > (size_t)HABCPULABObjectLimit) {
    // TLAB cycles: at every new TLAB and object outside one the runtime makes, as in stock;
    // an object larger than the stubs place, which stock would place outside a TLAB.
    return true;
  }
  const HabSampleMarks* marks = HabPlatform::sample_marks();
  return (size_t)thread->cooked_allocated_bytes() >=
         marks->jfr_attempt_bytes + marks->jfr_interval_bytes;
}

void HabSampling::set_next_mark(JavaThread* thread, bool new_tlab_or_outside,
                                size_t object_bytes) {
  if (!HabCpuLabs::sampled()) {
    return;
  }
  HabSampleMarks* marks = HabPlatform::sample_marks();
  const size_t allocated_bytes = (size_t)thread->cooked_allocated_bytes();
  if (new_tlab_or_outside && HabCpuLabs::jfr_samples() && jfr_sample_due(thread, object_bytes)) {
    marks->jfr_attempt_bytes = allocated_bytes;
    marks->jfr_interval_bytes = next_jfr_interval(thread, marks);
  }
  size_t next = SIZE_MAX;
  if (JvmtiExport::should_post_sampled_object_alloc()) {
    next = allocated_bytes + thread->heap_sampler().bytes_until_sample(thread->tlab().top());
  }
  if (HabCpuLabs::jfr_samples()) {
    next = MIN2(next, marks->jfr_attempt_bytes + marks->jfr_interval_bytes);
  }
  marks->next_sample_bytes = next == SIZE_MAX ? 0 : next;
}
