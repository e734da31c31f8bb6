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
// - JFR: stock tries a sample at each new TLAB and each object outside one (at least a TLAB
//   apart), and weighs it by the bytes the thread allocated since the sample before. In TLAB
//   cycles the runtime still tries at each one it makes, and the mark, about a per-CPU buffer
//   past its last try, sends the TLAB refill stubs back to it that often. In a cycle in
//   per-CPU LABs there are no TLABs: the runtime tries at the mark, about a per-CPU buffer
//   past its last try, and at objects larger than the stubs place (which stock would place
//   outside a TLAB or in a new one); not at the objects it places when a buffer runs out,
//   which fall at the same few places of a program that allocates in a fixed pattern. The
//   distance is drawn between half and one and a half of a buffer, for the same reason. JFR's
//   throttle (150 samples a second by default) keeps far fewer tries than either gives.
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
  // current thread), of `object_bytes`: whether JFR tries a sample there (in a cycle in
  // per-CPU LABs, only for an object larger than the stubs place or once the thread passed
  // its JFR mark).
  static bool jfr_sample_due(Thread* thread, size_t object_bytes);

  // After every allocation the runtime made for `thread` (the current thread), with the
  // samplers' state updated: where its compiled paths come back next. `new_tlab_or_outside`:
  // the object (of `object_bytes`) was in a new TLAB or outside one, where JFR tries a sample.
  static void set_next_mark(JavaThread* thread, bool new_tlab_or_outside, size_t object_bytes);
};

#endif // SHARE_GC_SHARED_HABSAMPLING_HPP
