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

#include "gc/shared/habPlatform.hpp"

#include <pthread.h>

// Both in the static TLS block (initial-exec), so at one offset from every thread's pointer,
// which the stubs address through fs.
static __thread HabSampleMarks _marks __attribute__((tls_model("initial-exec")));

// The kernel's struct rseq, as glibc's own area; starts unregistered (cpu_id -1) with indices
// beyond every buffer, so that a section run before the thread registers misses.
struct HabRseqArea {
  uint32_t cpu_id_start;
  uint32_t cpu_id;
  uint64_t rseq_cs;
  uint32_t flags;
  uint32_t node_id;
  uint32_t mm_cid;
  uint32_t reserved;
};
static __thread HabRseqArea _rseq_area __attribute__((tls_model("initial-exec"), aligned(32))) =
    {UINT32_MAX, UINT32_MAX, 0, 0, 0, UINT32_MAX, 0};

static pthread_key_t _exit_key;

static intptr_t thread_pointer() {
  intptr_t tp;
  __asm__("movq %%fs:0, %0" : "=r"(tp));
  return tp;
}

HabSampleMarks* HabPlatform::sample_marks() {
  return &_marks;
}

intptr_t HabPlatform::sample_mark_offset() {
  return (intptr_t)&_marks.next_sample_bytes - thread_pointer();
}

intptr_t HabPlatform::rseq_area_offset() {
  return (intptr_t)&_rseq_area - thread_pointer();
}

bool HabPlatform::create_exit_hook(void (*destructor)(void*)) {
  return pthread_key_create(&_exit_key, destructor) == 0;
}

void HabPlatform::set_exit_value(void* value) {
  pthread_setspecific(_exit_key, value);
}
