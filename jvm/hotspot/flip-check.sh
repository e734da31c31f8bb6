#!/usr/bin/env bash
# The flip judges only cycles the allocation ended: a collection asked for explicitly cuts a
# cycle short with the threads' TLABs just refilled, and their tails would send the next cycle
# to per-CPU LABs, where the flip rule seldom leaves again. Runs test/ExplicitCollections.java
# (16 threads allocating slowly in 512 KiB TLABs, 30 System.gc() calls 2 ms apart) with
# -XX:+UseHABCPULABs under Parallel and G1, and fails unless every such cycle was left unjudged
# (gc+tlab=debug: "not judged: ended by System.gc()") and the run never flipped (flips=0 on the
# JVM's exit line). Before the rule, each run flipped to per-CPU LABs at its second collection.
# Then the cycles eden ends must still be judged: 200 threads in fixed 128 KiB TLABs, one
# explicit collection and 3 s of allocation must flip to per-CPU LABs (their TLABs' tails stay
# over a tenth of eden; adaptive TLABs, resized for the 200 threads, leave 4-5 % of it here).
# Last, threads that start at once must not flip it on their first cycles' tails alone:
# test/ThreadsStart.java has the main thread allocate alone for 1 s, then 16 threads for 2 s;
# their TLABs, sized for one thread, leave tails over the bound for a cycle or two (the debug
# line says "1 of 3 cycles in a row over the bound"), then under it, and the run must end with
# flips=0, twice under each collector. Where the burst does not pass the bound (a LAB per CPU
# is more than its tails on a machine with many CPUs) the check says so and checks nothing.
#
#   jvm/hotspot/flip-check.sh           # after jvm/hotspot/build.sh
#
# Environment: JDK (default target/hotspot-hab/jdk).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
java="${JDK:-$repo/target/hotspot-hab/jdk}/bin/java"
[ -x "$java" ] || { echo "missing $java (jvm/hotspot/build.sh)" >&2; exit 1; }
collections=30
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
failed=0
for collector in Parallel G1; do
  out="$("$java" -XX:+UnlockExperimentalVMOptions -XX:+Use${collector}GC -Xmx512m -Xmn24m -XX:TLABSize=512k -XX:-ResizeTLAB \
    -XX:+UseHABCPULABs -Xlog:gc+tlab=debug:file="$log" -Xlog:gc+tlab=info \
    "$repo/jvm/hotspot/test/ExplicitCollections.java" 16 "$collections" 2 2>&1 || true)"
  flips="$(grep -o ' flips=[0-9]*' <<<"$out" | cut -d= -f2 || true)"
  unjudged="$(grep -c 'not judged: ended by System.gc()' "$log" || true)"
  flipped_at="$(grep -m1 "HAB flip: to" "$log" || true)"
  echo "$collector: $unjudged cycles ended by System.gc() not judged, flips=${flips:-none}"
  if [ "${flips:-x}" != 0 ] || [ "$unjudged" -lt "$collections" ]; then
    echo "  FAILED${flipped_at:+: $flipped_at}" >&2
    failed=1
  fi
  out="$("$java" -XX:+UnlockExperimentalVMOptions -XX:+Use${collector}GC -Xmx512m -Xmn24m -XX:TLABSize=128k -XX:-ResizeTLAB \
    -XX:+UseHABCPULABs -Xlog:gc+tlab=info \
    "$repo/jvm/hotspot/test/ExplicitCollections.java" 200 1 3000 2>&1 || true)"
  flips="$(grep -o ' flips=[0-9]*' <<<"$out" | cut -d= -f2 || true)"
  echo "$collector: 200 threads, flips=${flips:-none}"
  if [ "${flips:-0}" -lt 1 ]; then
    echo "  FAILED: the cycles eden ended were not judged" >&2
    failed=1
  fi
  for run in 1 2; do
    out="$("$java" -XX:+UnlockExperimentalVMOptions -XX:+Use${collector}GC -Xmx512m -Xmn24m -XX:+UseHABCPULABs \
      -Xlog:gc+tlab=debug:file="$log" -Xlog:gc+tlab=info \
      "$repo/jvm/hotspot/test/ThreadsStart.java" 16 1000 2000 2>&1 || true)"
    flips="$(grep -o ' flips=[0-9]*' <<<"$out" | cut -d= -f2 || true)"
    burst="$(grep -c 'unused ([1-9][0-9]* of [0-9]* cycles in a row over the bound)' "$log" || true)"
    echo "$collector: 16 threads starting at once (run $run): $burst cycles over the bound, flips=${flips:-none}"
    if [ "$burst" -eq 0 ]; then
      echo "  (their tails did not pass the bound on this machine: nothing checked)"
    elif [ "${flips:-x}" != 0 ]; then
      echo "  FAILED: $(grep -m1 "HAB flip: to" "$log" || true)" >&2
      failed=1
    fi
  done
done
exit "$failed"
