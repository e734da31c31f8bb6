/*
 * Part of Hab's changes to HotSpot. Like HotSpot, this file is free software under the GNU
 * General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

#include "precompiled.hpp"
#include "gc/shared/c2/habCpuLabAllocNode.hpp"
#include "gc/shared/habCpuLabs.hpp"
#include "opto/addnode.hpp"
#include "opto/callnode.hpp"
#include "opto/cfgnode.hpp"
#include "opto/macro.hpp"
#include "opto/phaseX.hpp"
#include "opto/subnode.hpp"

Node* HabCpuLabAllocNode::expand(PhaseMacroExpand* macro, Node* size_in_bytes, Node* rawmem,
                                 Node* i_o_before_prefetch, Node*& needgc_ctrl,
                                 Node*& fast_oop_ctrl, Node*& fast_oop_rawmem, Node*& i_o,
                                 Node* fast_oop) {
  if (!HabCpuLabs::c2_allocates_in_cpu_labs()) {
    return fast_oop;
  }
  const jlong con_size_bytes = size_in_bytes->find_intptr_t_con(-1);
  if (con_size_bytes > HABCPULABObjectLimit) {
    return fast_oop;
  }
  Node* object = macro->transform_later(new HabCpuLabAllocNode(needgc_ctrl, size_in_bytes));
  Node* cmp = macro->transform_later(new CmpPNode(object, macro->makecon(TypeRawPtr::NULL_PTR)));
  Node* placed_bol = macro->transform_later(new BoolNode(cmp, BoolTest::ne));
  IfNode* placed_iff = new IfNode(needgc_ctrl, placed_bol, PROB_LIKELY_MAG(3), COUNT_UNKNOWN);
  macro->transform_later(placed_iff);
  Node* placed = macro->transform_later(new IfTrueNode(placed_iff));
  needgc_ctrl = macro->transform_later(new IfFalseNode(placed_iff));

  enum { in_tlab_path = 1, in_cpu_lab_path = 2 };
  RegionNode* region = new RegionNode(3);
  region->init_req(in_tlab_path, fast_oop_ctrl);
  region->init_req(in_cpu_lab_path, placed);
  PhiNode* oop_phi = new PhiNode(region, TypeRawPtr::BOTTOM);
  oop_phi->init_req(in_tlab_path, fast_oop);
  oop_phi->init_req(in_cpu_lab_path, object);
  PhiNode* rawmem_phi = new PhiNode(region, Type::MEMORY, TypeRawPtr::BOTTOM);
  rawmem_phi->init_req(in_tlab_path, fast_oop_rawmem);
  rawmem_phi->init_req(in_cpu_lab_path, rawmem);
  PhiNode* i_o_phi = new PhiNode(region, Type::ABIO);
  i_o_phi->init_req(in_tlab_path, i_o);
  i_o_phi->init_req(in_cpu_lab_path, i_o_before_prefetch);
  fast_oop_ctrl = macro->transform_later(region);
  fast_oop_rawmem = macro->transform_later(rawmem_phi);
  i_o = macro->transform_later(i_o_phi);
  return macro->transform_later(oop_phi);
}
