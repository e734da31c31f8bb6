#!/usr/bin/env bash
# Runs a selection of HotSpot's own jtreg tests (from the source that build.sh unpacked) on the
# JVM that build.sh built — JDK 25 (jtreg 8) by default, JDK 17 (jtreg 7) with JDK_VERSION=17 —
# under the Parallel GC and under G1, each in these configurations: as shipped (-XX:-UseHAB),
# with -XX:+UseHAB (HABLevels=auto), with -XX:+UseHAB -XX:HABLevels=cpu:256K,core:2M, and with
# -XX:+UseHAB and heap verification before and after every collection; and with
# -XX:+UseHABCPULABs, without and with verification, and with every cycle in per-CPU LABs
# (-XX:-HABFlip).
# Builds the native library of the HeapMonitor tests. Writes
# target/hotspot-hab/jtreg[-17]/summary.md (tests run, passed, failed, errors, seconds per
# collector and configuration) and keeps jtreg's reports beside it.
#
#   jvm/hotspot/jtreg.sh [TEST...]     # default: the selection below, for both collectors
#   jvm/hotspot/jtreg.sh --groups [TEST...]  # HotSpot's groups tier1_gc_1 and tier1_gc_2 (JDK 25)
#
# With --groups each test runs under the collector it chooses (G1 where it chooses none), in the
# configurations stock, hab and cpu-labs (CONFIGS), the HAB flag added to every test JVM. A test
# that chooses Serial, ZGC, Shenandoah or Epsilon, or turns TLABs off, is refused by a HAB flag
# (the VM says why and does not start): the stock run is that test's run. Writes
# tier1_gc-summary.md: each configuration's counts and wall time, then every test that did not
# pass under a HAB flag, sorted into fails stock too, refused (the reason the VM printed), or a
# difference.
#
# Environment: JDK_VERSION (25 or 17); COLLECTORS (default "parallel g1"); CONFIGS (default every
# configuration: stock hab hab-cpu hab-verify cpu-labs cpu-labs-verify cpu-labs-always);
# ENVIRONMENT: glibc (the default: glibc's rseq registration), own
# (GLIBC_TUNABLES=glibc.pthread.rseq=0 for every test JVM: Hab registers its own areas), enosys or
# eperm (jtreg and every JVM it starts under tools/without-rseq, a seccomp filter that refuses
# rseq so).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="${HAB_HOTSPOT_DIR:-$repo/target/hotspot-hab}"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
case "${JDK_VERSION:-25}" in
  25)
    jdk="$work/jdk"
    tests_root="$work/jdk25u/test/hotspot/jtreg"
    out="$work/jtreg"
    [ -x "$jdk/bin/java" ] || { echo "no $jdk: run jvm/hotspot/build.sh first" >&2; exit 1; }
    # jtreg 8 (JDK 25's tests ask for 8+2): Debian trixie's jtreg8, unpacked beside the tree.
    jtreg_home="$work/jtreg8"
    if [ ! -x "$jtreg_home/usr/share/jtreg/bin/jtreg" ]; then
      lists="$work/jtreg8-apt"
      mkdir -p "$lists/lists/partial"
      echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" >"$lists/trixie.list"
      apt_private=(-o Dir::Etc::sourcelist="$lists/trixie.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$lists/lists")
      as_root apt-get "${apt_private[@]}" update -q >/dev/null
      (cd "$lists" && as_root apt-get "${apt_private[@]}" download jtreg8 >/dev/null 2>&1)
      dpkg -x "$(ls "$lists"/jtreg8_*_all.deb)" "$jtreg_home"
    fi
    jtreg=("env" "JT_JAVA=$jdk" "$jtreg_home/usr/share/jtreg/bin/jtreg")
    # The archive's test/jdk/TEST.groups names tests it does not hold; jtreg checks every group.
    : >"$work/jdk25u/test/jdk/TEST.groups"
    ;;
  17)
    jdk="$work/jdk17"
    tests_root="$work/jdk17u/test/hotspot/jtreg"
    out="$work/jtreg-17"
    [ -x "$jdk/bin/java" ] || { echo "no $jdk: run jvm/hotspot/build.sh --jdk 17 first" >&2; exit 1; }
    command -v jtreg >/dev/null 2>&1 || as_root apt-get install -y -q jtreg7 >/dev/null
    jtreg=(jtreg)
    ;;
  *) echo "JDK_VERSION=$JDK_VERSION: 25 or 17" >&2; exit 2 ;;
esac
# Tests of either collector: heap shape, verification, TLABs in every tier (the JITs'
# allocation and escape analysis), allocation sampling (JVMTI, with its native library) and
# JFR's allocation events (test/jdk, a second test suite, by its path from this one).
common=(
  gc/TestSmallHeap.java gc/TestSystemGC.java gc/TestObjectAlignment.java gc/TestBigObj.java
  gc/ArraySize.java gc/InfiniteList.java gc/TestFullGCCount.java gc/TestVerifySilently.java
  gc/TestVerifySubSet.java gc/TestVerifyDuringStartup.java gc/TestMemoryMXBeansAndPoolsPresence.java
  gc/TestSoftReferencesBehaviorOnOOME.java gc/TestStackOverflow.java gc/TestSpaceCounters.java
  gc/TestPolicyNamePerfCounter.java gc/TestGenerationPerfCounter.java
  gc/logging/TestGCId.java gc/logging/TestPrintReferences.java gc/metaspace
  compiler/memoryinitialization/ZeroTLABTest.java compiler/allocation compiler/escapeAnalysis
  runtime/Thread/TooSmallStackSize.java serviceability/jvmti/HeapMonitor
  ../../jdk/jdk/jfr/event/allocation
)
# Each collector's own: its tests, stress tests and heap-size flags.
parallel=(
  gc/parallel
  gc/stress/gcold/TestGCOldWithParallel.java gc/stress/gcbasher/TestGCBasherWithParallel.java
  gc/stress/systemgc/TestSystemGCWithParallel.java
  gc/arguments/TestParallelHeapSizeFlags.java gc/arguments/TestParallelGCThreads.java
)
g1=(
  gc/g1/TestEdenSurvivorLessThanMax.java gc/g1/TestGCLogMessages.java
  gc/g1/TestHumongousAllocNearlyFullRegion.java gc/g1/TestVerifyGCType.java
  gc/g1/TestEagerReclaimHumongousRegions.java gc/g1/TestShrinkToOneRegion.java
  gc/g1/TestRegionAlignment.java gc/g1/TestPLABOutput.java gc/g1/plab
  gc/g1/humongousObjects/TestHumongousThreshold.java
  gc/stress/gcold/TestGCOldWithG1.java gc/stress/gcbasher/TestGCBasherWithG1.java
  gc/stress/systemgc/TestSystemGCWithG1.java gc/arguments/TestG1HeapSizeFlags.java
)
mkdir -p "$out/native"
environment=${ENVIRONMENT:-glibc}
wrap=()
test_env=()
case "$environment" in
  glibc) ;;
  own) test_env=(-e:GLIBC_TUNABLES=glibc.pthread.rseq=0) ;;
  enosys | eperm)
    cc -O2 -Wall -Wextra -Werror -o "$out/without-rseq" "$repo/tools/without-rseq.c"
    wrap=("$out/without-rseq" "$environment") ;;
  *) echo "unknown environment $environment (glibc own enosys eperm)" >&2; exit 2 ;;
esac
# The HeapMonitor tests' agent, against this JDK's jvmti.h.
g++ -shared -fPIC -O2 -I"$jdk/include" -I"$jdk/include/linux" -o "$out/native/libHeapMonitorTest.so" \
  "$tests_root/serviceability/jvmti/HeapMonitor/libHeapMonitorTest.cpp"
# The native libraries of the gc tests (JNI critical sections, weak references, periodic GCs).
for source in $(cd "$tests_root" && find gc -name 'lib*.c' -not -path 'gc/shenandoah/*'); do
  library=$(basename "$source" .c)
  gcc -shared -fPIC -O2 -I"$jdk/include" -I"$jdk/include/linux" -o "$out/native/$library.so" "$tests_root/$source"
done
summary="$out/summary.md"
{
  echo "# HotSpot's jtreg tests on the JVM with HABs"
  echo
  echo "JVM: \`$("$jdk/bin/java" -version 2>&1 | tail -1)\`; environment: $environment; tests, either collector: \`${common[*]}\`;"
  echo "Parallel's own: \`${parallel[*]}\`; G1's own: \`${g1[*]}\`"
  echo
  echo "| collector | configuration | options | tests | passed | failed | errors | seconds |"
  echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"
} >"$summary"
# run COLLECTOR NAME OPTIONS TEST...
run() {
  local collector="$1" name="$2" options="$3" started status
  shift 3
  name="$collector-$name"
  [ "$environment" = glibc ] || name="$name-$environment"
  started=$(date +%s)
  status=0
  # A work folder an earlier run left (another selection, another jtreg) is refused by jtreg.
  rm -rf "${out:?}/$name"
  (cd "$tests_root" && "${wrap[@]}" "${jtreg[@]}" "${test_env[@]}" -jdk:"$jdk" -w:"$out/$name/work" -r:"$out/$name/report" \
    -conc:"$(nproc)" -timeoutFactor:4 -ignore:quiet -nativepath:"$out/native" \
    -javaoptions:"$options" "$@" >"$out/$name.log" 2>&1) || status=$?
  local seconds=$(( $(date +%s) - started ))
  local line passed failed errors
  line=$(grep -E '^(Test results|Passed|Failed)' "$out/$name.log" | tail -1 || true)
  passed=$(grep -oE 'passed: [0-9]+' "$out/$name.log" | tail -1 | grep -oE '[0-9]+' || echo 0)
  failed=$(grep -oE 'failed: [0-9]+' "$out/$name.log" | tail -1 | grep -oE '[0-9]+' || echo 0)
  errors=$(grep -oE 'error: [0-9]+' "$out/$name.log" | tail -1 | grep -oE '[0-9]+' || echo 0)
  echo "| $collector | ${name#"$collector"-} | \`$options\` | $((passed + failed + errors)) | $passed | $failed | $errors | $seconds |" >>"$summary"
  echo "$name: $line (jtreg exit $status; $out/$name.log)"
  grep -vE ' Passed\. ' "$out/$name/report/text/summary.txt" 2>/dev/null | sed "s/^/  $name: /" >>"$summary.failures" || true
}
rm -f "$summary.failures"
if [ "${1:-}" = --groups ]; then
  [ "${JDK_VERSION:-25}" = 25 ] || { echo "--groups: JDK 25 only" >&2; exit 2; }
  shift
  groups=(:tier1_gc_1 :tier1_gc_2)
  label=tier1_gc
  [ "$#" -gt 0 ] && { groups=("$@"); label=tests; }
  configs=(${CONFIGS:-stock hab cpu-labs})
  { echo "# HotSpot's jtreg groups on the JVM with HABs"; echo
    echo "JVM: \`$("$jdk/bin/java" -version 2>&1 | tail -1)\`; environment: $environment; tests: \`${groups[*]}\`, each under the collector it chooses"; echo
    echo "| tests | configuration | options | tests | passed | failed | errors | seconds |"
    echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"; } >"$summary"
  for config in "${configs[@]}"; do
    case "$config" in
      stock) options="-XX:-UseHAB" ;;
      hab) options="-XX:+UseHAB" ;;
      cpu-labs) options="-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs" ;;
      *) echo "unknown configuration $config (stock hab cpu-labs)" >&2; exit 2 ;;
    esac
    run "$label" "$config" "$options" "${groups[@]}"
  done
  # Every test that did not pass under a HAB flag: as stock, refused, or a difference.
  stock_summary="$out/$label-stock/report/text/summary.txt"
  { echo; echo "### Tests that did not pass with a HAB flag"; echo
    echo "| configuration | test | stock | why |"; echo "| --- | --- | --- | --- |"
    for config in "${configs[@]}"; do
      [ "$config" = stock ] && continue
      { grep -vE ' Passed\. ' "$out/$label-$config/report/text/summary.txt" 2>/dev/null || true; } | while read -r test rest; do
        stock_line=$(grep -E "^$test " "$stock_summary" 2>/dev/null || echo "$test not run")
        stock_result=$(echo "$stock_line" | awk '{print $2}')
        jtr="$out/$label-$config/work/${test%.java*}$(echo "$test" | sed -n 's/.*\.java#\(.*\)/_\1/p').jtr"
        reason=$(grep -ohE 'Error: -XX:\+UseHAB(CPULABs)?: [^"\\]*' "$jtr" 2>/dev/null | sort -u | head -1 || true)
        if [ "$stock_result" != Passed. ]; then why="fails stock too"
        elif [ -n "$reason" ]; then why="refused: ${reason#Error: }"
        else why="**a difference**: $rest"; fi
        echo "| $config | $test | $stock_result | $why |"
      done
    done; } >>"$summary"
  cp "$summary" "$out/$label-summary.md"
  cat "$summary"
  exit 0
fi
verify="-XX:+UnlockDiagnosticVMOptions -XX:+VerifyBeforeGC -XX:+VerifyAfterGC -XX:+HABVerifyCompiledRefills"
for collector in ${COLLECTORS:-parallel g1}; do
  case "$collector" in
    parallel) gc=-XX:+UseParallelGC; tests=("${common[@]}" "${parallel[@]}") ;;
    g1) gc=-XX:+UseG1GC; tests=("${common[@]}" "${g1[@]}") ;;
    *) echo "unknown collector $collector (parallel, g1)" >&2; exit 2 ;;
  esac
  [ "$#" -gt 0 ] && tests=("$@")
  for config in ${CONFIGS:-stock hab hab-cpu hab-verify cpu-labs cpu-labs-verify cpu-labs-always}; do
    case "$config" in
      stock) options="$gc -XX:-UseHAB" ;;
      hab) options="$gc -XX:+UseHAB" ;;
      hab-cpu) options="$gc -XX:+UseHAB -XX:HABLevels=cpu:256K,core:2M" ;;
      hab-verify) options="$gc -XX:+UseHAB $verify" ;;
      cpu-labs) options="$gc -XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs" ;;
      cpu-labs-always) options="$gc -XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs -XX:-HABFlip" ;;
      cpu-labs-verify) options="$gc -XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs $verify" ;;
      *) echo "unknown configuration $config" >&2; exit 2 ;;
    esac
    run "$collector" "$config" "$options" "${tests[@]}"
  done
done
if [ -s "$summary.failures" ]; then
  { echo; echo "Tests that did not pass:"; echo; sed 's/^/- /' "$summary.failures"; } >>"$summary"
fi
cat "$summary"
