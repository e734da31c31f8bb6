/*
 * Part of Hab's changes to HotSpot. Like HotSpot, this file is free software under the GNU
 * General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

#ifndef SHARE_GC_SHARED_HABSAMPLING_HPP
#define SHARE_GC_SHARED_HABSAMPLING_HPP

#include "memory/allStatic.hpp"
#include "utilities/globalDefinitions.hpp"

class JavaThread;
class Thread;

// Allocation samplers (JFR's ObjectAllocationSample, JVMTI's SampledObjectAlloc) live in the
// runtime: stock HotSpot reaches them at TLAB boundaries only. Hab's compiled paths allocate
// without the runtime, objects straight in per-CPU LABs and TLABs refilled from per-CPU
// buffers, so while a sampler is on they go back to it at a byte mark instead: each thread has
// a *sample mark*, a count of its allocated bytes (JavaThread::allocated_bytes with its TLAB's
// used bytes, the count the stubs keep), and an object or a new TLAB that would reach it takes
// the runtime, which samples it and sets the next mark:
//
// - JVMTI: the mark is where the thread's sampler wants its next sample (its bytes until the
//   sample), so a sample falls on the object that crosses it, as in stock; the bytes the
//   sampler counts are the thread's allocated bytes since its last check, however allocated;
// - JFR: the mark is about a per-CPU buffer (the lowest level's, at least the thread's TLAB;
//   drawn between half and one and a half of it, so that a program allocating in a fixed
//   pattern is not sampled at the same few places of it) past the runtime's last allocation
//   in a new TLAB or outside one, where JFR tries a sample: JFR then weighs each sample by the
//   bytes the thread allocated since the one before, as in stock, and only the tries its
//   throttle sees are fewer (one per buffer's worth of allocation instead of per TLAB).
//
// The stubs compare with the mark only while a sampler is on (HabCpuLabs' state says so).
class HabSampling : AllStatic {
 public:
  // The offset of the calling thread's sample mark from its thread pointer (fs on x86_64
  // Linux), the same in every thread; 0 where the mark is not at one (no stubs there).
  static intptr_t mark_offset();

  // A thread the VM starts or attaches: its mark and count start again (a native thread
  // attached anew has a new count of allocated bytes).
  static void attach_thread();

  // When JVMTI's sampler may have been turned on: every thread's last check is stale.
  static void jvmti_sampler_changed();

  // For the JVMTI sampler, after the runtime allocated an object of `object_bytes` for
  // `thread` (the current thread): the bytes the thread allocated before it since the last
  // such call, by any path, compiled code's included. Moves the count past the object.
  static size_t bytes_since_last_check(JavaThread* thread, size_t object_bytes);

  // For JFR, at an allocation the runtime made in a new TLAB or outside one for `thread` (the
  // current thread): whether JFR tries a sample there, the thread having passed its JFR mark.
  // Elsewhere (a buffer the runtime refilled, a TLAB it kept) JFR tries none: those places
  // fall on objects of the program's pattern at the buffers' ends, not at random bytes.
  static bool jfr_sample_due(Thread* thread);

  // After every allocation the runtime made for `thread` (the current thread), with the
  // samplers' state updated: where its compiled paths come back next. `new_tlab_or_outside`:
  // the object was in a new TLAB or outside one, where JFR tries a sample.
  static void set_next_mark(JavaThread* thread, bool new_tlab_or_outside);
};

#endif // SHARE_GC_SHARED_HABSAMPLING_HPP
