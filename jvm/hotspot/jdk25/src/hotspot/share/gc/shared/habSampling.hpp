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

#ifndef SHARE_GC_SHARED_HABSAMPLING_HPP
#define SHARE_GC_SHARED_HABSAMPLING_HPP

#include "memory/allStatic.hpp"
#include "utilities/globalDefinitions.hpp"

class JavaThread;
class Thread;

// Allocation samplers (JVMTI's SampledObjectAlloc, JFR's ObjectAllocationSample) live in the
// runtime, which stock HotSpot reaches at TLAB boundaries and sample points only. HAB's stubs
// allocate without it (objects in per-CPU LABs, TLABs refilled from per-CPU buffers), keeping
// the counts the runtime keeps (the thread's allocated bytes, ThreadHeapSampler's bytes); while
// a sampler is on they come back to the runtime at a byte mark instead: each thread has a
// *sample mark*, a count of its allocated bytes (TLAB included, as cooked_allocated_bytes),
// and an object or a new TLAB that would reach it takes the runtime, which samples and sets
// the next mark:
//
// - JVMTI: the mark is where the thread's ThreadHeapSampler wants its next sample, so the
//   sample falls on the object that crosses it, as in stock;
// - JFR: stock tries a sample at each new TLAB and each object outside one, weighed by the
//   bytes allocated since the sample before. In TLAB cycles the runtime tries at each TLAB it
//   makes, and the mark, about a per-CPU buffer past its last try, sends the refill stubs
//   back to it that often. In a cycle in per-CPU LABs there are no TLABs: the runtime tries
//   at the mark and at objects larger than the stubs place, at a distance drawn between half
//   and one and a half of a buffer (a fixed one would sample a program that allocates in a
//   fixed pattern at the same few places). JFR's throttle keeps far fewer tries than either.
//
// The stubs compare with the mark only while a sampler is on (HabCpuLabs' state says so).
class HabSampling : AllStatic {
 public:
  // The offset of the calling thread's sample mark from its thread pointer, the same in every
  // thread; 0 where the platform has none (the stubs then send every sampled state to the
  // runtime).
  static intptr_t mark_offset();

  // A thread the VM starts or attaches: its marks start again.
  static void attach_thread();

  // For JFR, at an allocation the runtime made in a new TLAB or outside one for `thread` (the
  // current thread), of `object_bytes`: whether JFR tries a sample there (in a cycle in
  // per-CPU LABs, only for an object larger than the stubs place, or past its JFR mark).
  static bool jfr_sample_due(Thread* thread, size_t object_bytes);

  // After every allocation the runtime made for `thread` (the current thread), with the
  // samplers' state updated: where its stubs come back next. `new_tlab_or_outside`: the
  // object (of `object_bytes`) was in a new TLAB or outside one, where JFR tries a sample.
  static void set_next_mark(JavaThread* thread, bool new_tlab_or_outside, size_t object_bytes);
};

#endif // SHARE_GC_SHARED_HABSAMPLING_HPP
