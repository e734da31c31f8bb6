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

// The run's allocation figures at exit as one line for programs (gc+tlab=info), beside the
// sentences printed for people: "hab-exit: key=value ...", every value an exact integer, the
// keys stable (jvm/hotspot/README.md lists them). Printed with HABs on or off, so that a run of
// stock HotSpot on the same JVM reads the same way; with HABs, HabLevels adds its figures.
class HabExitLine : AllStatic {
 public:
  // At a safepoint, after the TLABs were retired (`retire_tlabs`) or made parsable, with what
  // they left: counts the cycle's TLAB tails (at the collection and at refills).
  static void add_cycle(const ThreadLocalAllocStats& stats, bool retire_tlabs);

  // At exit: prints the line where gc+tlab=info is on.
  static void print();
};

#endif // SHARE_GC_SHARED_HABEXITLINE_HPP
