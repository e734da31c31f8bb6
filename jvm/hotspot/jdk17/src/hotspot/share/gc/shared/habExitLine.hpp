/*
 * Part of Hab's changes to HotSpot. Like HotSpot, this file is free software under the GNU
 * General Public License version 2 only, with the Classpath exception; see
 * jvm/hotspot/LICENSE in Hab's repository.
 */

#ifndef SHARE_GC_SHARED_HABEXITLINE_HPP
#define SHARE_GC_SHARED_HABEXITLINE_HPP

#include "memory/allStatic.hpp"
#include "utilities/globalDefinitions.hpp"

class outputStream;
class ThreadLocalAllocStats;

// The run's allocation figures at exit (gc+tlab=info): with HABs, sentences for people (the
// levels' and the per-CPU LAB mode's totals); then, with HABs on or off (so that a run of stock
// HotSpot on the same JVM reads the same way), one line for programs: "hab-exit: key=value
// ...", every value an exact integer, the keys stable (docs/hotspot/design.md lists them), to
// which HabLevels and HabCpuLabs add their figures.
class HabExitLine : AllStatic {
 public:
  // At a safepoint, after the TLABs were retired (`retire_tlabs`) or made parsable, with what
  // they left: counts the cycle's TLAB tails (at the collection and at refills).
  static void add_cycle(const ThreadLocalAllocStats& stats, bool retire_tlabs);

  // At exit (the collector's print_tracing_info): prints the totals and the line where
  // gc+tlab=info is on.
  static void print();
};

#endif // SHARE_GC_SHARED_HABEXITLINE_HPP
