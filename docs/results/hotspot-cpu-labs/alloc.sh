#!/bin/bash
# Shipilëv's single-thread experiment for per-CPU LABs: bench/jvm's AllocObject.bytes16
# (allocate a 16-byte object and drop it) under JMH, one thread, in interleaved rounds: stock
# adaptive TLABs, -XX:+UseHABCPULABs (flipping with TLABs: one thread on these CPUs stays in
# TLABs) and -XX:+UseHABCPULABs -XX:-HABFlip (every object in a per-CPU LAB), each in the
# default tiers (C2) and with C1 alone (-XX:TieredStopAtLevel=1). Prints nanoseconds per object.
# BENCHMARK picks another of bench/jvm's JMH benchmarks (AllocObject.lambda16: a capturing
# lambda, which C1 allocates in the runtime), TIERS and CONFIGS (also no-tlab: -XX:-UseTLAB;
# cpu-labs-slow-call: every object in a per-CPU LAB, C2 reaching them from its slow call only,
# -XX:-HABCompiledCPULABPath) fewer or other runs.
# JDK=... JAR=... ROUNDS=3 BENCHMARK=AllocObject.bytes16 TIERS="c2 c1" CONFIGS="..." bash alloc.sh
set -u
java=${JDK:-target/hotspot-hab/jdk}/bin/java
jar=${JAR:-bench/jvm/target/benchmarks.jar}
heap="-XX:+UseParallelGC -Xms1g -Xmx1g -Xmn256m"
echo "== machine"
nproc; uname -r; ldd --version | head -1
"$java" -version 2>&1 | tail -1
echo "== round tier config ns_per_object"
csv=$(mktemp)
trap 'rm -f "$csv"' EXIT
for round in $(seq "${ROUNDS:-3}"); do
  for tier in ${TIERS:-c2 c1}; do
    tier_flags=""
    [ "$tier" = c1 ] && tier_flags="-XX:TieredStopAtLevel=1"
    for config in ${CONFIGS:-stock cpu-labs cpu-labs-always}; do
      case $config in
        stock) flags="-XX:-UseHAB" ;;
        no-tlab) flags="-XX:-UseHAB -XX:-UseTLAB" ;;
        cpu-labs) flags="-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs" ;;
        cpu-labs-always) flags="-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs -XX:-HABFlip" ;;
        cpu-labs-slow-call) flags="-XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs -XX:-HABFlip -XX:+UnlockDiagnosticVMOptions -XX:-HABCompiledCPULABPath" ;;
      esac
      "$java" -jar "$jar" "${BENCHMARK:-AllocObject.bytes16}" -f 1 -wi 3 -w 1s -i 5 -r 1s -t 1 \
        -jvm "$java" -jvmArgs "$heap $tier_flags $flags" -rf csv -rff "$csv" >/dev/null 2>&1
      score=$(awk -F, 'NR == 2 {print $5}' "$csv")
      echo "$round $tier $config ${score:-nan}"
      : >"$csv"
    done
  done
done
