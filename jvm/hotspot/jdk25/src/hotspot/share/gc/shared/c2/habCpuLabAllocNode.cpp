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
