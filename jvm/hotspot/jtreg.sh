#!/usr/bin/env bash
# Runs a selection of HotSpot's own jtreg tests (from the source that build.sh unpacked) on the
# JVM that build.sh built, in three configurations: the Parallel GC as shipped (-XX:-UseHAB),
# with -XX:+UseHAB, and with -XX:+UseHAB and heap verification before and after every
# collection. Writes target/hotspot-hab/jtreg/summary.md (tests run, passed, failed, per
# configuration) and keeps jtreg's reports beside it.
#
#   jvm/hotspot/jtreg.sh [TEST...]     # default: the selection below
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="${HAB_HOTSPOT_DIR:-$repo/target/hotspot-hab}"
jdk="$work/jdk"
tests_root="$work/jdk17u/test/hotspot/jtreg"
[ -x "$jdk/bin/java" ] || { echo "no $jdk: run jvm/hotspot/build.sh first" >&2; exit 1; }
if ! command -v jtreg >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then apt-get install -y -q jtreg7 >/dev/null; else sudo apt-get install -y -q jtreg7 >/dev/null; fi
fi
# Parallel GC, TLAB, heap-shape, verification and stress tests that run on a stock JDK.
selection=(
  gc/parallel
  gc/TestSmallHeap.java gc/TestSystemGC.java gc/TestObjectAlignment.java gc/TestBigObj.java
  gc/ArraySize.java gc/InfiniteList.java gc/TestFullGCCount.java gc/TestVerifySilently.java
  gc/TestVerifySubSet.java gc/TestVerifyDuringStartup.java gc/TestMemoryMXBeansAndPoolsPresence.java
  gc/TestSoftReferencesBehaviorOnOOME.java gc/TestStackOverflow.java gc/TestSpaceCounters.java
  gc/TestPolicyNamePerfCounter.java gc/TestGenerationPerfCounter.java
  gc/stress/gcold/TestGCOldWithParallel.java gc/stress/gcbasher/TestGCBasherWithParallel.java
  gc/stress/systemgc/TestSystemGCWithParallel.java
  gc/logging/TestGCId.java gc/logging/TestPrintReferences.java gc/metaspace
  gc/arguments/TestParallelHeapSizeFlags.java gc/arguments/TestParallelGCThreads.java
  compiler/memoryinitialization/ZeroTLABTest.java
  runtime/Thread/TooSmallStackSize.java
)
[ "$#" -gt 0 ] && selection=("$@")
out="$work/jtreg"
mkdir -p "$out"
summary="$out/summary.md"
{
  echo "# HotSpot's jtreg tests on the JVM with HABs"
  echo
  echo "JVM: \`$("$jdk/bin/java" -version 2>&1 | tail -1)\`; tests: \`${selection[*]}\`"
  echo
  echo "| configuration | options | tests | passed | failed | errors | seconds |"
  echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
} >"$summary"
run() {
  local name="$1" options="$2" started status
  started=$(date +%s)
  status=0
  (cd "$tests_root" && jtreg -jdk:"$jdk" -w:"$out/$name/work" -r:"$out/$name/report" \
    -conc:"$(nproc)" -timeoutFactor:4 -ignore:quiet -javaoptions:"$options" \
    "${selection[@]}" >"$out/$name.log" 2>&1) || status=$?
  local seconds=$(( $(date +%s) - started ))
  local line passed failed errors
  line=$(grep -E '^(Test results|Passed|Failed)' "$out/$name.log" | tail -1 || true)
  passed=$(grep -oE 'passed: [0-9]+' "$out/$name.log" | tail -1 | grep -oE '[0-9]+' || echo 0)
  failed=$(grep -oE 'failed: [0-9]+' "$out/$name.log" | tail -1 | grep -oE '[0-9]+' || echo 0)
  errors=$(grep -oE 'error: [0-9]+' "$out/$name.log" | tail -1 | grep -oE '[0-9]+' || echo 0)
  echo "| $name | \`$options\` | $((passed + failed + errors)) | $passed | $failed | $errors | $seconds |" >>"$summary"
  echo "$name: $line (jtreg exit $status; $out/$name.log)"
  grep -E '^(FAILED|Error)' "$out/$name/report/text/summary.txt" 2>/dev/null | sed "s/^/  $name: /" >>"$summary.failures" || true
}
rm -f "$summary.failures"
run stock "-XX:+UseParallelGC -XX:-UseHAB"
run hab "-XX:+UseParallelGC -XX:+UseHAB"
run hab-cpu "-XX:+UseParallelGC -XX:+UseHAB -XX:HABLevels=cpu:256K,core:2M"
run hab-verify "-XX:+UseParallelGC -XX:+UseHAB -XX:+UnlockDiagnosticVMOptions -XX:+VerifyBeforeGC -XX:+VerifyAfterGC"
if [ -s "$summary.failures" ]; then
  { echo; echo "Tests that did not pass:"; echo; sed 's/^/- /' "$summary.failures"; } >>"$summary"
fi
cat "$summary"
