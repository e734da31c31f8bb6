#!/bin/bash
# Kirsch et al.'s claim inside HotSpot: small TLABs refilled from per-CPU buffers run as fast
# as large ones. bench/jvm's AllocObject.bytes16 (allocate a 16-byte object and drop it; C2)
# under JMH, per thread count, in interleaved rounds: stock adaptive TLABs, stock 1 KiB TLABs,
# and -XX:+UseHAB with 1 KiB TLABs refilled by the runtime (-XX:-HABCompiledRefill) and by
# C2's compiled refill; Parallel, and the two ends under G1. Prints nanoseconds per object
# per thread (JMH's average time of one operation). CONFIGS picks fewer or other runs (also
# g1-stock-1k: stock 1 KiB TLABs under G1; cpu-labs and cpu-labs-always: -XX:+UseHABCPULABs,
# flipping and with every cycle in per-CPU LABs, under Parallel).
# OBSERVERS picks the observers each run is made under: none (the default), jfr (JFR's default
# recording, which samples allocations), jvmti (jvm/hotspot/test/sampler.c, a JVMTI allocation
# sampler every 512 KiB, async-profiler's default).
# JDK=... JAR=... ROUNDS=3 THREADS="1 2" CONFIGS="..." OBSERVERS="none jfr jvmti" bash run.sh
set -u
java=${JDK:-target/hotspot-hab/jdk}/bin/java
jar=${JAR:-bench/jvm/target/benchmarks.jar}
small="-XX:MinTLABSize=1k -XX:TLABSize=1k -XX:-ResizeTLAB"
heap="-Xms1g -Xmx1g -Xmn256m"
echo "== machine"
nproc; uname -r; ldd --version | head -1
"$java" -version 2>&1 | tail -1
echo "== round threads config observer ns_per_object"
csv=$(mktemp)
observed_dir=$(mktemp -d)
trap 'rm -rf "$csv" "$observed_dir"' EXIT
jdk_home=$(dirname "$(dirname "$java")")
case " ${OBSERVERS:-none} " in
  *" jvmti "*)
    cc -shared -fPIC -O2 -Wall -Wextra -Werror -I"$jdk_home/include" -I"$jdk_home/include/linux" \
      "$(dirname "$0")/../../../jvm/hotspot/test/sampler.c" -lpthread -o "$observed_dir/libsampler.so" || exit 1 ;;
esac
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
        cpu-labs) flags="-XX:+UseParallelGC -XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs" ;;
        cpu-labs-always) flags="-XX:+UseParallelGC -XX:+UnlockExperimentalVMOptions -XX:+UseHABCPULABs -XX:-HABFlip" ;;
        *) echo "unknown config $config" >&2; exit 2 ;;
      esac
      for observer in ${OBSERVERS:-none}; do
        case $observer in
          none) observe="" ;;
          jfr) observe="-XX:StartFlightRecording:filename=$observed_dir/run.jfr,settings=default" ;;
          jvmti) observe="-agentpath:$observed_dir/libsampler.so=interval=524288" ;;
          *) echo "unknown observer $observer" >&2; exit 2 ;;
        esac
        "$java" -jar "$jar" AllocObject.bytes16 -f 1 -wi 3 -w 1s -i 5 -r 1s -t "$threads" \
          -jvm "$java" -jvmArgs "$heap $flags $observe" -rf csv -rff "$csv" >/dev/null 2>&1
        score=$(awk -F, 'NR == 2 {print $5}' "$csv")
        echo "$round $threads $config $observer ${score:-nan}"
        : >"$csv"
      done
    done
  done
done
