/*
 * Part of Hab's changes to HotSpot. Like HotSpot, this file is free software under the GNU
 * General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

#include "precompiled.hpp"
#include "asm/macroAssembler.inline.hpp"
#include "code/codeBlob.hpp"
#include "gc/shared/habCpuLabs.hpp"
#include "gc/shared/habLevels.hpp"
#include "logging/log.hpp"
#include "oops/arrayOop.hpp"
#include "oops/instanceKlass.hpp"
#include "oops/markWord.hpp"
#include "runtime/thread.hpp"

// The layout only: the section below is HotSpot's own code.
#define HAB_NO_INLINE_RSEQ
#include "gc/shared/hab.h"

#define __ _masm->

#ifdef _LP64

// The kernel's rseq_cs descriptor (struct rseq_cs): 32 bytes, 32-byte aligned.
struct RseqDescriptor {
  uint32_t version;
  uint32_t flags;
  uint64_t start_ip;
  uint64_t post_commit_offset;
  uint64_t abort_ip;
};

// Registers of every stub. C2's slow calls pass the klass in j_rarg0 (rsi) and an array's
// length in j_rarg1 (rdx), and treat every other register as clobbered; both stay intact on
// every path to the runtime stub. The object returns in rax.
static const Register klass = j_rarg0;
static const Register length = j_rarg1;
static const Register bytes = rcx;    // the object's size
static const Register words = r8;
static const Register delta = r9;     // (words << top bits) - words
static const Register scratch = r10;
static const Register next = r11;
static const Register slot = rdi;

// One stub in a code blob of its own, never freed (the kernel reads a section's descriptor
// at any preemption, for the VM's life): the descriptor first, then the code.
class HabStub {
  CodeBuffer _buffer;
  MacroAssembler* _masm;
  RseqDescriptor* _descriptor;
  address _start;
  address _commit;
  Label _miss;

 public:
  address entry;

  explicit HabStub(BufferBlob* blob) : _buffer(blob), _start(NULL), _commit(NULL) {
    _masm = new MacroAssembler(&_buffer);
    __ align(32);
    _descriptor = (RseqDescriptor*)__ pc();
    for (size_t i = 0; i < sizeof(RseqDescriptor) / sizeof(int64_t); i++) {
      __ emit_int64(0);
    }
    __ align(CodeEntryAlignment);
    entry = __ pc();
  }

  MacroAssembler* masm() { return _masm; }

  // The stub's first test: while allocations are sampled, the runtime takes them all.
  void unless_paused(address paused) {
    __ cmp8(ExternalAddress(paused), 0);
    __ jcc(Assembler::notEqual, _miss);
  }
  Label& miss() { return _miss; }

  // An fs-relative access: the segment prefix, then the instruction.
  void fs_prefix() { __ emit_int8((int8_t)Assembler::FS_segment); }

  // The restartable bump of `bytes` (a multiple of 8, at most HABCPULABObjectLimit): store
  // the descriptor, read the thread's index, bump that index's buffer, commit with one
  // store; then rax is the object. A preemption, migration or signal before the commit
  // restarts at the abort handler, which misses, as do an index without a buffer and a
  // buffer with too little left.
  void bump(const hab_cpu_buffer_path& path) {
    __ movl(words, bytes);
    __ shrl(words, LogHeapWordSize);
    __ movq(delta, words);
    __ shlq(delta, HAB_CPU_BUFFER_TOP_BITS);
    __ subq(delta, words);
    __ mov64(scratch, (int64_t)_descriptor);
    __ mov64(next, (int64_t)(path.rseq_area_offset + HAB_RSEQ_CS_OFFSET));
    fs_prefix();
    __ movq(Address(next, 0), scratch);
    _start = __ pc();
    __ mov64(next, (int64_t)path.rseq_index_offset);
    fs_prefix();
    __ movl(slot, Address(next, 0));
    __ cmpq(slot, (int32_t)path.slot_count);
    __ jcc(Assembler::aboveEqual, _miss);
    __ shlq(slot, HAB_CPU_LAB_SLOT_SHIFT);
    __ mov64(scratch, (int64_t)path.slots);
    __ addq(slot, scratch);
    __ movq(rax, Address(slot, 0));
    __ movq(next, rax);
    __ subq(next, delta);
    __ jcc(Assembler::below, _miss);
    __ movq(Address(slot, 0), next);
    _commit = __ pc();
    // The object: the old top, in words from the levels' base.
    __ mov64(scratch, (int64_t)(((uint64_t)1 << HAB_CPU_BUFFER_TOP_BITS) - 1));
    __ andq(rax, scratch);
    __ shlq(rax, LogHeapWordSize);
    __ mov64(scratch, (int64_t)path.base);
    __ addq(rax, scratch);
  }

  // Zeroes every word of the object in rax but its mark word (the klass, its gap or an
  // array's length are written after); leaves 0 in `words`.
  void zero_fields() {
    Label header, loop;
    __ xorl(words, words);
    __ movl(slot, bytes);
    __ shrl(slot, LogHeapWordSize);
    __ decrement(slot);
    __ jcc(Assembler::zero, header);
    __ bind(loop);
    __ movq(Address(rax, slot, Address::times_8, 0), words);
    __ decrement(slot);
    __ jcc(Assembler::notZero, loop);
    __ bind(header);
    __ movptr(Address(rax, oopDesc::mark_offset_in_bytes()), (intptr_t)markWord::prototype().value());
  }

  // The end of an object's path: the thread's allocated bytes (ThreadMXBean) count it, as an
  // allocation outside a TLAB, and it returns. Then the miss, the abort handler after the
  // signature the kernel checks, and the descriptor.
  address finish(address runtime_stub, const char* what) {
    __ addq(Address(r15_thread, in_bytes(JavaThread::allocated_bytes_offset())), bytes);
    __ ret(0);
    __ bind(_miss);
    __ jump(RuntimeAddress(runtime_stub));
    __ emit_int32((int32_t)HAB_RSEQ_SIGNATURE);
    address abort_handler = __ pc();
    __ jmp(_miss);
    __ flush();
    _descriptor->version = 0;
    _descriptor->flags = 0;
    _descriptor->start_ip = (uint64_t)_start;
    _descriptor->post_commit_offset = (uint64_t)(_commit - _start);
    _descriptor->abort_ip = (uint64_t)abort_handler;
    log_info(gc, init)("HAB: C2 allocates %s of up to " INTX_FORMAT " bytes in per-CPU LABs "
                       "(stub at " PTR_FORMAT ", %d bytes)",
                       what, HABCPULABObjectLimit, p2i(entry), (int)(__ pc() - entry));
    return entry;
  }
};

// A blob for one stub, or NULL after a warning.
static BufferBlob* stub_blob(const char* name) {
  BufferBlob* blob = BufferBlob::create(name, 512);
  if (blob == NULL) {
    warning("-XX:+UseHABCPULABs: no room in the code cache for %s; C2 allocates through the runtime", name);
  }
  return blob;
}

address HabCpuLabs::wrap_new_instance(address runtime_stub) {
  hab_cpu_buffer_path path;
  BufferBlob* blob;
  if (!HabLevels::cpu_buffer_path(&path) || (blob = stub_blob("HAB new_instance")) == NULL) {
    return runtime_stub;
  }
  HabStub stub(blob);
  MacroAssembler* _masm = stub.masm();
  stub.unless_paused((address)&_paused);
  // An initialized class without a finalizer, small enough (as the interpreter's _new checks).
  __ cmpb(Address(klass, InstanceKlass::init_state_offset()), InstanceKlass::fully_initialized);
  __ jcc(Assembler::notEqual, stub.miss());
  __ movl(bytes, Address(klass, Klass::layout_helper_offset()));
  __ testl(bytes, Klass::_lh_instance_slow_path_bit);
  __ jcc(Assembler::notZero, stub.miss());
  __ cmpl(bytes, (int32_t)HABCPULABObjectLimit);
  __ jcc(Assembler::above, stub.miss());
  stub.bump(path);
  stub.zero_fields();
  __ store_klass_gap(rax, words);
  __ store_klass(rax, klass, scratch);
  return stub.finish(runtime_stub, "instances");
}

address HabCpuLabs::wrap_new_array(address runtime_stub) {
  hab_cpu_buffer_path path;
  BufferBlob* blob;
  if (!HabLevels::cpu_buffer_path(&path) || (blob = stub_blob("HAB new_array")) == NULL) {
    return runtime_stub;
  }
  HabStub stub(blob);
  MacroAssembler* _masm = stub.masm();
  stub.unless_paused((address)&_paused);
  // An array klass (a negative layout helper) and a length the size limit can hold (a
  // negative one reads as a huge unsigned length).
  __ movl(bytes, Address(klass, Klass::layout_helper_offset()));
  __ testl(bytes, bytes);
  __ jcc(Assembler::positive, stub.miss());
  __ cmpl(length, (int32_t)HABCPULABObjectLimit);
  __ jcc(Assembler::above, stub.miss());
  // size = align(header + (length << log2 element size)); the shift by cl reads its low six
  // bits, the layout helper's log2 element size.
  __ movl(words, bytes);
  __ shrl(words, Klass::_lh_header_size_shift);
  __ andl(words, Klass::_lh_header_size_mask);
  __ movl(next, length);
  __ shlq(next);
  __ addq(next, words);
  __ addq(next, MinObjAlignmentInBytesMask);
  __ andq(next, ~(int32_t)MinObjAlignmentInBytesMask);
  __ movq(bytes, next);
  __ cmpq(bytes, (int32_t)HABCPULABObjectLimit);
  __ jcc(Assembler::above, stub.miss());
  stub.bump(path);
  stub.zero_fields();
  __ movl(Address(rax, arrayOopDesc::length_offset_in_bytes()), length);
  __ store_klass(rax, klass, scratch);
  return stub.finish(runtime_stub, "arrays");
}

#else

address HabCpuLabs::wrap_new_instance(address runtime_stub) {
  return runtime_stub;
}

address HabCpuLabs::wrap_new_array(address runtime_stub) {
  return runtime_stub;
}

#endif // _LP64
