#!/usr/bin/env bash
# The flip judges only cycles the allocation ended: a collection asked for explicitly cuts a
# cycle short with the threads' TLABs just refilled, and their tails would send the next cycle
# to per-CPU LABs, where the flip rule seldom leaves again. Runs test/ExplicitCollections.java
# (16 threads allocating slowly in 512 KiB TLABs, 30 System.gc() calls 2 ms apart) with
# -XX:+UseHABCPULABs under Parallel and G1, and fails unless every such cycle was left unjudged
# (gc+tlab=debug: "not judged: ended by System.gc()") and the run never flipped (flips=0 on the
# JVM's exit line). Before the rule, each run flipped to per-CPU LABs at its second collection.
# Then the cycles eden ends must still be judged: 200 threads, one explicit collection and 3 s
# of allocation must flip to per-CPU LABs (their TLABs' tails pass a tenth of eden).
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
  out="$("$java" -XX:+Use${collector}GC -Xmx512m -Xmn24m -XX:TLABSize=512k -XX:-ResizeTLAB \
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
  out="$("$java" -XX:+Use${collector}GC -Xmx512m -Xmn24m -XX:+UseHABCPULABs -Xlog:gc+tlab=info \
    "$repo/jvm/hotspot/test/ExplicitCollections.java" 200 1 3000 2>&1 || true)"
  flips="$(grep -o ' flips=[0-9]*' <<<"$out" | cut -d= -f2 || true)"
  echo "$collector: 200 threads, flips=${flips:-none}"
  if [ "${flips:-0}" -lt 1 ]; then
    echo "  FAILED: the cycles eden ended were not judged" >&2
    failed=1
  fi
done
exit "$failed"
