/*
 * Part of Hab's changes to HotSpot. Like HotSpot, this file is free software under the GNU
 * General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

#ifndef SHARE_GC_SHARED_C2_HABCPULABALLOCNODE_HPP
#define SHARE_GC_SHARED_C2_HABCPULABALLOCNODE_HPP

#include "opto/node.hpp"
#include "opto/opcodes.hpp"
#include "opto/type.hpp"

class PhaseMacroExpand;

// An object's bytes in the per-CPU LAB of the CPU the thread runs on (UseHABCPULABs), where
// C2's TLAB bump failed: the object's raw address, or null where HabCpuLabs' C2 stub declined
// it. Inputs: the control of the failed bump and the object's size in bytes.
//
// To the matcher it is one instruction (hab_x86_64.ad): a call of the shared stub, whose
// restartable section and rseq_cs descriptor live in a permanent code blob, so no descriptor
// in a compiled method can outlive its code, and C2's IR cannot split or reorder the section.
// It clobbers three registers and the flags, so C2 spills nothing around it, unlike its slow
// call. Every node is an allocation of its own: never commoned.
class HabCpuLabAllocNode : public Node {
 public:
  HabCpuLabAllocNode(Node* control, Node* size_in_bytes) : Node(control, size_in_bytes) {}
  virtual int Opcode() const;
  virtual uint hash() const { return NO_HASH; }
  virtual const Type* bottom_type() const { return TypeRawPtr::BOTTOM; }
  virtual uint ideal_reg() const { return Op_RegP; }

  // BarrierSetC2::obj_allocate's per-CPU LAB path, where C2 has its stub: at `needgc_ctrl`
  // (the TLAB bump failed), the node, and if it gave an object, that object joins the TLAB's
  // (`fast_oop`, at `fast_oop_ctrl` with `fast_oop_rawmem` and `i_o`) as the fast path's,
  // with the raw memory `rawmem` and the I/O `i_o_before_prefetch` (the TLAB's prefetches are
  // not on its path); needgc_ctrl becomes the path where it gave none, to C2's slow call.
  // Returns the fast path's object. Sizes known to be over HABCPULABObjectLimit keep the
  // TLAB's path alone.
  static Node* expand(PhaseMacroExpand* macro, Node* size_in_bytes, Node* rawmem,
                      Node* i_o_before_prefetch, Node*& needgc_ctrl, Node*& fast_oop_ctrl,
                      Node*& fast_oop_rawmem, Node*& i_o, Node* fast_oop);
};

#endif // SHARE_GC_SHARED_C2_HABCPULABALLOCNODE_HPP
