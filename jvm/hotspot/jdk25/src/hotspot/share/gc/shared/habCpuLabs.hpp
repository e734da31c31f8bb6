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

#ifndef SHARE_GC_SHARED_HABCPULABS_HPP
#define SHARE_GC_SHARED_HABCPULABS_HPP

#include "asm/register.hpp"
#include "gc/shared/habPlatform.hpp"
#include "gc/shared/tlab_globals.hpp" // UseHABCPULABs
#include "memory/allStatic.hpp"
#include "runtime/atomic.hpp"
#include "utilities/globalDefinitions.hpp"

class JavaThread;
class Label;
class MacroAssembler;
class outputStream;

// Compiled code that reaches the per-CPU buffers of Hab's restartable cpu level itself (their
// layout is hab.h's hab_cpu_buffer_path), bumping the buffer of the CPU it runs on in a
// restartable sequence, in a stub that wraps one of C2's slow allocation calls:
//
// - with -XX:+UseHABCPULABs, objects go straight into those buffers, as Garthwaite, Dice and
//   White placed them in per-processor LABs; there are no TLABs then, and an object the stub
//   does not place takes the runtime, which carves it from the same buffer through the levels
//   (allocate_object), refilling the buffer from eden, up to HABCPULABObjectLimit bytes (a
//   larger one the collector places);
// - with -XX:+UseHAB (and HABCompiledRefill), a full TLAB is refilled there, as Kirsch et al.
//   refill TLABs from per-CPU buffers: the old TLAB's tail becomes a filler, the new TLAB
//   (the desired size and the object) is installed with the statistics the runtime keeps, and
//   the object is placed in it, without the runtime call and its thread-state transitions.
//   Under Parallel, where the buffer's last carve was the old TLAB, the new one extends it
//   instead (the tail reused, no filler).
//
// With both and -XX:+HABFlip (the default), each cycle allocates in one or the other, as the
// flip policy decided at the collection before it (end_cycle): the per-CPU LAB stub then
// hands a TLAB cycle's calls to the TLAB refill stub.
//
// Each stub comes in two copies: the plain one, whose first instruction compares _state with
// 0, and the observed one any other state goes to, which also goes to the runtime where the
// thread reaches its sample mark while an allocation sampler is on (HabSampling).
//
// Anything unusual (an empty buffer, a TLAB the runtime would keep, a class not initialized,
// an object over the limit, a section the kernel aborted) takes C2's own runtime stub, with
// the registers it was called with.
class HabCpuLabs : AllStatic {
 public:
  // Who watches the allocations: each one a bit of _state.
  enum Observer {
    JVMTI_SAMPLER = 1,   // a JVMTI agent samples allocations (SampledObjectAlloc)
    JFR_TLAB_EVENTS = 2, // JFR records ObjectAllocationInNewTLAB or ObjectAllocationOutsideTLAB
    JFR_SAMPLES = 8      // JFR records ObjectAllocationSample
  };

 private:
  // The bit of _state set in a cycle the flip gave to TLABs (UseHABCPULABs).
  static const int IN_TLABS = 4;
  static const int SAMPLERS = JVMTI_SAMPLER | JFR_SAMPLES;

  // Read by every stub first; one compare of the word with 0 on the common path. Otherwise
  // out of line: with JFR's per-TLAB events, every stub goes to the runtime, which sends
  // them, and no cycle is in per-CPU LABs (an object there is in no TLAB); with a sampler
  // alone, each stub's observed copy runs, which goes to the runtime only where the thread
  // reaches its sample mark (HabSampling); IN_TLABS sends the per-CPU LAB stubs to the TLAB
  // refill stub (the interpreter's and C1's to the runtime).
  static volatile int _state;

  static void set_bit(int bit, bool on);

  // Wraps C2's runtime stub for instances (`array` false) or arrays.
  static address wrap(address runtime_stub, bool array);

  // The interpreter's and C1's stub (UseHABCPULABs): nullptr where there is none.
  static address _allocate_stub;

  // C2's stub (UseHABCPULABs and HABCompiledCPULABPath), entered with the object's size in
  // rcx, or past the limit check with the size in rcx and the packed word's delta in rdx (a
  // size known when compiling): nullptr where there is none.
  static address _c2_stub;
  static address _c2_sized_stub;

 public:
  // At start-up, once HabLevels::initialize has built the levels (UseHAB): with
  // UseHABCPULABs, checks that per-CPU LABs can work here (a restartable lowest level, no
  // DTrace allocation probes, the stubs on this platform), else turns them
  // off with a warning that says why; starts the flip in TLABs; generates the stubs the
  // interpreter and C1 call.
  static void initialize();

  // With UseHABCPULABs, for MemAllocator in a cycle in per-CPU LABs: an object of exactly
  // `words` from the buffer of the CPU the thread runs on, bumped inline as the stubs bump it,
  // or carved through the levels, which refill the buffer from the space as a TLAB's buffer
  // is; nullptr when the levels do not serve it (larger than HABCPULABObjectLimit, as the stubs'
  // objects are, or the space has no room for a buffer). Counts nothing per object.
  static HeapWord* allocate_object(size_t words);

  // At a collection, once HabLevels::retire_all has retired the buffers and before they are
  // resized (UseHABCPULABs): counts what the per-CPU LABs did over the cycle that ends, and,
  // with HABFlip, decides whether the next cycle is in per-CPU LABs or in TLABs (libhab's flip
  // policy; the cycle's TLABs left `tlab_waste_words` unused; `collection` counts from 1).
  static void end_cycle(size_t tlab_waste_words, uint64_t collection);

  // At exit (UseHABCPULABs): the mode's totals for people (gc+tlab), and its " key=value"
  // words of HabExitLine's line.
  static void print_summary(outputStream* out);
  static void print_exit_figures(outputStream* out);

  // From any thread, when an observer starts or stops.
  static void set_observed(Observer observer, bool on) { set_bit(observer, on); }

  static bool is_observed(Observer observer) { return (Atomic::load(&_state) & observer) != 0; }

  // Whether a sampler is on (JVMTI's, or JFR's ObjectAllocationSample).
  static bool sampled() { return (Atomic::load(&_state) & SAMPLERS) != 0; }
  static bool jfr_samples() { return (Atomic::load(&_state) & JFR_SAMPLES) != 0; }

  // Whether objects go to per-CPU LABs this cycle: with UseHABCPULABs, unless the flip gave
  // the cycle to TLABs or JFR records per-TLAB events. The flip changes only at a safepoint;
  // the events at any time (a TLAB cycle then starts at once, each thread at its next object).
  static bool in_cpu_labs() {
    return UseHABCPULABs && (Atomic::load(&_state) & (IN_TLABS | JFR_TLAB_EVENTS)) == 0;
  }

  // At start-up and at a collection (with every thread stopped): the next cycle in TLABs or
  // in per-CPU LABs.
  static void set_in_tlabs(bool in_tlabs) { set_bit(IN_TLABS, in_tlabs); }

  // At start-up, before the interpreter is generated: the stubs the interpreter's and C1's
  // per-CPU LAB path calls, and C2's (UseHABCPULABs; none with ZeroTLAB, which the tiers take
  // to mean that every object's fields are zero already, or where the levels publish no path).
  static void generate_allocate_stub();

  // Whether the interpreter and C1 have that stub (after generate_allocate_stub).
  static bool allocates_in_cpu_labs() { return _allocate_stub != nullptr; }

  // The interpreter's and C1's per-CPU LAB path, emitted where their TLAB bump failed: a call
  // of a shared stub that bumps the buffer of the thread's CPU by `size_bytes` (a register,
  // or noreg and `con_size_bytes`) in a restartable sequence and counts the bytes to the
  // thread; rax is then the object, its header and fields still to be written, as after the
  // TLAB's bump. JFR's per-TLAB events, a cycle in TLABs, the thread's sample mark (while a
  // sampler is on), an object over HABCPULABObjectLimit, too little left in the buffer or an
  // aborted section jump to `slow_case` instead. Every
  // register but rax and the flags is kept. Only where allocates_in_cpu_labs().
  static void allocate_in_cpu_lab(MacroAssembler* masm, Register size_bytes, int con_size_bytes,
                                  Label& slow_case);

  // Whether C2's allocations try the per-CPU LAB where their TLAB bump fails, with a call of
  // its stub from their fast path (HabCpuLabAllocNode) before their slow call.
  static bool c2_allocates_in_cpu_labs() { return _c2_stub != nullptr; }

  // C2's per-CPU LAB path (hab_x86_64.ad): a call of C2's stub, which bumps the buffer of the
  // thread's CPU by the object's size (in rcx, `size_bytes`; or noreg and `con_size_bytes`, at
  // most HABCPULABObjectLimit) in a restartable sequence and counts the bytes to the thread;
  // rax is then the object, its header and fields still to be written, or 0 where the stub
  // declined it (JFR's per-TLAB events, a TLAB cycle, the thread's sample mark while a sampler
  // is on, an object over the limit, too little left in the buffer, an aborted section).
  // Registers: rcx holds the size on return (set to `con_size_bytes` first where C2 knows it);
  // rdx, rdi and the flags are clobbered; nothing else is touched: no runtime call's spills,
  // no klass checks (C2 made them).
  static void c2_allocate_in_cpu_lab(MacroAssembler* masm, Register size_bytes,
                                     int64_t con_size_bytes);

  // What C2's TLAB refill stub keeps of the thread before it retires the old TLAB and fills
  // the new one (with HABVerifyCompiledRefills): one word each, in this order up the stack.
  struct TlabBeforeRefill {
    HeapWord* start;
    HeapWord* top;
    HeapWord* hard_end;
    uint64_t thread_allocated_bytes;
    uint64_t number_of_refills;
    uint64_t allocated_size_words;
    uint64_t refill_waste_words;
  };

  // With HABVerifyCompiledRefills, called by C2's TLAB refill stub once it has installed the
  // new TLAB and placed `object` at its start (before its fields are zeroed): checks the TLAB
  // fields against what ThreadLocalAllocBuffer::fill would have set, the counters against
  // what Thread::retire_tlab and fill would have added (the thread's allocated bytes,
  // the refills, the allocated size, the refill waste), and the old TLAB's tail
  // [before->top, before->hard_end) against the filler insert_filler would have written (none
  // where the new TLAB extends the old one, from its top). A failed check stops the VM.
  static void check_compiled_refill(JavaThread* thread, const TlabBeforeRefill* before,
                                    HeapWord* object);

  // C2's instance allocation: a stub in a permanent code blob that takes what C2's slow call
  // passes (the klass in j_rarg0) and allocates an instance of an initialized class without a
  // finalizer (in a per-CPU LAB, up to HABCPULABObjectLimit bytes; or in a new TLAB), and
  // returns it; anything else jumps to `runtime_stub`, unchanged. Returns `runtime_stub`
  // itself where the levels publish no path (saying why); with HABCompiledRefill off, or
  // where the stub cannot keep the runtime's rules (ZeroTLAB, a refill waste fraction that is
  // not a power of two), only per-CPU LAB stubs (UseHABCPULABs), else `runtime_stub`.
  static address wrap_new_instance(address runtime_stub) { return wrap(runtime_stub, false); }

  // C2's array allocation, wrapped as instances are: the klass in j_rarg0, the length in
  // j_rarg1; the array zeroed.
  static address wrap_new_array(address runtime_stub) { return wrap(runtime_stub, true); }
};

#endif // SHARE_GC_SHARED_HABCPULABS_HPP
