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

#include "asm/macroAssembler.inline.hpp"
#include "code/codeBlob.hpp"
#include "code/codeCache.hpp"
#include "gc/shared/gc_globals.hpp"
#include "gc/shared/habCpuLabs.hpp"
#include "gc/shared/habLevels.hpp"
#include "gc/shared/habSampling.hpp"
#include "gc/shared/threadLocalAllocBuffer.hpp"
#include "jvm_io.h"
#include "logging/log.hpp"
#include "memory/universe.hpp"
#include "oops/arrayOop.hpp"
#include "oops/compressedKlass.inline.hpp"
#include "oops/instanceKlass.hpp"
#include "oops/klass.inline.hpp"
#include "oops/markWord.hpp"
#include "runtime/javaThread.hpp"
#include "runtime/os.hpp"
#include "runtime/stubCodeGenerator.hpp"
#include "runtime/threadHeapSampler.hpp"
#include "utilities/powerOfTwo.hpp"

// The layout only: the section below is HotSpot's own code.
#define HAB_NO_INLINE_RSEQ
#include "gc/shared/hab.h"

#define __ _masm->

#ifdef PRODUCT
#define BLOCK_COMMENT(str) /* nothing */
#else
#define BLOCK_COMMENT(str) __ block_comment(str)
#endif

#if HAB_PLATFORM

// The kernel's rseq_cs descriptor (struct rseq_cs): 32 bytes, 32-byte aligned.
struct RseqDescriptor {
  uint32_t version;
  uint32_t flags;
  uint64_t start_ip;
  uint64_t post_commit_offset;
  uint64_t abort_ip;
};

// Where a thread's TLAB fields are, from the thread.
struct TlabFields {
  int start, top, pf_top, end, allocation_end;
  int desired_size, refill_waste_limit, number_of_refills, refill_waste, allocated_size;
};

// A field of the thread's ThreadHeapSampler, from the thread.
static Address sampler_field(ByteSize field) {
  return Address(r15_thread, in_bytes(Thread::heap_sampler_offset() + field));
}

// What the runtime counts of an object it places outside a TLAB
// (MemAllocator::mem_allocate_outside_tlab): `bytes` to the thread's allocated bytes, which
// ThreadMXBean and JFR read, and to its sampler's (JVMTI).
static void count_outside_tlab(MacroAssembler* _masm, Register bytes) {
  __ addq(Address(r15_thread, in_bytes(Thread::allocated_bytes_offset())), bytes);
  __ addq(sampler_field(ThreadHeapSampler::accumulated_outside_tlab_bytes_offset()), bytes);
}

// A filler array's header as CollectedHeap::fill_with_array counts it (filler_array_hdr_size):
// the array header rounded up to words, aligned as an object offset; the length is the rest.
static int32_t filler_header_bytes() {
  size_t header_words = align_up(arrayOopDesc::header_size_in_bytes(), HeapWordSize) / HeapWordSize;
  return (int32_t)(align_object_offset(header_words) * HeapWordSize);
}

// Whether the stubs reach `target` with a rip-relative operand from anywhere in the code cache.
static bool reaches(address target) {
  return Assembler::is_simm32(target - CodeCache::low_bound()) &&
         Assembler::is_simm32(target - CodeCache::high_bound());
}

// Whether the stubs reach the thread's rseq fields through fs with a 32-bit displacement.
static bool reaches_rseq_area(const hab_cpu_buffer_path& path) {
  return Assembler::is_simm32(path.rseq_area_offset + HAB_RSEQ_CS_OFFSET) &&
         Assembler::is_simm32(path.rseq_index_offset);
}

// Whether the stubs can read the sample mark: at one offset from every thread's pointer.
static bool has_sample_mark() {
  intptr_t offset = HabSampling::mark_offset();
  return offset != 0 && Assembler::is_simm32(offset);
}

// The packed word's change for a bump of `words` (hab.h): the free words down, the top up.
static int64_t packed_delta(int64_t words) {
  return (words << HAB_CPU_BUFFER_TOP_BITS) - words;
}

// Where the observed copy of a per-CPU LAB stub sends a cycle the flip gave to TLABs: the
// plain TLAB refill stub where `in_tlabs_state` is the whole of `state`, else the observed
// one (both past their first tests).
struct TlabCycleExit {
  address state;
  int in_tlabs_state;
  address plain_refill;
  address observed_refill;
};

// A restartable bump that may extend the TLAB it refills: where the buffer word's top field
// (read into `top_field`) is `old_hard_end`, the word is bumped by `delta` instead.
struct BumpExtension {
  Register top_field;
  Register old_hard_end;
  Register delta;
};

// The code buffer over a stub's blob, made before the StubCodeGenerator that emits into it.
class HabStubBuffer {
 protected:
  CodeBuffer _buffer;
  explicit HabStubBuffer(BufferBlob* blob) : _buffer(blob) {}
};

// One stub in a code blob of its own, never freed (the kernel reads a section's descriptor
// at any preemption, for the VM's life): the descriptor first, then the code, under a
// StubCodeMark named as the blob ("HAB new_instance refill (observed)" and the like), so that
// -XX:+PrintStubCode, profilers (Forte) and JVMTI's DynamicCodeGenerated see it. The rseq
// framing and the emitters every stub shares; each stub names its own registers. The
// interpreter's and C1's stub and C2's fast-path stub are made here (generate_tiers_stub,
// generate_c2_stub); the stubs that wrap C2's slow calls in SlowCallStub.
class HabStub : private HabStubBuffer, public StubCodeGenerator {
 protected:
  BufferBlob* _blob;
  RseqDescriptor* _descriptor;
  address _start;
  address _commit;
  Label L_miss;

 public:
  address entry;

  explicit HabStub(BufferBlob* blob)
      : HabStubBuffer(blob), StubCodeGenerator(&_buffer), _blob(blob), _start(nullptr),
        _commit(nullptr) {
    __ align(32);
    _descriptor = (RseqDescriptor*)__ pc();
    for (size_t i = 0; i < sizeof(RseqDescriptor) / sizeof(int64_t); i++) {
      __ emit_int64(0);
    }
    __ align(CodeEntryAlignment);
    entry = __ pc();
  }

  MacroAssembler* masm() { return _masm; }

  // Observed copies, before the bump: the miss where an object of `size` bytes would take the
  // thread's allocated bytes to its sample mark (HabSampling), through `tmp`. A load, an add,
  // a compare with the mark and a branch.
  void check_sample_mark(Register size, Register tmp) {
    assert_different_registers(size, tmp);
    __ movq(tmp, Address(r15_thread, in_bytes(Thread::allocated_bytes_offset())));
    __ addq(tmp, size);
    __ cmpq(tmp, thread_word(HabSampling::mark_offset()));
    __ jcc(Assembler::aboveEqual, L_miss);
  }

  // The first test of the interpreter's, C1's and C2's stubs. The observed copy
  // (`observed_state`: the bits it leaves to the slow path) sends those states to `slow`; the
  // plain copy (`observed_state` 0) compares the state with 0 (through `tmp` where the state
  // is out of rip-relative reach, kept where `keep_tmp`) and sends any other state to
  // `observed_copy` (nullptr: to `slow`).
  void state_test(address state, int observed_state, address observed_copy, Label& slow,
                  Register tmp, bool keep_tmp) {
    if (observed_state != 0) {
      __ testl(__ as_Address(ExternalAddress(state)), observed_state);
      __ jcc(Assembler::notZero, slow);
      return;
    }
    compare_state_with_zero(state, tmp, keep_tmp);
    if (observed_copy != nullptr) {
      __ jump_cc(Assembler::notEqual, RuntimeAddress(observed_copy));
    } else {
      __ jcc(Assembler::notEqual, slow);
    }
  }

  // Compares the word at `state` with 0: rip-relative where the code cache reaches it (as here
  // in practice), else through `tmp` (saved around it when `keep_tmp`).
  void compare_state_with_zero(address state, Register tmp, bool keep_tmp) {
    if (reaches(state)) {
      __ cmp32(ExternalAddress(state), 0);
      return;
    }
    if (keep_tmp) {
      __ push(tmp);
    }
    __ mov64(tmp, (int64_t)state);
    __ cmpl(Address(tmp, 0), 0);
    if (keep_tmp) {
      __ pop(tmp);  // the flags stay
    }
  }

  // Opens the section: the descriptor stored (through `scratch`) in the thread's rseq_cs,
  // then, from the section's first instruction, the thread's index read into `slot` and turned
  // into the address of its buffer's word; an index without a buffer misses.
  void enter_section(const hab_cpu_buffer_path& path, Register slot, Register scratch) {
    assert_different_registers(slot, scratch);
    __ mov64(scratch, (int64_t)_descriptor);
    __ movq(thread_word(path.rseq_area_offset + HAB_RSEQ_CS_OFFSET), scratch);
    _start = __ pc();
    __ movl(slot, thread_word(path.rseq_index_offset));
    __ cmpq(slot, (int32_t)path.slot_count);
    __ jcc(Assembler::aboveEqual, L_miss);
    __ shlq(slot, HAB_CPU_LAB_SLOT_SHIFT);
    __ mov64(scratch, (int64_t)path.slots);
    __ addq(slot, scratch);
  }

  // packed_delta of `count` words, in a register.
  void delta_of(Register delta_out, Register count) {
    assert_different_registers(delta_out, count);
    __ movq(delta_out, count);
    __ shlq(delta_out, HAB_CPU_BUFFER_TOP_BITS);
    __ subq(delta_out, count);
  }

  // The restartable bump, the one every stub runs: the descriptor stored in the thread's
  // rseq_cs (through rax), the thread's index read into `slot` and turned into its buffer's
  // word, that word less `delta` (the packed word's change: delta_of) committed with one
  // store; then rax is the chunk's address (the old word's top field), and `delta` the levels'
  // base. A preemption, migration or signal before the commit restarts at the abort handler,
  // which misses, as do an index without a buffer and a buffer with too little left (the
  // subtraction borrows). With an `extension` (the TLAB refill stubs), a buffer whose top
  // field is the extension's old hard end is bumped by the extension's delta instead.
  void restartable_bump(const hab_cpu_buffer_path& path, Register slot, Register delta,
                        const BumpExtension* extension = nullptr) {
    assert_different_registers(rax, slot, delta);
    if (extension != nullptr) {
      assert_different_registers(rax, slot, delta, extension->top_field, extension->old_hard_end,
                                 extension->delta);
    }
    BLOCK_COMMENT("restartable section {");
    enter_section(path, slot, rax);
    __ movq(rax, Address(slot, 0));
    if (extension != nullptr) {
      __ movq(extension->top_field, rax);
      __ shlq(extension->top_field, 64 - HAB_CPU_BUFFER_TOP_BITS);
      __ shrq(extension->top_field, 64 - HAB_CPU_BUFFER_TOP_BITS);
      __ cmpq(extension->top_field, extension->old_hard_end);
      __ cmovq(Assembler::equal, delta, extension->delta);
    }
    __ subq(rax, delta);
    __ jcc(Assembler::below, L_miss);
    __ movq(Address(slot, 0), rax);
    _commit = __ pc();
    BLOCK_COMMENT("} restartable section");
    // The old word again, and from its top field (words from the levels' base) the chunk.
    __ addq(rax, delta);
    __ shlq(rax, 64 - HAB_CPU_BUFFER_TOP_BITS);
    __ shrq(rax, 64 - HAB_CPU_BUFFER_TOP_BITS - LogHeapWordSize);
    __ mov64(delta, (int64_t)path.base);
    __ addq(rax, delta);
  }

  // The interpreter's and C1's stub, whole: called with the object's size in rax (bytes), it
  // returns the object's address in rax, or 0 for their slow path (an observer or a TLAB
  // cycle in `state`, an object over `limit_bytes`, an index without a buffer, too little
  // left, an aborted section); the thread's allocated bytes count the object. Keeps every
  // other register: the three the section needs beside rax are saved around it. The plain
  // copy sends any state but 0 to `observed` (nullptr: its slow path); the `observed` copy
  // (`observed_state`: the bits it leaves to the slow path) also misses at the thread's
  // sample mark.
  address generate_tiers_stub(const hab_cpu_buffer_path& path, address state,
                             int32_t limit_bytes, address observed_copy, int observed_state) {
    Label L_zero;
    const Register count = rcx;   // the object's words, then its bytes
    const Register change = rdx;  // the packed word's delta
    const Register index = rdi;   // the thread's index, then its buffer
    const bool observed = observed_state != 0;
    StubCodeMark mark(this, "HAB", _blob->name());
    state_test(state, observed_state, observed_copy, L_zero, index, true);
    __ cmpq(rax, limit_bytes);
    __ jcc(Assembler::above, L_zero);
    __ push(index);
    __ push(count);
    __ push(change);
    if (observed) {
      check_sample_mark(rax, index);
    }
    __ movq(count, rax);
    __ shrq(count, LogHeapWordSize);
    delta_of(change, count);
    restartable_bump(path, index, change);
    __ shlq(count, LogHeapWordSize);
    count_outside_tlab(_masm, count);
    __ pop(change);
    __ pop(count);
    __ pop(index);
    __ ret(0);
    __ bind(L_miss);
    __ pop(change);
    __ pop(count);
    __ pop(index);
    __ bind(L_zero);
    __ xorl(rax, rax);
    __ ret(0);
    close_section();
    log_info(gc, init)("HAB: the interpreter (instances) and C1 (instances, arrays) allocate "
                       "objects of up to %d bytes in per-CPU LABs (%s stub at " PTR_FORMAT
                       ", %d bytes)", (int)limit_bytes, observed ? "observed" : "plain",
                       p2i(entry), (int)(__ pc() - entry));
    return entry;
  }

  // C2's stub, whole: entered at `entry` with the object's size in rcx (bytes), or at
  // `sized_entry` with the size in rcx and the packed word's delta in rdx (a size C2 knew,
  // within the limit); returns the object's address in rax, or 0 for C2's slow call (an
  // observer or a TLAB cycle in `state`, an object over `limit_bytes`, an index without a
  // buffer, too little left, an aborted section). The thread's allocated bytes count the
  // object. Clobbers rdx, rdi and the flags; rcx keeps the size. C2 made the klass checks when
  // it compiled. The plain copy sends any state but 0 to `observed_copy`'s sized entry (nullptr:
  // the slow call); the observed copy (`observed_state` as for generate_tiers_stub) also
  // misses at the thread's sample mark.
  address generate_c2_stub(const hab_cpu_buffer_path& path, address state, int32_t limit_bytes,
                          address* sized_entry, address observed_copy, int observed_state) {
    Label L_zero;
    const Register size = rcx;    // the object's bytes
    const Register change = rdx;  // the packed word's delta
    const Register index = rdi;   // the thread's index, then its buffer
    StubCodeMark mark(this, "HAB", _blob->name());
    __ cmpq(size, limit_bytes);
    __ jcc(Assembler::above, L_zero);
    __ movq(index, size);
    __ shrq(index, LogHeapWordSize);
    delta_of(change, index);
    *sized_entry = __ pc();
    const bool observed = observed_state != 0;
    state_test(state, observed_state, observed_copy, L_zero, index, false);
    if (observed) {
      check_sample_mark(size, index);
    }
    restartable_bump(path, index, change);
    // C2's own allocation prefetch (AllocatePrefetchStyle, Instr, Distance), one line ahead
    // of the object, as after its TLAB bump.
    if (AllocatePrefetchStyle > 0) {
      Address ahead(rax, (int)AllocatePrefetchDistance);
      switch (AllocatePrefetchInstr) {
        case 1: __ prefetcht0(ahead); break;
        case 2: __ prefetcht2(ahead); break;
        case 3: __ prefetchw(ahead); break;
        default: __ prefetchnta(ahead); break;
      }
    }
    count_outside_tlab(_masm, size);
    __ ret(0);
    __ bind(L_miss);
    __ bind(L_zero);
    __ xorl(rax, rax);
    __ ret(0);
    close_section();
    log_info(gc, init)("HAB: C2 tries objects of up to %d bytes in per-CPU LABs before its slow "
                       "call (%s stub at " PTR_FORMAT ", %d bytes)", (int)limit_bytes,
                       observed ? "observed" : "plain", p2i(entry), (int)(__ pc() - entry));
    return entry;
  }

 protected:
  // Ends the stub: the signature the kernel checks before an abort handler, the handler (a
  // miss), and the section's descriptor, now that the code is there. The StubCodeMark's end
  // flushes the code and names it.
  void close_section() {
    __ emit_int32((int32_t)HAB_RSEQ_SIGNATURE);
    address abort_handler = __ pc();
    __ jmp(L_miss);
    describe(abort_handler);
  }

  // The section's descriptor, once the code is there.
  void describe(address abort_handler) {
    _descriptor->version = 0;
    _descriptor->flags = 0;
    _descriptor->start_ip = (uint64_t)_start;
    _descriptor->post_commit_offset = (uint64_t)(_commit - _start);
    _descriptor->abort_ip = (uint64_t)abort_handler;
  }

  // A word at `offset` from the thread pointer, for the next instruction: fs and a 32-bit
  // displacement (the address glibc's rseq fields have in every thread).
  Address thread_word(intptr_t offset) {
    assert(Assembler::is_simm32(offset), "wrap checked");
    __ emit_int8((int8_t)Assembler::FS_segment);
    return Address(noreg, (int)offset);
  }
};

// A stub that wraps one of C2's slow calls (new instance, new array): it places the object in
// a per-CPU LAB (generate_cpu_lab_call_stub) or at the start of a new TLAB
// (generate_tlab_refill_stub), and misses to the runtime stub C2 would have called. Its
// registers follow that call: C2 passes the klass in j_rarg0 (rsi) and an array's length in
// j_rarg1 (rdx) and treats every other register as clobbered; klass and length stay intact on
// every path to the runtime stub. The object returns in rax.
class SlowCallStub : public HabStub {
 public:
  static const Register klass;    // j_rarg0
  static const Register length;   // j_rarg1 (arrays)
  static const Register bytes;    // the object's size
  static const Register words;    // the chunk a bump claims
  static const Register delta;    // the packed word's change for it
  static const Register scratch;
  static const Register next;
  static const Register slot;     // the thread's index, then its buffer's word
  // The TLAB refill's extension (HabSpace::tlab_extension): the old TLAB's hard end as a
  // buffer word's top field, the extension's delta, the old TLAB's tail in words.
  static const Register old_hard_end;
  static const Register extension_delta;
  static const Register tail_words;

  // Past the first test(s): where the per-CPU LAB stub sends a TLAB cycle's calls.
  address checked_entry;

  explicit SlowCallStub(BufferBlob* blob) : HabStub(blob), checked_entry(nullptr) {}

  // The plain copy's first test, one compare of HabCpuLabs::_state with 0: any other state
  // goes to `observed` (the observed copy, which tells the states apart; nullptr: the miss).
  void first_test(address state, address observed) {
    assert(reaches(state), "wrap checked");
    state_test(state, 0, observed, L_miss, noreg, false);
    checked_entry = __ pc();
  }

  // The observed copy's first tests: a state with any of `leave_bits` (JFR's per-TLAB events)
  // misses; one with `in_tlabs_state` (a cycle the flip gave to TLABs; 0: no such cycle) goes
  // out of line, to the TLAB cycle's exit that finish emits. What passes is a sampler alone.
  void observed_test(address state, int leave_bits, int in_tlabs_state) {
    state_test(state, leave_bits, nullptr, L_miss, noreg, false);
    if (in_tlabs_state != 0) {
      __ testl(__ as_Address(ExternalAddress(state)), in_tlabs_state);
      __ jcc(Assembler::notZero, L_in_tlabs);
    }
    checked_entry = __ pc();
  }

  // `bytes` = the object's size, of at most `limit_bytes`: an instance of an initialized
  // class without a finalizer (as the interpreter's _new checks), or (`array`) an array klass
  // (a negative layout helper) with a length the limit can hold (a negative one reads as a
  // huge unsigned length), align(header + (length << log2 element size)). The shift by cl
  // reads its low six bits, the layout helper's log2 element size.
  void size_object(bool array, int32_t limit_bytes) {
    if (!array) {
      __ cmpb(Address(klass, InstanceKlass::init_state_offset()), InstanceKlass::fully_initialized);
      __ jcc(Assembler::notEqual, L_miss);
      __ movl(bytes, Address(klass, Klass::layout_helper_offset()));
      __ testl(bytes, Klass::_lh_instance_slow_path_bit);
      __ jcc(Assembler::notZero, L_miss);
      __ cmpl(bytes, limit_bytes);
      __ jcc(Assembler::above, L_miss);
      return;
    }
    __ movl(bytes, Address(klass, Klass::layout_helper_offset()));
    __ testl(bytes, bytes);
    __ jcc(Assembler::positive, L_miss);
    __ cmpl(length, limit_bytes);
    __ jcc(Assembler::above, L_miss);
    __ movl(words, bytes);
    __ shrl(words, Klass::_lh_header_size_shift);
    __ andl(words, Klass::_lh_header_size_mask);
    __ movl(next, length);
    __ shlq(next);
    __ addq(next, words);
    __ addq(next, MinObjAlignmentInBytesMask);
    __ andq(next, ~(int32_t)MinObjAlignmentInBytesMask);
    __ movq(bytes, next);
    __ cmpq(bytes, limit_bytes);
    __ jcc(Assembler::above, L_miss);
  }

  // The object alone in the buffer (UseHABCPULABs).
  void place_in_buffer(const hab_cpu_buffer_path& path) {
    __ movl(words, bytes);
    __ shrl(words, LogHeapWordSize);
    delta_of(delta, words);
    restartable_bump(path, slot, delta);
  }

  // The object at the start of a new TLAB of the desired size (within the levels' TLAB limit)
  // and the object, bumped from the buffer, as the runtime's refill does (MemAllocator::mem_allocate_inside_tlab_slow): only
  // where it would refill (a TLAB, no sample due, no more free than the refill waste limit)
  // and the new TLAB is one the levels carve (at most `max_tlab_words`). After the commit,
  // the old TLAB is retired (its used bytes to the thread, its tail a filler int[] and
  // refill waste) and the new one filled (its statistics, a fresh refill waste limit).
  //
  // With `extend` (the space allows it: HabSpace::tlab_extension), where the
  // buffer's top is the old TLAB's hard end (its last carve was this TLAB, on this CPU), the
  // new TLAB starts at the old one's top instead: the tail is reused, not wasted, and the
  // buffer gives only the rest. A thread that keeps its CPU then allocates in one run of
  // memory, as in one large TLAB. With `block_log` (G1: a region's), only where the new TLAB
  // stays within the old one's aligned block of 2^block_log bytes.
  //
  // `observed`: also only where the new TLAB ends before the thread's sample mark (the old
  // TLAB's used bytes count to the thread first): a new TLAB that would hold the mark is the
  // runtime's, which samples its object or shortens the TLAB to the sample point.
  void place_in_new_tlab(const hab_cpu_buffer_path& path, const TlabFields& tlab,
                         int32_t max_tlab_words, bool extend, int block_log, bool observed) {
    __ movq(next, Address(r15_thread, tlab.end));
    __ testq(next, next);
    __ jcc(Assembler::zero, L_miss);
    __ cmpq(next, Address(r15_thread, tlab.allocation_end));
    __ jcc(Assembler::notEqual, L_miss);
    __ subq(next, Address(r15_thread, tlab.top));
    __ shrq(next, LogHeapWordSize);
    __ cmpq(next, Address(r15_thread, tlab.refill_waste_limit));
    __ jcc(Assembler::above, L_miss);
    // The object and the desired size, within the levels' TLAB limit: near the end of the
    // space the runtime's refills shrink with the buffers, and so do these.
    const Address limit =
        __ as_Address(ExternalAddress((address)HabLevels::tlab_limit_words_address()));
    __ movq(scratch, Address(r15_thread, tlab.desired_size));
    __ cmpq(scratch, limit);
    __ cmovq(Assembler::above, scratch, limit);
    __ movl(words, bytes);
    __ shrl(words, LogHeapWordSize);
    __ addq(words, scratch);
    __ cmpq(words, max_tlab_words);
    __ jcc(Assembler::above, L_miss);
    if (observed) {
      __ movq(scratch, Address(r15_thread, tlab.top));
      __ subq(scratch, Address(r15_thread, tlab.start));
      __ leaq(scratch, Address(scratch, words, Address::times_8));
      check_sample_mark(scratch, next);
    }
    const int reserve_bytes = (int)ThreadLocalAllocBuffer::alignment_reserve_in_bytes();
    if (extend) {
      // The tail's words, the old hard end as a top field, and the extension's delta.
      __ movq(old_hard_end, Address(r15_thread, tlab.allocation_end));
      __ addq(old_hard_end, reserve_bytes);
      __ movq(tail_words, old_hard_end);
      __ subq(tail_words, Address(r15_thread, tlab.top));
      __ shrq(tail_words, LogHeapWordSize);
      // A tail as large as the new TLAB (a refill waste limit raised by many allocations
      // outside the TLAB) would leave nothing to bump: the runtime takes that rare case.
      __ cmpq(words, tail_words);
      __ jcc(Assembler::belowEqual, L_miss);
      __ mov64(scratch, (int64_t)path.base);
      __ subq(old_hard_end, scratch);
      __ shrq(old_hard_end, LogHeapWordSize);
      __ movq(next, words);
      __ subq(next, tail_words);
      delta_of(extension_delta, next);
      if (block_log > 0) {
        // [old top, old top + words) past its block: a top field no buffer word holds (all
        // ones), so that the section never extends.
        Label L_within_block;
        __ movq(next, Address(r15_thread, tlab.top));
        __ leaq(scratch, Address(next, words, Address::times_8, -1));
        __ xorq(scratch, next);
        __ shrq(scratch, block_log);
        __ jcc(Assembler::zero, L_within_block);
        __ mov64(old_hard_end, -1);
        __ bind(L_within_block);
      }
    }
    delta_of(delta, words);
    const BumpExtension extension = {next, old_hard_end, extension_delta};
    restartable_bump(path, slot, delta, extend ? &extension : nullptr);
    if (HABVerifyCompiledRefills) {
      // Past the commit nothing misses: the old TLAB's fields and the counters the refill
      // changes, kept for the check below as a HabCpuLabs::TlabBeforeRefill (the last field
      // pushed first).
      __ movl(scratch, Address(r15_thread, tlab.refill_waste));
      __ push(scratch);
      __ pushptr(Address(r15_thread, tlab.allocated_size));
      __ movl(scratch, Address(r15_thread, tlab.number_of_refills));
      __ push(scratch);
      __ pushptr(Address(r15_thread, in_bytes(Thread::allocated_bytes_offset())));
      __ movq(scratch, Address(r15_thread, tlab.allocation_end));
      __ addq(scratch, reserve_bytes);
      __ push(scratch);
      __ pushptr(Address(r15_thread, tlab.top));
      __ pushptr(Address(r15_thread, tlab.start));
    }
    BLOCK_COMMENT("retire the old TLAB {");
    // The old TLAB's used bytes count to the thread and to its sampler, however the new one
    // starts (Thread::retire_tlab).
    __ movq(next, Address(r15_thread, tlab.top));
    __ movq(scratch, next);
    __ subq(scratch, Address(r15_thread, tlab.start));
    __ addq(Address(r15_thread, in_bytes(Thread::allocated_bytes_offset())), scratch);
    __ movq(scratch, next);
    __ subq(scratch, sampler_field(ThreadHeapSampler::tlab_top_at_sample_start_offset()));
    __ addq(sampler_field(ThreadHeapSampler::accumulated_tlab_bytes_offset()), scratch);
    Label L_fill;
    if (extend) {
      // Extended (the chunk starts at the hard end, kept in `slot` for the filler otherwise):
      // the new TLAB starts at the old top, and the tail, now in it, leaves the allocated size.
      Label L_fresh;
      __ movq(slot, Address(r15_thread, tlab.allocation_end));
      __ addq(slot, reserve_bytes);
      __ cmpq(rax, slot);
      __ jcc(Assembler::notEqual, L_fresh);
      if (block_log > 0) {
        // A fresh chunk can start at the hard end too, where the block check ruled the
        // extension out (the next block's buffer starts there).
        __ cmpq(old_hard_end, (int32_t)-1);
        __ jcc(Assembler::equal, L_fresh);
      }
      __ movq(rax, next);
      __ subq(Address(r15_thread, tlab.allocated_size), tail_words);
      __ jmp(L_fill);
      __ bind(L_fresh);
    }
    // Retire the old TLAB: [top, hard end) becomes a filler array, as insert_filler makes it
    // (CollectedHeap::fill_with_array).
    Klass* filler_klass = Universe::fillerArrayKlass();
    if (!extend) {
      __ movq(slot, Address(r15_thread, tlab.allocation_end));
      __ addq(slot, reserve_bytes);
    }
    __ subq(slot, next);
    __ movl(scratch, slot);
    __ shrl(scratch, LogHeapWordSize);
    __ addl(Address(r15_thread, tlab.refill_waste), scratch);
    if (UseCompactObjectHeaders) {
      __ mov64(scratch, (int64_t)filler_klass->prototype_header().value());
      __ movq(Address(next, oopDesc::mark_offset_in_bytes()), scratch);
    } else {
      __ movptr(Address(next, oopDesc::mark_offset_in_bytes()), (intptr_t)markWord::prototype().value());
      if (UseCompressedClassPointers) {
        __ movl(Address(next, oopDesc::klass_offset_in_bytes()),
                (int32_t)CompressedKlassPointers::encode(filler_klass));
      } else {
        __ mov64(scratch, (int64_t)filler_klass);
        __ movq(Address(next, oopDesc::klass_offset_in_bytes()), scratch);
      }
    }
    __ subq(slot, filler_header_bytes());
    __ shrq(slot, exact_log2(sizeof(jint)));
    __ movl(Address(next, arrayOopDesc::length_offset_in_bytes()), slot);
    // Fill the new one: the object at its start (rax).
    BLOCK_COMMENT("} retire the old TLAB");
    __ bind(L_fill);
    BLOCK_COMMENT("fill the new TLAB");
    __ movq(sampler_field(ThreadHeapSampler::tlab_top_at_sample_start_offset()), rax);
    __ movq(Address(r15_thread, tlab.start), rax);
    __ leaq(next, Address(rax, bytes, Address::times_1));
    __ movq(Address(r15_thread, tlab.top), next);
    __ movq(Address(r15_thread, tlab.pf_top), next);
    __ leaq(next, Address(rax, words, Address::times_8, -reserve_bytes));
    __ movq(Address(r15_thread, tlab.end), next);
    __ movq(Address(r15_thread, tlab.allocation_end), next);
    __ incrementl(Address(r15_thread, tlab.number_of_refills));
    __ addq(Address(r15_thread, tlab.allocated_size), words);
    __ movq(next, Address(r15_thread, tlab.desired_size));
    __ shrq(next, exact_log2(TLABRefillWasteFraction));
    __ movq(Address(r15_thread, tlab.refill_waste_limit), next);
    if (HABVerifyCompiledRefills) {
      // HabCpuLabs::check_compiled_refill(thread, what was before, object), every register
      // kept; what was before is at the stack pointer before pusha.
      const int before_words = (int)(sizeof(HabCpuLabs::TlabBeforeRefill) / wordSize);
      __ movq(scratch, rsp);
      __ pusha();
      __ movq(c_rarg0, r15_thread);
      __ movq(c_rarg1, scratch);
      __ movq(c_rarg2, rax);
      __ call_VM_leaf(CAST_FROM_FN_PTR(address, HabCpuLabs::check_compiled_refill), 3);
      __ popa();
      __ addq(rsp, before_words * wordSize);
    }
  }

  // Zeroes every word of the object in rax but its mark word (the header is written after);
  // leaves 0 in `words`.
  void zero_fields() {
    BLOCK_COMMENT("zero the fields");
    Label L_done, L_loop;
    __ xorl(words, words);
    __ movl(slot, bytes);
    __ shrl(slot, LogHeapWordSize);
    __ decrement(slot);
    __ jcc(Assembler::zero, L_done);
    __ bind(L_loop);
    __ movq(Address(rax, slot, Address::times_8, 0), words);
    __ decrement(slot);
    __ jcc(Assembler::notZero, L_loop);
    __ bind(L_done);
  }

  // The object's header, as MemAllocator::finish writes it: with compact headers the class's
  // prototype mark (the narrow klass inside) and an array's length; else the prototype mark,
  // an array's length or an instance's klass gap, and the klass.
  void store_header(bool array) {
    BLOCK_COMMENT("header");
    if (UseCompactObjectHeaders) {
      __ movq(scratch, Address(klass, Klass::prototype_header_offset()));
      __ movq(Address(rax, oopDesc::mark_offset_in_bytes()), scratch);
      if (array) {
        __ movl(Address(rax, arrayOopDesc::length_offset_in_bytes()), length);
      }
      return;
    }
    __ movptr(Address(rax, oopDesc::mark_offset_in_bytes()), (intptr_t)markWord::prototype().value());
    if (array) {
      __ movl(Address(rax, arrayOopDesc::length_offset_in_bytes()), length);
    } else {
      __ store_klass_gap(rax, words);
    }
    __ store_klass(rax, klass, scratch);
  }

  // The end of an object's path: outside a TLAB, the thread's allocated bytes (ThreadMXBean)
  // count the object (a TLAB's count when it is retired); it returns. Then the TLAB cycle's
  // exit where observed_test sends one (`tlab_cycle`, nullptr: none), the miss, the abort handler
  // after the signature the kernel checks, and the descriptor.
  address finish(address runtime_stub, bool count_object, const char* what,
                 const TlabCycleExit* tlab_cycle) {
    if (count_object) {
      count_outside_tlab(_masm, bytes);
    }
    __ ret(0);
    if (tlab_cycle != nullptr) {
      // A TLAB cycle: the plain refill where nothing else is in the state, else the observed.
      __ bind(L_in_tlabs);
      __ cmp32(ExternalAddress(tlab_cycle->state), tlab_cycle->in_tlabs_state);
      __ jump_cc(Assembler::equal, RuntimeAddress(tlab_cycle->plain_refill));
      __ jump(RuntimeAddress(tlab_cycle->observed_refill));
    }
    __ bind(L_miss);
    __ jump(RuntimeAddress(runtime_stub));
    close_section();
    log_info(gc, init)("HAB: C2 %s (stub at " PTR_FORMAT ", %d bytes)", what, p2i(entry),
                       (int)(__ pc() - entry));
    return entry;
  }

 private:
  // The observed copy of a per-CPU LAB stub in a cycle in TLABs: to a TLAB refill stub.
  Label L_in_tlabs;
};

const Register SlowCallStub::klass = j_rarg0;
const Register SlowCallStub::length = j_rarg1;
const Register SlowCallStub::bytes = rcx;
const Register SlowCallStub::words = r8;
const Register SlowCallStub::delta = r9;
const Register SlowCallStub::scratch = r10;
const Register SlowCallStub::next = r11;
const Register SlowCallStub::slot = rdi;
const Register SlowCallStub::old_hard_end = r13;
const Register SlowCallStub::extension_delta = r14;
const Register SlowCallStub::tail_words = rbx;

// What each kind of stub needs here, every reason a stub is not made said once: why one of
// `kind` cannot be (nullptr where it can). The stubs reach the thread's rseq fields and sample
// mark through fs with a 32-bit displacement, and HAB's state word rip-relative from the code
// cache; a TLAB refill stub keeps the runtime's refill rules; the interpreter's and C1's stubs
// leave objects unzeroed, which ZeroTLAB's tiers take for zeroed.
enum class StubKind { tlab_refill, slow_call_cpu_lab, tiers_cpu_lab };

static const char* why_no_stub(StubKind kind, const hab_cpu_buffer_path& path, address state) {
  if (!reaches_rseq_area(path)) {
    return "the rseq area is more than 2 GiB from the thread pointer";
  }
  if (kind != StubKind::tiers_cpu_lab && (!reaches(state) || !has_sample_mark())) {
    return "the sample mark is more than 2 GiB from the thread pointer, or HAB's state from the "
           "code cache";
  }
  if (kind == StubKind::tlab_refill && !reaches((address)HabLevels::tlab_limit_words_address())) {
    return "HAB's TLAB limit is more than 2 GiB from the code cache";
  }
  if (kind == StubKind::tlab_refill) {
    if (!HABCompiledRefill) {
      return "-XX:-HABCompiledRefill";
    } else if (ZeroTLAB) {
      return "-XX:+ZeroTLAB zeroes each new TLAB whole";
    } else if (!is_power_of_2(TLABRefillWasteFraction)) {
      return "-XX:TLABRefillWasteFraction is not a power of two";
    }
  }
  if (kind == StubKind::tiers_cpu_lab && ZeroTLAB) {
    return "-XX:+ZeroTLAB (they would take every object's fields for zero)";
  }
  return nullptr;
}

// Where a slow-call stub is entered: by C2's calls, and past its first test(s).
struct StubEntries {
  address entry;
  address checked_entry;
  BufferBlob* blob;
};

static const StubEntries no_stub = {nullptr, nullptr, nullptr};

// An observed copy whose plain stub could not be made (no room in the code cache) is never
// called: its blob is freed.
static void drop_unused_observed_copy(const StubEntries& plain, StubEntries* observed) {
  if (plain.entry == nullptr && observed->blob != nullptr) {
    BufferBlob::free(observed->blob);
    *observed = no_stub;
  }
}

// The blobs of a tiers' or C2's stub and of its observed copy (none where `observe` is
// false): both or neither, so that no blob is left unused where the code cache has room for
// one only.
static bool create_blobs(const char* name, const char* observed_name, bool observe,
                         BufferBlob** blob, BufferBlob** observed_blob) {
  *blob = BufferBlob::create(name, 512);
  *observed_blob = observe && *blob != nullptr ? BufferBlob::create(observed_name, 512) : nullptr;
  if (*blob != nullptr && (!observe || *observed_blob != nullptr)) {
    return true;
  }
  if (*blob != nullptr) {
    BufferBlob::free(*blob);
    *blob = nullptr;
  }
  return false;
}

// A blob for a slow-call stub, named for -XX:+PrintStubCode, hs_err files and the code
// cache's listings (the blob keeps the name): "HAB new_instance refill (observed)" and the
// like. nullptr, with a warning, where the code cache has no room. The largest stub (arrays, TLAB
// refills, observed, checked) is under 800 bytes with its descriptor and alignment.
static BufferBlob* slow_call_blob(bool array, bool refill, bool observed) {
  char name[64];
  jio_snprintf(name, sizeof(name), "HAB new_%s%s%s", array ? "array" : "instance",
               refill ? " refill" : "", observed ? " (observed)" : "");
  // The longest (G1's observed array refill, classic headers, HABVerifyCompiledRefills) takes
  // a little over 1 KiB; CodeBuffer's guarantee stops the VM where one would not fit.
  BufferBlob* blob = BufferBlob::create(os::strdup(name, mtCode), 2048);
  if (blob == nullptr) {
    warning("-XX:+UseHAB: no room in the code cache for HAB's %s stub; C2 allocates %s through "
            "the runtime", name, array ? "arrays" : "instances");
  }
  return blob;
}

// The stub that places C2's slow-call objects (instances or arrays: `array`) at the start of
// a new TLAB, from the per-CPU buffers, where the runtime would refill. The plain copy sends
// any state but 0 to `observed_copy` (nullptr: the runtime); the `observed` copy leaves JFR's
// per-TLAB events to the runtime and a new TLAB that would hold the thread's sample mark.
static StubEntries generate_tlab_refill_stub(address runtime_stub, bool array, bool observed,
                                             address observed_copy,
                                             const hab_cpu_buffer_path& path,
                                             const TlabFields& tlab, volatile int* state) {
  BufferBlob* blob = slow_call_blob(array, true, observed);
  if (blob == nullptr) {
    return no_stub;
  }
  // Objects in a new TLAB: at most what the levels carve as a TLAB, beside its desired size.
  size_t max_tlab_words = MIN3(HabLevels::max_tlab_words(), ThreadLocalAllocBuffer::max_size(),
                               (size_t)(max_jint / HeapWordSize));
  SlowCallStub stub(blob);
  StubCodeMark mark(&stub, "HAB", blob->name());
  if (observed) {
    stub.observed_test((address)state, HabCpuLabs::JFR_TLAB_EVENTS, 0);
  } else {
    stub.first_test((address)state, observed_copy);
  }
  stub.size_object(array, (int32_t)(max_tlab_words * HeapWordSize));
  // Extensions where the space allows them: within a region under G1, whose TLABs must not
  // cross one; anywhere in Parallel's eden, but not across the per-node pieces of a NUMA eden.
  const HabTlabExtension extension = HabLevels::tlab_extension();
  stub.place_in_new_tlab(path, tlab, (int32_t)max_tlab_words, extension.allowed,
                         extension.block_bytes == 0 ? 0 : exact_log2(extension.block_bytes),
                         observed);
  stub.zero_fields();
  stub.store_header(array);
  char what[200];
  jio_snprintf(what, sizeof(what), "refills TLABs for %s from per-CPU buffers%s%s",
               array ? "arrays" : "instances",
               UseHABCPULABs ? " (in the cycles the flip gives to TLABs)" : "",
               observed ? ", observed: to the runtime at sample marks" : "");
  stub.finish(runtime_stub, false, what, nullptr);
  StubEntries entries = {stub.entry, stub.checked_entry, blob};
  return entries;
}

// The stub that places C2's slow-call objects of up to HABCPULABObjectLimit bytes alone in
// the per-CPU LABs (UseHABCPULABs). The plain copy sends any state but 0 to `observed_copy`
// (nullptr: the runtime). The observed copy (`tlab_cycle` non-nullptr) leaves JFR's per-TLAB events
// to the runtime, sends a cycle the flip gave to TLABs to the refill stubs (`tlab_cycle`'s
// state 0: no such cycle), and misses at the thread's sample mark.
static StubEntries generate_cpu_lab_call_stub(address runtime_stub, bool array,
                                              address observed_copy,
                                              const TlabCycleExit* tlab_cycle,
                                              const hab_cpu_buffer_path& path,
                                              volatile int* state) {
  const bool observed = tlab_cycle != nullptr;
  BufferBlob* blob = slow_call_blob(array, false, observed);
  if (blob == nullptr) {
    return no_stub;
  }
  SlowCallStub stub(blob);
  StubCodeMark mark(&stub, "HAB", blob->name());
  if (observed) {
    stub.observed_test((address)state, HabCpuLabs::JFR_TLAB_EVENTS, tlab_cycle->in_tlabs_state);
  } else {
    stub.first_test((address)state, observed_copy);
  }
  stub.size_object(array, (int32_t)HABCPULABObjectLimit);
  if (observed) {
    stub.check_sample_mark(SlowCallStub::bytes, SlowCallStub::scratch);
  }
  stub.place_in_buffer(path);
  stub.zero_fields();
  stub.store_header(array);
  const bool to_refill = observed && tlab_cycle->in_tlabs_state != 0 &&
                         tlab_cycle->plain_refill != runtime_stub;
  char what[200];
  jio_snprintf(what, sizeof(what), "allocates %s of up to %zd bytes in per-CPU LABs%s%s",
               array ? "arrays" : "instances", HABCPULABObjectLimit,
               to_refill ? " (TLAB cycles: the refill stubs)" : "",
               observed ? ", observed: to the runtime at sample marks"
                        : (observed_copy != nullptr ? " (other states: the observed copy)" : ""));
  stub.finish(runtime_stub, true, what,
              observed && tlab_cycle->in_tlabs_state != 0 ? tlab_cycle : nullptr);
  StubEntries entries = {stub.entry, stub.checked_entry, blob};
  return entries;
}

// wrap's work, once StubCodeDesc's list takes new stubs.
static address wrap_unfrozen(address runtime_stub, bool array, volatile int* state,
                             int in_tlabs_state);

address HabCpuLabs::wrap(address runtime_stub, bool array) {
  // C2 sets its runtime up on a compiler thread after VM creation froze StubCodeDesc's list:
  // the stubs are named in it as compiler_stubs_init(true) names C2's own, just before.
  StubCodeDesc::unfreeze();
  address entry = wrap_unfrozen(runtime_stub, array, &_state, IN_TLABS);
  StubCodeDesc::freeze();
  return entry;
}

static address wrap_unfrozen(address runtime_stub, bool array, volatile int* state,
                             int in_tlabs_state) {
  const char* kind = array ? "arrays" : "instances";
  const hab_cpu_buffer_path* path_or_null = HabLevels::cpu_buffer_path();
  if (path_or_null == nullptr) {
    return runtime_stub;
  }
  const hab_cpu_buffer_path& path = *path_or_null;
  const char* why_not = why_no_stub(StubKind::slow_call_cpu_lab, path, (address)state);
  if (why_not != nullptr) {
    log_info(gc, init)("HAB: C2 allocates %s through the runtime: %s", kind, why_not);
    return runtime_stub;
  }
#define HAB_TLAB_FIELD(field) in_bytes(Thread::tlab_offset() + ThreadLocalAllocBuffer::field##_offset())
  TlabFields tlab = {
    HAB_TLAB_FIELD(start), HAB_TLAB_FIELD(top), HAB_TLAB_FIELD(pf_top), HAB_TLAB_FIELD(end),
    HAB_TLAB_FIELD(allocation_end), HAB_TLAB_FIELD(desired_size),
    HAB_TLAB_FIELD(refill_waste_limit), HAB_TLAB_FIELD(number_of_refills),
    HAB_TLAB_FIELD(refill_waste), HAB_TLAB_FIELD(allocated_size)};
#undef HAB_TLAB_FIELD
  // The TLAB refill stubs: with UseHAB alone, and for the TLAB cycles of a flipping
  // UseHABCPULABs.
  bool flips = UseHABCPULABs && HABFlip;
  StubEntries refill = no_stub;
  StubEntries observed_refill = no_stub;
  if (!UseHABCPULABs || flips) {
    const char* why_not = why_no_stub(StubKind::tlab_refill, path, (address)state);
    if (why_not != nullptr) {
      log_info(gc, init)("HAB: C2 refills TLABs for %s through the runtime: %s", kind, why_not);
    } else {
      observed_refill = generate_tlab_refill_stub(runtime_stub, array, true, nullptr, path, tlab,
                                                  state);
      refill = generate_tlab_refill_stub(runtime_stub, array, false, observed_refill.entry,
                                         path, tlab, state);
      drop_unused_observed_copy(refill, &observed_refill);
    }
  }
  if (!UseHABCPULABs) {
    return refill.entry != nullptr ? refill.entry : runtime_stub;
  }
  // A TLAB cycle's calls skip the refill stubs' first tests, which the per-CPU LAB stubs made.
  TlabCycleExit tlab_cycle = {
    (address)state, flips ? in_tlabs_state : 0,
    refill.entry != nullptr ? refill.checked_entry : runtime_stub,
    observed_refill.entry != nullptr ? observed_refill.checked_entry : runtime_stub};
  StubEntries observed_labs = generate_cpu_lab_call_stub(runtime_stub, array, nullptr, &tlab_cycle,
                                                         path, state);
  StubEntries labs = generate_cpu_lab_call_stub(runtime_stub, array, observed_labs.entry, nullptr,
                                                path, state);
  drop_unused_observed_copy(labs, &observed_labs);
  return labs.entry != nullptr ? labs.entry : runtime_stub;
}

address HabCpuLabs::_allocate_stub = nullptr;
address HabCpuLabs::_c2_stub = nullptr;
address HabCpuLabs::_c2_sized_stub = nullptr;

void HabCpuLabs::generate_allocate_stub() {
  const hab_cpu_buffer_path* path_or_null = HabLevels::cpu_buffer_path();
  if (!UseHABCPULABs || path_or_null == nullptr) {
    return;
  }
  const hab_cpu_buffer_path& path = *path_or_null;
  const char* why_not = why_no_stub(StubKind::tiers_cpu_lab, path, (address)&_state);
  // Each stub in two copies: the plain one, and the observed one any other state goes to,
  // which leaves JFR's per-TLAB events and TLAB cycles to the slow path and misses at the
  // thread's sample mark; only the plain one where the stubs cannot read the state or the
  // mark directly (every other state then takes the slow path).
  const bool observe = reaches((address)&_state) && has_sample_mark();
  const int observed_state = JFR_TLAB_EVENTS | IN_TLABS;
  BufferBlob* observed_blob = nullptr;
  BufferBlob* blob = nullptr;
  if (why_not == nullptr && !create_blobs("HAB allocate (interpreter, C1)",
                                           "HAB allocate (interpreter, C1, observed)", observe,
                                           &blob, &observed_blob)) {
    why_not = "no room in the code cache for the stub";
  }
  if (why_not != nullptr) {
    log_info(gc, init)("HAB: the interpreter and C1 allocate through the runtime, and C2 "
                       "reaches per-CPU LABs from its slow call only: %s", why_not);
    return;
  }
  address observed_copy = nullptr;
  if (observe) {
    HabStub observed_stub(observed_blob);
    observed_copy = observed_stub.generate_tiers_stub(path, (address)&_state,
                                                     (int32_t)HABCPULABObjectLimit, nullptr,
                                                     observed_state);
  }
  HabStub stub(blob);
  _allocate_stub = stub.generate_tiers_stub(path, (address)&_state, (int32_t)HABCPULABObjectLimit,
                                           observed_copy, 0);
#ifdef COMPILER2
  if (!HABCompiledCPULABPath) {
    log_info(gc, init)("HAB: C2 tries per-CPU LABs in its slow call only "
                       "(-XX:-HABCompiledCPULABPath)");
    return;
  }
  BufferBlob* c2_observed_blob = nullptr;
  BufferBlob* c2_blob = nullptr;
  if (!create_blobs("HAB allocate (C2)", "HAB allocate (C2, observed)", observe, &c2_blob,
                    &c2_observed_blob)) {
    log_info(gc, init)("HAB: C2 tries per-CPU LABs in its slow call only: no room in the code "
                       "cache for its stub");
    return;
  }
  address c2_observed_sized = nullptr;
  if (observe) {
    HabStub c2_observed(c2_observed_blob);
    c2_observed.generate_c2_stub(path, (address)&_state, (int32_t)HABCPULABObjectLimit,
                                &c2_observed_sized, nullptr, observed_state);
  }
  HabStub c2_stub(c2_blob);
  _c2_stub = c2_stub.generate_c2_stub(path, (address)&_state, (int32_t)HABCPULABObjectLimit,
                                     &_c2_sized_stub, c2_observed_sized, 0);
#endif
}

void HabCpuLabs::c2_allocate_in_cpu_lab(MacroAssembler* _masm, Register size_bytes,
                                        int64_t con_size_bytes) {
  assert(c2_allocates_in_cpu_labs(), "no stub to call");
  if (size_bytes == noreg) {
    assert(0 < con_size_bytes && con_size_bytes <= HABCPULABObjectLimit, "checked by C2");
    __ movl(rcx, (int32_t)con_size_bytes);
    __ mov64(rdx, packed_delta(con_size_bytes >> LogHeapWordSize));
    __ call(RuntimeAddress(_c2_sized_stub));
  } else {
    assert(size_bytes == rcx, "the stub's register");
    __ call(RuntimeAddress(_c2_stub));
  }
}

void HabCpuLabs::allocate_in_cpu_lab(MacroAssembler* _masm, Register size_bytes,
                                     int con_size_bytes, Label& slow_case) {
  assert(allocates_in_cpu_labs(), "no stub to call");
  if (size_bytes == noreg) {
    __ movl(rax, con_size_bytes);
  } else if (size_bytes != rax) {
    __ movq(rax, size_bytes);
  }
  __ call(RuntimeAddress(_allocate_stub));
  __ testptr(rax, rax);
  __ jcc(Assembler::zero, slow_case);
}

#endif // HAB_PLATFORM
