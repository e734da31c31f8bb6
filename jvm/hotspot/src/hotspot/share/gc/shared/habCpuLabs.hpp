/*
 * Part of Hab's changes to HotSpot. Like HotSpot, this file is free software under the GNU
 * General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

#ifndef SHARE_GC_SHARED_HABCPULABS_HPP
#define SHARE_GC_SHARED_HABCPULABS_HPP

#include "memory/allStatic.hpp"
#include "utilities/globalDefinitions.hpp"

// Objects allocated straight in per-CPU LABs by compiled code (-XX:+UseHABCPULABs), as
// Garthwaite, Dice and White did: the LABs are the per-CPU buffers of Hab's restartable cpu
// level (their layout is hab.h's hab_cpu_buffer_path), bumped in a restartable sequence. There
// are no TLABs then; an object the compiled path does not place takes the runtime, which
// carves it from the same buffer through the levels (HabLevels::allocate_object), refilling
// the buffer from eden.
class HabCpuLabs : AllStatic {
  // Read by every stub first: while true, each one goes to the runtime.
  static volatile bool _paused;

 public:
  // Sends every compiled allocation to the runtime while `paused`: while a JVMTI agent
  // samples allocations (SampledObjectAlloc), which only the runtime's allocations reach.
  static void set_paused(bool paused) { _paused = paused; }

  // C2's instance allocation: a stub in a permanent code blob that takes what C2's slow call
  // passes (the klass in j_rarg0), allocates and initializes an instance of an initialized
  // class without a finalizer, of at most HABCPULABObjectLimit bytes, in the LAB of the CPU
  // the thread runs on, and returns it; anything else (and a LAB without room, or a section
  // the kernel aborted) jumps to `runtime_stub`, unchanged. Returns `runtime_stub` itself
  // where the levels publish no path (a warning then says why).
  static address wrap_new_instance(address runtime_stub);

  // C2's array allocation, wrapped as instances are: the klass in j_rarg0, the length in
  // j_rarg1; an array of at most HABCPULABObjectLimit bytes in the LAB, zeroed.
  static address wrap_new_array(address runtime_stub);
};

#endif // SHARE_GC_SHARED_HABCPULABS_HPP
