#!/bin/bash
# Kirsch et al.'s claim inside HotSpot: small TLABs refilled from per-CPU buffers run as fast
# as large ones. bench/jvm's AllocObject.bytes16 (allocate a 16-byte object and drop it; C2)
# under JMH, per thread count, in interleaved rounds: stock adaptive TLABs, stock 1 KiB TLABs,
# and -XX:+UseHAB with 1 KiB TLABs refilled by the runtime (-XX:-HABCompiledRefill) and by
# C2's compiled refill; Parallel, and the two ends under G1. Prints nanoseconds per object
# per thread (JMH's average time of one operation). CONFIGS picks fewer or other runs (also
# g1-stock-1k: stock 1 KiB TLABs under G1; cpu-labs and cpu-labs-always: -XX:+UseHABCPULABs,
# flipping and with every cycle in per-CPU LABs, under Parallel).
# JDK=... JAR=... ROUNDS=3 THREADS="1 2" CONFIGS="..." bash run.sh
set -u
java=${JDK:-target/hotspot-hab/jdk}/bin/java
jar=${JAR:-bench/jvm/target/benchmarks.jar}
small="-XX:MinTLABSize=1k -XX:TLABSize=1k -XX:-ResizeTLAB"
heap="-Xms1g -Xmx1g -Xmn256m"
echo "== machine"
nproc; uname -r; ldd --version | head -1
"$java" -version 2>&1 | tail -1
echo "== round threads config ns_per_object"
csv=$(mktemp)
trap 'rm -f "$csv"' EXIT
for round in $(seq "${ROUNDS:-3}"); do
  for threads in ${THREADS:-1 2}; do
    for config in ${CONFIGS:-stock stock-1k hab-1k-runtime hab-1k hab g1-stock g1-hab-1k}; do
      case $config in
        stock) flags="-XX:+UseParallelGC -XX:-UseHAB" ;;
        stock-1k) flags="-XX:+UseParallelGC -XX:-UseHAB $small" ;;
        hab-1k-runtime) flags="-XX:+UseParallelGC -XX:+UseHAB -XX:-HABCompiledRefill $small" ;;
        hab-1k) flags="-XX:+UseParallelGC -XX:+UseHAB $small" ;;
        hab) flags="-XX:+UseParallelGC -XX:+UseHAB" ;;
        g1-stock) flags="-XX:+UseG1GC -XX:-UseHAB" ;;
        g1-stock-1k) flags="-XX:+UseG1GC -XX:-UseHAB $small" ;;
        g1-hab-1k) flags="-XX:+UseG1GC -XX:+UseHAB $small" ;;
        cpu-labs) flags="-XX:+UseParallelGC -XX:+UseHABCPULABs" ;;
        cpu-labs-always) flags="-XX:+UseParallelGC -XX:+UseHABCPULABs -XX:-HABFlip" ;;
        *) echo "unknown config $config" >&2; exit 2 ;;
      esac
      "$java" -jar "$jar" AllocObject.bytes16 -f 1 -wi 3 -w 1s -i 5 -r 1s -t "$threads" \
        -jvm "$java" -jvmArgs "$heap $flags" -rf csv -rff "$csv" >/dev/null 2>&1
      score=$(awk -F, 'NR == 2 {print $5}' "$csv")
      echo "$round $threads $config ${score:-nan}"
      : >"$csv"
    done
  done
done
