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

#ifndef SHARE_GC_SHARED_HABPLATFORM_HPP
#define SHARE_GC_SHARED_HABPLATFORM_HPP

#include "memory/allStatic.hpp"
#include "utilities/globalDefinitions.hpp"
#include "utilities/macros.hpp"

// Where HABs have their stubs, Hab's own rseq registration and thread-pointer-relative
// storage: x86_64 Linux (os_cpu/linux_x86/habPlatform_linux_x86.cpp). Elsewhere UseHAB
// refills TLABs through the runtime and UseHABCPULABs is refused.
#if defined(AMD64) && defined(LINUX)
#define HAB_PLATFORM 1
#else
#define HAB_PLATFORM 0
#endif

// Where the runtime sends HAB's stubs back to it, per thread (HabSampling).
struct HabSampleMarks {
  size_t next_sample_bytes;  // the thread's allocated bytes at which the stubs take the runtime
  size_t jfr_attempt_bytes;  // its allocated bytes at JFR's last try
  size_t jfr_interval_bytes; // the distance to the next try
  uint64_t random;           // a xorshift state for those distances (0: not seeded)
};

// Per-thread storage at one offset from every thread's pointer, and a hook at thread exit.
class HabPlatform : AllStatic {
 public:
  // The calling thread's marks.
  static HabSampleMarks* sample_marks();
  // The offset of HabSampleMarks::next_sample_bytes from the thread pointer; 0 where none.
  static intptr_t sample_mark_offset();
  // Hab's own rseq area for threads glibc registered none for (32 bytes, 32-aligned, marked
  // unregistered until libhab registers it): its offset from the thread pointer; 0 where none.
  static intptr_t rseq_area_offset();
  // Runs `destructor` at each thread's exit with what the thread last gave set_exit_value.
  // False where the platform cannot.
  static bool create_exit_hook(void (*destructor)(void*));
  static void set_exit_value(void* value);
};

#endif // SHARE_GC_SHARED_HABPLATFORM_HPP
